//! Log replication (Raft §5.3) and commitment (§5.4): the leader's turn (CheckQuorum, the
//! switchover's progress, sequencing, appends pipelined to each follower with a retransmission
//! timeout), a follower taking appends and acknowledging them in batches, and the commit point.

use super::*;

impl Member {
    pub(super) fn on_append(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        a: cluster::Append<'_>,
        log: &mut dyn Store,
    ) -> Result<(), StoreError> {
        self.stats.appends_received += 1;
        if term < self.term {
            // a deposed leader: the answer tells it the current term
            self.stats.stale += 1;
            self.send(
                from,
                &Body::AppendReply {
                    success: false,
                    index: self.last + 1,
                },
            );
            return Ok(());
        }
        if term > self.term || self.role != Role::Follower || self.leader != Some(from) {
            self.become_follower(now_ns, term, Some(from));
            self.leader_arrivals.restart();
        }
        self.leader_heard_ns = now_ns;
        self.leader_arrivals.heard(now_ns);
        self.holding = false;
        self.reset_election_timer(now_ns);
        let reply = |m: &mut Member, success: bool, index: u64| {
            m.send(from, &Body::AppendReply { success, index });
        };
        if a.prev_index > self.last {
            self.stats.rejected_appends += 1;
            reply(self, false, self.last + 1);
            return Ok(());
        }
        let prev_term = self.term_at(a.prev_index);
        if prev_term != a.prev_term {
            // skip back over the whole conflicting term (Raft §5.3), never below the commit
            let first_of_term = match self
                .epochs
                .iter()
                .rev()
                .find(|&&(first, t)| t == prev_term && first <= a.prev_index)
            {
                Some(&(first, _)) => first,
                None => 1,
            };
            self.stats.rejected_appends += 1;
            reply(self, false, first_of_term.max(self.commit + 1));
            return Ok(());
        }
        let mut index = a.prev_index;
        let mut term_here = a.prev_term;
        for e in a.entries() {
            index += 1;
            if let Some((t, _)) = epoch_of(e) {
                term_here = t;
            }
            if index <= self.last {
                if self.term_at(index) == term_here {
                    continue; // the same entry (log matching)
                }
                if index <= self.commit {
                    return Err(StoreError(format!(
                        "cluster safety: the leader of term {term} disagrees with committed \
                         entry {index} (commit {})",
                        self.commit
                    )));
                }
                let count = self.last - index + 1;
                self.discard(index);
                self.stats.discarded += count;
                self.events
                    .push_back(Event::Discarded { from: index, count });
                // (the discard is carried out after this call: what is read is below it)
                self.rescan(log, index - 1)?;
            }
            self.write(index, e);
            self.recovered.replay(index, e);
            if let Some((t, _)) = epoch_of(e) {
                self.epochs.push((index, t));
            }
            self.last = index;
            self.stats.entries_received += 1;
        }
        self.commit = self.commit.max(a.commit.min(index));
        // answered once this turn's poll asked for the sync and the entries are durable: the
        // appends that came together are persisted with one sync and acknowledged with one
        // reply (the last one's index covers the others')
        self.ack = Some((from, index));
        self.ack_due = true;
        Ok(())
    }

    /// Asks for what was appended to be synced, and sends the acknowledgement waiting for
    /// it if what it covers is durable already (else [`Member::handle_durable`] sends it).
    pub(super) fn sync_and_ack(&mut self) {
        // a sync asked in an earlier turn still running: the disk lags, and this turn's
        // appends are answered now with what is durable (else the sync asked here answers)
        let lagging = !self.syncing.is_empty();
        self.sync();
        self.ack_due &= lagging;
        self.ack_durable();
        self.ack_due = false;
    }

    /// Sends the acknowledgement waiting for the entries it covers to be durable, once they
    /// are (to a leader this member still follows). While syncs lag behind the appends (off
    /// the loop, on a slow disk), what is durable of it is acknowledged as it becomes so: the
    /// log matches the leader's up to the acknowledgement's index, so it matches up to any
    /// index below it, and the leader's commit does not wait for the newest append's sync.
    /// While a sync asked in an earlier turn is still running, a turn that took appends answers
    /// even when nothing more became durable, so that a leader hears a standby whose disk is
    /// slow (CheckQuorum) and does not step down for it.
    pub(super) fn ack_durable(&mut self) {
        let Some((to, index)) = self.ack else {
            return;
        };
        let upto = index.min(self.durable);
        if upto == index {
            self.ack = None;
        } else if upto <= self.acked && !self.ack_due {
            return; // nothing durable beyond what was acknowledged, and no append to answer
        }
        if self.role == Role::Follower && self.leader == Some(to) {
            self.acked = upto;
            self.stats.acks_sent += 1;
            self.send(
                to,
                &Body::AppendReply {
                    success: true,
                    index: upto,
                },
            );
        }
    }

    pub(super) fn on_append_reply(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        success: bool,
        index: u64,
    ) {
        if term > self.term {
            self.become_follower(now_ns, term, None);
            return;
        }
        if term < self.term || self.role != Role::Leader {
            self.stats.stale += 1;
            return;
        }
        let Some(peer) = self.peers.iter_mut().find(|p| p.p.id == from) else {
            return;
        };
        peer.p.heard_ns = now_ns;
        peer.arrivals.heard(now_ns);
        if success {
            peer.sample(now_ns, index);
            if index > peer.p.matched {
                peer.p.matched = index;
                peer.progress_ns = now_ns;
            }
            if peer.probing && index + 1 >= peer.p.next {
                // found where the logs meet: pipeline from here
                peer.probing = false;
                peer.last_sent_ns = 0;
            }
            peer.p.next = peer.p.next.max(index + 1);
        } else if peer.probing {
            if index > peer.p.matched && index < peer.p.next {
                peer.p.next = index;
                peer.last_sent_ns = 0; // probe again at once
            }
        } else if index > peer.p.matched
            && index < peer.p.next
            && now_ns >= peer.resent_ns + peer.rto.get() / 4
        {
            // in step, but the follower lacks entries from `index` on (a datagram lost ahead
            // of later ones): send again from there, once for the rejections of a whole
            // pipeline (a later loss is the retransmission timer's)
            peer.p.next = index;
            peer.last_sent_ns = 0;
            peer.resent_ns = now_ns;
        }
        self.advance_commit();
    }

    pub(super) fn advance_commit(&mut self) {
        if self.role != Role::Leader {
            return;
        }
        // the leader's own replica counts as far as it is durable
        let mut matched: Vec<u64> = self.peers.iter().map(|p| p.p.matched).collect();
        matched.push(self.durable);
        matched.sort_unstable_by(|a, b| b.cmp(a));
        let n = matched[self.majority() - 1];
        // only an entry of the leader's own term commits by counting (Raft §5.4.2)
        if n > self.commit && self.term_at(n) == self.term {
            self.commit = n;
        }
    }

    pub(super) fn lead(&mut self, now_ns: u64, log: &mut dyn Store) -> Result<(), StoreError> {
        if !self.single() && now_ns > self.polled_ns + 2 * self.p.heartbeat_ns {
            // this process has not run for two heartbeats (descheduled, stopped): it sent
            // nothing meanwhile, so its followers had nothing to answer. Their silence counts
            // from now, not from before the pause.
            self.stats.own_pauses += 1;
            self.quorum_checked_ns = self.quorum_checked_ns.max(now_ns);
            for p in &mut self.peers {
                p.p.heard_ns = p.p.heard_ns.max(now_ns);
                p.arrivals.restart();
                p.arrivals.heard(now_ns);
            }
        }
        self.polled_ns = now_ns;
        if !self.single() && now_ns >= self.quorum_checked_ns + self.p.election_timeout_ns {
            // CheckQuorum: a leader that has not heard a majority for an election timeout
            // (and whose φ for them says dead, not slow) stops, so a partitioned leader cannot
            // keep nodes waiting on it
            let (timeout, phi) = (self.p.election_timeout_ns, self.p.suspicion_phi);
            let heard = 1 + self
                .peers
                .iter()
                .filter(|p| {
                    p.p.heard_ns + timeout > now_ns || !p.arrivals.suspects(now_ns, timeout, phi)
                })
                .count();
            self.quorum_checked_ns = now_ns;
            if heard < self.majority() {
                self.stats.quorum_stepdowns += 1;
                self.events.push_back(Event::SteppedDown {
                    term: self.term,
                    why: "no majority heard for an election timeout",
                });
                self.role = Role::Follower;
                self.stop_leading();
                self.recovering = None;
                self.peers.clear();
                self.transfer = None;
                if let Some(l) = self.leader.take() {
                    self.previous_leader = l;
                }
                self.reset_election_timer(now_ns);
                return Ok(());
            }
        }
        if let Some((target, until, _)) = self.transfer {
            if now_ns >= until {
                self.transfer = None;
                self.events.push_back(Event::Transfer {
                    target,
                    started: false,
                });
            }
        }
        if let Some((until, waiting)) = &self.recovering {
            if now_ns >= *until || waiting.iter().all(|w| !w) {
                self.start_term(now_ns, log)?;
            } else {
                // followers hear from their leader meanwhile
                let ids: Vec<u16> = self.peers.iter().map(|p| p.p.id).collect();
                for id in ids {
                    let peer = self.peers.iter().find(|p| p.p.id == id).expect("peer");
                    if peer.last_sent_ns == 0 || now_ns >= peer.last_sent_ns + self.p.heartbeat_ns {
                        self.replicate(now_ns, id, log)?;
                    }
                }
                return Ok(());
            }
        }
        let seq = self.seq.as_mut().expect("a leader sequences");
        if self.transfer.is_none() {
            seq.handle_timeout(now_ns);
        }
        let first_new = self.last + 1;
        if seq.has_unwritten() {
            // followers that are in step get the new entries before the leader's own write
            let ids: Vec<u16> = self
                .peers
                .iter()
                .filter(|p| !p.probing && p.p.next == first_new)
                .map(|p| p.p.id)
                .collect();
            for id in ids {
                self.replicate(now_ns, id, log)?;
            }
            // (the leader's sequencer keeps the dedupe state while it leads: `recovered` is
            // taken from it when it stops, see `stop_leading`)
            let seq = self.seq.as_mut().expect("leading");
            for (q, m) in seq.unwritten() {
                self.storage.push(Op::Append(q), m);
                if let Some((t, _)) = epoch_of(m) {
                    self.epochs.push((q, t));
                }
                self.last = q;
            }
            seq.mark_written();
            self.sync();
        }
        if self.single() {
            // (its own replica is the majority: committed as it becomes durable)
            return Ok(());
        }
        let ids: Vec<u16> = self.peers.iter().map(|p| p.p.id).collect();
        for id in ids {
            let peer = self.peers.iter_mut().find(|p| p.p.id == id).expect("peer");
            if peer.p.matched < self.last
                && now_ns >= peer.progress_ns + peer.rto.get()
                && now_ns >= peer.last_sent_ns + peer.rto.get() / 2
            {
                // unconfirmed for a retransmission time: back to probing from what it
                // confirmed (or, still probing, the same probe again), with the timeout
                // doubled (RFC 6298 5.5) and nothing in flight timed any more (Karn)
                if !peer.probing {
                    peer.p.next = peer.p.matched + 1;
                    peer.probing = true;
                }
                peer.rto.backoff();
                for t in &mut peer.timed {
                    t.2 = true;
                }
                peer.progress_ns = now_ns;
                peer.last_sent_ns = 0;
            }
            let due = if peer.probing {
                peer.last_sent_ns == 0 || now_ns >= peer.last_sent_ns + self.p.heartbeat_ns
            } else {
                peer.p.next <= self.last || now_ns >= peer.last_sent_ns + self.p.heartbeat_ns
            };
            if due {
                self.replicate(now_ns, id, log)?;
            }
        }
        self.advance_commit();
        if let Some((target, until, false)) = self.transfer {
            let ready = self
                .peers
                .iter()
                .any(|p| p.p.id == target && p.p.matched == self.last);
            if ready && !self.seq.as_ref().expect("leading").has_unwritten() {
                self.transfer = Some((target, until, true));
                self.send(target, &Body::TimeoutNow);
            }
        }
        Ok(())
    }

    /// Sends follower `id` what it lacks from its `next` on (from memory when the leader still
    /// holds the entries, else from the log), or an empty append as a heartbeat. A follower
    /// being probed gets one datagram at a time; one in step gets a pipeline.
    pub(super) fn replicate(
        &mut self,
        now_ns: u64,
        id: u16,
        log: &mut dyn Store,
    ) -> Result<(), StoreError> {
        // one past the last entry, written or not
        let end = self.seq.as_ref().map_or(self.last + 1, Sequencer::next_seq);
        let pi = self.peers.iter().position(|p| p.p.id == id).expect("peer");
        let peer = &self.peers[pi];
        let mut next = peer.p.next;
        let limit = peer.p.matched + MAX_IN_FLIGHT;
        let max_datagrams = if peer.probing {
            1
        } else {
            MAX_APPENDS_PER_POLL
        };
        let mut sent = 0;
        loop {
            let carries = next < end && next < limit;
            // an empty append (a heartbeat, or a full pipeline) names the last confirmed entry
            // while entries are on their way, so that those are not taken for lost: loss is
            // the retransmission timer's to find
            let prev = if !carries
                && !self.peers[pi].probing
                && self.peers[pi].sent_upto > self.peers[pi].p.matched
            {
                self.peers[pi].p.matched
            } else {
                next - 1
            };
            let prev_term = self.term_at(prev);
            self.writer.begin(
                self.session,
                self.p.id,
                self.term,
                prev,
                prev_term,
                self.commit,
            );
            let mut q = next;
            if carries {
                let first_pending = self.seq.as_ref().map_or(u64::MAX, Sequencer::first_pending);
                if next >= first_pending {
                    let seq = self.seq.as_ref().expect("pending entries");
                    for (s, m) in seq.pending_from(next) {
                        if s >= limit || !self.writer.push(m) {
                            break;
                        }
                        q = s + 1;
                    }
                } else {
                    let w = &mut self.writer;
                    let upto = self.last.min(limit - 1);
                    log.read(next, (upto + 1 - next) as usize, &mut |s, m| {
                        if !w.push(m) {
                            return false;
                        }
                        q = s + 1;
                        true
                    })?;
                }
            }
            let n = q - next;
            self.out.push(To::Member(id), self.writer.bytes());
            self.stats.appends_sent += 1;
            self.stats.entries_sent += n;
            if n > 0 {
                let peer = &mut self.peers[pi];
                let again = next <= peer.sent_upto;
                if peer.timed.len() >= 1024 {
                    peer.timed.pop_front();
                }
                peer.timed.push_back((q - 1, now_ns, again));
            }
            sent += 1;
            next = q;
            if n == 0 || next >= end || next >= limit || sent >= max_datagrams {
                break;
            }
        }
        let peer = &mut self.peers[pi];
        if !peer.probing {
            // in step: later entries go out right behind these
            peer.p.next = next;
        }
        peer.sent_upto = peer.sent_upto.max(next - 1);
        peer.last_sent_ns = now_ns;
        Ok(())
    }
}

//! Leader election (Raft §5.2) with PreVote (Ongaro's thesis §9.6) and CheckQuorum's leader
//! stickiness (§6.2): terms, votes, the election timer and the failure detector that holds it
//! while a slow leader is only slow ([`crate::detector`]), and the steps between the roles.

use super::*;

impl Member {
    pub(super) fn reset_election_timer(&mut self, now_ns: u64) {
        // randomised over [t, 1.5 t): two standbys rarely time out together (Raft §5.2),
        // and a dead leader is noticed within 1.5 election timeouts
        let t = self.p.election_timeout_ns;
        self.election_deadline = now_ns + t + self.rng.next_u64() % (t / 2).max(1);
    }

    /// Asks for the term and vote to be saved (before the datagrams queued after it leave).
    pub(super) fn save_vote(&mut self) {
        self.storage
            .push(Op::SaveVote(self.term, self.voted_for), &[]);
    }

    pub(super) fn become_follower(&mut self, now_ns: u64, term: u64, leader: Option<u16>) {
        if self.role == Role::Leader {
            self.events.push_back(Event::SteppedDown {
                term: self.term,
                why: "a higher term",
            });
        }
        if term > self.term {
            self.term = term;
            self.voted_for = 0;
            self.save_vote();
        }
        self.role = Role::Follower;
        self.stop_leading();
        self.recovering = None;
        self.peers.clear();
        self.transfer = None;
        self.votes.clear();
        self.acked = 0;
        if let Some(new) = leader.filter(|&l| Some(l) != self.leader) {
            self.previous_leader = self.leader.unwrap_or(self.previous_leader);
            self.leader = Some(new);
            self.events.push_back(Event::Following {
                term: self.term,
                leader: new,
            });
        } else if leader.is_none() {
            if let Some(l) = self.leader.take() {
                self.previous_leader = l;
            }
        }
        self.reset_election_timer(now_ns);
    }

    /// Drops the sequencer of a leader that stops leading, keeping its dedupe state as the
    /// written journal has it (messages it numbered but did not write are dropped with it).
    pub(super) fn stop_leading(&mut self) {
        if let Some(seq) = self.seq.take() {
            let r = seq.recovered_written();
            debug_assert_eq!(
                r.next_seq,
                self.last + 1,
                "the written journal ends at `last`"
            );
            self.recovered = r;
        }
    }

    pub(super) fn up_to_date(&self, last_index: u64, last_term: u64) -> bool {
        let mine = self.term_at(self.last);
        last_term > mine || (last_term == mine && last_index >= self.last)
    }

    pub(super) fn in_lease(&self, now_ns: u64) -> bool {
        match self.role {
            Role::Leader => true,
            _ => self.leader.is_some() && !self.suspects_leader(now_ns),
        }
    }

    /// Whether this member takes the leader it follows for dead: silent for the election
    /// timeout at least, and past the suspicion φ ([`crate::detector`]).
    pub(super) fn suspects_leader(&self, now_ns: u64) -> bool {
        now_ns
            >= self
                .leader_heard_ns
                .saturating_add(self.p.election_timeout_ns)
            && self.leader_arrivals.suspects(
                now_ns,
                self.p.election_timeout_ns,
                self.p.suspicion_phi,
            )
    }

    /// Asks for votes: PreVote first (`pre`), then the real election.
    pub(super) fn campaign(
        &mut self,
        now_ns: u64,
        pre: bool,
        transfer: bool,
        log: &mut dyn Store,
    ) -> Result<(), StoreError> {
        // what this member claims to hold is synced before it asks
        self.sync_and_ack();
        self.votes.clear();
        self.votes.insert(self.p.id);
        self.handed_over = transfer;
        self.reset_election_timer(now_ns);
        if pre || transfer {
            // what this campaign begins from (the real election after a PreVote keeps it)
            let (timeout, phi) = (self.p.election_timeout_ns, self.p.suspicion_phi);
            // the silence as the detector judged it (from the first of the leader's last
            // burst of appends), so that it is compared with what it tolerated on one clock
            self.campaign_from = (
                self.leader.map(|_| {
                    self.leader_arrivals
                        .silence(now_ns)
                        .unwrap_or_else(|| now_ns.saturating_sub(self.leader_heard_ns))
                }),
                self.leader_arrivals.tolerated(timeout, phi),
            );
        }
        if let Some(l) = self.leader.take() {
            self.previous_leader = l;
        }
        let proposed = if pre {
            self.role = Role::PreCandidate;
            self.term + 1
        } else {
            self.role = Role::Candidate;
            self.term += 1;
            self.voted_for = self.p.id;
            self.save_vote();
            self.stats.elections += 1;
            let (silent_ns, tolerated_ns) = self.campaign_from;
            self.events.push_back(Event::Election {
                term: self.term,
                silent_ns,
                tolerated_ns,
                handed_over: transfer,
            });
            self.term
        };
        if self.votes.len() >= self.majority() {
            return if pre {
                self.campaign(now_ns, false, transfer, log)
            } else {
                self.become_leader(now_ns, log)
            };
        }
        let body = Body::RequestVote {
            last_index: self.last,
            last_term: self.term_at(self.last),
            pre_vote: pre,
            transfer,
        };
        for to in self.p.members.clone() {
            if to != self.p.id {
                cluster::encode(&mut self.buf, self.session, self.p.id, proposed, &body);
                self.out.push(To::Member(to), &self.buf);
            }
        }
        Ok(())
    }

    pub(super) fn become_leader(
        &mut self,
        now_ns: u64,
        log: &mut dyn Store,
    ) -> Result<(), StoreError> {
        self.role = Role::Leader;
        self.leader = Some(self.p.id);
        self.stats.terms_led += 1;
        self.votes.clear();
        self.quorum_checked_ns = now_ns;
        self.polled_ns = now_ns;
        self.transfer = None;
        self.peers = self
            .p
            .members
            .iter()
            .filter(|&&id| id != self.p.id)
            .map(|&id| Peer {
                p: PeerProgress {
                    id,
                    matched: 0,
                    next: self.last + 1,
                    heard_ns: now_ns,
                },
                arrivals: Detector::new(self.p.heartbeat_ns / 2, self.p.heartbeat_ns / 2),
                last_sent_ns: 0,
                progress_ns: now_ns,
                resent_ns: 0,
                probing: true,
                sent_upto: 0,
                timed: VecDeque::new(),
                rto: Rto::new(
                    self.p.retransmit_ns,
                    RETRANSMIT_MIN_NS,
                    self.p.retransmit_ns,
                ),
            })
            .collect();
        if self.replayers > 0 && !self.handed_over {
            // whatever any node may have seen is held by a replayer: ask them first
            self.recovering = Some((now_ns + self.p.replayer_wait_ns, vec![true; self.replayers]));
            for i in 0..self.replayers {
                self.ask_replayer(i);
            }
            return Ok(());
        }
        self.start_term(now_ns, log)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_request_vote(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        last_index: u64,
        last_term: u64,
        pre_vote: bool,
        transfer: bool,
    ) {
        let lease = self.in_lease(now_ns) && !transfer;
        if pre_vote {
            // granted without changing this member's term or vote
            let granted = term > self.term && !lease && self.up_to_date(last_index, last_term);
            let answer_term = if granted { term } else { self.term };
            cluster::encode(
                &mut self.buf,
                self.session,
                self.p.id,
                answer_term,
                &Body::Vote {
                    granted,
                    pre_vote: true,
                },
            );
            self.out.push(To::Member(from), &self.buf);
            return;
        }
        if term > self.term {
            if lease {
                // a leader is alive: a member that cannot hear it must not depose it
                self.stats.stale += 1;
                self.send(
                    from,
                    &Body::Vote {
                        granted: false,
                        pre_vote: false,
                    },
                );
                return;
            }
            self.become_follower(now_ns, term, None);
        }
        let granted = term == self.term
            && (self.voted_for == 0 || self.voted_for == from)
            && self.up_to_date(last_index, last_term);
        if granted {
            self.voted_for = from;
            self.save_vote();
            self.reset_election_timer(now_ns);
        }
        self.send(
            from,
            &Body::Vote {
                granted,
                pre_vote: false,
            },
        );
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_vote(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        granted: bool,
        pre_vote: bool,
        log: &mut dyn Store,
    ) -> Result<(), StoreError> {
        if pre_vote {
            if self.role == Role::PreCandidate && granted && term == self.term + 1 {
                self.votes.insert(from);
                if self.votes.len() >= self.majority() {
                    return self.campaign(now_ns, false, false, log);
                }
            } else if !granted && term > self.term {
                self.become_follower(now_ns, term, None);
            }
            return Ok(());
        }
        if term > self.term {
            self.become_follower(now_ns, term, None);
            return Ok(());
        }
        if self.role == Role::Candidate && term == self.term && granted {
            self.votes.insert(from);
            if self.votes.len() >= self.majority() {
                return self.become_leader(now_ns, log);
            }
        }
        Ok(())
    }
}

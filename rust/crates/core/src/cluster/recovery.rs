//! A new leader's recovery before it publishes (docs/ha.md, "Failure detection and
//! takeover"): it asks every replayer how far its stream reaches, takes what a replayer holds
//! beyond its own log, then starts its term with an `Epoch`.

use super::*;

impl Member {
    pub(super) fn ask_replayer(&mut self, i: usize) {
        let r = Request {
            session: self.session,
            sequence: self.last + 1,
            count: 8192,
        };
        self.out.push(To::Replayer(i), &r.encode());
    }

    /// How many replayers the member can ask (their indices are `0..n`).
    pub fn set_replayers(&mut self, n: usize) {
        self.replayers = n;
    }

    /// Messages this member took from replayers when it became leader (entries some node
    /// may have seen that its own log lacked: none with gating replication).
    pub fn recovered_from_replayers(&mut self) -> u64 {
        self.recovered_from_replayers
    }

    /// Handles an answer of replayer `i` (a MoldUDP64 packet) to a new leader's question.
    pub fn handle_replayer(&mut self, _now_ns: u64, i: usize, datagram: &[u8]) {
        let Some((_, waiting)) = self.recovering.as_mut() else {
            return;
        };
        if i >= waiting.len() {
            return;
        }
        let Ok(p) = MoldPacket::parse(datagram) else {
            self.stats.malformed += 1;
            return;
        };
        if p.session() != self.session {
            self.stats.malformed += 1;
            return;
        }
        match p.kind() {
            PacketKind::Heartbeat | PacketKind::EndOfSession => {
                if p.sequence() <= self.last + 1 {
                    waiting[i] = false;
                }
            }
            PacketKind::Messages => {
                let mut appended = false;
                for (q, m) in p.messages() {
                    if q != self.last + 1 {
                        continue;
                    }
                    self.write(q, m);
                    self.recovered.replay(q, m);
                    if let Some((t, _)) = epoch_of(m) {
                        self.epochs.push((q, t));
                    }
                    self.last = q;
                    self.recovered_from_replayers += 1;
                    appended = true;
                }
                if appended {
                    self.sync();
                    self.ask_replayer(i);
                }
            }
        }
    }

    /// The new leader's term begins: it sequences its `Epoch` (after the previous leaders'
    /// entries it holds, which it publishes again from its known commit point on).
    pub(super) fn start_term(
        &mut self,
        now_ns: u64,
        log: &mut dyn Store,
    ) -> Result<(), StoreError> {
        self.recovering = None;
        // Entries after the known commit point may not have been published by the previous
        // leader: they are published again (nodes drop what they already have).
        let mut params = self.p.sequencer.clone();
        params.term = self.term;
        params.leader = self.p.id;
        let mut seq = Sequencer::resume(params, self.recovered.clone(), self.commit + 1, now_ns);
        log.read(self.commit + 1, usize::MAX, &mut |q, m| {
            seq.preload(q, m);
            true
        })?;
        let empty = self.last == 0;
        if let Some(ns) = self.tail_heartbeat_ns {
            seq.set_tail_heartbeat(ns);
        }
        if let Some(ns) = self.nak_holdoff_ns {
            seq.set_nak_holdoff(ns);
        }
        if let Some(k) = &self.keys {
            seq.set_keys(k.clone());
        }
        seq.sequence_epoch(now_ns, self.term, self.p.id, self.previous_leader);
        let epoch_seq = self.last + 1;
        if empty {
            seq.sequence_session_start(now_ns);
        }
        self.seq = Some(seq);
        self.events.push_back(Event::BecameLeader {
            term: self.term,
            epoch_seq,
        });
        Ok(())
    }
}

//! Leadership transfer (Ongaro's thesis §3.10): a planned switchover to a member that holds
//! everything the leader published.

use super::*;

impl Member {
    /// Starts a planned switchover to `target` (None: the most up-to-date follower). The
    /// leader stops sequencing, waits for the target to hold everything, then tells it to
    /// start an election at once (Raft's leadership transfer). Gives up after an election
    /// timeout.
    pub fn switchover(&mut self, now_ns: u64, target: Option<u16>) -> Result<u16, String> {
        if self.role != Role::Leader {
            return Err("not the leader".into());
        }
        if self.single() {
            return Err("a cluster of one member has no one to hand over to".into());
        }
        if self.seq.is_none() {
            return Err("the leader is still taking over".into());
        }
        let target = match target {
            Some(t) if self.peers.iter().any(|p| p.p.id == t) => t,
            Some(t) => return Err(format!("{t} is not another member of the cluster")),
            None => {
                self.peers
                    .iter()
                    .max_by_key(|p| (p.p.matched, std::cmp::Reverse(p.p.id)))
                    .expect("peers")
                    .p
                    .id
            }
        };
        self.transfer = Some((target, now_ns + self.p.election_timeout_ns, false));
        self.events.push_back(Event::Transfer {
            target,
            started: true,
        });
        Ok(target)
    }
}

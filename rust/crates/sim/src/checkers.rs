//! Invariant checkers that run after every step of the simulated bus (TigerBeetle's VOPR
//! checks as it goes; the end-state checks of the tests come on top).
//!
//! A **step** is one thing the bus does to one process: a datagram delivered to a member (a
//! peer's message, a node's command, a replayer's answer to a new leader, a request to the
//! member's replayer), a member's turn (`poll` then `publish`), a member's process waking
//! from a blocked fsync, a crash or a restart, a node handed its records
//! ([`crate::Bus::deliver`]) and the following replayer storing what its node delivered.
//! After each, [`Checker`] is shown every member ([`MemberView`]) and what was published or
//! handed to a node in the step, and panics on the first rule broken, naming the step, the
//! member (or node), and the term or sequence.
//!
//! **Committed**, as the checkers mean it: entry `s` is committed once any member's
//! `Member::commit()` (the highest index it knows committed: a leader's counted from a
//! majority's acknowledgements of entries of its own term, a follower's learned from its
//! leader) has reached `s`. The committed stream is the entries `1..=C`, `C` the highest
//! commit any member has shown; the checker keeps its bytes. `Member::commit()` itself is
//! volatile, as Raft's `commitIndex`: a member restarted from its journal starts again from 0
//! (a cluster of one from its whole journal) and learns it anew. What never goes back is
//! durable: the committed stream stays on the durable journals of a majority.
//!
//! The rules:
//!
//! 1. **One leader per term**, over the whole run: a term once led by a member is never led
//!    by another.
//! 2. **A committed index never goes back**: within one process of a member, `commit()`
//!    never decreases; and every committed entry stays durable (flushed, not lost by the
//!    disk, byte for byte the committed one) on a majority of the members' journals. Checked
//!    at the highest committed entry and at every entry some journal lost, which bounds every
//!    other entry (journals are prefixes).
//! 3. **Committed prefixes are equal**: every member's journal holds, up to its own
//!    `commit()`, exactly the committed stream, compared byte for byte. Incremental: each
//!    member's agreement with the stream is extended, never recomputed, except after its
//!    process restarts.
//! 4. **Nothing uncommitted reaches a node**: every message a member publishes, and every
//!    message handed to a node, is in the committed stream at its sequence, with the same
//!    bytes, and durable on a majority of the journals at that moment.
//! 5. **A sequence number never carries two messages**: what was published, committed or
//!    handed to a node agrees per sequence over the whole run (rules 3 and 4 compare each to
//!    the one committed stream, which only grows); and a suffix a member moves aside (a
//!    deposed leader's entries its new leader does not hold) never holds a committed entry
//!    (nor one below the member's own commit), so a moved-aside message is never one that
//!    was published: it is a message the bus never carried. (A member that lagged may hold a
//!    deposed leader's entry under a sequence committed since with another message: moving
//!    that one aside is what Raft does.)

use std::collections::HashMap;
use std::fmt;

/// What happened in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A peer's datagram delivered to member `.0`.
    Peer(u16),
    /// A node's upstream datagram delivered to member `.0`.
    Upstream(u16),
    /// A replayer's answer to member `.0`, leading anew.
    ReplayerAnswer(u16),
    /// A request served by member `.0`'s replayer.
    Serve(u16),
    /// Member `.0`'s turn: timers, replication, publishing.
    Turn(u16),
    /// Member `.0`'s process wakes from a blocked fsync.
    Wake(u16),
    /// A sync off member `.0`'s loop completed, and the member was told.
    Synced(u16),
    /// Member `.0`'s process stopped (killed, or failed on its disk).
    Crash(u16),
    /// Member `.0`'s process started again from its journal.
    Restart(u16),
    /// Node `.0` handed its application records.
    Deliver(usize),
    /// The following replayer stored what its node delivered.
    Follower,
    /// A test's own history (the checker's unit tests).
    Test,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Peer(m) => write!(f, "member {m} handled a peer's datagram"),
            Action::Upstream(m) => write!(f, "member {m} handled an upstream datagram"),
            Action::ReplayerAnswer(m) => write!(f, "member {m} handled a replayer's answer"),
            Action::Serve(m) => write!(f, "member {m}'s replayer served a request"),
            Action::Turn(m) => write!(f, "member {m} polled and published"),
            Action::Wake(m) => write!(f, "member {m} woke from a blocked fsync"),
            Action::Synced(m) => write!(f, "a sync off member {m}'s loop completed"),
            Action::Crash(m) => write!(f, "member {m} stopped"),
            Action::Restart(m) => write!(f, "member {m} restarted from its journal"),
            Action::Deliver(n) => write!(f, "node {n} was handed its records"),
            Action::Follower => write!(f, "the following replayer stored its records"),
            Action::Test => write!(f, "a test's history"),
        }
    }
}

/// Who published, or was handed, a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    Member(u16),
    Node(usize),
    Follower,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Who::Member(m) => write!(f, "member {m} published"),
            Who::Node(n) => write!(f, "node {n} was handed"),
            Who::Follower => write!(f, "the following replayer stored"),
        }
    }
}

/// One step: its number, the virtual time, what happened.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub n: u64,
    pub now_ns: u64,
    pub action: Action,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} (t={}.{:09} s, {})",
            self.n,
            self.now_ns / 1_000_000_000,
            self.now_ns % 1_000_000_000,
            self.action
        )
    }
}

/// A member's process as the checker sees it (through `Member`'s public accessors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Live {
    /// Counts the member's processes: a new one after each restart.
    pub incarnation: u64,
    pub leader: bool,
    pub term: u64,
    /// `Member::commit()`.
    pub commit: u64,
}

/// One member after a step: its process (None while dead, or blocked in an fsync, when its
/// state cannot be seen) and its journal.
#[derive(Debug, Clone, Copy)]
pub struct MemberView<'a> {
    pub id: u16,
    pub live: Option<Live>,
    /// Records written, sequence `i + 1` at `i`.
    pub records: &'a [Vec<u8>],
    /// Records `1..=durable` are durable.
    pub durable: usize,
    /// Durable records the disk lost (damage a read would report).
    pub lost: &'a [u64],
    /// Every suffix moved aside so far: (first sequence, messages).
    pub discarded: &'a [(u64, Vec<Vec<u8>>)],
}

#[derive(Debug, Clone, Default)]
struct PerMember {
    incarnation: Option<u64>,
    commit: u64,
    /// Its journal's first `agree` records equal the committed stream's.
    agree: usize,
    discarded_seen: usize,
}

/// The checkers' memory of the run.
#[derive(Debug, Clone)]
pub struct Checker {
    majority: usize,
    members: usize,
    /// Who led each term.
    leaders: HashMap<u64, u16>,
    per: Vec<PerMember>,
    /// The committed stream, sequence `i + 1` at `i`.
    committed: Vec<Vec<u8>>,
    steps: u64,
}

impl Checker {
    pub fn new(members: usize) -> Checker {
        Checker {
            majority: members / 2 + 1,
            members,
            leaders: HashMap::new(),
            per: vec![PerMember::default(); members],
            committed: Vec::new(),
            steps: 0,
        }
    }

    /// The committed stream so far.
    pub fn committed(&self) -> &[Vec<u8>] {
        &self.committed
    }

    /// Steps checked.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Checks the members after `step`, and what the step published (`(member, sequence,
    /// message)`: envelope and body as sequenced).
    pub fn after_step(
        &mut self,
        step: &Step,
        views: &[MemberView<'_>],
        published: &[(u16, u64, &[u8])],
    ) {
        assert_eq!(views.len(), self.members, "a view per member");
        self.steps += 1;
        let before = self.committed.len();
        for (k, v) in views.iter().enumerate() {
            let p = &mut self.per[k];
            // rule 5: nothing committed is moved aside. A member that lagged may hold, under
            // a sequence committed since, a deposed leader's entry: that one it moves aside
            // (it differs from the committed entry); the committed entry, or one below its
            // own commit, never.
            for (first, msgs) in &v.discarded[p.discarded_seen.min(v.discarded.len())..] {
                for (i, m) in msgs.iter().enumerate() {
                    let s = first + i as u64;
                    let committed =
                        (s as usize) <= before && self.committed[(s - 1) as usize] == *m;
                    if committed || s <= p.commit {
                        panic!(
                            "invariant broken at {step}: member {} moved aside entry {s}, \
                             which is committed (the member knew up to {}, the cluster up to \
                             {before}): a sequence would carry two messages",
                            v.id, p.commit
                        );
                    }
                }
            }
            p.discarded_seen = v.discarded.len();
            let Some(live) = v.live else {
                continue;
            };
            // rule 1
            if live.leader {
                let led = *self.leaders.entry(live.term).or_insert(v.id);
                if led != v.id {
                    panic!(
                        "invariant broken at {step}: two leaders in term {}: member {led} and \
                         member {}",
                        live.term, v.id
                    );
                }
            }
            // rule 2, within a process
            if p.incarnation == Some(live.incarnation) {
                if live.commit < p.commit {
                    panic!(
                        "invariant broken at {step}: member {}'s committed index went back \
                         from {} to {} (term {})",
                        v.id, p.commit, live.commit, live.term
                    );
                }
            } else {
                // a new process: its journal is compared again from the start
                p.incarnation = Some(live.incarnation);
                p.agree = 0;
            }
            p.commit = live.commit;
        }
        // rule 3: extend each member's agreement with the committed stream, then the stream
        // with what the members know committed beyond it
        for (k, v) in views.iter().enumerate() {
            self.extend_agreement(k, v);
        }
        for (k, v) in views.iter().enumerate() {
            let Some(live) = v.live else {
                continue;
            };
            let c = live.commit as usize;
            if c > self.committed.len() {
                let have = self.committed.len();
                if self.per[k].agree < have {
                    self.differs(step, v, live, self.per[k].agree + 1);
                }
                if v.records.len() < c {
                    panic!(
                        "invariant broken at {step}: member {} knows {c} committed but its \
                         journal ends at {} (term {})",
                        v.id,
                        v.records.len(),
                        live.term
                    );
                }
                self.committed.extend_from_slice(&v.records[have..c]);
                self.per[k].agree = c;
            }
        }
        for (k, v) in views.iter().enumerate() {
            self.extend_agreement(k, v);
            if let Some(live) = v.live {
                if self.per[k].agree < live.commit as usize {
                    self.differs(step, v, live, self.per[k].agree + 1);
                }
            }
        }
        // rule 2, durably: the committed stream on a majority
        let c = self.committed.len() as u64;
        if c > 0 {
            self.on_majority(step, views, c, "the highest committed entry");
            for v in views {
                for &s in v.lost {
                    if s <= c {
                        self.on_majority(step, views, s, "a committed entry a journal lost");
                    }
                }
            }
        }
        // rule 4, at the source
        for &(member, seq, msg) in published {
            self.reaches_a_node(step, views, Who::Member(member), seq, msg, true);
        }
    }

    /// Checks what a node (or the following replayer) was handed in `step`: `(sequence,
    /// envelope + body)` of every message record. A node is handed a message of several
    /// fragments whole under its last fragment's sequence: only the body of that fragment is
    /// compared. `whole`: the records are the stream's messages as sequenced (the following
    /// replayer's), compared whole.
    pub fn delivered(
        &mut self,
        step: &Step,
        views: &[MemberView<'_>],
        who: Who,
        records: &[(u64, &[u8])],
        whole: bool,
    ) {
        self.steps += 1;
        for &(seq, msg) in records {
            self.reaches_a_node(step, views, who, seq, msg, whole);
        }
    }

    fn extend_agreement(&mut self, k: usize, v: &MemberView<'_>) {
        let p = &mut self.per[k];
        p.agree = p.agree.min(v.records.len());
        let upto = v.records.len().min(self.committed.len());
        while p.agree < upto && v.records[p.agree] == self.committed[p.agree] {
            p.agree += 1;
        }
    }

    fn differs(&self, step: &Step, v: &MemberView<'_>, live: Live, s: usize) -> ! {
        let what = match v.records.get(s - 1) {
            Some(_) => "differs from the committed entry",
            None => "is missing",
        };
        panic!(
            "invariant broken at {step}: member {}'s committed prefix (commit {}, term {}) \
             is not the committed stream: its entry {s} {what}",
            v.id, live.commit, live.term
        );
    }

    /// Members whose durable journal holds the committed entry `s`.
    fn holders(&self, views: &[MemberView<'_>], s: u64) -> usize {
        let i = (s - 1) as usize;
        views
            .iter()
            .enumerate()
            .filter(|(k, v)| {
                let agree = self.per[*k].agree;
                // within the agreement, or (beyond it, when the stream grew this step) equal
                let same = i < agree || v.records.get(i) == self.committed.get(i);
                same && i < v.durable && !v.lost.contains(&s)
            })
            .count()
    }

    fn on_majority(&self, step: &Step, views: &[MemberView<'_>], s: u64, what: &str) {
        let n = self.holders(views, s);
        if n < self.majority {
            panic!(
                "invariant broken at {step}: committed entry {s} ({what}; committed up to {}) \
                 is durable on {n} of {} members' journals, fewer than a majority",
                self.committed.len(),
                self.members
            );
        }
    }

    fn reaches_a_node(
        &self,
        step: &Step,
        views: &[MemberView<'_>],
        who: Who,
        seq: u64,
        msg: &[u8],
        whole: bool,
    ) {
        let c = self.committed.len() as u64;
        if seq == 0 || seq > c {
            panic!(
                "invariant broken at {step}: {who} sequence {seq}, which is not committed \
                 (committed up to {c}; durable on {} of {} members' journals)",
                views
                    .iter()
                    .filter(|v| (seq as usize) <= v.durable && seq > 0)
                    .count(),
                self.members
            );
        }
        let want = &self.committed[(seq - 1) as usize];
        let same = if whole || msg.len() == want.len() {
            msg == want.as_slice()
        } else {
            // reassembled from fragments: the last fragment's body ends the message
            want.len() >= 32 && msg.ends_with(&want[32..])
        };
        if !same {
            panic!(
                "invariant broken at {step}: {who} sequence {seq} with other bytes than the \
                 committed entry {seq} ({} bytes, committed {} bytes): a sequence carries two \
                 messages",
                msg.len(),
                want.len()
            );
        }
        let n = self.holders(views, seq);
        if n < self.majority {
            panic!(
                "invariant broken at {step}: {who} sequence {seq}, durable on {n} of {} \
                 members' journals, fewer than a majority",
                self.members
            );
        }
    }
}

/// Fabricated histories, one per rule: the checker must panic on each.
#[cfg(test)]
mod tests {
    use super::*;

    fn step(n: u64) -> Step {
        Step {
            n,
            now_ns: n * 1_000,
            action: Action::Test,
        }
    }

    fn live(leader: bool, term: u64, commit: u64) -> Option<Live> {
        Some(Live {
            incarnation: 1,
            leader,
            term,
            commit,
        })
    }

    fn view<'a>(id: u16, live: Option<Live>, records: &'a [Vec<u8>]) -> MemberView<'a> {
        MemberView {
            id,
            live,
            records,
            durable: records.len(),
            lost: &[],
            discarded: &[],
        }
    }

    fn log(entries: &[&str]) -> Vec<Vec<u8>> {
        entries.iter().map(|e| e.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_sound_history_passes() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2", "m3"]);
        let b = log(&["e1", "m2"]);
        let views = [
            view(1, live(true, 1, 2), &a),
            view(2, live(false, 1, 2), &b),
            view(3, None, &[]),
        ];
        c.after_step(&step(1), &views, &[(1, 1, b"e1"), (1, 2, b"m2")]);
        c.delivered(&step(2), &views, Who::Node(0), &[(2, b"m2")], false);
        assert_eq!(c.committed(), &log(&["e1", "m2"])[..]);
    }

    #[test]
    #[should_panic(expected = "two leaders in term 3: member 1 and member 2")]
    fn two_leaders_in_one_term_even_at_different_times() {
        let mut c = Checker::new(3);
        c.after_step(
            &step(1),
            &[
                view(1, live(true, 3, 0), &[]),
                view(2, None, &[]),
                view(3, None, &[]),
            ],
            &[],
        );
        // member 1 is gone; member 2 leads the same term later
        c.after_step(
            &step(2),
            &[
                view(1, None, &[]),
                view(2, live(true, 3, 0), &[]),
                view(3, None, &[]),
            ],
            &[],
        );
    }

    #[test]
    #[should_panic(expected = "member 2's committed index went back from 2 to 1 (term 1)")]
    fn a_commit_that_goes_back() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        c.after_step(
            &step(1),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 2), &a),
                view(3, None, &[]),
            ],
            &[],
        );
        c.after_step(
            &step(2),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 1), &a),
                view(3, None, &[]),
            ],
            &[],
        );
    }

    #[test]
    #[should_panic(
        expected = "committed entry 2 (the highest committed entry; committed up to 2) is durable on 1 of 3"
    )]
    fn a_committed_entry_on_one_journal_of_three() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        let b = log(&["e1"]);
        c.after_step(
            &step(1),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 1), &b),
                view(3, None, &[]),
            ],
            &[],
        );
    }

    #[test]
    #[should_panic(
        expected = "member 2's committed prefix (commit 2, term 1) is not the committed stream: its entry 2 differs"
    )]
    fn committed_prefixes_that_differ() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        let b = log(&["e1", "x2"]);
        let views = [
            view(1, live(true, 1, 2), &a),
            view(2, live(false, 1, 2), &b),
            view(3, live(false, 1, 0), &a),
        ];
        c.after_step(&step(1), &views, &[]);
    }

    #[test]
    #[should_panic(
        expected = "member 1 published sequence 3, which is not committed (committed up to 2"
    )]
    fn publishing_what_is_not_committed() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2", "m3"]);
        let b = log(&["e1", "m2"]);
        let views = [
            view(1, live(true, 1, 2), &a),
            view(2, live(false, 1, 2), &b),
            view(3, None, &[]),
        ];
        c.after_step(&step(1), &views, &[(1, 3, b"m3")]);
    }

    #[test]
    #[should_panic(
        expected = "node 4 was handed sequence 2 with other bytes than the committed entry 2"
    )]
    fn a_node_handed_another_message_under_a_committed_sequence() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        let views = [
            view(1, live(true, 1, 2), &a),
            view(2, live(false, 1, 2), &a),
            view(3, None, &[]),
        ];
        c.after_step(&step(1), &views, &[]);
        c.delivered(&step(2), &views, Who::Node(4), &[(2, b"x2")], false);
    }

    #[test]
    #[should_panic(expected = "member 3 moved aside entry 2, which is committed")]
    fn a_committed_entry_moved_aside() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        let kept = log(&["e1"]);
        let gone = [(2, log(&["m2"]))];
        c.after_step(
            &step(1),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 2), &a),
                view(3, live(false, 1, 0), &a),
            ],
            &[],
        );
        let mut v3 = view(3, live(false, 1, 0), &kept);
        v3.discarded = &gone;
        c.after_step(
            &step(2),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 2), &a),
                v3,
            ],
            &[],
        );
    }

    #[test]
    fn a_deposed_leaders_entry_under_a_committed_sequence_may_be_moved_aside() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        let kept = log(&["e1"]);
        let gone = [(2, log(&["stale2"]))];
        c.after_step(
            &step(1),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 2), &a),
                view(3, None, &[]),
            ],
            &[],
        );
        let mut v3 = view(3, live(false, 1, 0), &kept);
        v3.discarded = &gone;
        c.after_step(
            &step(2),
            &[
                view(1, live(true, 1, 2), &a),
                view(2, live(false, 1, 2), &a),
                v3,
            ],
            &[],
        );
    }

    #[test]
    #[should_panic(
        expected = "committed entry 1 (a committed entry a journal lost; committed up to 2) is durable on 1 of 3"
    )]
    fn a_lost_record_counts_as_not_held() {
        let mut c = Checker::new(3);
        let a = log(&["e1", "m2"]);
        let mut v2 = view(2, live(false, 1, 2), &a);
        v2.lost = &[1];
        c.after_step(
            &step(1),
            &[view(1, live(true, 1, 2), &a), v2, view(3, None, &[])],
            &[],
        );
    }
}

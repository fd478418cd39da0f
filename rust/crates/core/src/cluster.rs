//! A cluster of sequencers with no single point of failure (docs/ha.md): one leader
//! sequences, every member keeps a replica of the stream, and a message is published only once
//! a majority of the members hold it (gating replication: "persist before publish" on more than
//! one host). A failed leader is replaced by an election; a deposed leader is fenced.
//!
//! The protocol is Raft (Ongaro & Ousterhout 2014, Figure 2), followed closely, with the
//! PreVote and CheckQuorum extensions (Ongaro's thesis §9.6, §6.2) and leadership transfer
//! (§3.10) for planned switchovers. Raft's log is the sequenced stream itself: index =
//! sequence number, entry = the message exactly as published (envelope + body). An entry's
//! term is not stored beside it: every leader's first entry of its term is an `Epoch` control
//! message naming the term, so the term of entry `i` is that of the last `Epoch` at or before
//! `i` (0 before the first). Two logs that hold the same entries therefore give them the same
//! terms, which is all Raft's log-matching argument needs.
//!
//! Sans-IO like the rest of the core: datagrams and the time in, datagrams out. The member
//! reads and writes its replica through [`Log`] (the journal, or memory in simulations); a
//! write returns once the entries are persisted per the journal's policy, and a member answers
//! an append only after that.
//!
//! A cluster of one member is a plain sequencer: leader from the start, term 0, no `Epoch`,
//! every written message committed at once.
//!
//! The I/O layer drives a member like this:
//!
//! ```text
//! for each upstream datagram: m.handle_upstream(now, d)        // the leader sequences
//! for each peer datagram: m.handle_peer(now, d, log, emit)     // votes, appends, answers
//! m.poll(now, log, emit)                                        // timers; write + replicate
//! m.publish(now, |packet| send downstream)                      // committed → MoldUDP64
//! ```

use std::collections::{HashSet, VecDeque};

use seqbus_wire::cluster::{self, AppendWriter, Body, Message};
use seqbus_wire::control::Control;
use seqbus_wire::envelope::{Envelope, KIND_CONTROL};
use seqbus_wire::mold::{MoldPacket, PacketKind, Request, REQUEST_LEN};
use seqbus_wire::{Session, ENVELOPE_LEN};

use crate::detector::Detector;
use crate::replayer::{MemoryStore, Store, StoreError};
use crate::rng::Rng;
use crate::rto::Rto;
use crate::sequencer::{Recovered, Sequencer, SequencerParams};

/// A member's replica of the stream: what [`Member`] needs from the journal.
pub trait Log: Store {
    /// Appends `msg` under `seq` (= [`Store::next_seq`]).
    fn append(&mut self, seq: u64, msg: &[u8]) -> Result<(), StoreError>;
    /// Persists what was appended (per the journal's durability policy); an append is
    /// answered only after this.
    fn flush(&mut self) -> Result<(), StoreError>;
    /// Removes the entries from `seq` on, keeping them aside (never destroyed): a replica's
    /// suffix the leader does not hold. Only entries never published are ever removed.
    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError>;
    /// Persists the term and vote (before any message that depends on them is sent).
    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError>;
}

/// A [`Log`] in memory, for simulations: the entries, the vote, and what was discarded.
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub store: MemoryStore,
    pub term: u64,
    pub voted_for: u16,
    /// Every discarded suffix: (first sequence, messages).
    pub discarded: Vec<(u64, Vec<Vec<u8>>)>,
}

impl Store for MemoryLog {
    fn next_seq(&mut self) -> u64 {
        self.store.next_seq()
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        self.store.read(from, max, f)
    }
}

impl Log for MemoryLog {
    fn append(&mut self, seq: u64, msg: &[u8]) -> Result<(), StoreError> {
        if seq != self.store.next_seq() {
            return Err(StoreError(format!(
                "append of {seq} where {} is next",
                self.store.next_seq()
            )));
        }
        self.store.push(msg);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError> {
        let gone = self.store.split_off(seq);
        if !gone.is_empty() {
            self.discarded.push((seq, gone));
        }
        Ok(())
    }

    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError> {
        self.term = term;
        self.voted_for = voted_for;
        Ok(())
    }
}

/// Settings of a cluster member.
#[derive(Debug, Clone)]
pub struct MemberParams {
    /// The sequencing settings the member uses as leader (`term`/`leader` are set by it).
    pub sequencer: SequencerParams,
    /// This member's id (1–65535).
    pub id: u16,
    /// Every member's id, this one's included.
    pub members: Vec<u16>,
    /// A follower that hears no leader for a random time in `[t, 1.5t)` starts an election;
    /// a leader that hears no majority for `t` steps down.
    pub election_timeout_ns: u64,
    /// The leader sends an append (empty if need be) to each follower at least this often.
    pub heartbeat_ns: u64,
    /// Entries a follower has not confirmed after this long are sent again: the most; the
    /// timeout in force is learned per follower from the round trips of its answers (RFC
    /// 6298), at least [`RETRANSMIT_MIN_NS`].
    pub retransmit_ns: u64,
    /// Largest append datagram.
    pub max_append: usize,
    /// Seed of the election timeouts' randomness.
    pub seed: u64,
    /// A new leader waits at most this long for the replayers to say how far their stream
    /// reaches (it takes whatever they hold beyond its own log before it publishes).
    pub replayer_wait_ns: u64,
    /// The φ at which a silent leader (at a follower) or follower (at the leader) is taken for
    /// dead, once silent for the election timeout at least ([`crate::detector`]); 0: the
    /// election timeout alone decides.
    pub suspicion_phi: f64,
}

/// What a member currently is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Follower,
    /// Asking whether an election could be won (PreVote), without raising the term.
    PreCandidate,
    Candidate,
    Leader,
}

impl Role {
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Follower => "follower",
            Role::PreCandidate => "pre-candidate",
            Role::Candidate => "candidate",
            Role::Leader => "leader",
        }
    }
}

/// Something the I/O layer should log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Became leader of `term`; the `Epoch` is sequenced at `epoch_seq`.
    BecameLeader { term: u64, epoch_seq: u64 },
    /// Stopped leading `term`.
    SteppedDown { term: u64, why: &'static str },
    /// Follows `leader` in `term`.
    Following { term: u64, leader: u16 },
    /// Started an election for `term`: `silent_ns`, how long the leader it followed had been
    /// silent when it first asked (None: it followed none), `tolerated_ns` the silence it
    /// tolerated from that leader ([`crate::detector::Detector::tolerated`]); `handed_over`:
    /// the leader asked for it (a switchover).
    Election {
        term: u64,
        silent_ns: Option<u64>,
        tolerated_ns: u64,
        handed_over: bool,
    },
    /// Entries from `from` on were not the leader's: moved aside.
    Discarded { from: u64, count: u64 },
    /// A switchover to `target` began, or gave up.
    Transfer { target: u16, started: bool },
}

/// Counters of a member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub elections: u64,
    /// Election timeouts that passed while the leader's φ said it was slow, not dead: no
    /// election was started (docs/ha.md, "Failure detection").
    pub held_suspicions: u64,
    /// Times this member stepped down as leader for want of a majority (CheckQuorum).
    pub quorum_stepdowns: u64,
    /// Times this member, leading, found that it had itself not run for two heartbeats (a
    /// descheduled or stopped process): it then judges its followers' silence from then on.
    pub own_pauses: u64,
    pub terms_led: u64,
    pub appends_sent: u64,
    pub appends_received: u64,
    /// Acknowledgements a follower sent for the appends it took: one for all that came in
    /// one turn of its loop.
    pub acks_sent: u64,
    pub entries_sent: u64,
    pub entries_received: u64,
    pub rejected_appends: u64,
    pub malformed: u64,
    pub stale: u64,
    /// Upstream datagrams dropped because this member was not (yet) leading.
    pub not_leader: u64,
    pub discarded: u64,
}

/// Where a leader's follower stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerProgress {
    pub id: u16,
    /// Highest index known to match the leader's log.
    pub matched: u64,
    /// Next index to send.
    pub next: u64,
    /// When the peer was last heard from.
    pub heard_ns: u64,
}

#[derive(Debug, Clone)]
struct Peer {
    p: PeerProgress,
    /// The arrivals of its answers, for CheckQuorum.
    arrivals: Detector,
    last_sent_ns: u64,
    /// When `matched` last moved (or the peer was last sent a retransmission).
    progress_ns: u64,
    /// When a rejection last made the leader send again (rejections of a pipeline arrive
    /// together; one resend answers them all).
    resent_ns: u64,
    /// Where the follower's log meets the leader's is not known yet: one append at a time,
    /// each waiting for its answer (Raft's probe), until one succeeds.
    probing: bool,
    /// Highest index sent.
    sent_upto: u64,
    /// Appends carrying entries, not yet confirmed: (last index, when sent, sent before).
    timed: VecDeque<(u64, u64, bool)>,
    /// The retransmission timeout in force for this follower.
    rto: Rto,
}

impl Peer {
    /// A success answer confirmed everything up to `index`: a round-trip sample from the
    /// newest append it covers that was sent once (Karn's rule).
    fn sample(&mut self, now_ns: u64, index: u64) {
        let mut sent = None;
        while self.timed.front().is_some_and(|t| t.0 <= index) {
            let (_, at, again) = self.timed.pop_front().expect("present");
            sent = if again { None } else { Some(at) };
        }
        if let Some(at) = sent {
            self.rto.sample(now_ns.saturating_sub(at));
        }
    }
}

/// The least retransmission timeout of an append.
pub const RETRANSMIT_MIN_NS: u64 = 200_000;

/// Most entries sent to a follower beyond what it confirmed.
const MAX_IN_FLIGHT: u64 = 1 << 16;
/// Most append datagrams sent to one follower per poll.
const MAX_APPENDS_PER_POLL: usize = 32;

/// The `Epoch` in a message (envelope + body), if it is one.
fn epoch_of(msg: &[u8]) -> Option<(u64, u16)> {
    let env = Envelope::parse(msg).ok()?;
    if env.kind != KIND_CONTROL {
        return None;
    }
    match Control::parse(&msg[ENVELOPE_LEN..]) {
        Ok(Control::Epoch { term, leader, .. }) => Some((term, leader)),
        _ => None,
    }
}

/// One sequencer of a cluster.
#[derive(Debug)]
pub struct Member {
    p: MemberParams,
    session: Session,
    role: Role,
    term: u64,
    voted_for: u16,
    leader: Option<u16>,
    /// The leader before this term's (named in the next `Epoch`).
    previous_leader: u16,
    /// Last index in the log (written).
    last: u64,
    /// (first index, term) of every `Epoch` in the log.
    epochs: Vec<(u64, u64)>,
    /// Dedupe state and clock of the whole log (a new leader starts from it).
    recovered: Recovered,
    /// Highest index known committed.
    commit: u64,
    election_deadline: u64,
    /// When a leader of the current term was last heard (no vote is granted to a
    /// challenger while the leader is not suspected: CheckQuorum's leader stickiness).
    leader_heard_ns: u64,
    /// The arrivals of the leaders' appends: how long a leader here falls silent and is
    /// still alive.
    leader_arrivals: Detector,
    /// An election timeout passed while the leader was taken for slow (counted once a
    /// silence in `held_suspicions`).
    holding: bool,
    /// What the last campaign began from: how long its leader had been silent (None: none
    /// followed) and the silence tolerated, for [`Event::Election`].
    campaign_from: (Option<u64>, u64),
    /// When a leader's [`Member::poll`] last ran (its own pauses are told from its
    /// followers' silence).
    polled_ns: u64,
    /// A follower's acknowledgement, waiting for the turn's last append: (leader, index)
    /// answered once the log is flushed ([`Member::poll`]), one for every append that came
    /// in the same turn.
    ack: Option<(u16, u64)>,
    /// Entries appended to the log and not yet flushed.
    unflushed: bool,
    votes: HashSet<u16>,
    peers: Vec<Peer>,
    seq: Option<Sequencer>,
    /// Switchover in progress: (target, give-up time, TimeoutNow sent).
    transfer: Option<(u16, u64, bool)>,
    /// Replayers this member can ask ([`Member::set_replayers`]).
    replayers: usize,
    /// A new leader asking the replayers how far their stream reaches: (give-up time,
    /// replayers not yet done).
    recovering: Option<(u64, Vec<bool>)>,
    /// Requests to replayers, waiting to be sent: (replayer, request).
    requests: Vec<(usize, [u8; REQUEST_LEN])>,
    /// Messages a new leader took from replayers.
    recovered_from_replayers: u64,
    /// This election was started by the leader handing over (TimeoutNow): the old leader
    /// made sure this member holds all it published, so no replayer need be asked.
    handed_over: bool,
    /// Given to every sequencer this member runs ([`Member::set_tail_heartbeat`],
    /// [`Member::set_nak_holdoff`]); None: the sequencer's defaults.
    tail_heartbeat_ns: Option<u64>,
    nak_holdoff_ns: Option<u64>,
    /// The accounts' keys, when upstream is authenticated ([`Member::set_keys`]).
    keys: Option<std::sync::Arc<crate::sequencer::AccountKeys>>,
    /// When the leader last checked that a majority is with it.
    quorum_checked_ns: u64,
    rng: Rng,
    writer: AppendWriter,
    buf: Vec<u8>,
    events: Vec<Event>,
    stats: ClusterStats,
}

impl Member {
    /// A member over `log`, whose term and vote were persisted as `term`/`voted_for`.
    /// Reads the whole log once (terms, dedupe state).
    pub fn new(
        p: MemberParams,
        log: &mut dyn Log,
        term: u64,
        voted_for: u16,
        now_ns: u64,
    ) -> Result<Member, StoreError> {
        assert!(
            p.id != 0 && p.members.contains(&p.id),
            "member id in members"
        );
        let mut m = Member {
            session: p.sequencer.session,
            writer: AppendWriter::new(p.max_append),
            rng: Rng(p.seed ^ (p.id as u64).wrapping_mul(0x9E37_79B9)),
            role: Role::Follower,
            term,
            voted_for,
            leader: None,
            previous_leader: 0,
            last: 0,
            epochs: Vec::new(),
            recovered: Recovered::new_session(),
            commit: 0,
            election_deadline: 0,
            leader_heard_ns: 0,
            leader_arrivals: Detector::new(p.heartbeat_ns / 2, p.heartbeat_ns / 2),
            polled_ns: 0,
            ack: None,
            unflushed: false,
            holding: false,
            campaign_from: (None, 0),
            votes: HashSet::new(),
            peers: Vec::new(),
            seq: None,
            transfer: None,
            replayers: 0,
            recovering: None,
            requests: Vec::new(),
            recovered_from_replayers: 0,
            handed_over: false,
            tail_heartbeat_ns: None,
            nak_holdoff_ns: None,
            keys: None,
            quorum_checked_ns: now_ns,
            buf: Vec::new(),
            events: Vec::new(),
            stats: ClusterStats::default(),
            p,
        };
        m.rescan(log)?;
        if m.p.members.len() == 1 {
            // a cluster of one: a plain sequencer, whose own journal is the majority
            m.commit = m.last;
            m.role = Role::Leader;
            m.leader = Some(m.p.id);
            let seq = Sequencer::new(m.p.sequencer.clone(), m.recovered.clone(), now_ns);
            m.seq = Some(seq);
        } else {
            m.reset_election_timer(now_ns);
        }
        Ok(m)
    }

    /// The first heartbeat after data comes this soon (`Sequencer::set_tail_heartbeat`).
    pub fn set_tail_heartbeat(&mut self, ns: u64) {
        self.tail_heartbeat_ns = Some(ns);
        if let Some(seq) = self.seq.as_mut() {
            seq.set_tail_heartbeat(ns);
        }
    }

    /// At most one NAK per account per this long (`Sequencer::set_nak_holdoff`).
    pub fn set_nak_holdoff(&mut self, ns: u64) {
        self.nak_holdoff_ns = Some(ns);
        if let Some(seq) = self.seq.as_mut() {
            seq.set_nak_holdoff(ns);
        }
    }

    /// Authenticated upstream for every sequencer this member runs (`Sequencer::set_keys`).
    /// Each leader's anti-replay windows start empty: a replay of what the last leader took
    /// carries commands it already sequenced, which are dropped as duplicates.
    pub fn set_keys(&mut self, keys: std::sync::Arc<crate::sequencer::AccountKeys>) {
        if let Some(seq) = self.seq.as_mut() {
            seq.set_keys(keys.clone());
        }
        self.keys = Some(keys);
    }

    /// The NAK the last [`Member::handle_upstream`] produced, for the datagram's sender.
    pub fn take_nak(&mut self) -> Option<Vec<u8>> {
        self.seq.as_mut().and_then(Sequencer::take_nak)
    }

    /// Rebuilds terms and dedupe state from the log.
    fn rescan(&mut self, log: &mut dyn Log) -> Result<(), StoreError> {
        let mut recovered = Recovered::new_session();
        let mut epochs = Vec::new();
        let mut last = 0;
        log.read(1, usize::MAX, &mut |q, msg| {
            recovered.replay(q, msg);
            if let Some((term, _)) = epoch_of(msg) {
                epochs.push((q, term));
            }
            last = q;
            true
        })?;
        self.recovered = recovered;
        self.epochs = epochs;
        self.last = last;
        Ok(())
    }

    fn single(&self) -> bool {
        self.p.members.len() == 1
    }

    fn majority(&self) -> usize {
        self.p.members.len() / 2 + 1
    }

    /// The term of entry `index` (0 before the first `Epoch`).
    pub fn term_at(&self, index: u64) -> u64 {
        let i = self.epochs.partition_point(|&(first, _)| first <= index);
        if i == 0 {
            0
        } else {
            self.epochs[i - 1].1
        }
    }

    /// The term of the log's last entry (0 for a log with no `Epoch`).
    pub fn last_log_term(&self) -> u64 {
        self.epochs.last().map_or(0, |&(_, term)| term)
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    pub fn id(&self) -> u16 {
        self.p.id
    }

    /// The leader this member follows (itself when leading), if known.
    pub fn leader(&self) -> Option<u16> {
        self.leader
    }

    /// Highest index known committed: the leader publishes up to it, and a follower's replayer
    /// may serve up to it.
    pub fn commit(&self) -> u64 {
        self.commit
    }

    /// Last index in this member's log.
    pub fn last_index(&self) -> u64 {
        self.last
    }

    pub fn stats(&self) -> ClusterStats {
        self.stats
    }

    /// The leader's view of its followers.
    pub fn peers(&self) -> Vec<PeerProgress> {
        self.peers.iter().map(|p| p.p).collect()
    }

    /// The sequencer, while leading.
    pub fn sequencer(&self) -> Option<&Sequencer> {
        self.seq.as_ref()
    }

    /// Sequence number the next sequenced message will get while leading.
    pub fn next_seq(&self) -> u64 {
        self.seq.as_ref().map_or(self.last + 1, Sequencer::next_seq)
    }

    /// Events since the last call, for the log.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// True while a switchover is in progress (upstream is refused meanwhile).
    pub fn transferring(&self) -> bool {
        self.transfer.is_some()
    }

    fn reset_election_timer(&mut self, now_ns: u64) {
        // randomised over [t, 1.5 t): two standbys rarely time out together (Raft §5.2),
        // and a dead leader is noticed within 1.5 election timeouts
        let t = self.p.election_timeout_ns;
        self.election_deadline = now_ns + t + self.rng.next_u64() % (t / 2).max(1);
    }

    fn save_vote(&mut self, log: &mut dyn Log) -> Result<(), StoreError> {
        log.save_vote(self.term, self.voted_for)
    }

    fn send(&mut self, to: u16, body: &Body<'_>, emit: &mut dyn FnMut(u16, &[u8])) {
        cluster::encode(&mut self.buf, self.session, self.p.id, self.term, body);
        emit(to, &self.buf);
    }

    fn become_follower(
        &mut self,
        now_ns: u64,
        term: u64,
        leader: Option<u16>,
        log: &mut dyn Log,
    ) -> Result<(), StoreError> {
        if self.role == Role::Leader {
            self.events.push(Event::SteppedDown {
                term: self.term,
                why: "a higher term",
            });
        }
        if term > self.term {
            self.term = term;
            self.voted_for = 0;
            self.save_vote(log)?;
        }
        self.role = Role::Follower;
        self.stop_leading();
        self.recovering = None;
        self.peers.clear();
        self.transfer = None;
        self.votes.clear();
        if let Some(new) = leader.filter(|&l| Some(l) != self.leader) {
            self.previous_leader = self.leader.unwrap_or(self.previous_leader);
            self.leader = Some(new);
            self.events.push(Event::Following {
                term: self.term,
                leader: new,
            });
        } else if leader.is_none() {
            if let Some(l) = self.leader.take() {
                self.previous_leader = l;
            }
        }
        self.reset_election_timer(now_ns);
        Ok(())
    }

    /// Drops the sequencer of a leader that stops leading, keeping its dedupe state as the
    /// written journal has it (messages it numbered but did not write are dropped with it).
    fn stop_leading(&mut self) {
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

    fn up_to_date(&self, last_index: u64, last_term: u64) -> bool {
        let mine = self.term_at(self.last);
        last_term > mine || (last_term == mine && last_index >= self.last)
    }

    fn in_lease(&self, now_ns: u64) -> bool {
        match self.role {
            Role::Leader => true,
            _ => self.leader.is_some() && !self.suspects_leader(now_ns),
        }
    }

    /// Whether this member takes the leader it follows for dead: silent for the election
    /// timeout at least, and past the suspicion φ ([`crate::detector`]).
    fn suspects_leader(&self, now_ns: u64) -> bool {
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
    fn campaign(
        &mut self,
        now_ns: u64,
        pre: bool,
        transfer: bool,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
        // what this member claims to hold is durable before it asks
        self.flush_and_ack(log, emit)?;
        self.votes.clear();
        self.votes.insert(self.p.id);
        self.handed_over = transfer;
        self.reset_election_timer(now_ns);
        if pre || transfer {
            // what this campaign begins from (the real election after a PreVote keeps it)
            let (timeout, phi) = (self.p.election_timeout_ns, self.p.suspicion_phi);
            self.campaign_from = (
                self.leader
                    .map(|_| now_ns.saturating_sub(self.leader_heard_ns)),
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
            self.save_vote(log)?;
            self.stats.elections += 1;
            let (silent_ns, tolerated_ns) = self.campaign_from;
            self.events.push(Event::Election {
                term: self.term,
                silent_ns,
                tolerated_ns,
                handed_over: transfer,
            });
            self.term
        };
        if self.votes.len() >= self.majority() {
            return if pre {
                self.campaign(now_ns, false, transfer, log, emit)
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
                emit(to, &self.buf);
            }
        }
        Ok(())
    }

    fn become_leader(&mut self, now_ns: u64, log: &mut dyn Log) -> Result<(), StoreError> {
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

    fn ask_replayer(&mut self, i: usize) {
        let r = Request {
            session: self.session,
            sequence: self.last + 1,
            count: 8192,
        };
        self.requests.push((i, r.encode()));
    }

    /// Requests to replayers waiting to be sent (a new leader's), drained.
    pub fn take_replayer_requests(&mut self) -> Vec<(usize, [u8; REQUEST_LEN])> {
        std::mem::take(&mut self.requests)
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
    pub fn handle_replayer(
        &mut self,
        _now_ns: u64,
        i: usize,
        datagram: &[u8],
        log: &mut dyn Log,
    ) -> Result<(), StoreError> {
        let Some((_, waiting)) = self.recovering.as_mut() else {
            return Ok(());
        };
        if i >= waiting.len() {
            return Ok(());
        }
        let Ok(p) = MoldPacket::parse(datagram) else {
            self.stats.malformed += 1;
            return Ok(());
        };
        if p.session() != self.session {
            self.stats.malformed += 1;
            return Ok(());
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
                    log.append(q, m)?;
                    self.recovered.replay(q, m);
                    if let Some((t, _)) = epoch_of(m) {
                        self.epochs.push((q, t));
                    }
                    self.last = q;
                    self.recovered_from_replayers += 1;
                    appended = true;
                }
                if appended {
                    log.flush()?;
                    self.ask_replayer(i);
                }
            }
        }
        Ok(())
    }

    /// The new leader's term begins: it sequences its `Epoch` (after the previous leaders'
    /// entries it holds, which it publishes again from its known commit point on).
    fn start_term(&mut self, now_ns: u64, log: &mut dyn Log) -> Result<(), StoreError> {
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
        self.events.push(Event::BecameLeader {
            term: self.term,
            epoch_seq,
        });
        Ok(())
    }

    /// Handles one upstream datagram (a node's commands or hello); only a leader sequences.
    pub fn handle_upstream(&mut self, now_ns: u64, datagram: &[u8]) -> usize {
        match &mut self.seq {
            Some(seq) if self.transfer.is_none() => seq.handle_upstream(now_ns, datagram),
            _ => {
                self.stats.not_leader += 1;
                0
            }
        }
    }

    /// Counts an upstream datagram the I/O layer dropped as malformed.
    pub fn note_malformed(&mut self) {
        match &mut self.seq {
            Some(seq) => seq.note_malformed(),
            None => self.stats.malformed += 1,
        }
    }

    /// Handles one datagram from another member.
    pub fn handle_peer(
        &mut self,
        now_ns: u64,
        datagram: &[u8],
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
        let m = match Message::parse(datagram) {
            Ok(m) if m.session == self.session && self.p.members.contains(&m.from) => m,
            _ => {
                self.stats.malformed += 1;
                return Ok(());
            }
        };
        if m.from == self.p.id {
            self.stats.malformed += 1;
            return Ok(());
        }
        match m.body {
            Body::RequestVote {
                last_index,
                last_term,
                pre_vote,
                transfer,
            } => self.on_request_vote(
                now_ns, m.from, m.term, last_index, last_term, pre_vote, transfer, log, emit,
            ),
            Body::Vote { granted, pre_vote } => {
                self.on_vote(now_ns, m.from, m.term, granted, pre_vote, log, emit)
            }
            Body::Append(a) => self.on_append(now_ns, m.from, m.term, a, log, emit),
            Body::AppendReply { success, index } => {
                self.on_append_reply(now_ns, m.from, m.term, success, index, log)
            }
            Body::TimeoutNow => {
                if m.term > self.term || (m.term == self.term && self.leader == Some(m.from)) {
                    if m.term > self.term {
                        self.become_follower(now_ns, m.term, Some(m.from), log)?;
                    }
                    // the leader hands over: an election at once, past the voters' lease
                    self.campaign(now_ns, false, true, log, emit)
                } else {
                    self.stats.stale += 1;
                    Ok(())
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_request_vote(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        last_index: u64,
        last_term: u64,
        pre_vote: bool,
        transfer: bool,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
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
            emit(from, &self.buf);
            return Ok(());
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
                    emit,
                );
                return Ok(());
            }
            self.become_follower(now_ns, term, None, log)?;
        }
        let granted = term == self.term
            && (self.voted_for == 0 || self.voted_for == from)
            && self.up_to_date(last_index, last_term);
        if granted {
            self.voted_for = from;
            self.save_vote(log)?;
            self.reset_election_timer(now_ns);
        }
        self.send(
            from,
            &Body::Vote {
                granted,
                pre_vote: false,
            },
            emit,
        );
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn on_vote(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        granted: bool,
        pre_vote: bool,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
        if pre_vote {
            if self.role == Role::PreCandidate && granted && term == self.term + 1 {
                self.votes.insert(from);
                if self.votes.len() >= self.majority() {
                    return self.campaign(now_ns, false, false, log, emit);
                }
            } else if !granted && term > self.term {
                self.become_follower(now_ns, term, None, log)?;
            }
            return Ok(());
        }
        if term > self.term {
            return self.become_follower(now_ns, term, None, log);
        }
        if self.role == Role::Candidate && term == self.term && granted {
            self.votes.insert(from);
            if self.votes.len() >= self.majority() {
                return self.become_leader(now_ns, log);
            }
        }
        Ok(())
    }

    fn on_append(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        a: cluster::Append<'_>,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
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
                emit,
            );
            return Ok(());
        }
        if term > self.term || self.role != Role::Follower || self.leader != Some(from) {
            self.become_follower(now_ns, term, Some(from), log)?;
            self.leader_arrivals.restart();
        }
        self.leader_heard_ns = now_ns;
        self.leader_arrivals.heard(now_ns);
        self.holding = false;
        self.reset_election_timer(now_ns);
        let reply =
            |m: &mut Member, success: bool, index: u64, emit: &mut dyn FnMut(u16, &[u8])| {
                m.send(from, &Body::AppendReply { success, index }, emit);
            };
        if a.prev_index > self.last {
            self.stats.rejected_appends += 1;
            reply(self, false, self.last + 1, emit);
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
            reply(self, false, first_of_term.max(self.commit + 1), emit);
            return Ok(());
        }
        let mut index = a.prev_index;
        let mut term_here = a.prev_term;
        let mut appended = false;
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
                log.discard_from(index)?;
                self.stats.discarded += count;
                self.events.push(Event::Discarded { from: index, count });
                self.rescan(log)?;
            }
            log.append(index, e)?;
            self.recovered.replay(index, e);
            if let Some((t, _)) = epoch_of(e) {
                self.epochs.push((index, t));
            }
            self.last = index;
            self.stats.entries_received += 1;
            appended = true;
        }
        self.unflushed |= appended;
        self.commit = self.commit.max(a.commit.min(index));
        // answered in this turn's poll, after the flush: the appends that came together are
        // persisted with one flush and acknowledged with one reply (the last one's index
        // covers the others')
        self.ack = Some((from, index));
        Ok(())
    }

    /// Flushes what was appended and sends the acknowledgement waiting for it (to a leader
    /// this member still follows).
    fn flush_and_ack(
        &mut self,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
        if self.unflushed {
            log.flush()?;
            self.unflushed = false;
        }
        if let Some((to, index)) = self.ack.take() {
            if self.role == Role::Follower && self.leader == Some(to) {
                self.stats.acks_sent += 1;
                self.send(
                    to,
                    &Body::AppendReply {
                        success: true,
                        index,
                    },
                    emit,
                );
            }
        }
        Ok(())
    }

    fn on_append_reply(
        &mut self,
        now_ns: u64,
        from: u16,
        term: u64,
        success: bool,
        index: u64,
        log: &mut dyn Log,
    ) -> Result<(), StoreError> {
        if term > self.term {
            return self.become_follower(now_ns, term, None, log);
        }
        if term < self.term || self.role != Role::Leader {
            self.stats.stale += 1;
            return Ok(());
        }
        let Some(peer) = self.peers.iter_mut().find(|p| p.p.id == from) else {
            return Ok(());
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
        Ok(())
    }

    fn advance_commit(&mut self) {
        if self.role != Role::Leader {
            return;
        }
        let mut matched: Vec<u64> = self.peers.iter().map(|p| p.p.matched).collect();
        matched.push(self.last);
        matched.sort_unstable_by(|a, b| b.cmp(a));
        let n = matched[self.majority() - 1];
        // only an entry of the leader's own term commits by counting (Raft §5.4.2)
        if n > self.commit && self.term_at(n) == self.term {
            self.commit = n;
        }
    }

    /// Timers (elections, heartbeats, retransmissions), then, while leading: clock ticks, the
    /// new entries written to the log and sent to the followers, and the commit point moved.
    pub fn poll(
        &mut self,
        now_ns: u64,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
        self.flush_and_ack(log, emit)?;
        match self.role {
            Role::Follower | Role::PreCandidate | Role::Candidate => {
                if now_ns >= self.election_deadline
                    && self.role == Role::Follower
                    && self.leader.is_some()
                    && !self.suspects_leader(now_ns)
                {
                    // the timeout passed, but this leader has fallen silent this long before
                    // and lived: slow, not dead. Look again a heartbeat on.
                    if !self.holding {
                        self.holding = true;
                        self.stats.held_suspicions += 1;
                    }
                    self.election_deadline = now_ns + self.p.heartbeat_ns;
                    return Ok(());
                }
                if now_ns >= self.election_deadline {
                    // PreVote first: a member cut off from the others cannot raise the term
                    // and disturb the cluster when it comes back
                    self.campaign(now_ns, true, false, log, emit)?;
                }
                Ok(())
            }
            Role::Leader => self.lead(now_ns, log, emit),
        }
    }

    fn lead(
        &mut self,
        now_ns: u64,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
    ) -> Result<(), StoreError> {
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
                self.events.push(Event::SteppedDown {
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
                self.events.push(Event::Transfer {
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
                        self.replicate(now_ns, id, log, emit)?;
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
                self.replicate(now_ns, id, log, emit)?;
            }
            // (the leader's sequencer keeps the dedupe state while it leads: `recovered` is
            // taken from it when it stops, see `stop_leading`)
            let seq = self.seq.as_mut().expect("leading");
            for (q, m) in seq.unwritten() {
                log.append(q, m)?;
                if let Some((t, _)) = epoch_of(m) {
                    self.epochs.push((q, t));
                }
                self.last = q;
            }
            log.flush()?;
            seq.mark_written();
        }
        if self.single() {
            self.commit = self.last;
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
                self.replicate(now_ns, id, log, emit)?;
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
                self.send(target, &Body::TimeoutNow, emit);
            }
        }
        Ok(())
    }

    /// Sends follower `id` what it lacks from its `next` on (from memory when the leader still
    /// holds the entries, else from the log), or an empty append as a heartbeat. A follower
    /// being probed gets one datagram at a time; one in step gets a pipeline.
    fn replicate(
        &mut self,
        now_ns: u64,
        id: u16,
        log: &mut dyn Log,
        emit: &mut dyn FnMut(u16, &[u8]),
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
            emit(id, self.writer.bytes());
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

    /// While leading: hands the MoldUDP64 packets of the newly committed messages (or a
    /// heartbeat when nothing was sent for a while) to `emit`.
    pub fn publish(&mut self, now_ns: u64, emit: &mut dyn FnMut(&[u8])) {
        let commit = self.commit;
        let Some(seq) = self.seq.as_mut() else {
            return;
        };
        let end = (commit + 1).min(seq.next_seq());
        if end > seq.first_pending() {
            seq.packets_upto(end, &mut *emit);
            seq.published_upto(end, now_ns);
        } else if let Some(hb) = seq.poll_heartbeat(now_ns) {
            emit(&hb);
        }
    }

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
        self.events.push(Event::Transfer {
            target,
            started: true,
        });
        Ok(target)
    }

    /// When [`Member::poll`] or [`Member::publish`] next has something to do.
    pub fn next_timeout(&self) -> u64 {
        match self.role {
            Role::Leader => {
                let mut t = self.seq.as_ref().map_or(u64::MAX, Sequencer::next_timeout);
                if let Some((until, _)) = &self.recovering {
                    t = t.min(*until);
                }
                if !self.single() {
                    t = t.min(self.quorum_checked_ns + self.p.election_timeout_ns);
                    for p in &self.peers {
                        t = t.min(p.last_sent_ns + self.p.heartbeat_ns);
                        if p.p.matched < self.last {
                            t = t.min(p.progress_ns + p.rto.get());
                        }
                    }
                }
                t
            }
            _ => self.election_deadline,
        }
    }
}

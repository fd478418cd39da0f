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
//! Sans-IO like the rest of the core: datagrams and the time in; datagrams and storage
//! requests out (`io.rs`). The member reads its replica through [`Store`] (the journal, or a
//! simulated disk) but never writes it: it asks ([`Storage`]: append, discard, save the vote,
//! sync) and is told what became durable ([`Member::handle_durable`]). A member answers an
//! append, and a leader counts its own replica toward a majority, only as far as it is
//! durable.
//!
//! The member is one type over six files, each beside its part of the paper: `election.rs`
//! (§5.2, PreVote, CheckQuorum's stickiness), `replication.rs` (§5.3, §5.4, the leader's
//! turn), `recovery.rs` (a new leader's questions to the replayers), `transfer.rs` (§3.10),
//! `log.rs` (the replica it asks to write) and `io.rs` (its requests and datagrams, and the
//! rule for carrying them out); this file holds its state, its settings, its events, and the
//! calls that drive it.
//!
//! A cluster of one member is a plain sequencer: leader from the start, term 0, no `Epoch`,
//! every message committed once durable.
//!
//! The I/O layer drives a member like this:
//!
//! ```text
//! for each upstream datagram: m.handle_upstream(now, d)  // the leader sequences
//! for each peer datagram: m.handle_peer(now, d, store)   // votes, appends, answers
//! m.poll(now, store)                                      // timers; write + replicate
//! after each call: every m.poll_storage() carried out, in order (a Sync answered with
//!     m.handle_durable(upto), at once or later); then every m.poll_transmit() sent
//!     (to a member, or a new leader's question to a replayer)
//! while let Some(p) = m.poll_publish(now) { send downstream }  // committed → MoldUDP64
//! ```

use std::collections::{HashSet, VecDeque};

use seqbus_wire::cluster::{self, AppendWriter, Body, Message};
use seqbus_wire::control::Control;
use seqbus_wire::envelope::{Envelope, KIND_CONTROL};
use seqbus_wire::mold::{MoldPacket, PacketKind, Request};
use seqbus_wire::{Session, ENVELOPE_LEN};

use crate::detector::Detector;
use crate::replayer::{Store, StoreError};
use crate::rng::Rng;
use crate::rto::Rto;
use crate::sequencer::{Recovered, Sequencer, SequencerParams};

mod election;
mod io;
mod log;
mod recovery;
mod replication;
mod transfer;

use crate::queue::Queue;
use io::Op;
pub use io::{carry_out, Storage};
pub use log::Log;

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
/// Where a datagram of [`Member::poll_transmit`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// The member with this id, at its peer address.
    Member(u16),
    /// Replayer `i` of those the member may ask ([`Member::set_replayers`]).
    Replayer(usize),
}

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
    /// answered once the entries are durable ([`Member::handle_durable`]), one for every
    /// append that came in the same turn.
    ack: Option<(u16, u64)>,
    /// The index this member last acknowledged (to the leader it follows).
    acked: u64,
    /// An append came since the last turn: the turn answers it.
    ack_due: bool,
    /// Highest index the I/O layer said is durable (entries past a discard no longer
    /// count).
    durable: u64,
    /// Syncs asked and not yet answered: (asked up to, durable up to once answered: lower
    /// when a discard came after the request).
    syncing: VecDeque<(u64, u64)>,
    /// Requests to the replica, waiting for [`Member::poll_storage`].
    storage: Queue<Op>,
    /// Datagrams to the other members, waiting for [`Member::poll_transmit`].
    out: Queue<To>,
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
    events: VecDeque<Event>,
    stats: ClusterStats,
}

impl Member {
    /// A member over `log`, whose term and vote were persisted as `term`/`voted_for`.
    /// Reads the whole log once (terms, dedupe state); what it holds is durable.
    pub fn new(
        p: MemberParams,
        log: &mut dyn Store,
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
            acked: 0,
            ack_due: false,
            durable: 0,
            syncing: VecDeque::new(),
            storage: Queue::new(),
            out: Queue::new(),
            holding: false,
            campaign_from: (None, 0),
            votes: HashSet::new(),
            peers: Vec::new(),
            seq: None,
            transfer: None,
            replayers: 0,
            recovering: None,
            recovered_from_replayers: 0,
            handed_over: false,
            tail_heartbeat_ns: None,
            nak_holdoff_ns: None,
            keys: None,
            quorum_checked_ns: now_ns,
            buf: Vec::new(),
            events: VecDeque::new(),
            stats: ClusterStats::default(),
            p,
        };
        m.rescan(log, u64::MAX)?;
        m.durable = m.last;
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
    pub fn poll_nak(&mut self) -> Option<&[u8]> {
        self.seq.as_mut().and_then(Sequencer::poll_nak)
    }

    /// Rebuilds terms and dedupe state from the log's entries up to `upto`.
    fn rescan(&mut self, log: &mut dyn Store, upto: u64) -> Result<(), StoreError> {
        let mut recovered = Recovered::new_session();
        let mut epochs = Vec::new();
        let mut last = 0;
        let max = usize::try_from(upto).unwrap_or(usize::MAX);
        log.read(1, max, &mut |q, msg| {
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

    /// The next event (for the log, the status endpoint), in the order they happened; call
    /// until None.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// True while a switchover is in progress (upstream is refused meanwhile).
    pub fn transferring(&self) -> bool {
        self.transfer.is_some()
    }

    fn send(&mut self, to: u16, body: &Body<'_>) {
        cluster::encode(&mut self.buf, self.session, self.p.id, self.term, body);
        self.out.push(To::Member(to), &self.buf);
    }

    /// Asks for `msg` to be appended under `index`.
    fn write(&mut self, index: u64, msg: &[u8]) {
        self.storage.push(Op::Append(index), msg);
    }

    /// How far the syncs asked reach (as lowered by a discard since): the newest one still
    /// running, else what is durable.
    fn sync_asked(&self) -> u64 {
        self.syncing.back().map_or(self.durable, |s| s.1)
    }

    /// Asks for what was appended to be synced (if anything was since the last sync).
    fn sync(&mut self) {
        if self.last > self.sync_asked() {
            self.storage.push(Op::Sync(self.last), &[]);
            self.syncing.push_back((self.last, self.last));
        }
    }

    /// Asks for the entries from `from` on to be moved aside: they are not durable any more,
    /// whatever a sync asked before says.
    fn discard(&mut self, from: u64) {
        self.storage.push(Op::Discard(from), &[]);
        let keep = from - 1;
        self.durable = self.durable.min(keep);
        for s in &mut self.syncing {
            s.1 = s.1.min(keep);
        }
    }

    /// The next request to the replica, to carry out in order before the datagrams queued
    /// with it are sent (`io.rs`). None when all were taken.
    pub fn poll_storage(&mut self) -> Option<Storage<'_>> {
        self.storage.pop().map(|(op, msg)| op.request(msg))
    }

    /// The next datagram to send: to another member (votes, appends, answers), or to a
    /// replayer (a new leader's question). None when all were taken.
    pub fn poll_transmit(&mut self) -> Option<(To, &[u8])> {
        self.out.pop()
    }

    /// The I/O layer's answer to [`Storage::Sync`]`{ upto }`: the syncs asked up to that one
    /// are done. A follower acknowledges what became durable; a leader counts it toward the
    /// commit (and a cluster of one commits it). An answer to no sync asked is ignored.
    pub fn handle_durable(&mut self, upto: u64) {
        let Some(n) = self.syncing.iter().position(|s| s.0 == upto) else {
            debug_assert!(false, "an answer to no sync asked: {upto}");
            return;
        };
        for (_, reach) in self.syncing.drain(..=n) {
            self.durable = self.durable.max(reach);
        }
        self.durable = self.durable.min(self.last);
        self.ack_durable();
        if self.role == Role::Leader {
            if self.single() {
                self.commit = self.durable;
            } else {
                self.advance_commit();
            }
        }
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

    /// Handles one datagram from another member. `log` is read (never written); an error is
    /// a read that failed, or a leader that disagrees with a committed entry.
    pub fn handle_peer(
        &mut self,
        now_ns: u64,
        datagram: &[u8],
        log: &mut dyn Store,
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
            } => {
                self.on_request_vote(
                    now_ns, m.from, m.term, last_index, last_term, pre_vote, transfer,
                );
                Ok(())
            }
            Body::Vote { granted, pre_vote } => {
                self.on_vote(now_ns, m.from, m.term, granted, pre_vote, log)
            }
            Body::Append(a) => self.on_append(now_ns, m.from, m.term, a, log),
            Body::AppendReply { success, index } => {
                self.on_append_reply(now_ns, m.from, m.term, success, index);
                Ok(())
            }
            Body::TimeoutNow => {
                if m.term > self.term || (m.term == self.term && self.leader == Some(m.from)) {
                    if m.term > self.term {
                        self.become_follower(now_ns, m.term, Some(m.from));
                    }
                    // the leader hands over: an election at once, past the voters' lease
                    self.campaign(now_ns, false, true, log)
                } else {
                    self.stats.stale += 1;
                    Ok(())
                }
            }
        }
    }

    /// Timers (elections, heartbeats, retransmissions), then, while leading: clock ticks, the
    /// new entries written to the log and sent to the followers, and the commit point moved.
    pub fn poll(&mut self, now_ns: u64, log: &mut dyn Store) -> Result<(), StoreError> {
        self.sync_and_ack();
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
                    self.campaign(now_ns, true, false, log)?;
                }
                Ok(())
            }
            Role::Leader => self.lead(now_ns, log),
        }
    }

    /// While leading: the next MoldUDP64 packet of the newly committed messages, or a
    /// heartbeat when nothing was sent for a while; call until None.
    pub fn poll_publish(&mut self, now_ns: u64) -> Option<&[u8]> {
        let commit = self.commit;
        let seq = self.seq.as_mut()?;
        let end = (commit + 1).min(seq.next_seq());
        seq.poll_publish(now_ns, end)
    }

    /// When [`Member::poll`] or [`Member::poll_publish`] next has something to do.
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

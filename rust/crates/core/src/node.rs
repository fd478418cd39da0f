//! The node's protocol logic: downstream datagrams and the time in; delivery records
//! (docs/architecture.md, "Batches from Rust to Python"), gap-fill requests and upstream
//! command packets out. What the node is handed of each message in order is
//! [`crate::delivery`]'s to decide.
//!
//! * Gap detection: a packet ahead of the next expected sequence is held in a reorder buffer
//!   and the missing range is requested from a replayer, again with doubling back-off while
//!   the replayer stays silent, failing over to the next replayer after `failover_after`
//!   misses, or at once when the replayer answers that it holds nothing from the gap on
//!   (then, once every replayer said so, after a request timeout). A rewind keeps `replay_depth` requests outstanding ([`Node::set_replay_depth`]).
//! * Exactly-once, in-order delivery: anything below the next expected sequence is a
//!   duplicate and dropped.
//! * Rewind: `Start::From(s)` requests history from `s` and reports when it has caught up
//!   with the highest sequence known to exist (record type 2).
//! * Upstream: commands are numbered per account and retried (go-back-N) until they appear
//!   in the stream; at most `window` fragments are in flight.
//! * Clusters of sequencers (docs/ha.md): live packets come tagged with the sequencer that
//!   sent them ([`Source::Sequencer`]). The node follows the leader named by the stream's
//!   latest `Epoch` (or its own `SenderState`) and drops packets of any other sequencer
//!   (fencing, counted in `fenced`), except a packet that itself announces a newer term led by
//!   its sender. Commands go to the leader; when the leader changes, every command in flight
//!   is sent again to the new one at once.

use std::collections::{BTreeMap, VecDeque};

use seqbus_wire::auth::Key;
use seqbus_wire::control::Control;
use seqbus_wire::envelope::{
    Envelope, FLAG_FIRST_FRAGMENT, FLAG_FRAGMENT, FLAG_LAST_FRAGMENT, KIND_APPLICATION,
    KIND_CONTROL,
};
use seqbus_wire::mold::{MoldPacket, PacketKind, Request, MOLD_HEADER_LEN};
use seqbus_wire::upstream::{
    Command, Nak, UpstreamWriter, COMMAND_HEADER_LEN, TYPE_COMMANDS, TYPE_HELLO,
};

use crate::queue::Queue;
use crate::rto::Rto;
use seqbus_wire::{Account, Session, ENVELOPE_LEN};

use crate::delivery::Delivery;
/// The record layout, defined by [`crate::delivery::batch`].
pub use crate::delivery::{
    RAW_RECORD_HEADER_LEN, RECORD_CAUGHT_UP, RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME,
};
/// The least retransmission timeout of a command ([`Node::set_retry_floor`]).
pub const DEFAULT_RTO_MIN_NS: u64 = 200_000;

/// How long after a NAK a retransmission timeout is taken for loss (everything in flight sent
/// again at once) rather than for late confirmations (a probe first).
const LOSS_MEMORY_NS: u64 = 1_000_000_000;

/// Where a node starts reading the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At the first packet it receives (no rewind).
    Live,
    /// Rewind from this sequence number (1 = the whole session), then live.
    From(u64),
}

/// Settings of a node's protocol logic.
#[derive(Debug, Clone)]
pub struct NodeParams {
    pub session: Session,
    pub account: Account,
    pub instance: u16,
    pub start: Start,
    /// `(schema_id, template_id)` of the application messages to deliver; None = all
    /// ([`crate::delivery`]: admin commands for `account` pass whatever the topics).
    pub topics: Option<Vec<(u16, u16)>>,
    /// Most command fragments in flight.
    pub window: usize,
    /// Largest upstream datagram.
    pub max_packet: usize,
    pub retry_ns: u64,
    pub request_timeout_ns: u64,
    pub request_backoff_max_ns: u64,
    pub failover_after: u32,
    /// Number of replayers (destinations `Dest::Replayer(0..n)`).
    pub replayers: usize,
    /// Most messages asked for in one request.
    pub max_request: u16,
    /// Most messages held out of order.
    pub reorder_limit: usize,
}

/// A timed-out replay request for more than this many messages is asked again as a probe
/// of one ([`Node`]'s `probe`); a smaller one is asked again whole.
const PROBE_OVER: u64 = 256;

/// Where a datagram came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The downstream (multicast or unicast) feed of a bus with one sequencer.
    Live,
    /// The downstream feed, sent by the cluster member with this id (docs/ha.md).
    Sequencer(u16),
    /// An answer from replayer `i`.
    Replayer(usize),
}

/// Where a datagram must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// The sequencer: in a cluster, the leader ([`Node::leader`]), or every member while the
    /// leader is not known.
    Sequencer,
    /// Every sequencer of the cluster (a hello, and commands sent again after a timeout: the
    /// leader may have changed unseen). Without a cluster, the sequencer.
    AllSequencers,
    Replayer(usize),
}

/// Why [`Node::deliver`] cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    #[error("gap: messages {from}..{to} are missing and no replayer is configured to fill it")]
    Gap { from: u64, to: u64 },
    #[error("the session ended at sequence {0}")]
    SessionEnded(u64),
}

/// Why a command was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Back-pressure: the in-flight window is full; retry after polling.
    #[error("window full: {in_flight} of {window} commands in flight")]
    WindowFull { in_flight: usize, window: usize },
    /// The body needs more fragments than the whole window.
    #[error("message of {len} bytes is larger than the window allows ({max} bytes)")]
    TooLarge { len: usize, max: usize },
    /// The node does not know its next command sequence yet (it waits for its
    /// `SenderState` from the sequencer).
    #[error("not ready to send: waiting for the sequencer's SenderState for this account")]
    NotReady,
}

/// Counters of a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Messages received (live and retransmitted, duplicates included).
    pub received: u64,
    /// Records of type 1 handed out.
    pub delivered: u64,
    /// Messages the node does not see (control messages included; [`crate::delivery`]).
    pub filtered: u64,
    /// Time records handed out (filtered messages entering a new millisecond).
    pub time_records: u64,
    /// Malformed datagrams (and malformed messages in the stream) dropped.
    pub malformed: u64,
    /// Fragmented messages whose sender stopped between fragments, discarded when the
    /// account's next message began ([`crate::delivery::fragments`]), and their fragments.
    pub abandoned: u64,
    pub abandoned_fragments: u64,
    /// Datagrams of another session dropped.
    pub wrong_session: u64,
    /// Messages received more than once and dropped.
    pub duplicates: u64,
    /// Gaps detected.
    pub gaps: u64,
    /// Gap-fill requests sent (including repeats).
    pub requests: u64,
    /// Messages received from replayers.
    pub retransmits: u64,
    /// Out-of-order packets dropped because the reorder buffer was full.
    pub reorder_dropped: u64,
    /// Command fragments sent but not yet seen in the stream.
    pub in_flight: u64,
    /// Command fragments sent again after `retry_ns`.
    pub resent: u64,
    /// Commands accepted by `send`.
    pub sent: u64,
    /// Live packets of a sequencer that is not the leader (a deposed one) dropped.
    pub fenced: u64,
    /// NAKs from the sequencer (a gap in this node's commands) that made it resend.
    pub naks: u64,
    /// Signed NAKs refused as stale: they answer a packet no newer than one an earlier NAK
    /// answered (a NAK captured and sent again), or none this node sent.
    pub stale_naks: u64,
    /// Retransmission timeouts answered with a probe: the oldest and the last command in
    /// flight, sent again so that the sequencer NAKs what it lacks (the next timeout resends
    /// everything).
    pub probes: u64,
    /// Smoothed round trip of a command (send → seen in the stream), ns; 0 before the first.
    pub srtt_ns: u64,
    /// The retransmission timeout in force, ns.
    pub rto_ns: u64,
    /// Leader changes seen in the stream.
    pub leader_changes: u64,
}

/// What the retransmission timeouts did since the last confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timeout {
    /// Nothing yet.
    Clear,
    /// A probe went out at this time, its last command this one: the next timeout before
    /// that command is confirmed sends everything in flight again (confirmations of the
    /// commands before it alone do not end the stall: its NAK may never come — a sequencer
    /// with NAKs off, commands over TCP).
    Probed(u64, u64),
    /// Everything in flight was sent again (and the timeout doubled).
    Resent,
}

#[derive(Debug)]
struct Pending {
    seq: u64,
    flags: u8,
    body_length: u32,
    fragment: Vec<u8>,
    sent_ns: u64,
    /// Sent more than once: its confirmation times no round trip (Karn's rule).
    resent: bool,
}

/// The node state machine.
#[derive(Debug)]
pub struct Node {
    p: NodeParams,
    /// Next sequence to deliver; 0 = not known yet (live start before the first packet).
    next: u64,
    /// One past the highest sequence known to exist; 0 = unknown.
    head: u64,
    /// True once `head` came from the stream's end itself (a live packet or a heartbeat),
    /// not only from retransmitted history: only then can a rewind be over.
    head_known: bool,
    rewinding: bool,
    ended: Option<u64>,
    // the packet being delivered
    cur: Vec<u8>,
    cur_at: usize,
    cur_seq: u64,
    cur_end: u64,
    /// Packets ahead of `next` by first sequence: (message count, datagram).
    reorder: BTreeMap<u64, (u64, Vec<u8>)>,
    reorder_msgs: usize,
    // gap fill
    replayer: usize,
    failures: u32,
    timeout_ns: u64,
    request_deadline: u64,
    requested_from: u64,
    requested_upto: u64,
    replay_depth: usize,
    /// Replayers in a row that answered they hold nothing from the gap on (a following
    /// replayer that lost what this node lost): the next one is asked at once, and once every
    /// one was, the node waits a request timeout (`request_hold`) instead of asking again.
    behind: usize,
    request_hold: u64,
    /// The next request repeats one a replayer that was behind could not answer (not a new gap).
    reasking: bool,
    // upstream
    ready: bool,
    next_cmd: u64,
    confirmed: u64,
    in_flight: VecDeque<Pending>,
    /// Entries at the back of `in_flight` never sent yet.
    unsent: usize,
    /// Commands were confirmed since the last transmission.
    progressed: bool,
    /// When confirmations last advanced: retries wait for `retry_ns` without progress, so a
    /// long but moving queue is not sent twice.
    last_progress_ns: u64,
    suppressed: VecDeque<Pending>,
    /// Buffers of confirmed fragments, reused by `send`.
    pool: Vec<Vec<u8>>,
    hello_due: u64,
    upw: UpstreamWriter,
    /// Datagrams due, for [`Node::poll_transmit`] to hand out.
    out: Queue<Dest>,
    /// A round of [`Node::poll_transmit`] is under way: what was due is queued in `out`.
    transmitting: bool,
    /// The account's key, when upstream is authenticated: NAKs must carry its MAC.
    key: Option<Key>,
    // clusters
    /// The current term and its leader, per the stream delivered so far.
    epoch: u64,
    leader: Option<u16>,
    /// A sequencer whose packet announced a newer term: accepted until its `Epoch` is
    /// delivered.
    pending_leader: Option<(u16, u64)>,
    /// The highest sequence that packets of fenced sequencers claimed to exist: a hint to ask
    /// the replayers, which hold only the leaders' stream.
    fenced_head: u64,
    /// Commands in flight go out again at once (the leader changed).
    resend_now: bool,
    /// The commands' retransmission timeout (RFC 6298, with Karn's rule).
    rto: Rto,
    /// Send time of the newest command confirmed that was sent once: a round-trip sample,
    /// taken at the next transmission (delivery reads no clock).
    rtt_sample: Option<u64>,
    /// A NAK asked for the commands from this sequence on, up to `nak_upto` (exclusive; the
    /// sequencer holds those after it: u64::MAX when it holds none).
    nak_from: Option<u64>,
    nak_upto: u64,
    /// The `expected` of the NAK answered last, and when.
    nak_resent_from: u64,
    nak_resent_ns: u64,
    /// What the retransmission timeouts did since the last confirmation.
    timeout: Timeout,
    /// When the last NAK came (0: never).
    nak_seen_ns: u64,
    /// The counter of the newest of this node's packets a signed NAK answered.
    nak_answered: u64,
    /// Replay requests: the timeout learned from the round trip to the first answer (the
    /// request timeout once the replayer answered).
    req_rto: Rto,
    /// When the request a round trip can be timed from was sent (Karn: not a repeat).
    req_timed: Option<u64>,
    /// When the current replayer's last answer to the outstanding requests came (0: none
    /// yet), and the longest silence between two of its answers: a replayer descheduled on a busy host goes quiet
    /// for far longer than its round trip, and a request timed out meanwhile is answered
    /// twice. Requests wait at least 1.5 times that silence before they are asked again.
    heard_ns: u64,
    longest_silence: u64,
    /// A silence that ended after a request timed out and was asked again: a stall if the
    /// replayer then answers the same range twice (duplicates), a loss if not. Learned only
    /// once the duplicates show it (a loss would teach the timeout to grow with itself).
    stall: Option<u64>,
    /// A timed-out request is asked again as a probe of one message at this sequence; its
    /// answer (the replayer serves requests in order) shows that everything asked before it
    /// was served: what is still missing was lost and is asked for whole at once. A stalled
    /// replayer's queue thus costs one message twice, not a whole request.
    probe: Option<u64>,
    probe_answered: bool,
    /// Replayers are announced while the node runs: a gap with none known yet waits.
    discovering: bool,
    /// What the node is handed of each message.
    delivery: Delivery,
    stats: NodeStats,
}

impl Node {
    pub fn new(p: NodeParams, now_ns: u64) -> Node {
        let (next, rewinding) = match p.start {
            Start::Live => (0, false),
            Start::From(s) => (s.max(1), true),
        };
        // A full rewind numbers commands from 1 as the first run did; any other start
        // learns the next command sequence from the sequencer (hello → SenderState).
        let ready = p.start == Start::From(1);
        Node {
            delivery: Delivery::new(&p.account, p.topics.as_deref()),
            next,
            head: 0,
            head_known: false,
            rewinding,
            ended: None,
            cur: Vec::new(),
            cur_at: 0,
            cur_seq: 0,
            cur_end: 0,
            reorder: BTreeMap::new(),
            reorder_msgs: 0,
            replayer: 0,
            failures: 0,
            timeout_ns: p.request_timeout_ns,
            request_deadline: 0,
            behind: 0,
            request_hold: 0,
            reasking: false,
            requested_from: 0,
            requested_upto: 0,
            replay_depth: 1,
            ready,
            next_cmd: 1,
            confirmed: 0,
            in_flight: VecDeque::new(),
            unsent: 0,
            progressed: false,
            last_progress_ns: now_ns,
            suppressed: VecDeque::new(),
            pool: Vec::new(),
            hello_due: now_ns,
            upw: UpstreamWriter::new(p.max_packet),
            out: Queue::new(),
            transmitting: false,
            key: None,
            epoch: 0,
            leader: None,
            pending_leader: None,
            fenced_head: 0,
            resend_now: false,
            rto: Rto::new(p.retry_ns, DEFAULT_RTO_MIN_NS, p.retry_ns),
            rtt_sample: None,
            nak_from: None,
            nak_upto: 0,
            nak_resent_from: 0,
            nak_resent_ns: 0,
            timeout: Timeout::Clear,
            nak_seen_ns: 0,
            nak_answered: 0,
            req_rto: Rto::new(
                p.request_timeout_ns,
                DEFAULT_RTO_MIN_NS,
                p.request_timeout_ns,
            ),
            req_timed: None,
            heard_ns: 0,
            longest_silence: 0,
            stall: None,
            probe: None,
            probe_answered: false,
            discovering: false,
            stats: NodeStats::default(),
            p,
        }
    }

    pub fn stats(&self) -> NodeStats {
        let mut s = self.stats;
        let d = self.delivery.stats();
        s.in_flight = self.in_flight.len() as u64;
        s.srtt_ns = self.rto.srtt();
        s.rto_ns = self.rto.get();
        s.delivered = d.delivered;
        s.filtered = d.filtered;
        s.time_records = d.time_records;
        s.malformed += d.malformed;
        s.abandoned = d.abandoned;
        s.abandoned_fragments = d.abandoned_fragments;
        s
    }

    /// Command fragments sent (or queued) and not yet seen in the stream.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The least retransmission timeout (default [`DEFAULT_RTO_MIN_NS`]): a command not seen
    /// in the stream after max(this, smoothed round trip + 4 × its variation) is sent again
    /// (RFC 6298), doubling while nothing is confirmed, up to `retry_ns`.
    pub fn set_retry_floor(&mut self, ns: u64) {
        self.rto.set_min(ns);
        self.req_rto.set_min(ns);
    }

    /// Authenticates every upstream packet with the account's `key` (docs/upstream.md,
    /// "Authentication"); `boot_ns` (this sender's start, ns since the epoch) begins its
    /// nonces. NAKs are then taken only with the key's MAC. Call before the first poll.
    pub fn set_key(&mut self, key: Key, boot_ns: u64) {
        self.upw.set_key(key.clone(), boot_ns);
        self.key = Some(key);
    }

    /// Handles a NAK from the sequencer (its answer to a gap in this account's commands):
    /// the commands in flight from `expected` on are sent again at the next transmission, at
    /// most once per half a retransmission timeout. Anything else (with a key: a NAK without
    /// its MAC) is counted malformed.
    pub fn handle_nak(&mut self, now_ns: u64, datagram: &[u8]) {
        let Ok(n) = Nak::parse(datagram) else {
            self.stats.malformed += 1;
            return;
        };
        if self.key.as_ref().is_some_and(|k| !Nak::verify(datagram, k)) {
            self.stats.malformed += 1;
            return;
        }
        if n.session != self.p.session || n.account != self.p.account {
            self.stats.wrong_session += 1;
            return;
        }
        if self.key.is_some() {
            // freshness: a NAK answers one of this run's packets, newer than the last answered
            let sent = self.upw.last_nonce();
            let fresh = match (n.answers, sent) {
                (Some(a), Some(s)) => {
                    a.boot_ns == s.boot_ns
                        && a.counter <= s.counter
                        && a.counter > self.nak_answered
                }
                _ => false,
            };
            if !fresh {
                self.stats.stale_naks += 1;
                return;
            }
            self.nak_answered = n.answers.map_or(0, |a| a.counter);
        }
        // the network loses this node's commands: a timeout soon after is likely loss too
        self.nak_seen_ns = now_ns;
        let sent = self.in_flight.len() - self.unsent;
        let in_flight = self
            .in_flight
            .iter()
            .take(sent)
            .any(|c| c.seq >= n.expected);
        // a burst after a gap brings a NAK for each datagram: the resend that answered the
        // first answers the others while it may still be on its way (half a timeout)
        if !in_flight
            || (n.expected == self.nak_resent_from
                && now_ns < self.nak_resent_ns + self.rto.get() / 2)
        {
            return;
        }
        let upto = match n.missing {
            0 => u64::MAX,
            m => n.expected + m as u64,
        };
        match self.nak_from {
            Some(f) => {
                self.nak_from = Some(f.min(n.expected));
                self.nak_upto = self.nak_upto.max(upto);
            }
            None => {
                self.nak_from = Some(n.expected);
                self.nak_upto = upto;
            }
        }
    }

    /// Takes a round-trip sample, when a confirmation left one.
    fn sample_rtt(&mut self, now_ns: u64) {
        if let Some(sent) = self.rtt_sample.take() {
            self.rto.sample(now_ns.saturating_sub(sent));
        }
    }

    /// True until a rewinding node has caught up with live.
    pub fn is_rewinding(&self) -> bool {
        self.rewinding
    }

    /// Next sequence number to be delivered (0 before a live node's first packet).
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// One past the highest sequence known to exist (0: not known yet): where a rewind ends,
    /// once [`Node::head_known`].
    pub fn head(&self) -> u64 {
        self.head
    }

    /// True once [`Node::head`] came from the stream's end itself (a live packet or a
    /// heartbeat), not only from retransmitted history.
    pub fn head_known(&self) -> bool {
        self.head_known
    }

    /// True when a packet is being delivered (the I/O layer then need not read more).
    pub fn has_deliverable(&self) -> bool {
        self.cur_seq < self.cur_end
    }

    /// Raw mode, for replayers that follow the stream into a journal of their own
    /// ([`Delivery::raw`]). A raw node never sends, so it does not ask for its `SenderState`
    /// either.
    pub fn set_raw(&mut self, raw: bool) {
        if raw {
            self.delivery = Delivery::raw();
            self.never_sends();
        } else {
            self.delivery = Delivery::new(&self.p.account, self.p.topics.as_deref());
        }
    }

    /// A node that only receives (a following replayer, a tail): it never asks for its
    /// `SenderState` (a hello it sent would be sequenced as its account's, and, on a bus whose
    /// upstream is authenticated, counted as forged: it has no key).
    pub fn never_sends(&mut self) {
        self.hello_due = u64::MAX;
    }

    /// How many requests of `max_request` messages a rewind or gap fill keeps outstanding
    /// (at least 1, the default): the next chunk is asked for once less than half a chunk
    /// beyond `depth - 1` whole chunks is left to arrive.
    pub fn set_replay_depth(&mut self, depth: usize) {
        self.replay_depth = depth.max(1);
    }

    /// True while a gap-fill or rewind request is outstanding (answers may be waiting).
    pub fn awaits_replay(&self) -> bool {
        self.rewinding || self.requested_upto > self.next
    }

    /// Another replayer is asked from now on: what the last one's silences taught is not
    /// about it.
    fn forget_silences(&mut self) {
        self.longest_silence = 0;
        self.stall = None;
        self.probe = None;
        self.probe_answered = false;
        self.heard_ns = 0;
    }

    /// How long a replay request waits for its first answer, or for the next one: the
    /// timeout learned from round trips, and at least 1.5 times the longest silence the
    /// current replayer came back from (at most `request_backoff_max_ns`).
    fn request_timeout(&self) -> u64 {
        let stall = self
            .longest_silence
            .saturating_add(self.longest_silence / 2);
        self.req_rto
            .get()
            .max(stall.min(self.p.request_backoff_max_ns))
    }

    /// True when a request already asked covers a gap beginning at `from`.
    fn outstanding_at(&self, from: u64) -> bool {
        self.requested_upto > from && self.requested_from <= from
    }

    /// True when an outstanding replay request has waited its whole timeout: the next
    /// [`Node::poll_transmit`] asks for it again (and for a rewind, again a whole request's
    /// worth). A caller that was away (busy in handlers while the answers arrived) reads the
    /// answers that wait first, so answers already received are not taken for loss.
    pub fn request_due(&self, now_ns: u64) -> bool {
        if self.p.replayers == 0 || (now_ns < self.request_deadline && !self.probe_answered) {
            return false;
        }
        self.gap()
            .is_some_and(|(from, _)| self.outstanding_at(from))
    }

    /// True when the oldest command in flight has waited a whole retransmission timeout with
    /// nothing confirmed: the next [`Node::poll_transmit`] sends a probe (the oldest and the
    /// last command in flight) or every command in flight again (docs/upstream.md). A caller
    /// that was away (descheduled, or busy in handlers) reads and delivers what waits first,
    /// so confirmations already received are not taken for loss.
    pub fn resend_due(&self, now_ns: u64) -> bool {
        !self.progressed && self.timed_out(now_ns)
    }

    /// The first `n` commands in flight fit one upstream packet.
    fn fits_one_packet(&self, n: usize) -> bool {
        let room = self.upw.command_room();
        let mut used = 0;
        self.in_flight.iter().take(n).all(|c| {
            used += COMMAND_HEADER_LEN + c.fragment.len();
            used <= room
        })
    }

    /// The oldest command sent has waited a retransmission timeout since it was sent and
    /// since the last confirmation; after a probe, the probe (or the resend its NAK asked
    /// for) has gone unanswered for a retransmission timeout.
    fn timed_out(&self, now_ns: u64) -> bool {
        let sent = self.in_flight.len() - self.unsent;
        if sent == 0 {
            return false;
        }
        if let Timeout::Probed(at, _) = self.timeout {
            let since = at.max(self.nak_resent_ns).max(self.last_progress_ns);
            return now_ns >= since + self.rto.get();
        }
        self.in_flight
            .front()
            .is_some_and(|c| now_ns >= c.sent_ns.max(self.last_progress_ns) + self.rto.get())
    }

    /// Sends every command in flight again with the next [`Node::poll_transmit`]: the path
    /// they took dropped them (a SoupBinTCP session that logged in again drops what was sent
    /// while it was down), so the retransmission timeout need not find out.
    pub fn resend_in_flight(&mut self) {
        if self.in_flight.len() > self.unsent {
            self.resend_now = true;
        }
    }

    /// True once the node may send (its next command sequence is known).
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// How many replayers there are to ask (`Dest::Replayer(0..n)`): more are found while the
    /// node runs (docs/ha.md, "Replayer discovery").
    pub fn set_replayers(&mut self, n: usize) {
        self.p.replayers = n;
        if n > 0 {
            self.replayer %= n;
        }
    }

    /// Replayers are announced while the node runs: a gap while none is known waits for one
    /// instead of failing.
    pub fn set_discovering(&mut self, on: bool) {
        self.discovering = on;
    }

    /// The cluster leader the node follows, per the stream (None: not known yet, or a bus
    /// with one sequencer).
    pub fn leader(&self) -> Option<u16> {
        self.leader
    }

    /// The term of [`Node::leader`] (0 without a cluster).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Counts a live datagram from an address that is no member of the cluster.
    pub fn note_fenced(&mut self) {
        self.stats.fenced += 1;
    }

    /// Whether a live packet of cluster member `from` may be taken: from the leader (or while
    /// none is known), from a sequencer that announced a newer term, or from a packet that
    /// announces one itself (an `Epoch` of a higher term naming its sender).
    fn admit(&mut self, from: u16, p: &MoldPacket<'_>) -> bool {
        if self.leader.is_none_or(|l| l == from) {
            return true;
        }
        if self.pending_leader.is_some_and(|(l, _)| l == from) {
            return true;
        }
        if p.kind() == PacketKind::Messages {
            for (_, m) in p.messages() {
                let Ok(env) = Envelope::parse(m) else {
                    continue;
                };
                if env.kind != KIND_CONTROL {
                    continue;
                }
                if let Ok(Control::Epoch { term, leader, .. }) = Control::parse(&m[ENVELOPE_LEN..])
                {
                    if leader == from
                        && term > self.epoch
                        && self.pending_leader.is_none_or(|(_, t)| term > t)
                    {
                        self.pending_leader = Some((from, term));
                        return true;
                    }
                }
            }
        }
        self.stats.fenced += 1;
        let end = match p.kind() {
            PacketKind::Messages => p.sequence() + p.message_count() as u64,
            _ => p.sequence(),
        };
        self.fenced_head = self.fenced_head.max(end);
        false
    }

    /// The stream named a leader for `term`.
    fn follow_leader(&mut self, term: u64, leader: u16) {
        if term < self.epoch || leader == 0 {
            return;
        }
        if self.leader != Some(leader) || term > self.epoch {
            if self.leader.is_some() {
                self.stats.leader_changes += 1;
                // commands in flight were sent to the old leader: to the new one at once
                self.resend_now = true;
            }
            self.leader = Some(leader);
        }
        self.epoch = term;
        if self.pending_leader.is_some_and(|(_, t)| t <= term) {
            self.pending_leader = None;
        }
    }

    fn note_head(&mut self, end: u64) {
        self.head = self.head.max(end);
    }

    /// Counts a datagram the I/O layer dropped as malformed (e.g. truncated).
    pub fn note_malformed(&mut self) {
        self.stats.malformed += 1;
    }

    /// The replayer asked holds nothing from the gap on (it follows the stream and lost what
    /// this node lost, or it is a standby's and lags): ask the next one at once; once every
    /// replayer was asked in turn, wait a request timeout before asking again rather than
    /// asking as fast as the answers come back.
    fn replayer_behind(&mut self, now_ns: u64) {
        self.behind += 1;
        self.reasking = true;
        self.failures = 0;
        self.req_timed = None;
        if self.behind < self.p.replayers {
            self.replayer = (self.replayer + 1) % self.p.replayers;
            self.forget_silences();
        } else {
            self.behind = 0;
            self.request_hold = now_ns + self.req_rto.get();
        }
    }

    /// Handles one downstream datagram (a live packet or a replayer's answer). Malformed and
    /// foreign datagrams are counted and dropped.
    pub fn handle_datagram(&mut self, now_ns: u64, src: Source, datagram: &[u8]) {
        let duplicates = self.stats.duplicates;
        self.take_datagram(now_ns, src, datagram);
        if self.stats.duplicates > duplicates && src == Source::Replayer(self.replayer) {
            // the replayer answered twice what a timeout asked again: the silence before
            // was a stall, not a loss
            if let Some(s) = self.stall.take() {
                self.longest_silence = self.longest_silence.max(s);
            }
        }
    }

    fn take_datagram(&mut self, now_ns: u64, src: Source, datagram: &[u8]) {
        let p = match MoldPacket::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if p.session() != self.p.session {
            self.stats.wrong_session += 1;
            return;
        }
        if let Source::Replayer(i) = src {
            if i == self.replayer {
                let timed_out = self.failures > 0;
                self.failures = 0;
                if let Some(sent) = self.req_timed.take() {
                    // the first answer to a request sent once: a round-trip sample
                    self.req_rto.sample(now_ns.saturating_sub(sent));
                }
                if self.requested_upto > self.requested_from && self.heard_ns > 0 {
                    let silence = now_ns.saturating_sub(self.heard_ns);
                    if !timed_out {
                        self.longest_silence = self.longest_silence.max(silence);
                    } else if self.stall.is_none() {
                        self.stall = Some(silence);
                    }
                }
                self.heard_ns = self.heard_ns.max(now_ns);
                self.timeout_ns = self.request_timeout();
                // the replayer is answering: outstanding requests time out only once it has
                // been silent for a whole timeout (answers to pipelined requests may take
                // longer than one timeout in all)
                if self.requested_upto > self.requested_from {
                    self.request_deadline = self.request_deadline.max(now_ns + self.timeout_ns);
                }
            }
        }
        if let Source::Sequencer(from) = src {
            if !self.admit(from, &p) {
                return;
            }
        }
        let live = matches!(src, Source::Live | Source::Sequencer(_));
        let first = p.sequence();
        if live || p.kind() != PacketKind::Messages {
            self.head_known = true;
        }
        match p.kind() {
            PacketKind::Heartbeat => {
                self.note_head(first);
                if let Source::Replayer(i) = src {
                    // the replayer holds nothing from `first` on: requests that reach past it
                    // (a rewind asks ahead of the end) have no more answers coming, and what a
                    // fenced sequencer claimed beyond it is not the leaders' stream (yet)
                    self.requested_upto = self.requested_upto.min(first);
                    self.fenced_head = self.fenced_head.min(first);
                    if i == self.replayer && self.gap().is_some_and(|(from, _)| first <= from) {
                        self.replayer_behind(now_ns);
                    }
                }
                if self.next == 0 && live {
                    self.next = first;
                }
            }
            PacketKind::EndOfSession => {
                self.note_head(first);
                self.ended = Some(first);
            }
            PacketKind::Messages => {
                let count = p.message_count() as u64;
                let end = first + count;
                self.stats.received += count;
                if let Source::Replayer(i) = src {
                    self.stats.retransmits += count;
                    if i == self.replayer {
                        self.behind = 0;
                        if self.probe == Some(first) && count == 1 {
                            // the probe's answer: when what it asked for is news, everything
                            // asked before it was lost (served first, it would be here)
                            self.probe = None;
                            self.probe_answered = first >= self.next && self.next > 0;
                        }
                    }
                }
                self.note_head(end);
                if self.next == 0 {
                    self.next = first;
                }
                if end <= self.next {
                    self.stats.duplicates += count;
                    return;
                }
                if first <= self.next && !self.has_deliverable() {
                    self.cur.clear();
                    self.cur.extend_from_slice(datagram);
                    self.set_current(first, end);
                    return;
                }
                if self.reorder_msgs + count as usize > self.p.reorder_limit {
                    self.stats.reorder_dropped += 1;
                    return;
                }
                match self.reorder.get(&first) {
                    Some(&(old, _)) if old >= count => {
                        self.stats.duplicates += count;
                    }
                    _ => {
                        if let Some((old, _)) =
                            self.reorder.insert(first, (count, datagram.to_vec()))
                        {
                            self.reorder_msgs -= old as usize;
                        }
                        self.reorder_msgs += count as usize;
                    }
                }
            }
        }
    }

    /// Makes `self.cur` (a validated packet of messages first..end) the current packet,
    /// skipping what was already delivered.
    fn set_current(&mut self, first: u64, end: u64) {
        self.cur_at = MOLD_HEADER_LEN;
        self.cur_seq = first;
        self.cur_end = end;
        while self.cur_seq < self.next {
            let len = u16::from_be_bytes([self.cur[self.cur_at], self.cur[self.cur_at + 1]]);
            self.cur_at += 2 + len as usize;
            self.cur_seq += 1;
            self.stats.duplicates += 1;
        }
    }

    /// Takes the packet covering `next` out of the reorder buffer, if there is one.
    fn fill_current(&mut self) -> bool {
        while let Some((&first, &(count, _))) = self.reorder.first_key_value() {
            if first + count > self.next {
                break;
            }
            self.reorder_msgs -= count as usize;
            self.stats.duplicates += count;
            self.reorder.remove(&first);
        }
        let Some((&first, &(count, _))) = self.reorder.range(..=self.next).next_back() else {
            return false;
        };
        if first + count <= self.next {
            return false;
        }
        let (_, pk) = self.reorder.remove(&first).expect("present");
        self.reorder_msgs -= count as usize;
        self.cur = pk;
        self.set_current(first, first + count);
        true
    }

    /// Appends up to `max_records` records to `out`; returns how many. Errors: a gap that
    /// no replayer can fill, or the end of the session once everything was delivered.
    ///
    /// `out` holds the current batch: records already in it are taken as not yet handled by
    /// the application (clear it once they are).
    pub fn deliver(&mut self, out: &mut Vec<u8>, max_records: usize) -> Result<usize, NodeError> {
        let mut n = 0;
        while n < max_records {
            if !self.has_deliverable() && !self.fill_current() {
                break;
            }
            let at = self.cur_at;
            let len = u16::from_be_bytes([self.cur[at], self.cur[at + 1]]) as usize;
            let seq = self.cur_seq;
            self.cur_at += 2 + len;
            self.cur_seq += 1;
            self.next = self.cur_seq;
            n += self.process(seq, at + 2, len, out);
        }
        // Caught up only at the start of a batch (`out` empty: one poll may call `deliver`
        // several times into the same buffer): the application has then handled every record
        // delivered before, so the commands it issued while rewinding are all numbered when
        // `next_cmd` is reconciled with the stream below (a hot backup that rewinds would
        // otherwise number later commands past its twin's, and the sequencer would take them).
        if out.is_empty() && self.rewinding && self.head_known && self.next >= self.head {
            self.rewinding = false;
            // nothing more to come from requests that reached past the end
            self.requested_upto = self.requested_upto.min(self.next);
            n += self.delivery.caught_up(self.next - 1, out);
            self.next_cmd = self.next_cmd.max(self.confirmed + 1);
            // commands issued while rewinding that the stream never showed: send them now
            while let Some(c) = self.suppressed.pop_front() {
                if c.seq > self.confirmed {
                    self.in_flight.push_back(c);
                    self.unsent += 1;
                }
            }
        }
        if n == 0 && !self.has_deliverable() {
            if self.p.replayers == 0 && !self.discovering {
                if let Some((from, to)) = self.gap() {
                    return Err(NodeError::Gap { from, to });
                }
            }
            if let Some(end) = self.ended {
                if self.next >= end {
                    return Err(NodeError::SessionEnded(end));
                }
            }
        }
        Ok(n)
    }

    /// The first missing range `[from, to)`, if any.
    fn gap(&self) -> Option<(u64, u64)> {
        if self.next == 0 {
            return None;
        }
        let mut have = if self.has_deliverable() {
            self.cur_end
        } else {
            self.next
        };
        while let Some((&first, &(count, _))) = self.reorder.range(..=have).next_back() {
            let end = first + count;
            if end <= have {
                break;
            }
            have = end;
        }
        let to = match self.reorder.range(have..).next() {
            Some((&first, _)) => first,
            // a fenced sequencer's packets say the stream reaches further: the replayers know
            None => self.head.max(self.fenced_head),
        };
        if to > have {
            Some((have, to))
        } else if self.rewinding && !self.head_known {
            // rewinding before the end of the stream is known: ask on from where we are, as
            // far as the requests kept outstanding reach (the replayer answers what it has)
            Some((
                have,
                have + self.p.max_request as u64 * self.replay_depth as u64,
            ))
        } else {
            None
        }
    }

    fn process(&mut self, seq: u64, at: usize, len: usize, out: &mut Vec<u8>) -> usize {
        let m = &self.cur[at..at + len];
        if self.delivery.is_raw() {
            return self.delivery.message(seq, m, out);
        }
        let Ok(env) = Envelope::parse(m) else {
            self.stats.malformed += 1;
            return 0;
        };
        // the protocol's part: the node's own commands confirmed, the senders' state and the
        // cluster's leader followed; then delivery decides what the node is handed
        let control = match env.kind {
            KIND_CONTROL => match Control::parse(&m[ENVELOPE_LEN..]) {
                Ok(Control::SenderState {
                    next_command_seq,
                    account,
                    term,
                    leader,
                    ..
                }) => Some((term, leader, Some((account, next_command_seq)))),
                Ok(Control::Epoch { term, leader, .. }) => Some((term, leader, None)),
                _ => None,
            },
            _ => None,
        };
        if env.kind == KIND_APPLICATION && env.account == self.p.account {
            self.confirm(env.command_seq);
        }
        if let Some((term, leader, sender)) = control {
            self.follow_leader(term, leader);
            if let Some((account, next_command_seq)) = sender {
                if account == self.p.account && !self.ready {
                    self.ready = true;
                    self.next_cmd = next_command_seq.max(self.confirmed + 1);
                }
            }
        }
        let m = &self.cur[at..at + len];
        self.delivery.parsed(seq, &env, m, out)
    }

    fn confirm(&mut self, cmd: u64) {
        self.confirmed = self.confirmed.max(cmd);
        let sent = self.in_flight.len() - self.unsent;
        let mut i = 0;
        while self.in_flight.front().is_some_and(|c| c.seq <= cmd) {
            let c = self.in_flight.pop_front().expect("present");
            if i < sent && !c.resent && c.sent_ns > 0 {
                self.rtt_sample = Some(c.sent_ns);
            }
            i += 1;
            self.recycle(c.fragment);
            self.progressed = true;
        }
        self.unsent = self.unsent.min(self.in_flight.len());
        while self.suppressed.front().is_some_and(|c| c.seq <= cmd) {
            let c = self.suppressed.pop_front().expect("present");
            self.recycle(c.fragment);
        }
    }

    /// Keeps a confirmed fragment's buffer for the next command (no allocation per command).
    fn recycle(&mut self, mut fragment: Vec<u8>) {
        if self.pool.len() < self.p.window && fragment.capacity() <= 4096 {
            fragment.clear();
            self.pool.push(fragment);
        }
    }

    /// Queues a command (fragmenting bodies larger than a packet); returns the command
    /// sequence of its last fragment. While rewinding, commands are numbered but not sent
    /// unless the stream has not shown them once the node caught up.
    pub fn send(&mut self, body: &[u8]) -> Result<u64, SendError> {
        if !self.ready {
            return Err(SendError::NotReady);
        }
        let max_frag = self.max_fragment();
        let nfrag = body.len().div_ceil(max_frag).max(1);
        if nfrag > self.p.window || body.len() > u32::MAX as usize {
            return Err(SendError::TooLarge {
                len: body.len(),
                max: (self.p.window * max_frag).min(u32::MAX as usize),
            });
        }
        if !self.rewinding && self.in_flight.len() + nfrag > self.p.window {
            return Err(SendError::WindowFull {
                in_flight: self.in_flight.len(),
                window: self.p.window,
            });
        }
        let mut last = 0;
        for i in 0..nfrag {
            let seq = self.next_cmd;
            self.next_cmd += 1;
            last = seq;
            let flags = match (nfrag, i) {
                (1, _) => 0,
                (_, 0) => FLAG_FIRST_FRAGMENT | FLAG_FRAGMENT,
                _ if i + 1 == nfrag => FLAG_LAST_FRAGMENT,
                _ => FLAG_FRAGMENT,
            };
            if seq <= self.confirmed {
                continue; // already in the stream (a hot-hot twin sent it first)
            }
            let frag = &body[i * max_frag..((i + 1) * max_frag).min(body.len())];
            let mut fragment = self.pool.pop().unwrap_or_default();
            fragment.extend_from_slice(frag);
            let c = Pending {
                seq,
                flags,
                body_length: body.len() as u32,
                fragment,
                sent_ns: 0,
                resent: false,
            };
            if self.rewinding {
                self.suppressed.push_back(c);
            } else {
                self.in_flight.push_back(c);
                self.unsent += 1;
            }
        }
        self.stats.sent += 1;
        Ok(last)
    }

    /// Largest fragment: it must fit one upstream packet and, with its envelope, one
    /// downstream packet.
    pub fn max_fragment(&self) -> usize {
        self.upw
            .max_fragment_len()
            .min(self.p.max_packet - MOLD_HEADER_LEN - 2 - ENVELOPE_LEN)
    }

    /// The next datagram due now, and where it goes: hellos, commands (new and retried) and
    /// gap requests. Call until None: the first call of a round decides everything due at
    /// `now_ns`, the next ones hand it out.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<(Dest, &[u8])> {
        if !self.transmitting {
            self.transmitting = true;
            self.transmit(now_ns);
        }
        if self.out.drained() {
            self.transmitting = false;
        }
        self.out.pop()
    }

    /// Queues every datagram due now.
    fn transmit(&mut self, now_ns: u64) {
        if !self.ready && now_ns >= self.hello_due {
            self.upw
                .begin(TYPE_HELLO, self.p.session, self.p.account, self.p.instance);
            self.out.push(Dest::AllSequencers, self.upw.finish());
            self.hello_due = now_ns + self.p.retry_ns;
        }
        self.transmit_commands(now_ns);
        self.transmit_requests(now_ns);
    }

    fn transmit_commands(&mut self, now_ns: u64) {
        let sent = self.in_flight.len() - self.unsent;
        self.sample_rtt(now_ns);
        if self.progressed {
            self.progressed = false;
            self.last_progress_ns = now_ns;
            match self.timeout {
                Timeout::Probed(_, last) if self.confirmed < last => {}
                _ => self.timeout = Timeout::Clear,
            }
        }
        // in a cluster, after a timeout, to every member (the leader may have changed); a
        // NAK that answers a probe may come from a leader this node has not seen yet
        let mut dest = if self.timeout != Timeout::Clear {
            Dest::AllSequencers
        } else {
            Dest::Sequencer
        };
        let nak_from = self.nak_from.take();
        // sent commands from here up to `held_upto` are not sent again: the sequencer holds
        // them (a NAK said so), or a probe stands for them
        let mut held_from = sent;
        let mut held_upto = sent;
        let from = match self.in_flight.front() {
            Some(_) if sent > 0 && self.resend_now => {
                self.stats.resent += sent as u64;
                0
            }
            Some(_) if sent > 0 && self.timed_out(now_ns) => {
                dest = Dest::AllSequencers;
                if self.timeout == Timeout::Clear
                    && !self.fits_one_packet(sent)
                    && (self.nak_seen_ns == 0 || now_ns >= self.nak_seen_ns + LOSS_MEMORY_NS)
                {
                    // a probe: the oldest command and the last, in one datagram. The oldest
                    // fills the gap a lost NAK left open; past the last, a sequencer that
                    // lacks commands before it NAKs them at once (a lost tail of a burst),
                    // one that has them all drops both as duplicates — the whole window is
                    // not sent again while the confirmations are only late (a busy
                    // sequencer, a descheduled node). What fits one packet is all sent at
                    // once instead: it costs no more than the probe and needs no NAK's
                    // round trip (nor a lossy network's luck with it). Where the sequencer
                    // NAKed lately, the network loses commands: everything goes at once too,
                    // as its copies also stand in for one another
                    let last = self.in_flight[sent - 1].seq;
                    self.timeout = Timeout::Probed(now_ns, last);
                    self.stats.probes += 1;
                    self.stats.resent += 2;
                    // the NAK it brings is answered even if one for the same command was
                    // answered a moment ago (that resend was lost)
                    self.nak_resent_from = 0;
                    held_from = 1;
                    held_upto = sent - 1;
                    0
                } else {
                    // all in one packet, a lossy network, or a probe that brought nothing (a
                    // sequencer that does not NAK, or lost again): go-back-N, the sequencer
                    // takes an account's commands strictly in order, so everything from the
                    // oldest is sent again
                    self.timeout = Timeout::Resent;
                    self.stats.resent += sent as u64;
                    // nothing confirmed for a whole timeout: back off (RFC 6298 5.5)
                    self.rto.backoff();
                    0
                }
            }
            Some(_) if sent > 0 && nak_from.is_some() => {
                // the sequencer saw a gap: from the first command it lacks, at once
                let at = nak_from.expect("some");
                let i = self
                    .in_flight
                    .iter()
                    .take(sent)
                    .position(|c| c.seq >= at)
                    .unwrap_or(sent);
                // only the missing ones: the sequencer holds those after them
                held_from = self
                    .in_flight
                    .iter()
                    .take(sent)
                    .position(|c| c.seq >= self.nak_upto)
                    .unwrap_or(sent)
                    .max(i);
                self.stats.resent += (held_from - i) as u64;
                self.stats.naks += 1;
                self.nak_resent_from = at;
                self.nak_resent_ns = now_ns;
                i
            }
            _ => sent,
        };
        self.resend_now = false;
        if from == self.in_flight.len() {
            return;
        }
        let (s, a, i) = (self.p.session, self.p.account, self.p.instance);
        self.upw.begin(TYPE_COMMANDS, s, a, i);
        for (k, c) in self.in_flight.iter_mut().enumerate().skip(from) {
            if (held_from..held_upto).contains(&k) {
                continue;
            }
            if k < sent {
                c.resent = true;
            }
            c.sent_ns = now_ns;
            let cmd = Command {
                command_seq: c.seq,
                body_length: c.body_length,
                flags: c.flags,
                fragment: &c.fragment,
            };
            if !self.upw.push(&cmd) {
                self.out.push(dest, self.upw.finish());
                self.upw.begin(TYPE_COMMANDS, s, a, i);
                self.upw.push(&cmd);
            }
        }
        if self.upw.count() > 0 {
            self.out.push(dest, self.upw.finish());
        }
        self.unsent = 0;
    }

    fn transmit_requests(&mut self, now_ns: u64) {
        if self.p.replayers == 0 {
            return;
        }
        let Some((from, to)) = self.gap() else {
            self.probe_answered = false;
            return;
        };
        let outstanding = self.outstanding_at(from);
        if !outstanding && now_ns < self.request_hold {
            return; // every replayer said it is behind: wait before asking again
        }
        // the probe came back and the gap is still there: it was lost, not delayed
        let lost = outstanding && std::mem::take(&mut self.probe_answered);
        if outstanding && !lost && now_ns < self.request_deadline {
            // pipelining: ask for the next chunk once less than half a chunk beyond
            // `replay_depth - 1` whole chunks is left, so a rewind never waits a round trip
            // between chunks (depth 1: the next chunk when half of this one is left)
            let max = self.p.max_request as u64;
            let ahead = max * (self.replay_depth as u64 - 1) + max / 2;
            while self.requested_upto - from <= ahead && to > self.requested_upto {
                let start = self.requested_upto;
                let count = (to - start).min(self.p.max_request as u64) as u16;
                let r = Request {
                    session: self.p.session,
                    sequence: start,
                    count,
                };
                self.out.push(Dest::Replayer(self.replayer), &r.encode());
                self.stats.requests += 1;
                self.requested_upto = start + count as u64;
                self.request_deadline = now_ns + self.timeout_ns;
            }
            return;
        }
        let mut probe = false;
        if lost {
            self.timeout_ns = self.request_timeout();
        } else if outstanding {
            // unanswered (or answered in part and the rest lost): back off, maybe fail over;
            // the same replayer is probed first (it may only be slow: descheduled, busy)
            self.failures += 1;
            self.timeout_ns = (self.timeout_ns * 2).min(self.p.request_backoff_max_ns);
            self.req_timed = None; // a repeat's answer times nothing (Karn)
            if self.failures >= self.p.failover_after && self.p.replayers > 1 {
                self.failures = 0;
                self.replayer = (self.replayer + 1) % self.p.replayers;
                self.forget_silences();
                self.timeout_ns = self.p.request_timeout_ns;
            } else {
                // a small gap is cheaper asked again whole than probed (a round trip more)
                probe = to - from > PROBE_OVER;
            }
        } else if std::mem::take(&mut self.reasking) {
            self.timeout_ns = self.request_timeout();
        } else {
            self.stats.gaps += 1;
            // a new gap: what the replayer's silences taught fades, an eighth each time
            self.longest_silence -= self.longest_silence / 8;
            self.stall = None;
            // silences are timed between answers (a request's first answer is the round trip,
            // which the learned timeout already covers)
            self.heard_ns = 0;
            self.timeout_ns = self.request_timeout();
            self.req_timed = Some(now_ns);
        }
        let count = if probe {
            1
        } else {
            (to - from).min(self.p.max_request as u64) as u16
        };
        self.probe = probe.then_some(from);
        let r = Request {
            session: self.p.session,
            sequence: from,
            count,
        };
        self.out.push(Dest::Replayer(self.replayer), &r.encode());
        self.stats.requests += 1;
        // after a timeout, requests pipelined beyond this one stay outstanding: a late
        // answer (a busy replayer) then costs one chunk twice, not every chunk in flight;
        // if they were lost, each is asked again when the gap reaches it and times out
        if !outstanding {
            self.requested_upto = from + count as u64;
        }
        self.requested_upto = self.requested_upto.max(from + count as u64);
        self.requested_from = from;
        self.request_deadline = now_ns + self.timeout_ns;
    }

    /// When [`Node::poll_transmit`] next has something to do (absent new input).
    pub fn next_timeout(&self) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut add = |x: u64| t = Some(t.map_or(x, |y: u64| y.min(x)));
        if !self.ready {
            add(self.hello_due);
        }
        if self.unsent > 0 {
            add(0);
        }
        if let Some(c) = self.in_flight.front() {
            add(c.sent_ns.max(self.last_progress_ns) + self.rto.get());
        }
        if self.nak_from.is_some() {
            add(0);
        }
        // a request's deadline matters only while there is still a gap to fill
        if self.p.replayers > 0 && self.gap().is_some() {
            if self.probe_answered {
                add(0);
            } else if self.requested_upto > self.requested_from {
                add(self.request_deadline);
            } else if self.request_hold > 0 {
                add(self.request_hold);
            }
        }
        t
    }
}

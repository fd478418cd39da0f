//! The sequencer's protocol logic: upstream datagrams and the time in, numbered messages to
//! persist and MoldUDP64 packets to publish out.
//!
//! The I/O layer drives it like this (persist before publish):
//!
//! ```text
//! for each upstream datagram: seq.handle_upstream(now, datagram)
//! seq.handle_timeout(now)                     // clock ticks when idle
//! journal.append(seq.unwritten()); seq.mark_written()       // then flush / fsync per policy
//! while let Some(p) = seq.poll_publish(now, seq.next_seq()) { send(p) }
//!                    // MoldUDP64, many messages per packet; a heartbeat when idle
//! ```
//!
//! In a cluster (`crate::cluster`) a message is published only once a majority of the
//! cluster holds it: the leader writes and replicates every message as it is numbered and
//! publishes a prefix at a time (`end` of [`Sequencer::poll_publish`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use seqbus_wire::auth::{Freshness, Key, ReplayWindow};
use seqbus_wire::control::Control;
use seqbus_wire::envelope::{Envelope, KIND_APPLICATION, KIND_CONTROL};
use seqbus_wire::mold::{self, MoldWriter};
use seqbus_wire::upstream::{Nak, UpstreamPacket, TYPE_COMMANDS, TYPE_HELLO};
use seqbus_wire::{Account, Session, ENVELOPE_LEN, SEQUENCER_ACCOUNT};

/// The key of every account that may send (docs/upstream.md, "Authentication").
pub type AccountKeys = HashMap<Account, Key>;

/// Settings of the sequencer's protocol logic.
#[derive(Debug, Clone)]
pub struct SequencerParams {
    pub session: Session,
    /// Largest downstream datagram.
    pub max_packet: usize,
    /// Heartbeat after this long without a packet.
    pub heartbeat_ns: u64,
    /// Clock tick after this long without a message; 0 = never.
    pub clock_tick_ns: u64,
    /// The cluster term and member id of this sequencer as leader (0, 0 without a cluster):
    /// named in every `SenderState`.
    pub term: u64,
    pub leader: u16,
    /// Commands held per account after a gap in its numbering (`sequencer.max_held`,
    /// [`MAX_HELD`] by default): a sender's window of this many is repaired by one NAK.
    pub max_held: usize,
}

/// What the sequencer knows after reading its journal back.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// One past the last journaled message (1 for a new session).
    pub next_seq: u64,
    /// Next command sequence expected per account.
    pub expected: HashMap<Account, u64>,
    /// Timestamp of the last journaled message.
    pub last_timestamp_ns: u64,
}

impl Recovered {
    /// State of a new session.
    pub fn new_session() -> Recovered {
        Recovered {
            next_seq: 1,
            ..Recovered::default()
        }
    }

    /// Folds one journaled message into the state (call in sequence order).
    pub fn replay(&mut self, seq: u64, msg: &[u8]) {
        self.next_seq = seq + 1;
        if let Ok(e) = Envelope::parse(msg) {
            self.last_timestamp_ns = self.last_timestamp_ns.max(e.timestamp_ns);
            if e.kind == KIND_APPLICATION {
                let x = self.expected.entry(e.account).or_insert(1);
                *x = (*x).max(e.command_seq + 1);
            }
        }
    }
}

/// Counters of the sequencer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequencerStats {
    /// Upstream datagrams received.
    pub datagrams: u64,
    /// Malformed upstream datagrams dropped.
    pub malformed: u64,
    /// Datagrams for another session dropped.
    pub wrong_session: u64,
    /// Commands already sequenced (retries, hot-hot copies) dropped.
    pub duplicates: u64,
    /// Commands ahead of the next expected one from their account dropped (the sender
    /// retries them in order).
    pub out_of_order: u64,
    /// Messages sequenced (commands and control).
    pub sequenced: u64,
    /// Downstream packets built (data and heartbeats).
    pub packets: u64,
    pub heartbeats: u64,
    /// NAKs sent (a gap in a sender's commands).
    pub naks: u64,
    /// With keys: datagrams dropped whose MAC is not their account's key (a wrong key, an
    /// account without a key, an unauthenticated packet, a changed byte).
    pub forged: u64,
    /// With keys: authentic datagrams dropped because their nonce was seen before.
    pub replayed: u64,
    /// With keys: authentic datagrams dropped because their nonce is older than the window
    /// or of an earlier start of their sender.
    pub stale: u64,
}

/// The sequencer state machine.
#[derive(Debug)]
pub struct Sequencer {
    params: SequencerParams,
    next_seq: u64,
    expected: HashMap<Account, u64>,
    last_ts: u64,
    /// Messages numbered but not yet published: bytes back to back, with their ends.
    pending: Vec<u8>,
    pending_ends: Vec<usize>,
    pending_first: u64,
    /// The first pending message not yet packed into a packet ([`Sequencer::poll_publish`]).
    packed: u64,
    /// The heartbeat [`Sequencer::poll_publish`] hands out.
    heartbeat: [u8; mold::MOLD_HEADER_LEN],
    /// The first pending message not yet handed to the journal.
    written: u64,
    /// The latest timestamp of a message handed to the journal.
    written_ts: u64,
    last_message_ns: u64,
    last_packet_ns: u64,
    writer: MoldWriter,
    stats: SequencerStats,
    /// The heartbeat due after the last packet: `tail_heartbeat_ns` after data, doubling up to
    /// `heartbeat_ns` while the stream stays idle.
    hb_interval: u64,
    tail_heartbeat_ns: u64,
    /// At most one NAK per account per holdoff.
    nak_pacing: NakHoldoff,
    /// The NAK of the last upstream datagram, for its sender ([`Sequencer::poll_nak`]), and
    /// whether it is still to be taken.
    nak: Vec<u8>,
    nak_due: bool,
    /// With keys: every datagram must be authenticated by its account's key.
    keys: Option<Arc<AccountKeys>>,
    /// The anti-replay window of each sender.
    windows: HashMap<(Account, u16), ReplayWindow>,
    /// Commands that came after a gap in their account's numbering, held until the gap is
    /// filled, so the resent missing command alone completes the run (selective repeat);
    /// at most `params.max_held` per account. A sender's hello (a restart) drops its account's.
    held: HashMap<Account, BTreeMap<u64, Held>>,
}

/// A command held after a gap: what its envelope and body need once its turn comes.
#[derive(Debug)]
struct Held {
    instance: u16,
    flags: u8,
    body_length: u32,
    fragment: Vec<u8>,
}

/// What a sequencer holds per account after a gap ([`SequencerParams::max_held`]) when
/// `sequencer.max_held` is not set and `node.window` is not larger. Past the hold, commands
/// after the gap are dropped, and the sender, which takes a NAK to mean that everything after
/// the missing commands is held, finds them only on its retransmission timeout.
pub const MAX_HELD: usize = 256;

/// After data, a heartbeat this soon, so a node that lost the last packet of a burst learns of
/// it within about this long ([`Sequencer::set_tail_heartbeat`]).
pub const DEFAULT_TAIL_HEARTBEAT_NS: u64 = 250_000;
/// At most one NAK per account in this long ([`Sequencer::set_nak_holdoff`]).
pub const DEFAULT_NAK_HOLDOFF_NS: u64 = 100_000;

/// At most one NAK to each account per holdoff, the sequencer's and a site bridge's
/// (docs/upstream.md): an account's first NAK goes at once, the next not before the holdoff has
/// passed since it. A holdoff of 0 sends none.
#[derive(Debug, Clone, Default)]
pub struct NakHoldoff {
    holdoff_ns: u64,
    /// When each account was last NAKed (only accounts that had a gap).
    last: HashMap<Account, u64>,
}

impl NakHoldoff {
    pub fn new(holdoff_ns: u64) -> NakHoldoff {
        NakHoldoff {
            holdoff_ns,
            last: HashMap::new(),
        }
    }

    /// NAKs are sent at all (the holdoff is not 0).
    pub fn enabled(&self) -> bool {
        self.holdoff_ns > 0
    }

    /// True, and noted, when a NAK to `account` may go at `now_ns`.
    pub fn allow(&mut self, account: Account, now_ns: u64) -> bool {
        use std::collections::hash_map::Entry;
        if !self.enabled() {
            return false;
        }
        match self.last.entry(account) {
            Entry::Occupied(e) if now_ns < e.get().saturating_add(self.holdoff_ns) => false,
            Entry::Occupied(mut e) => {
                e.insert(now_ns);
                true
            }
            Entry::Vacant(e) => {
                e.insert(now_ns);
                true
            }
        }
    }
}

impl Sequencer {
    /// A sequencer continuing from `recovered` (use [`Recovered::new_session`] for a new
    /// session: it starts with a `SessionStart` message at sequence 1).
    pub fn new(params: SequencerParams, recovered: Recovered, now_ns: u64) -> Sequencer {
        let next = recovered.next_seq.max(1);
        let mut s = Sequencer::resume(params, recovered, next, now_ns);
        if s.next_seq == 1 {
            s.sequence_session_start(now_ns);
        }
        s
    }

    /// A sequencer continuing from `recovered` that sequences nothing by itself: a cluster's
    /// new leader. Messages `publish_from..recovered.next_seq` are already journaled but maybe
    /// not yet published: hand each to [`Sequencer::preload`], in order, before anything
    /// else.
    pub fn resume(
        params: SequencerParams,
        recovered: Recovered,
        publish_from: u64,
        now_ns: u64,
    ) -> Sequencer {
        let next = recovered.next_seq.max(1);
        assert!(publish_from >= 1 && publish_from <= next);
        Sequencer {
            writer: MoldWriter::new(params.max_packet),
            next_seq: next,
            expected: recovered.expected,
            last_ts: recovered.last_timestamp_ns,
            pending: Vec::new(),
            pending_ends: Vec::new(),
            pending_first: publish_from,
            packed: publish_from,
            heartbeat: [0; mold::MOLD_HEADER_LEN],
            written: next,
            written_ts: recovered.last_timestamp_ns,
            last_message_ns: now_ns,
            last_packet_ns: now_ns,
            stats: SequencerStats::default(),
            hb_interval: params.heartbeat_ns,
            tail_heartbeat_ns: DEFAULT_TAIL_HEARTBEAT_NS.min(params.heartbeat_ns),
            nak_pacing: NakHoldoff::new(DEFAULT_NAK_HOLDOFF_NS),
            nak: Vec::new(),
            nak_due: false,
            keys: None,
            windows: HashMap::new(),
            held: HashMap::new(),
            params,
        }
    }

    /// Authenticated upstream (docs/upstream.md, "Authentication"): from now on a datagram is
    /// taken only with a valid MAC of its account's key and a fresh nonce; the rest is dropped
    /// and counted (`forged`, `replayed`, `stale`). NAKs are authenticated with the same key.
    pub fn set_keys(&mut self, keys: Arc<AccountKeys>) {
        self.keys = Some(keys);
    }

    /// Checks a datagram's MAC and nonce when keys are on; false (counted) to drop it.
    fn authentic(&mut self, p: &UpstreamPacket<'_>) -> bool {
        let Some(keys) = &self.keys else {
            return true;
        };
        let account = p.account();
        let (Some(key), Some(nonce)) = (keys.get(&account), p.nonce()) else {
            self.stats.forged += 1;
            return false;
        };
        if !p.verify(key) {
            self.stats.forged += 1;
            return false;
        }
        match self.windows.get_mut(&(account, p.instance())) {
            None => {
                self.windows
                    .insert((account, p.instance()), ReplayWindow::new(nonce));
                true
            }
            Some(w) => match w.check(nonce) {
                Freshness::Fresh => {
                    w.accept(nonce);
                    true
                }
                Freshness::Replayed => {
                    self.stats.replayed += 1;
                    false
                }
                Freshness::Stale => {
                    self.stats.stale += 1;
                    false
                }
            },
        }
    }

    /// The first heartbeat after data comes this soon (0: only every `heartbeat_ns`), the
    /// next ones at double the interval up to `heartbeat_ns`: a node that lost the end of a
    /// burst learns of it in about this long, not a whole heartbeat period.
    pub fn set_tail_heartbeat(&mut self, ns: u64) {
        self.tail_heartbeat_ns = if ns == 0 {
            self.params.heartbeat_ns
        } else {
            ns.min(self.params.heartbeat_ns)
        };
    }

    /// At most one NAK to an account per this long (0: NAKs off; senders then resend on their
    /// own timer only).
    pub fn set_nak_holdoff(&mut self, ns: u64) {
        self.nak_pacing = NakHoldoff::new(ns);
    }

    /// The NAK the last [`Sequencer::handle_upstream`] produced, to be sent to the address that
    /// datagram came from (once: the next call gives None). One not taken before the next
    /// upstream datagram is dropped: it is never sent to another sender.
    pub fn poll_nak(&mut self) -> Option<&[u8]> {
        std::mem::take(&mut self.nak_due).then_some(&self.nak[..])
    }

    /// Adds an already journaled message to the messages waiting to be published (see
    /// [`Sequencer::resume`]).
    pub fn preload(&mut self, seq: u64, msg: &[u8]) {
        assert_eq!(
            seq,
            self.pending_first + self.pending_ends.len() as u64,
            "preloaded in order"
        );
        assert!(seq < self.written, "only journaled messages are preloaded");
        self.pending.extend_from_slice(msg);
        self.pending_ends.push(self.pending.len());
    }

    /// Sequences the `SessionStart` of a new session.
    pub fn sequence_session_start(&mut self, now_ns: u64) {
        let session = self.params.session;
        self.sequence_control(now_ns, Control::SessionStart { session });
    }

    /// Sequences a cluster leader's `Epoch` (its first message of the term) and names the
    /// term and leader in later `SenderState`s.
    pub fn sequence_epoch(&mut self, now_ns: u64, term: u64, leader: u16, previous_leader: u16) {
        self.params.term = term;
        self.params.leader = leader;
        self.sequence_control(
            now_ns,
            Control::Epoch {
                term,
                leader,
                previous_leader,
            },
        );
    }

    pub fn stats(&self) -> SequencerStats {
        self.stats
    }

    /// Sequence number the next message will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn session(&self) -> Session {
        self.params.session
    }

    /// Largest message body (envelope excluded) one packet carries.
    pub fn max_fragment(&self) -> usize {
        self.writer.max_message_len() - ENVELOPE_LEN
    }

    fn stamp(&mut self, now_ns: u64) -> u64 {
        self.last_ts = self.last_ts.max(now_ns);
        self.last_message_ns = now_ns;
        self.last_ts
    }

    /// Sequences an account's command: (command sequence, flags, body length) and its
    /// fragment.
    fn push_command(
        &mut self,
        ts: u64,
        account: Account,
        instance: u16,
        (command_seq, flags, body_length): (u64, u8, u32),
        fragment: &[u8],
    ) {
        let env = Envelope {
            timestamp_ns: ts,
            command_seq,
            account,
            instance,
            kind: KIND_APPLICATION,
            flags,
            body_length,
        };
        self.push_message(&env, fragment);
    }

    fn push_message(&mut self, env: &Envelope, body: &[u8]) {
        self.pending.extend_from_slice(&env.encode());
        self.pending.extend_from_slice(body);
        self.pending_ends.push(self.pending.len());
        self.next_seq += 1;
        self.stats.sequenced += 1;
    }

    fn sequence_control(&mut self, now_ns: u64, c: Control) {
        let ts = self.stamp(now_ns);
        let body = c.encode();
        let env = Envelope {
            timestamp_ns: ts,
            command_seq: 0,
            account: SEQUENCER_ACCOUNT,
            instance: 0,
            kind: KIND_CONTROL,
            flags: 0,
            body_length: body.len() as u32,
        };
        self.push_message(&env, &body);
    }

    /// Handles one upstream datagram; returns how many commands it sequenced. Malformed,
    /// wrong-session, duplicate and out-of-order input is counted and dropped.
    pub fn handle_upstream(&mut self, now_ns: u64, datagram: &[u8]) -> usize {
        self.stats.datagrams += 1;
        self.nak_due = false;
        let p = match UpstreamPacket::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return 0;
            }
        };
        if p.session() != self.params.session {
            self.stats.wrong_session += 1;
            return 0;
        }
        if !self.authentic(&p) {
            return 0;
        }
        let account = p.account();
        if account == SEQUENCER_ACCOUNT {
            self.stats.malformed += 1;
            return 0;
        }
        match p.kind() {
            TYPE_HELLO => {
                // a sender that starts (again) numbers from what the stream holds: commands
                // an earlier run of it left held after a gap are not its new ones
                self.held.remove(&account);
                let next = *self.expected.get(&account).unwrap_or(&1);
                self.sequence_control(
                    now_ns,
                    Control::SenderState {
                        next_command_seq: next,
                        account,
                        instance: p.instance(),
                        term: self.params.term,
                        leader: self.params.leader,
                    },
                );
                1
            }
            TYPE_COMMANDS => {
                let mut n = 0;
                let out_of_order_before = self.stats.out_of_order;
                let max_fragment = self.max_fragment();
                // one look-up per packet, written back at the end
                let mut expected = *self.expected.get(&account).unwrap_or(&1);
                let instance = p.instance();
                // every command of a packet gets the same time (stamped if any is taken)
                let ts = self.last_ts.max(now_ns);
                for c in p.commands() {
                    if c.fragment.len() > max_fragment {
                        // cannot be published in one downstream packet
                        self.stats.malformed += 1;
                        break;
                    }
                    if c.command_seq < expected {
                        self.stats.duplicates += 1;
                        continue;
                    }
                    if c.command_seq > expected {
                        self.stats.out_of_order += 1;
                        let held = self.held.entry(account).or_default();
                        if held.len() < self.params.max_held {
                            held.entry(c.command_seq).or_insert_with(|| Held {
                                instance,
                                flags: c.flags,
                                body_length: c.body_length,
                                fragment: c.fragment.to_vec(),
                            });
                        }
                        continue;
                    }
                    expected += 1;
                    let cmd = (c.command_seq, c.flags, c.body_length);
                    self.push_command(ts, account, instance, cmd, c.fragment);
                    n += 1;
                }
                if n > 0 {
                    // the gap before held commands is filled: they follow, in order
                    // (no look-up at all while nothing is held: the common case)
                    let held = if self.held.is_empty() {
                        None
                    } else {
                        self.held.remove(&account)
                    };
                    if let Some(mut held) = held {
                        while let Some(e) = held.first_entry() {
                            let seq = *e.key();
                            if seq < expected {
                                e.remove();
                                continue;
                            }
                            if seq > expected {
                                break;
                            }
                            let h = e.remove();
                            expected += 1;
                            let cmd = (seq, h.flags, h.body_length);
                            self.push_command(ts, account, h.instance, cmd, &h.fragment);
                            n += 1;
                        }
                        if !held.is_empty() {
                            self.held.insert(account, held);
                        }
                    }
                    self.stamp(now_ns);
                    self.expected.insert(account, expected);
                }
                // a NAK for commands after a gap, and for a gap still open before held ones
                // once an earlier one was filled (several datagrams were lost)
                let gap_left = n > 0 && !self.held.is_empty() && self.held.contains_key(&account);
                if self.stats.out_of_order > out_of_order_before || gap_left {
                    // commands after a gap: ask the sender for the missing one now, not after
                    // its retransmission timer
                    if self.nak_pacing.allow(account, now_ns) {
                        self.stats.naks += 1;
                        // the first command held after the gap bounds what is missing
                        let missing = self
                            .held
                            .get(&account)
                            .and_then(|h| h.keys().next())
                            .map_or(0, |&f| (f - expected).min(u16::MAX as u64) as u16);
                        let nak = Nak {
                            session: self.params.session,
                            account,
                            instance,
                            expected,
                            missing,
                            answers: p.nonce(),
                        };
                        // with keys, authentic() found the account's key
                        let key = self.keys.as_ref().and_then(|k| k.get(&account));
                        nak.write_datagram(key, &mut self.nak);
                        self.nak_due = true;
                    }
                }
                n
            }
            _ => unreachable!("parse accepts only known packet types"),
        }
    }

    /// Counts an upstream datagram the I/O layer dropped as malformed (e.g. truncated).
    pub fn note_malformed(&mut self) {
        self.stats.datagrams += 1;
        self.stats.malformed += 1;
    }

    /// Sequences a clock tick when no message has been sequenced for `clock_tick_ns`.
    pub fn handle_timeout(&mut self, now_ns: u64) {
        if self.params.clock_tick_ns > 0
            && self.written == self.next_seq
            && now_ns.saturating_sub(self.last_message_ns) >= self.params.clock_tick_ns
        {
            self.sequence_control(now_ns, Control::ClockTick);
        }
    }

    /// When the next timer-driven action is due (clock tick or heartbeat).
    pub fn next_timeout(&self) -> u64 {
        let hb = self.last_packet_ns + self.hb_interval;
        if self.params.clock_tick_ns > 0 {
            hb.min(self.last_message_ns + self.params.clock_tick_ns)
        } else {
            hb
        }
    }

    /// True when numbered messages wait to be persisted and published.
    pub fn has_pending(&self) -> bool {
        !self.pending_ends.is_empty()
    }

    /// True when numbered messages wait to be handed to the journal.
    pub fn has_unwritten(&self) -> bool {
        self.written < self.next_seq
    }

    /// The first sequence not yet published.
    pub fn first_pending(&self) -> u64 {
        self.pending_first
    }

    /// The messages waiting to be published, as `(sequence, envelope + body)`.
    pub fn pending(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.pending_from(self.pending_first)
    }

    /// The waiting messages from `from` on (none if `from` is not pending).
    pub fn pending_from(&self, from: u64) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let skip = from.saturating_sub(self.pending_first) as usize;
        let skip = if from < self.pending_first {
            self.pending_ends.len()
        } else {
            skip
        };
        let mut start = if skip == 0 || skip > self.pending_ends.len() {
            0
        } else {
            self.pending_ends[skip - 1]
        };
        self.pending_ends
            .iter()
            .enumerate()
            .skip(skip)
            .map(move |(i, &end)| {
                let m = &self.pending[start..end];
                start = end;
                (self.pending_first + i as u64, m)
            })
    }

    /// The messages not yet handed to the journal.
    pub fn unwritten(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.pending_from(self.written)
    }

    /// Marks every numbered message as handed to the journal.
    pub fn mark_written(&mut self) {
        self.written = self.next_seq;
        self.written_ts = self.last_ts;
    }

    /// The state of the journal as written so far — what [`Recovered`] would read back from
    /// it: messages numbered but not yet written are left out (a leader that stops leading
    /// drops them, unsent, and a later leader's state must not count them).
    pub fn recovered_written(&self) -> Recovered {
        let mut expected = self.expected.clone();
        // the first unwritten command of an account is the one the written journal expects
        for (_, m) in self.unwritten() {
            if let Ok(e) = Envelope::parse(m) {
                if e.kind == KIND_APPLICATION {
                    let x = expected.entry(e.account).or_insert(e.command_seq);
                    *x = (*x).min(e.command_seq);
                }
            }
        }
        Recovered {
            next_seq: self.written,
            expected,
            last_timestamp_ns: self.written_ts,
        }
    }

    /// The next MoldUDP64 packet of the waiting messages before `end`, as many messages as
    /// fit; call until None. Once every message before `end` was handed out they are marked
    /// published, and when nothing was sent for a while the packet is a heartbeat. Call only
    /// for messages persisted ([`Sequencer::mark_written`]); a cluster leader publishes what
    /// a majority holds, a prefix at a time.
    pub fn poll_publish(&mut self, now_ns: u64, end: u64) -> Option<&[u8]> {
        debug_assert!(end <= self.written, "published before written");
        let end = end.min(self.written);
        if self.packed < end {
            return Some(self.pack(end));
        }
        if self.packed > self.pending_first {
            self.published_upto(self.packed, now_ns);
            return None;
        }
        self.heartbeat = self.poll_heartbeat(now_ns)?;
        Some(&self.heartbeat)
    }

    /// Packs the messages from `packed` on, before `end`, into the next packet.
    fn pack(&mut self, end: u64) -> &[u8] {
        let first = (self.packed - self.pending_first) as usize;
        let n = (end - self.pending_first) as usize;
        let mut start = match first {
            0 => 0,
            i => self.pending_ends[i - 1],
        };
        self.writer.begin(self.params.session, self.packed);
        let mut i = first;
        while i < n {
            let e = self.pending_ends[i];
            if !self.writer.push(&self.pending[start..e]) {
                break;
            }
            start = e;
            i += 1;
        }
        debug_assert!(i > first, "fragments always fit one packet");
        self.packed = self.pending_first + i.max(first + 1) as u64;
        self.stats.packets += 1;
        self.writer.bytes()
    }

    /// Marks the waiting messages before `end` as published.
    fn published_upto(&mut self, end: u64, now_ns: u64) {
        let n = end.saturating_sub(self.pending_first) as usize;
        if n == 0 {
            return;
        }
        if n >= self.pending_ends.len() {
            self.pending.clear();
            self.pending_ends.clear();
        } else {
            let cut = self.pending_ends[n - 1];
            self.pending.drain(..cut);
            self.pending_ends.drain(..n);
            for e in &mut self.pending_ends {
                *e -= cut;
            }
        }
        self.pending_first += n as u64;
        self.last_packet_ns = now_ns;
        self.hb_interval = self.tail_heartbeat_ns;
    }

    /// The time of the last packet sent (heartbeats included).
    pub fn last_packet_ns(&self) -> u64 {
        self.last_packet_ns
    }

    /// A heartbeat packet when nothing was sent for `heartbeat_ns`.
    pub fn poll_heartbeat(&mut self, now_ns: u64) -> Option<[u8; mold::MOLD_HEADER_LEN]> {
        if now_ns.saturating_sub(self.last_packet_ns) >= self.hb_interval {
            self.last_packet_ns = now_ns;
            self.hb_interval = (self.hb_interval * 2).min(self.params.heartbeat_ns);
            self.stats.heartbeats += 1;
            self.stats.packets += 1;
            // the next sequence *published*: in a cluster, numbered messages wait for a
            // majority, and a heartbeat naming them would send nodes after a gap that no
            // replayer can fill yet
            Some(mold::heartbeat(self.params.session, self.pending_first))
        } else {
            None
        }
    }

    /// The end-of-session packet (send it after the last published batch).
    pub fn end_of_session(&self) -> [u8; mold::MOLD_HEADER_LEN] {
        mold::end_of_session(self.params.session, self.pending_first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqbus_wire::mold::MoldPacket;
    use seqbus_wire::upstream::{Command, UpstreamWriter};

    fn params() -> SequencerParams {
        SequencerParams {
            session: Session::new("T").unwrap(),
            max_packet: 200,
            heartbeat_ns: 1_000,
            clock_tick_ns: 100,
            term: 0,
            leader: 0,
            max_held: MAX_HELD,
        }
    }

    /// Begins a packet of commands `seqs` (8-byte bodies) from `account`/`instance` in `w`.
    fn push_cmds(w: &mut UpstreamWriter, account: &str, instance: u16, seqs: &[u64]) {
        w.begin(
            TYPE_COMMANDS,
            Session::new("T").unwrap(),
            seqbus_wire::account(account).unwrap(),
            instance,
        );
        for &s in seqs {
            w.push(&Command {
                command_seq: s,
                body_length: 8,
                flags: 0,
                fragment: &s.to_le_bytes(),
            });
        }
    }

    fn cmds(account: &str, instance: u16, seqs: &[u64]) -> Vec<u8> {
        let mut w = UpstreamWriter::new(1400);
        push_cmds(&mut w, account, instance, seqs);
        w.bytes().to_vec()
    }

    fn drain(s: &mut Sequencer, now: u64) -> Vec<(u64, Envelope)> {
        s.mark_written();
        let out: Vec<_> = s
            .pending()
            .map(|(q, m)| (q, Envelope::parse(m).unwrap()))
            .collect();
        let mut pkts = Vec::new();
        let end = s.next_seq();
        while let Some(p) = s.poll_publish(now, end) {
            pkts.push(p.to_vec());
        }
        let mut from_packets = Vec::new();
        for p in &pkts {
            for (q, m) in MoldPacket::parse(p).unwrap().messages() {
                from_packets.push((q, Envelope::parse(m).unwrap()));
            }
        }
        assert_eq!(out, from_packets);
        assert!(!s.has_pending(), "published");
        out
    }

    #[test]
    fn new_session_starts_with_session_start_and_dedupes() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 10);
        assert_eq!(drain(&mut s, 10).len(), 1);
        assert_eq!(s.handle_upstream(20, &cmds("A", 1, &[1, 2])), 2);
        // hot-hot copy from instance 2 and a retry: dropped
        assert_eq!(s.handle_upstream(21, &cmds("A", 2, &[1, 2])), 0);
        // gap: 4 before 3 is dropped; 3 then accepted
        assert_eq!(s.handle_upstream(22, &cmds("A", 1, &[4])), 0);
        assert_eq!(s.handle_upstream(23, &cmds("A", 1, &[3, 4])), 2);
        assert_eq!(s.handle_upstream(24, &cmds("B", 1, &[1])), 1);
        let got = drain(&mut s, 30);
        let seqs: Vec<_> = got.iter().map(|(q, e)| (*q, e.command_seq)).collect();
        assert_eq!(seqs, vec![(2, 1), (3, 2), (4, 3), (5, 4), (6, 1)]);
        assert!(got
            .windows(2)
            .all(|w| w[0].1.timestamp_ns <= w[1].1.timestamp_ns));
        let st = s.stats();
        assert_eq!((st.duplicates, st.out_of_order), (2, 1));
        assert_eq!(s.handle_upstream(40, b"garbage"), 0);
        assert_eq!(s.stats().malformed, 1);
    }

    #[test]
    fn many_messages_per_packet_and_split_when_full() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        let seqs: Vec<u64> = (1..=10).collect();
        s.handle_upstream(1, &cmds("A", 1, &seqs));
        s.mark_written();
        let mut pkts = Vec::new();
        let end = s.next_seq();
        while let Some(p) = s.poll_publish(2, end) {
            pkts.push(p.to_vec());
        }
        // 11 messages of 34/42 bytes in 200-byte packets
        assert!(pkts.len() > 1 && pkts.len() < 11, "{}", pkts.len());
        let total: usize = pkts
            .iter()
            .map(|p| MoldPacket::parse(p).unwrap().message_count())
            .sum();
        assert_eq!(total, 11);
    }

    #[test]
    fn publishes_a_prefix_at_a_time_then_heartbeats() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        let seqs: Vec<u64> = (1..=10).collect();
        s.handle_upstream(1, &cmds("A", 1, &seqs));
        s.mark_written();
        let mut got = Vec::new();
        let mut publish = |s: &mut Sequencer, now: u64, end: u64| {
            let mut packets = 0;
            while let Some(p) = s.poll_publish(now, end) {
                let p = MoldPacket::parse(p).unwrap();
                got.extend(p.messages().map(|(q, _)| q));
                packets += 1;
                assert!(packets < 20, "poll_publish ends");
            }
            packets
        };
        assert!(publish(&mut s, 2, 5) > 0);
        assert_eq!(s.first_pending(), 5, "a prefix is published");
        assert_eq!(
            publish(&mut s, 2, 5),
            0,
            "nothing more before 5, no heartbeat yet"
        );
        assert!(publish(&mut s, 3, 12) > 0);
        assert_eq!(
            got,
            (1..12).collect::<Vec<u64>>(),
            "each message once, in order"
        );
        assert!(!s.has_pending());
        // idle: a heartbeat naming the next sequence, then none until it is due again
        let p = s.poll_publish(3 + 10_000_000_000, 12).map(|p| p.to_vec());
        let hb = MoldPacket::parse(p.as_deref().expect("heartbeat")).unwrap();
        assert_eq!((hb.sequence(), hb.message_count()), (12, 0));
        assert!(s.poll_publish(3 + 10_000_000_000, 12).is_none());
    }

    #[test]
    fn heartbeat_and_clock_tick_when_idle() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        drain(&mut s, 0);
        assert!(s.poll_heartbeat(500).is_none());
        s.handle_timeout(50);
        assert!(!s.has_pending());
        s.handle_timeout(150);
        assert!(s.has_pending());
        drain(&mut s, 150);
        let hb = s.poll_heartbeat(1200).unwrap();
        let p = MoldPacket::parse(&hb).unwrap();
        assert_eq!((p.message_count(), p.sequence()), (0, 3));
    }

    #[test]
    fn commands_after_a_gap_are_held_until_it_is_filled() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        s.set_nak_holdoff(1);
        drain(&mut s, 0);
        assert_eq!(s.handle_upstream(1, &cmds("A", 1, &[1])), 1);
        // 2 is lost: 3 and 4 wait (and a NAK asks for 2); B is not held up
        assert_eq!(s.handle_upstream(2, &cmds("A", 1, &[3, 4])), 0);
        let nak = Nak::parse(&s.poll_nak().map(<[u8]>::to_vec).expect("a NAK")).unwrap();
        assert_eq!(
            (nak.expected, nak.missing),
            (2, 1),
            "2 is missing, 3 on are held"
        );
        assert_eq!(s.handle_upstream(3, &cmds("B", 1, &[1])), 1);
        // the resent 2 alone completes the run
        assert_eq!(s.handle_upstream(4, &cmds("A", 1, &[2])), 3);
        // the sender's go-back-N copies of 3 and 4 are duplicates now
        assert_eq!(s.handle_upstream(5, &cmds("A", 1, &[3, 4])), 0);
        let got: Vec<_> = drain(&mut s, 6)
            .iter()
            .map(|(_, e)| (e.account[0], e.command_seq))
            .collect();
        assert_eq!(
            got,
            vec![(b'A', 1), (b'B', 1), (b'A', 2), (b'A', 3), (b'A', 4)]
        );
        // a sender that says hello again (it restarted) numbers anew from 5: what an earlier
        // run of it left held after a gap is not sequenced
        assert_eq!(s.handle_upstream(7, &cmds("A", 1, &[6])), 0);
        let mut w = UpstreamWriter::new(1400);
        w.begin(
            TYPE_HELLO,
            Session::new("T").unwrap(),
            seqbus_wire::account("A").unwrap(),
            1,
        );
        assert_eq!(s.handle_upstream(8, w.finish()), 1);
        assert_eq!(s.handle_upstream(9, &cmds("A", 1, &[5])), 1);
        let got: Vec<_> = drain(&mut s, 10)
            .iter()
            .filter(|(_, e)| e.kind == KIND_APPLICATION)
            .map(|(_, e)| e.command_seq)
            .collect();
        assert_eq!(got, vec![5]);
        // two gaps (7 and 9 lost, 8 and 10 held): filling the first NAKs the second at once
        let _ = s.poll_nak();
        assert_eq!(s.handle_upstream(11, &cmds("A", 1, &[8])), 0);
        assert_eq!(s.handle_upstream(12, &cmds("A", 1, &[10])), 0);
        let _ = s.poll_nak();
        assert_eq!(s.handle_upstream(13, &cmds("A", 1, &[6, 7])), 3);
        let nak = Nak::parse(&s.poll_nak().map(<[u8]>::to_vec).expect("the second gap")).unwrap();
        assert_eq!((nak.expected, nak.missing), (9, 1));
        assert_eq!(s.handle_upstream(14, &cmds("A", 1, &[9])), 2);
        assert!(s.poll_nak().is_none(), "no gap left");
        drain(&mut s, 15);
        // at most MAX_HELD per account
        let far: Vec<u64> = (12..12 + MAX_HELD as u64 + 10).collect();
        for chunk in far.chunks(50) {
            s.handle_upstream(16, &cmds("A", 1, chunk));
        }
        assert_eq!(s.handle_upstream(17, &cmds("A", 1, &[11])), 1 + MAX_HELD);
    }

    #[test]
    fn nak_holdoff_lets_an_accounts_first_nak_go_at_once_then_one_per_holdoff() {
        let (a, b) = (
            seqbus_wire::account("A").unwrap(),
            seqbus_wire::account("B").unwrap(),
        );
        let mut h = NakHoldoff::new(100);
        // the first, even before a holdoff has passed since time 0 (virtual clocks start there)
        assert!(h.allow(a, 5));
        assert!(!h.allow(a, 104));
        assert!(h.allow(b, 104), "each account has its own");
        assert!(h.allow(a, 105));
        assert!(!h.allow(a, 204));
        let mut off = NakHoldoff::new(0);
        assert!(!off.enabled());
        assert!(!off.allow(a, 1_000_000), "a holdoff of 0 sends none");
    }

    #[test]
    fn the_first_gap_is_naked_at_once_in_virtual_time() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        s.set_nak_holdoff(1_000_000);
        s.handle_upstream(10, &cmds("A", 1, &[1]));
        assert!(s.poll_nak().is_none());
        s.handle_upstream(20, &cmds("A", 1, &[3]));
        let nak = Nak::parse(
            &s.poll_nak()
                .map(<[u8]>::to_vec)
                .expect("a NAK for command 2"),
        )
        .unwrap();
        assert_eq!((nak.expected, nak.missing), (2, 1));
    }

    #[test]
    fn a_nak_is_taken_once_and_never_for_the_next_sender() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        s.set_nak_holdoff(1);
        s.handle_upstream(10, &cmds("A", 1, &[1]));
        s.handle_upstream(20, &cmds("A", 1, &[3]));
        assert!(s.poll_nak().is_some(), "A's gap");
        assert!(s.poll_nak().is_none(), "taken once");
        s.handle_upstream(30, &cmds("A", 1, &[4]));
        // not taken: B's datagram next, which leaves nothing to answer
        s.handle_upstream(40, &cmds("B", 1, &[1]));
        assert!(s.poll_nak().is_none(), "A's NAK is not B's");
    }

    #[test]
    fn a_configured_hold_covers_a_larger_window() {
        // `sequencer.max_held` (default: node.window): a window of 1,000 with its first
        // command lost is held whole, and the resent command alone completes the run
        for (max_held, sequenced) in [(1_000, 1_000), (MAX_HELD, 1 + MAX_HELD), (0, 1)] {
            let mut s = Sequencer::new(
                SequencerParams {
                    max_held,
                    ..params()
                },
                Recovered::new_session(),
                0,
            );
            let after_gap: Vec<u64> = (2..=1_000).collect();
            for chunk in after_gap.chunks(50) {
                assert_eq!(s.handle_upstream(1, &cmds("A", 1, chunk)), 0);
            }
            assert_eq!(
                s.handle_upstream(2, &cmds("A", 1, &[1])),
                sequenced,
                "max_held {max_held}"
            );
        }
    }

    fn signed(account: &str, key: u8, boot: u64, counter: u64, seqs: &[u64]) -> Vec<u8> {
        let mut w = UpstreamWriter::new(1400);
        w.set_key(Key::new([key; 32]), boot);
        for _ in 1..counter {
            w.begin(TYPE_HELLO, Session::new("T").unwrap(), [0; 8], 0);
            w.finish(); // advances the counter
        }
        push_cmds(&mut w, account, 1, seqs);
        w.finish().to_vec()
    }

    #[test]
    fn with_keys_forged_replayed_and_stale_packets_are_dropped_and_counted() {
        let mut keys = AccountKeys::new();
        keys.insert(seqbus_wire::account("A").unwrap(), Key::new([1; 32]));
        keys.insert(seqbus_wire::account("B").unwrap(), Key::new([2; 32]));
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        s.set_keys(Arc::new(keys));
        drain(&mut s, 0);
        assert_eq!(s.handle_upstream(1, &signed("A", 1, 100, 1, &[1])), 1);
        // unauthenticated, a wrong key, an account with no key, another account's key
        assert_eq!(s.handle_upstream(2, &cmds("A", 1, &[2])), 0);
        assert_eq!(s.handle_upstream(3, &signed("A", 9, 100, 2, &[2])), 0);
        assert_eq!(s.handle_upstream(4, &signed("C", 1, 100, 1, &[1])), 0);
        assert_eq!(s.handle_upstream(5, &signed("A", 2, 100, 2, &[2])), 0);
        assert_eq!(s.stats().forged, 4);
        // the very same packet again: a replay
        let p = signed("A", 1, 100, 2, &[2]);
        assert_eq!(s.handle_upstream(6, &p), 1);
        assert_eq!(s.handle_upstream(7, &p), 0);
        assert_eq!(s.stats().replayed, 1);
        // far ahead, then a packet 64 behind it and one of an earlier start: stale
        assert_eq!(s.handle_upstream(8, &signed("A", 1, 100, 200, &[3])), 1);
        assert_eq!(s.handle_upstream(9, &signed("A", 1, 100, 136, &[4])), 0);
        assert_eq!(s.handle_upstream(10, &signed("A", 1, 99, 500, &[4])), 0);
        assert_eq!(s.stats().stale, 2);
        // the sender restarted: a later boot is fresh; B is unaffected throughout
        assert_eq!(s.handle_upstream(11, &signed("A", 1, 101, 1, &[4])), 1);
        assert_eq!(s.handle_upstream(12, &signed("B", 2, 5, 1, &[1])), 1);
        let got = drain(&mut s, 20);
        let seqs: Vec<_> = got
            .iter()
            .map(|(_, e)| (e.account[0], e.command_seq))
            .collect();
        assert_eq!(
            seqs,
            vec![(b'A', 1), (b'A', 2), (b'A', 3), (b'A', 4), (b'B', 1)]
        );
        let st = s.stats();
        assert_eq!(
            (st.forged, st.replayed, st.stale, st.malformed),
            (4, 1, 2, 0)
        );
    }

    #[test]
    fn with_keys_naks_carry_the_accounts_mac() {
        let key = Key::new([1; 32]);
        let mut keys = AccountKeys::new();
        keys.insert(seqbus_wire::account("A").unwrap(), key.clone());
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        s.set_keys(Arc::new(keys));
        s.set_nak_holdoff(1);
        assert_eq!(s.handle_upstream(1, &signed("A", 1, 100, 1, &[2])), 0);
        let nak = s.poll_nak().map(<[u8]>::to_vec).expect("a gap: NAK");
        assert!(Nak::verify(&nak, &key));
        let nak = Nak::parse(&nak).unwrap();
        assert_eq!(nak.expected, 1);
        // it answers the packet that showed the gap: its nonce, inside the MAC
        assert_eq!(
            nak.answers,
            UpstreamPacket::parse(&signed("A", 1, 100, 1, &[2]))
                .unwrap()
                .nonce()
        );
    }

    #[test]
    fn recovery_continues_numbering_and_dedupe() {
        let mut s = Sequencer::new(params(), Recovered::new_session(), 0);
        s.handle_upstream(1, &cmds("A", 1, &[1, 2, 3]));
        let mut rec = Recovered::new_session();
        for (q, m) in s.pending() {
            rec.replay(q, m);
        }
        let mut s2 = Sequencer::new(params(), rec, 5);
        assert!(!s2.has_pending());
        assert_eq!(s2.next_seq(), 5);
        assert_eq!(s2.handle_upstream(6, &cmds("A", 1, &[3, 4])), 1);
        assert_eq!(s2.pending().next().unwrap().0, 5);
    }
}

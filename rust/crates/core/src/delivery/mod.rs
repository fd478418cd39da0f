//! What a node is handed: the one model of delivery, the same whether the stream comes live,
//! rewound from a replayer, through the simulated bus or from a session archive.
//!
//! [`Delivery`] takes the sequenced stream message by message, in order, and writes the
//! records the node sees ([`batch`] layout):
//!
//! * **Fragments** are reassembled per sender account ([`fragments`]): the whole body is one
//!   message record at the last fragment's sequence; the fragments before it are not
//!   messages of their own. Fragments whose sender stopped before the last are discarded
//!   when the account's next message begins (counted as `abandoned`), never delivered.
//! * **Topics**: an application message whose `(schema_id, template_id)` the node lists is a
//!   message record; any other message (a control message, an unlisted type) is filtered.
//! * **Admin commands** (`bus.AdminCommand`, `schemas/bus.idl`) are routed by their target
//!   account, not by topic: one for the node's own account always passes, one for another
//!   account is filtered, unless the node lists the AdminCommand topic (then it sees every
//!   account's, as `seqbus admin` does).
//! * **Time**: a filtered message whose stream time enters a new slot of [`TIME_GRID_NS`]
//!   (1 ms) since the previous message becomes a header-only time record, so deterministic
//!   timers see stream time pass — idle clock ticks included — without every filtered
//!   message crossing to the application.
//!
//! Which records exist depends only on the stream and the node's account and topics, never
//! on how the stream was cut into packets or batches, nor on when the application set its
//! timers; and [`Walk`] fires timers at the first record at or past their deadline. So every
//! consumer — a Rust node, a Python node, a hot backup, a late joiner, the simulated bus, an
//! offline replay — fires every timer at the same sequence. The node's protocol
//! ([`crate::Node`]: gaps, fencing, senders' state) runs before this and hands it the messages
//! in order.

pub mod batch;
pub mod clock;
pub mod fragments;

use std::collections::HashSet;

use seqbus_wire::envelope::{MessageHeader, KIND_APPLICATION};
use seqbus_wire::{Account, Envelope, ENVELOPE_LEN};

pub use batch::{
    write_record, BatchError, Record, Step, Walk, RAW_RECORD_HEADER_LEN, RECORD_CAUGHT_UP,
    RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME,
};
pub use clock::Clock;
pub use fragments::{Abandoned, Piece, Reassembler};

use batch::write_header;

/// The slot of stream time at whose start a filtered message becomes a time record: 1 ms.
pub const TIME_GRID_NS: u64 = 1_000_000;
/// Schema id of the bus's own messages (`schemas/bus.idl`, `schema 1`).
pub const BUS_SCHEMA_ID: u16 = 1;
/// Template id of `bus.AdminCommand`; its block starts with the target account, `char[8]`.
pub const ADMIN_COMMAND_TEMPLATE_ID: u16 = 4;
/// Template id of `bus.AdminReply`.
pub const ADMIN_REPLY_TEMPLATE_ID: u16 = 5;
const ACCOUNT_LEN: usize = 8;

/// An account field without its padding (trailing NUL or space bytes).
fn unpadded(account: &[u8]) -> &[u8] {
    let end = account
        .iter()
        .rposition(|&b| b != 0 && b != b' ')
        .map_or(0, |i| i + 1);
    &account[..end]
}

/// Where a reader of stored messages finds the start of a fragmented message whose earlier
/// fragments it did not read (an offline replay that begins between them). A live node has
/// none: a rewind from between a message's fragments cannot reassemble it.
pub trait EarlierFragments {
    /// The first `missing` bytes of the body of the message whose last fragment is `seq`
    /// (sent by `account`), or None when they cannot be had.
    fn earlier(&mut self, seq: u64, account: &Account, missing: usize) -> Option<Vec<u8>>;
}

/// Counters of what a node was handed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// Message records written.
    pub delivered: u64,
    /// Messages the node does not see (control messages, other types, other accounts' admin
    /// commands, fragments before the last).
    pub filtered: u64,
    /// Time records written.
    pub time_records: u64,
    /// Fragmented messages that did not reassemble.
    pub malformed: u64,
    /// Fragmented messages never completed: their sender stopped between fragments and the
    /// account's next message began anew ([`fragments::Abandoned`]); and their fragments
    /// (those this node saw).
    pub abandoned: u64,
    pub abandoned_fragments: u64,
}

/// The delivery rules of one node.
#[derive(Debug)]
pub struct Delivery {
    /// Listed `(schema_id, template_id)`; None: every application message.
    topics: Option<HashSet<(u16, u16)>>,
    /// The node's account, unpadded: admin commands for it always pass.
    account: Vec<u8>,
    /// Slot of the previous message (None before the first).
    last_slot: Option<u64>,
    fragments: Reassembler,
    /// Raw mode: every message exactly as published (a replayer following the stream).
    raw: bool,
    stats: DeliveryStats,
}

impl Delivery {
    /// The rules of a node of `account` handling `topics` (None: every application message).
    pub fn new(account: &Account, topics: Option<&[(u16, u16)]>) -> Delivery {
        Delivery {
            topics: topics.map(|t| t.iter().copied().collect()),
            account: unpadded(account).to_vec(),
            last_slot: None,
            fragments: Reassembler::new(),
            raw: false,
            stats: DeliveryStats::default(),
        }
    }

    /// Raw mode, for replayers that follow the stream into a journal of their own: every
    /// sequenced message is handed out exactly as published (no topics, no reassembly,
    /// control messages included) in records `length u32 | type u16 (1) | reserved u16 |
    /// sequence u64 | message`.
    pub fn raw() -> Delivery {
        let mut d = Delivery::new(&[0; 8], None);
        d.raw = true;
        d
    }

    pub fn is_raw(&self) -> bool {
        self.raw
    }

    pub fn stats(&self) -> DeliveryStats {
        let mut s = self.stats;
        (s.abandoned, s.abandoned_fragments) = self.fragments.abandoned_counts();
        s
    }

    /// Appends to `out` what the node is handed of the next message of the stream, `msg`
    /// (envelope, then its body or its part of a fragmented one) under `seq`; returns the
    /// records written (0 or 1). Malformed envelopes count and are dropped.
    pub fn message(&mut self, seq: u64, msg: &[u8], out: &mut Vec<u8>) -> usize {
        if self.raw {
            return self.raw_record(seq, msg, out);
        }
        match Envelope::parse(msg) {
            Ok(env) => self.parsed(seq, &env, msg, out),
            Err(_) => {
                self.stats.malformed += 1;
                0
            }
        }
    }

    /// [`Delivery::message`] from storage: a fragmented message whose start was not read is
    /// completed from `earlier`.
    pub fn stored(
        &mut self,
        seq: u64,
        msg: &[u8],
        out: &mut Vec<u8>,
        earlier: &mut dyn EarlierFragments,
    ) -> usize {
        match Envelope::parse(msg) {
            Ok(env) => self.deliver(seq, &env, msg, out, Some(earlier)),
            Err(_) => {
                self.stats.malformed += 1;
                0
            }
        }
    }

    /// [`Delivery::message`] for a message whose envelope the caller parsed already.
    pub fn parsed(&mut self, seq: u64, env: &Envelope, msg: &[u8], out: &mut Vec<u8>) -> usize {
        self.deliver(seq, env, msg, out, None)
    }

    fn deliver(
        &mut self,
        seq: u64,
        env: &Envelope,
        msg: &[u8],
        out: &mut Vec<u8>,
        earlier: Option<&mut dyn EarlierFragments>,
    ) -> usize {
        if self.raw {
            return self.raw_record(seq, msg, out);
        }
        let slot = env.timestamp_ns / TIME_GRID_NS;
        let new_slot = self.last_slot.is_none_or(|s| slot > s);
        if new_slot {
            self.last_slot = Some(slot);
        }
        let part = &msg[ENVELOPE_LEN..];
        if env.kind != KIND_APPLICATION {
            return self.filtered(seq, env, new_slot, out);
        }
        if !env.is_fragmented() {
            if !self.fragments.is_idle() {
                // the account's open chain, if any, will never complete
                self.fragments.push(env, part);
            }
            if !wanted(&self.topics, &self.account, part) {
                return self.filtered(seq, env, new_slot, out);
            }
            // envelope and body lie back to back in the message: one copy
            write_header(out, RECORD_MESSAGE, seq, part.len());
            out.extend_from_slice(msg);
            self.stats.delivered += 1;
            return 1;
        }
        let mut completed: Vec<u8>;
        let body = match self.fragments.push(env, part) {
            Piece::Whole { body, .. } => body,
            Piece::More => return self.filtered(seq, env, new_slot, out),
            Piece::Short { have, want } => {
                let missing = (want as usize).saturating_sub(have);
                match earlier.and_then(|e| e.earlier(seq, &env.account, missing)) {
                    Some(start) if start.len() == missing && missing > 0 => {
                        completed = start;
                        completed.extend_from_slice(self.fragments.last_tail());
                        &completed[..]
                    }
                    _ => {
                        self.stats.malformed += 1;
                        return self.filtered(seq, env, new_slot, out);
                    }
                }
            }
        };
        let whole = Envelope { flags: 0, ..*env };
        if !wanted(&self.topics, &self.account, body) {
            return self.filtered(seq, &whole, new_slot, out);
        }
        write_record(out, RECORD_MESSAGE, seq, &whole.encode(), body);
        self.stats.delivered += 1;
        1
    }

    /// The record of caught-up-with-live after `seq`, the last message of the rewind.
    pub fn caught_up(&mut self, seq: u64, out: &mut Vec<u8>) -> usize {
        write_record(out, RECORD_CAUGHT_UP, seq, &[0u8; ENVELOPE_LEN], &[]);
        1
    }

    /// A message the node does not see: a time record when it enters a new slot.
    fn filtered(&mut self, seq: u64, env: &Envelope, new_slot: bool, out: &mut Vec<u8>) -> usize {
        self.stats.filtered += 1;
        if !new_slot {
            return 0;
        }
        write_record(out, RECORD_TIME, seq, &env.encode(), &[]);
        self.stats.time_records += 1;
        1
    }

    fn raw_record(&mut self, seq: u64, msg: &[u8], out: &mut Vec<u8>) -> usize {
        out.extend_from_slice(&((RAW_RECORD_HEADER_LEN + msg.len()) as u32).to_le_bytes());
        out.extend_from_slice(&RECORD_MESSAGE.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(msg);
        self.stats.delivered += 1;
        1
    }
}

/// Whether the application message `body` is for a node of `account` and `topics`.
fn wanted(topics: &Option<HashSet<(u16, u16)>>, account: &[u8], body: &[u8]) -> bool {
    let Ok(h) = MessageHeader::parse(body) else {
        return false; // not even a message header: nobody's
    };
    let listed = topics
        .as_ref()
        .is_none_or(|t| t.contains(&(h.schema_id, h.template_id)));
    if h.schema_id == BUS_SCHEMA_ID && h.template_id == ADMIN_COMMAND_TEMPLATE_ID {
        return listed || targets(account, &h, body);
    }
    listed
}

/// True when the AdminCommand `body` targets `account`.
fn targets(account: &[u8], h: &MessageHeader, body: &[u8]) -> bool {
    let start = seqbus_wire::envelope::MESSAGE_HEADER_LEN;
    let end = start + ACCOUNT_LEN;
    // a block too short to hold the target is corrupt: no node's, so nobody's business
    if (h.block_length as usize) < ACCOUNT_LEN || body.len() < end || account.is_empty() {
        return false;
    }
    unpadded(&body[start..end]) == account
}

#[cfg(test)]
mod tests;

//! The batch layout: the records a node is handed, back to back in one buffer, so that a
//! consumer in another language (Python) crosses the FFI once per batch
//! (docs/architecture.md, "Batches from Rust to Python").
//!
//! Each record, little-endian: `record_length u32` (the whole record) | `record_type u16` |
//! reserved `u16` | `sequence u64` | the 32-byte envelope | the body (message records only).
//! [`Walk`] reads a batch record by record with a node's [`Clock`], so every consumer fires
//! its deterministic timers at the same records.

use seqbus_wire::ENVELOPE_LEN;

use super::clock::Clock;

/// Record type: a sequenced message for the node (envelope, then the whole body).
pub const RECORD_MESSAGE: u16 = 1;
/// Record type: the node has caught up with live (`on_rewound`); the envelope is zeros.
pub const RECORD_CAUGHT_UP: u16 = 2;
/// Record type: stream time advanced over messages the node does not see (header only).
pub const RECORD_TIME: u16 = 3;
/// Length of a record header (length, type, reserved, sequence, envelope).
pub const RECORD_HEADER_LEN: usize = 16 + ENVELOPE_LEN;
/// Length of a raw-mode record header (length, type, reserved, sequence): the layout a
/// replayer following the stream reads ([`super::Delivery::raw`]), internal to the Rust core.
pub const RAW_RECORD_HEADER_LEN: usize = 16;
/// The IDL message header at the front of every body: block length, template id, schema id,
/// version.
const MESSAGE_HEADER_LEN: usize = 8;

/// Appends one record: header, envelope (its first 32 bytes) and body.
pub fn write_record(out: &mut Vec<u8>, ty: u16, seq: u64, envelope: &[u8], body: &[u8]) {
    write_header(out, ty, seq, body.len());
    out.extend_from_slice(&envelope[..ENVELOPE_LEN]);
    out.extend_from_slice(body);
}

/// Appends the first 16 bytes of a record (length, type, reserved, sequence), reserving
/// room for the envelope and a body of `body_len` bytes that the caller appends.
pub(crate) fn write_header(out: &mut Vec<u8>, ty: u16, seq: u64, body_len: usize) {
    let len = RECORD_HEADER_LEN + body_len;
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4..6].copy_from_slice(&ty.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    out.reserve(len);
    out.extend_from_slice(&h);
}

/// A batch that does not hold what its records claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {field} at offset {offset}: {message}")]
pub struct BatchError {
    /// Byte offset in the batch of the field at fault.
    pub offset: usize,
    /// `record_length`, `body_length` or `record_type`.
    pub field: &'static str,
    pub message: String,
}

/// One record of a batch, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Offset of the record in its batch.
    pub offset: usize,
    pub record_type: u16,
    pub sequence: u64,
    /// The 32 bytes of the envelope (zeros in a caught-up record).
    pub envelope: &'a [u8],
    /// The whole body (message records; empty otherwise).
    pub body: &'a [u8],
}

impl Record<'_> {
    /// Length of the record in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        RECORD_HEADER_LEN + self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The sequencer's timestamp of the message (ns since the epoch).
    #[inline]
    pub fn time_ns(&self) -> u64 {
        u64::from_le_bytes(self.envelope[0..8].try_into().expect("8 bytes"))
    }

    /// The sender's account (envelope bytes 16..24, NUL padded).
    #[inline]
    pub fn account(&self) -> &[u8] {
        &self.envelope[16..24]
    }

    /// `(schema_id, template_id)` of a message record's body.
    #[inline]
    pub fn message_type(&self) -> (u16, u16) {
        let b = self.body;
        (
            u16::from_le_bytes([b[4], b[5]]),
            u16::from_le_bytes([b[2], b[3]]),
        )
    }

    /// Whether the record is a point of the stream with a time of its own (a message or a
    /// time record), where the clock moves and timers may come due.
    #[inline]
    pub fn moves_clock(&self) -> bool {
        self.record_type == RECORD_MESSAGE || self.record_type == RECORD_TIME
    }

    /// Parses the record at `offset` of `batch`, checking its length (and, for a message
    /// record, that the envelope's body length agrees and covers a message header).
    #[inline]
    pub fn parse(batch: &[u8], offset: usize) -> Result<Record<'_>, BatchError> {
        let left = batch.len().saturating_sub(offset);
        if left < RECORD_HEADER_LEN {
            return Err(BatchError {
                offset,
                field: "record_length",
                message: format!("truncated record header ({left} bytes)"),
            });
        }
        let b = &batch[offset..];
        let length = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")) as usize;
        if length < RECORD_HEADER_LEN || length > left {
            return Err(BatchError {
                offset,
                field: "record_length",
                message: format!("length {length} outside the batch"),
            });
        }
        let record_type = u16::from_le_bytes([b[4], b[5]]);
        let sequence = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let envelope = &b[16..RECORD_HEADER_LEN];
        let body = &b[RECORD_HEADER_LEN..length];
        if record_type == RECORD_MESSAGE {
            let body_length = u32::from_le_bytes(b[44..48].try_into().expect("4 bytes")) as usize;
            if body_length != body.len() || body_length < MESSAGE_HEADER_LEN {
                return Err(BatchError {
                    offset: offset + 44,
                    field: "body_length",
                    message: format!("{body_length} in a {length}-byte record"),
                });
            }
        }
        Ok(Record {
            offset,
            record_type,
            sequence,
            envelope,
            body,
        })
    }
}

/// One step of a [`Walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// Deterministic timers are due before the next record: fire every one
    /// [`Clock::pop_due`] hands out, then go on (the walk hands out the same record again,
    /// which then passes, unless a timer set another one due already).
    TimersDue,
    /// The next record, to be handled; the clock already stands at it.
    Record(Record<'a>),
}

/// A batch read record by record with a node's clock: the one rule of when deterministic
/// timers fire — before the first record (a message or a time record) whose time is at or
/// past their deadline, the clock standing at that record — for every consumer.
#[derive(Debug)]
pub struct Walk<'a> {
    batch: &'a [u8],
    offset: usize,
    clock: &'a Clock,
}

impl<'a> Walk<'a> {
    /// Walks `batch` from `offset`.
    pub fn new(batch: &'a [u8], offset: usize, clock: &'a Clock) -> Walk<'a> {
        Walk {
            batch,
            offset,
            clock,
        }
    }

    /// Where the next record starts.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for Walk<'a> {
    type Item = Result<Step<'a>, BatchError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.offset >= self.batch.len() {
            return None;
        }
        let r = match Record::parse(self.batch, self.offset) {
            Ok(r) => r,
            Err(e) => {
                self.offset = self.batch.len();
                return Some(Err(e));
            }
        };
        if r.moves_clock() && self.clock.enter(r.sequence, r.time_ns()) {
            return Some(Ok(Step::TimersDue));
        }
        self.offset += r.len();
        Some(Ok(Step::Record(r)))
    }
}

//! Column buffers in the Arrow layout (values, offsets, validity), built in one forward pass
//! and handed to pyarrow without conversion, and the envelope table.
//!
//! The envelope table (docs/spark.md), one row per message (fragmented messages reassembled):
//! `sequence i64, timestamp_ns i64, time timestamp[us], account utf8, instance i32,
//! command_seq i64, kind utf8, schema_id i32, template_id i32, version i32, type utf8,
//! size i32, fragments i32`; and the raw table, one row per record, fragments included:
//! `sequence, timestamp_ns, time, account, instance, command_seq, kind, flags i16,
//! body_length i64, size i32, body binary` (unsigned wire fields widened so that every value
//! stays exact).

use std::collections::HashMap;

use crate::format::{le_u16, le_u32, le_u64};
use crate::reader::{ArchiveReader, Mode, Msg};
use crate::segment::Problem;

/// One column (or a child of one) in the Arrow layout. `validity`, when present, holds one
/// byte per row (packed into a bitmap on export).
#[derive(Debug, Clone)]
pub struct Column {
    pub len: usize,
    pub validity: Option<Vec<u8>>,
    pub data: Data,
}

#[derive(Debug, Clone)]
pub enum Data {
    /// Fixed-width values (`width` bytes each, little-endian).
    Fixed { width: usize, values: Vec<u8> },
    /// Booleans, one byte per row (packed on export).
    Bool { values: Vec<u8> },
    /// utf8 or binary: i32 offsets (len + 1) and the bytes.
    Var { offsets: Vec<i32>, bytes: Vec<u8> },
    /// A list: i32 offsets (len + 1) into `child`.
    List {
        offsets: Vec<i32>,
        child: Box<Column>,
    },
    /// A struct: one child per field, each of `len` rows.
    Struct { children: Vec<Column> },
}

impl Column {
    pub fn new(data: Data, nullable: bool) -> Column {
        Column {
            len: 0,
            validity: if nullable { Some(Vec::new()) } else { None },
            data,
        }
    }
    pub fn fixed(width: usize, nullable: bool) -> Column {
        Column::new(
            Data::Fixed {
                width,
                values: Vec::new(),
            },
            nullable,
        )
    }
    pub fn var(nullable: bool) -> Column {
        Column::new(
            Data::Var {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            nullable,
        )
    }
    pub fn list(child: Column, nullable: bool) -> Column {
        Column::new(
            Data::List {
                offsets: vec![0],
                child: Box::new(child),
            },
            nullable,
        )
    }

    pub fn null_count(&self) -> usize {
        self.validity
            .as_ref()
            .map(|v| v.iter().filter(|b| **b == 0).count())
            .unwrap_or(0)
    }

    /// Marks the row being appended valid or null (no-op for non-nullable columns).
    #[inline]
    pub fn set_valid(&mut self, valid: bool) {
        if let Some(v) = self.validity.as_mut() {
            v.push(valid as u8);
        }
    }

    #[inline]
    pub fn push_fixed(&mut self, bytes: &[u8]) {
        if let Data::Fixed { values, .. } = &mut self.data {
            values.extend_from_slice(bytes);
        }
        self.len += 1;
    }

    #[inline]
    pub fn push_bool(&mut self, b: bool) {
        if let Data::Bool { values } = &mut self.data {
            values.push(b as u8);
        }
        self.len += 1;
    }

    #[inline]
    pub fn push_var(&mut self, b: &[u8]) {
        if let Data::Var { offsets, bytes } = &mut self.data {
            bytes.extend_from_slice(b);
            offsets.push(bytes.len() as i32);
        }
        self.len += 1;
    }

    /// Cuts the column back to its first `n` rows, children included (they may hold the parts
    /// of a row that was being appended when its message turned out not to decode).
    pub fn truncate(&mut self, n: usize) {
        if let Some(v) = self.validity.as_mut() {
            v.truncate(n);
        }
        match &mut self.data {
            Data::Fixed { width, values } => values.truncate(n * *width),
            Data::Bool { values } => values.truncate(n),
            Data::Var { offsets, bytes } => {
                offsets.truncate(n + 1);
                if let Some(&end) = offsets.get(n) {
                    bytes.truncate(end as usize);
                }
            }
            Data::List { offsets, child } => {
                offsets.truncate(n + 1);
                if let Some(&end) = offsets.get(n) {
                    child.truncate(end as usize);
                }
            }
            Data::Struct { children } => {
                for c in children {
                    c.truncate(n);
                }
            }
        }
        self.len = self.len.min(n);
    }

    /// Appends a zero/empty value of this column's shape (a null's slot, or a default).
    pub fn push_default(&mut self) {
        match &mut self.data {
            Data::Fixed { width, values } => values.resize(values.len() + *width, 0),
            Data::Bool { values } => values.push(0),
            Data::Var { offsets, bytes } => offsets.push(bytes.len() as i32),
            Data::List { offsets, .. } => {
                let last = *offsets.last().expect("offsets start at 0");
                offsets.push(last)
            }
            Data::Struct { children } => {
                for c in children {
                    c.set_valid(false);
                    c.push_default();
                }
            }
        }
        self.len += 1;
    }
}

/// Packs one byte per row into an Arrow validity bitmap (LSB first).
pub fn pack_bits(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len().div_ceil(8)];
    for (i, b) in bytes.iter().enumerate() {
        if *b != 0 {
            out[i >> 3] |= 1 << (i & 7);
        }
    }
    out
}

/// Type names by (schema id, template id), e.g. `exchange.NewOrder`.
pub type TypeNames = HashMap<(u16, u16), String>;

/// The account as text: ASCII with its NUL/space padding removed (other bytes as `\xNN`).
pub fn account_text(raw: &[u8], out: &mut Vec<u8>) {
    let mut n = raw.len();
    while n > 0 && (raw[n - 1] == 0 || raw[n - 1] == b' ') {
        n -= 1;
    }
    for &b in &raw[..n] {
        if b.is_ascii_graphic() || b == b' ' {
            out.push(b);
        } else {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
}

/// The type of a message without a message header.
pub const NO_BODY: &str = "(no body)";

/// `package.Message` of (schema id, template id), or `schema<id>.template<id>` when no schema
/// of the archive names it.
pub fn type_name(names: &TypeNames, sid: u16, tid: u16) -> std::borrow::Cow<'_, str> {
    match names.get(&(sid, tid)) {
        Some(n) => n.as_str().into(),
        None => format!("schema{sid}.template{tid}").into(),
    }
}

/// The envelope kind as text.
pub fn kind_text(kind: u8) -> &'static [u8] {
    match kind {
        1 => b"application",
        2 => b"control",
        _ => b"unknown",
    }
}

/// A utf8 column being built: offsets and bytes.
#[derive(Debug, Clone)]
pub struct Utf8 {
    pub offsets: Vec<i32>,
    pub bytes: Vec<u8>,
}

impl Utf8 {
    pub fn with_capacity(rows: usize, bytes: usize) -> Utf8 {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Utf8 {
            offsets,
            bytes: Vec::with_capacity(bytes),
        }
    }
    #[inline]
    pub fn push(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
        self.end();
    }
    /// Ends the value whose bytes were appended to `bytes` since the last one.
    #[inline]
    pub fn end(&mut self) {
        self.offsets.push(self.bytes.len() as i32);
    }
}

/// The columns every message table starts with: sequence, timestamps, sender.
#[derive(Debug, Clone)]
pub struct EnvelopePrefix {
    pub sequence: Vec<i64>,
    pub timestamp_ns: Vec<i64>,
    pub time_us: Vec<i64>,
    pub account: Utf8,
    pub instance: Vec<i32>,
    pub command_seq: Vec<i64>,
    pub kind: Utf8,
}

impl EnvelopePrefix {
    fn with_capacity(n: usize) -> EnvelopePrefix {
        EnvelopePrefix {
            sequence: Vec::with_capacity(n),
            timestamp_ns: Vec::with_capacity(n),
            time_us: Vec::with_capacity(n),
            account: Utf8::with_capacity(n, n * 4),
            instance: Vec::with_capacity(n),
            command_seq: Vec::with_capacity(n),
            kind: Utf8::with_capacity(n, n * 11),
        }
    }

    #[inline]
    fn push(&mut self, m: &Msg<'_>) {
        let e = m.envelope;
        let ts = le_u64(e, 0);
        self.sequence.push(m.sequence as i64);
        self.timestamp_ns.push(ts as i64);
        self.time_us.push((ts / 1000) as i64);
        account_text(&e[16..24], &mut self.account.bytes);
        self.account.end();
        self.instance.push(le_u16(e, 24) as i32);
        self.command_seq.push(le_u64(e, 8) as i64);
        self.kind.push(kind_text(e[26]));
    }
}

/// The envelope table's columns, in table order.
#[derive(Debug, Clone)]
pub struct EnvelopeColumns {
    pub rows: usize,
    pub prefix: EnvelopePrefix,
    pub schema_id: Vec<i32>,
    pub template_id: Vec<i32>,
    pub version: Vec<i32>,
    pub type_name: Utf8,
    pub size: Vec<i32>,
    pub fragments: Vec<i32>,
}

impl EnvelopeColumns {
    pub fn with_capacity(n: usize) -> EnvelopeColumns {
        EnvelopeColumns {
            rows: 0,
            prefix: EnvelopePrefix::with_capacity(n),
            schema_id: Vec::with_capacity(n),
            template_id: Vec::with_capacity(n),
            version: Vec::with_capacity(n),
            type_name: Utf8::with_capacity(n, n * 16),
            size: Vec::with_capacity(n),
            fragments: Vec::with_capacity(n),
        }
    }

    /// Appends one row per message with sequence in `[lo, hi]`; corrupt records and messages
    /// that cannot be reassembled go to `problems`.
    pub fn decode(&mut self, a: &ArchiveReader, lo: u64, hi: u64, problems: &mut Vec<Problem>) {
        a.read(lo, hi, Mode::Messages, problems, &mut |m| {
            self.push(m, &a.names)
        });
    }

    /// Appends message `m` as a row.
    pub fn push(&mut self, m: &Msg<'_>, names: &TypeNames) {
        self.prefix.push(m);
        match m.header() {
            Some((sid, tid, ver)) => {
                self.schema_id.push(sid as i32);
                self.template_id.push(tid as i32);
                self.version.push(ver as i32);
                self.type_name.push(type_name(names, sid, tid).as_bytes());
            }
            None => {
                self.schema_id.push(0);
                self.template_id.push(0);
                self.version.push(0);
                self.type_name.push(NO_BODY.as_bytes());
            }
        }
        self.size.push(m.size() as i32);
        self.fragments.push(m.fragments as i32);
        self.rows += 1;
    }
}

/// The raw table's columns: one row per record, fragments included.
#[derive(Debug, Clone)]
pub struct RawColumns {
    pub rows: usize,
    pub prefix: EnvelopePrefix,
    pub flags: Vec<i16>,
    pub body_length: Vec<i64>,
    pub size: Vec<i32>,
    pub body: Utf8,
}

impl RawColumns {
    pub fn with_capacity(n: usize) -> RawColumns {
        RawColumns {
            rows: 0,
            prefix: EnvelopePrefix::with_capacity(n),
            flags: Vec::with_capacity(n),
            body_length: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            body: Utf8::with_capacity(n, n * 64),
        }
    }

    /// Appends one row per record with sequence in `[lo, hi]`; corrupt records go to
    /// `problems`.
    pub fn decode(&mut self, a: &ArchiveReader, lo: u64, hi: u64, problems: &mut Vec<Problem>) {
        a.read(lo, hi, Mode::Raw, problems, &mut |m| {
            self.prefix.push(m);
            self.flags.push(m.envelope[27] as i16);
            self.body_length.push(le_u32(m.envelope, 28) as i64);
            self.size.push(m.size() as i32);
            self.body.push(&m.body);
            self.rows += 1;
        });
    }
}

//! Column buffers in the Arrow layout (values, offsets, validity), built in one forward pass
//! and handed to pyarrow without conversion, and the envelope table.
//!
//! The envelope table (docs/spark.md), one row per sequenced message:
//! `sequence i64, timestamp_ns i64, time timestamp[us], account utf8, instance i32,
//! command_seq i64, kind utf8, flags i16, schema_id i32, template_id i32, version i32,
//! type utf8, size i32` (unsigned wire fields widened so that every value stays exact).

use std::collections::HashMap;

use crate::format::{le_u16, le_u64, ENVELOPE_LEN, MESSAGE_HEADER_LEN};
use crate::segment::{Problem, Segment};

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

/// The envelope table's columns, in table order.
#[derive(Default)]
pub struct EnvelopeColumns {
    pub rows: usize,
    pub sequence: Vec<i64>,
    pub timestamp_ns: Vec<i64>,
    pub time_us: Vec<i64>,
    pub account_offsets: Vec<i32>,
    pub account: Vec<u8>,
    pub instance: Vec<i32>,
    pub command_seq: Vec<i64>,
    pub kind_offsets: Vec<i32>,
    pub kind: Vec<u8>,
    pub flags: Vec<i16>,
    pub schema_id: Vec<i32>,
    pub template_id: Vec<i32>,
    pub version: Vec<i32>,
    pub type_offsets: Vec<i32>,
    pub type_name: Vec<u8>,
    pub size: Vec<i32>,
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

impl EnvelopeColumns {
    pub fn with_capacity(n: usize) -> EnvelopeColumns {
        let mut c = EnvelopeColumns {
            sequence: Vec::with_capacity(n),
            timestamp_ns: Vec::with_capacity(n),
            time_us: Vec::with_capacity(n),
            account_offsets: Vec::with_capacity(n + 1),
            account: Vec::with_capacity(n * 4),
            instance: Vec::with_capacity(n),
            command_seq: Vec::with_capacity(n),
            kind_offsets: Vec::with_capacity(n + 1),
            kind: Vec::with_capacity(n * 11),
            flags: Vec::with_capacity(n),
            schema_id: Vec::with_capacity(n),
            template_id: Vec::with_capacity(n),
            version: Vec::with_capacity(n),
            type_offsets: Vec::with_capacity(n + 1),
            type_name: Vec::with_capacity(n * 16),
            size: Vec::with_capacity(n),
            ..Default::default()
        };
        c.account_offsets.push(0);
        c.kind_offsets.push(0);
        c.type_offsets.push(0);
        c
    }

    /// Decodes index positions `[start, end)` of `seg`, appending rows; corrupt records are
    /// returned as problems and skipped.
    pub fn decode(
        &mut self,
        seg: &Segment,
        start: usize,
        end: usize,
        names: &TypeNames,
        problems: &mut Vec<Problem>,
    ) {
        let mut last_key = (u16::MAX, u16::MAX);
        let mut last_name: &[u8] = b"";
        for i in start..end {
            let r = match seg.record(i) {
                Ok(r) => r,
                Err(p) => {
                    problems.push(p);
                    continue;
                }
            };
            let m = r.message;
            let ts = le_u64(m, 0);
            self.sequence.push(r.sequence as i64);
            self.timestamp_ns.push(ts as i64);
            self.time_us.push((ts / 1000) as i64);
            account_text(&m[16..24], &mut self.account);
            self.account_offsets.push(self.account.len() as i32);
            self.instance.push(le_u16(m, 24) as i32);
            self.command_seq.push(le_u64(m, 8) as i64);
            let kind: &[u8] = match m[26] {
                1 => b"application",
                2 => b"control",
                _ => b"unknown",
            };
            self.kind.extend_from_slice(kind);
            self.kind_offsets.push(self.kind.len() as i32);
            let flags = m[27];
            self.flags.push(flags as i16);
            let whole;
            let body = if flags == 2 {
                // the last fragment stands for the reassembled message
                match seg.reassemble(i) {
                    Ok(Some(b)) => {
                        whole = b;
                        &whole[..]
                    }
                    _ => &m[..0],
                }
            } else {
                &m[ENVELOPE_LEN..]
            };
            if (flags == 0 || flags == 2) && body.len() >= MESSAGE_HEADER_LEN {
                let tid = le_u16(body, 2);
                let sid = le_u16(body, 4);
                self.schema_id.push(sid as i32);
                self.template_id.push(tid as i32);
                self.version.push(le_u16(body, 6) as i32);
                if (sid, tid) != last_key {
                    last_key = (sid, tid);
                    last_name = names.get(&(sid, tid)).map(|s| s.as_bytes()).unwrap_or(b"");
                }
                if last_name.is_empty() {
                    self.type_name
                        .extend_from_slice(format!("schema{sid}.template{tid}").as_bytes());
                } else {
                    self.type_name.extend_from_slice(last_name);
                }
            } else {
                self.schema_id.push(0);
                self.template_id.push(0);
                self.version.push(0);
                self.type_name.extend_from_slice(if flags == 1 {
                    b"(fragment)"
                } else if flags == 2 {
                    b"(unreassembled fragment)"
                } else {
                    b"(no body)"
                });
            }
            self.type_offsets.push(self.type_name.len() as i32);
            self.size.push(m.len() as i32);
            self.rows += 1;
        }
    }
}

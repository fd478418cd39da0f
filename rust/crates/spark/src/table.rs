//! The tables of the Spark source, decoded into column buffers the JVM reads in place
//! ([`JCol`]): the envelope and raw tables, one typed table per message, the problems table.
//! Only the columns a query reads are written (`want`); strings with few distinct values
//! (`account`, `kind`, `type`) are dictionary-encoded.

use std::collections::HashMap;

use seqbus_archive::columns::{
    account_text, kind_text, type_name, Column, Data, TypeNames, NO_BODY,
};
use seqbus_archive::format::{le_u16, le_u32, le_u64};
use seqbus_archive::ir;
use seqbus_archive::reader::{Msg, SchemaText, BUS_IR, BUS_SCHEMA_ID};
use seqbus_archive::typed::{TypedColumns, TypedDecoder};
use seqbus_archive::Problem;

/// The schemas a table is decoded with: `[[schema id, package, IR JSON], …]` as JSON, the
/// bus's own added when missing.
pub struct Catalog {
    pub schemas: Vec<SchemaText>,
    pub names: TypeNames,
}

impl Catalog {
    pub fn new(mut schemas: Vec<SchemaText>) -> Result<Catalog, String> {
        if !schemas.iter().any(|s| s.schema_id == BUS_SCHEMA_ID) {
            schemas.push(SchemaText {
                schema_id: BUS_SCHEMA_ID,
                package: "bus".into(),
                ir: BUS_IR.into(),
                builtin: true,
            });
        }
        let mut names = HashMap::new();
        for s in &schemas {
            let parsed =
                ir::Schema::parse(&s.ir).map_err(|e| format!("schema {}: {e}", s.package))?;
            for m in &parsed.messages {
                names.insert(
                    (s.schema_id, m.id),
                    format!("{}.{}", parsed.package, m.name),
                );
            }
        }
        Ok(Catalog { schemas, names })
    }

    pub fn from_json(json: &str) -> Result<Catalog, String> {
        let v: Vec<(u16, String, String)> =
            serde_json::from_str(json).map_err(|e| format!("schema list: {e}"))?;
        Catalog::new(
            v.into_iter()
                .map(|(schema_id, package, ir)| SchemaText {
                    schema_id,
                    package,
                    ir,
                    builtin: false,
                })
                .collect(),
        )
    }

    pub fn to_json(&self) -> String {
        let v: Vec<(u16, &str, &str)> = self
            .schemas
            .iter()
            .map(|s| (s.schema_id, s.package.as_str(), s.ir.as_str()))
            .collect();
        serde_json::to_string(&v).expect("serialises")
    }

    /// (schema id, message name) of `package.Message` or an unambiguous `Message`.
    pub fn resolve(&self, message: &str) -> Result<(u16, String), String> {
        let (pkg, name) = match message.rsplit_once('.') {
            Some((p, n)) => (Some(p), n),
            None => (None, message),
        };
        let hits: Vec<(u16, String)> = self
            .names
            .iter()
            .filter_map(|(&(sid, _), full)| {
                let (p, n) = full.rsplit_once('.').expect("package.Message");
                (n == name && pkg.is_none_or(|want| want == p)).then(|| (sid, n.to_string()))
            })
            .collect();
        let mut known: Vec<&str> = self.names.values().map(String::as_str).collect();
        known.sort();
        match hits.len() {
            1 => Ok(hits.into_iter().next().expect("one")),
            0 => Err(format!(
                "no message {message:?} in the schemas ({})",
                known.join(", ")
            )),
            _ => Err(format!(
                "{message:?} is ambiguous; name its package ({})",
                known.join(", ")
            )),
        }
    }

    pub fn ir(&self, schema_id: u16) -> Option<ir::Schema> {
        let s = self.schemas.iter().find(|s| s.schema_id == schema_id)?;
        ir::Schema::parse(&s.ir).ok()
    }
}

/// One column (or child) as the JVM reads it: one byte per row of validity (absent: no
/// nulls), fixed-width values (or dictionary codes), i32 offsets and bytes (strings, binary,
/// lists; the dictionary's entries when `dict` ≥ 0), children (struct fields, list element).
#[derive(Debug, Default)]
pub struct JCol {
    pub len: usize,
    pub validity: Option<Vec<u8>>,
    pub values: Values,
    pub offsets: Vec<i32>,
    pub bytes: Vec<u8>,
    /// Entries of the dictionary, or -1 when the column is not dictionary-encoded.
    pub dict: i64,
    pub children: Vec<JCol>,
}

/// Fixed-width values in their own type (freed with the layout they were allocated with).
#[derive(Debug, Default)]
pub enum Values {
    #[default]
    None,
    Bytes(Vec<u8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Values {
    fn ptr(&self) -> i64 {
        match self {
            Values::None => 0,
            Values::Bytes(v) => v.as_ptr() as i64,
            Values::I16(v) => v.as_ptr() as i64,
            Values::I32(v) => v.as_ptr() as i64,
            Values::I64(v) => v.as_ptr() as i64,
        }
    }
}

impl From<Vec<u8>> for Values {
    fn from(v: Vec<u8>) -> Values {
        Values::Bytes(v)
    }
}
impl From<Vec<i16>> for Values {
    fn from(v: Vec<i16>) -> Values {
        Values::I16(v)
    }
}
impl From<Vec<i32>> for Values {
    fn from(v: Vec<i32>) -> Values {
        Values::I32(v)
    }
}
impl From<Vec<i64>> for Values {
    fn from(v: Vec<i64>) -> Values {
        Values::I64(v)
    }
}

impl JCol {
    fn from_column(c: Column) -> JCol {
        let mut j = JCol {
            len: c.len,
            validity: c.validity,
            dict: -1,
            ..Default::default()
        };
        match c.data {
            Data::Fixed { values, .. } | Data::Bool { values } => j.values = values.into(),
            Data::Var { offsets, bytes } => {
                j.offsets = offsets;
                j.bytes = bytes;
            }
            Data::List { offsets, child } => {
                j.offsets = offsets;
                j.children = vec![JCol::from_column(*child)];
            }
            Data::Struct { children } => {
                j.children = children.into_iter().map(JCol::from_column).collect()
            }
        }
        j
    }

    fn fixed<T>(v: Vec<T>) -> JCol
    where
        Vec<T>: Into<Values>,
    {
        JCol {
            len: v.len(),
            values: v.into(),
            dict: -1,
            ..Default::default()
        }
    }

    /// Pre-order descriptors, six longs per node: len, validity, values, offsets, bytes
    /// (addresses, valid while the batch lives), dictionary entries (-1: none).
    pub fn layout(&self, out: &mut Vec<i64>) {
        out.push(self.len as i64);
        out.push(self.validity.as_ref().map_or(0, |v| v.as_ptr() as i64));
        out.push(self.values.ptr());
        out.push(self.offsets.as_ptr() as i64);
        out.push(self.bytes.as_ptr() as i64);
        out.push(self.dict);
        for c in &self.children {
            c.layout(out);
        }
    }
}

/// A column of strings with few distinct values: codes and the dictionary.
struct Dict<K> {
    codes: Vec<i32>,
    index: HashMap<K, i32>,
    offsets: Vec<i32>,
    bytes: Vec<u8>,
    last: Option<(K, i32)>,
}

impl<K: std::hash::Hash + Eq + Copy> Dict<K> {
    fn new(n: usize) -> Dict<K> {
        Dict {
            codes: Vec::with_capacity(n),
            index: HashMap::new(),
            offsets: vec![0],
            bytes: Vec::new(),
            last: None,
        }
    }

    #[inline]
    fn push(&mut self, key: K, text: impl FnOnce(&mut Vec<u8>)) {
        if let Some((k, c)) = self.last {
            if k == key {
                self.codes.push(c);
                return;
            }
        }
        let code = match self.index.get(&key) {
            Some(&c) => c,
            None => {
                text(&mut self.bytes);
                self.offsets.push(self.bytes.len() as i32);
                let c = self.index.len() as i32;
                self.index.insert(key, c);
                c
            }
        };
        self.last = Some((key, code));
        self.codes.push(code);
    }

    fn finish(self) -> JCol {
        let dict = self.index.len() as i64;
        let mut j = JCol::fixed(self.codes);
        j.offsets = self.offsets;
        j.bytes = self.bytes;
        j.dict = dict;
        j
    }
}

/// Envelope table columns, in order.
pub const ENVELOPE: [&str; 13] = [
    "sequence",
    "timestamp_ns",
    "time",
    "account",
    "instance",
    "command_seq",
    "kind",
    "schema_id",
    "template_id",
    "version",
    "type",
    "size",
    "fragments",
];
/// Raw table columns, in order.
pub const RAW: [&str; 11] = [
    "sequence",
    "timestamp_ns",
    "time",
    "account",
    "instance",
    "command_seq",
    "kind",
    "flags",
    "body_length",
    "size",
    "body",
];
/// Problems table columns, in order.
pub const PROBLEMS: [&str; 4] = ["file", "offset", "sequence", "problem"];

/// The Spark schema (JSON, `DataType.fromJson`) of a flat table.
fn flat_schema(cols: &[(&str, &str)]) -> String {
    let fields: Vec<serde_json::Value> = cols
        .iter()
        .map(|(n, t)| serde_json::json!({"name": n, "type": t, "nullable": false, "metadata": {}}))
        .collect();
    serde_json::json!({"type": "struct", "fields": fields}).to_string()
}

pub fn envelope_schema() -> String {
    let types = [
        "long",
        "long",
        "timestamp",
        "string",
        "integer",
        "long",
        "string",
        "integer",
        "integer",
        "integer",
        "string",
        "integer",
        "integer",
    ];
    flat_schema(&ENVELOPE.iter().copied().zip(types).collect::<Vec<_>>())
}

pub fn raw_schema() -> String {
    let types = [
        "long",
        "long",
        "timestamp",
        "string",
        "integer",
        "long",
        "string",
        "short",
        "long",
        "integer",
        "binary",
    ];
    flat_schema(&RAW.iter().copied().zip(types).collect::<Vec<_>>())
}

pub fn problems_schema() -> String {
    flat_schema(&[
        ("file", "string"),
        ("offset", "long"),
        ("sequence", "long"),
        ("problem", "string"),
    ])
}

/// What a decoder makes.
pub enum Table {
    Envelope,
    Raw,
    Typed(Box<TypedDecoder>),
    Problems,
}

/// A compiled table decoder: the table, the columns wanted, the type names.
pub struct Decoder {
    pub table: Table,
    pub want: Vec<bool>,
    names: TypeNames,
}

/// A decoded batch: its rows, its wanted columns and the problems met.
pub struct Batch {
    pub rows: usize,
    pub cols: Vec<JCol>,
    pub problems: Vec<Problem>,
}

impl Batch {
    pub fn layout(&self) -> Vec<i64> {
        let mut out = vec![
            self.rows as i64,
            self.problems.len() as i64,
            self.cols.len() as i64,
        ];
        for c in &self.cols {
            c.layout(&mut out);
        }
        out
    }

    pub fn problems_json(&self) -> String {
        let v: Vec<(&str, u64, u64, &str)> = self
            .problems
            .iter()
            .map(|p| (p.file.as_str(), p.offset, p.sequence, p.message.as_str()))
            .collect();
        serde_json::to_string(&v).expect("serialises")
    }

    /// The problems table: one row per problem.
    pub fn of_problems(problems: &[Problem], want: &[bool]) -> Batch {
        let n = problems.len();
        let mut cols = Vec::new();
        let text = |f: &dyn Fn(&Problem) -> &str| {
            let mut offsets = Vec::with_capacity(n + 1);
            let mut bytes = Vec::new();
            offsets.push(0);
            for p in problems {
                bytes.extend_from_slice(f(p).as_bytes());
                offsets.push(bytes.len() as i32);
            }
            JCol {
                len: n,
                offsets,
                bytes,
                dict: -1,
                ..Default::default()
            }
        };
        for (i, w) in want.iter().enumerate() {
            if !w {
                continue;
            }
            cols.push(match i {
                0 => text(&|p| &p.file),
                1 => JCol::fixed(problems.iter().map(|p| p.offset as i64).collect()),
                2 => JCol::fixed(problems.iter().map(|p| p.sequence as i64).collect()),
                _ => text(&|p| &p.message),
            });
        }
        Batch {
            rows: n,
            cols,
            problems: Vec::new(),
        }
    }
}

impl Decoder {
    /// `table`: "envelope", "raw", "problems" or "typed" (message `message` of schema
    /// `schema_id`); `want`: one flag per column of the table (empty: all).
    pub fn new(
        catalog: &Catalog,
        table: &str,
        schema_id: u16,
        message: &str,
        want: &[bool],
    ) -> Result<Decoder, String> {
        let (table, width) = match table {
            "envelope" => (Table::Envelope, ENVELOPE.len()),
            "raw" => (Table::Raw, RAW.len()),
            "problems" => (Table::Problems, PROBLEMS.len()),
            "typed" => {
                let ir = catalog
                    .ir(schema_id)
                    .ok_or_else(|| format!("no schema {schema_id}"))?;
                let d = TypedDecoder::new(&ir, message)?;
                let width = d.columns().columns.len();
                (Table::Typed(Box::new(d)), width)
            }
            t => return Err(format!("unknown table {t:?}")),
        };
        if !want.is_empty() && want.len() != width {
            return Err(format!(
                "{} column flags for a table of {width} columns",
                want.len()
            ));
        }
        Ok(Decoder {
            table,
            want: if want.is_empty() {
                vec![true; width]
            } else {
                want.to_vec()
            },
            names: catalog.names.clone(),
        })
    }

    pub fn builder(&self, capacity: usize) -> Builder<'_> {
        let w = &self.want;
        let n = capacity;
        let kind = match &self.table {
            Table::Envelope => Kind::Envelope(Box::new(Env {
                sequence: Vec::with_capacity(if w[0] { n } else { 0 }),
                timestamp_ns: Vec::with_capacity(if w[1] { n } else { 0 }),
                time: Vec::with_capacity(if w[2] { n } else { 0 }),
                account: Dict::new(if w[3] { n } else { 0 }),
                instance: Vec::with_capacity(if w[4] { n } else { 0 }),
                command_seq: Vec::with_capacity(if w[5] { n } else { 0 }),
                kind: Dict::new(if w[6] { n } else { 0 }),
                schema_id: Vec::with_capacity(if w[7] { n } else { 0 }),
                template_id: Vec::with_capacity(if w[8] { n } else { 0 }),
                version: Vec::with_capacity(if w[9] { n } else { 0 }),
                type_name: Dict::new(if w[10] { n } else { 0 }),
                size: Vec::with_capacity(if w[11] { n } else { 0 }),
                fragments: Vec::with_capacity(if w[12] { n } else { 0 }),
            })),
            Table::Raw => Kind::Raw(Box::new(Raw {
                head: Env {
                    sequence: Vec::new(),
                    timestamp_ns: Vec::new(),
                    time: Vec::new(),
                    account: Dict::new(0),
                    instance: Vec::new(),
                    command_seq: Vec::new(),
                    kind: Dict::new(0),
                    schema_id: Vec::new(),
                    template_id: Vec::new(),
                    version: Vec::new(),
                    type_name: Dict::new(0),
                    size: Vec::new(),
                    fragments: Vec::new(),
                },
                flags: Vec::new(),
                body_length: Vec::new(),
                size: Vec::new(),
                body_offsets: vec![0],
                body: Vec::new(),
            })),
            Table::Typed(d) => Kind::Typed(d.columns()),
            Table::Problems => Kind::Problems,
        };
        Builder {
            dec: self,
            rows: 0,
            kind,
            problems: Vec::new(),
        }
    }
}

struct Env {
    sequence: Vec<i64>,
    timestamp_ns: Vec<i64>,
    time: Vec<i64>,
    account: Dict<[u8; 8]>,
    instance: Vec<i32>,
    command_seq: Vec<i64>,
    kind: Dict<u8>,
    schema_id: Vec<i32>,
    template_id: Vec<i32>,
    version: Vec<i32>,
    type_name: Dict<(u16, u16)>,
    size: Vec<i32>,
    fragments: Vec<i32>,
}

impl Env {
    /// The columns every table starts with (the first seven), as wanted.
    #[inline]
    fn head(&mut self, m: &Msg<'_>, w: &[bool]) {
        let e = m.envelope;
        let ts = le_u64(e, 0);
        if w[0] {
            self.sequence.push(m.sequence as i64);
        }
        if w[1] {
            self.timestamp_ns.push(ts as i64);
        }
        if w[2] {
            self.time.push((ts / 1000) as i64);
        }
        if w[3] {
            let raw: [u8; 8] = e[16..24].try_into().expect("8 bytes");
            self.account.push(raw, |out| account_text(&raw, out));
        }
        if w[4] {
            self.instance.push(le_u16(e, 24) as i32);
        }
        if w[5] {
            self.command_seq.push(le_u64(e, 8) as i64);
        }
        if w[6] {
            self.kind
                .push(e[26], |out| out.extend_from_slice(kind_text(e[26])));
        }
    }

    fn finish_head(self, w: &[bool], out: &mut Vec<JCol>) -> Env {
        let mut rest = self;
        let take = |v: &mut Vec<i64>| JCol::fixed(std::mem::take(v));
        if w[0] {
            out.push(take(&mut rest.sequence));
        }
        if w[1] {
            out.push(take(&mut rest.timestamp_ns));
        }
        if w[2] {
            out.push(take(&mut rest.time));
        }
        if w[3] {
            out.push(std::mem::replace(&mut rest.account, Dict::new(0)).finish());
        }
        if w[4] {
            out.push(JCol::fixed(std::mem::take(&mut rest.instance)));
        }
        if w[5] {
            out.push(take(&mut rest.command_seq));
        }
        if w[6] {
            out.push(std::mem::replace(&mut rest.kind, Dict::new(0)).finish());
        }
        rest
    }
}

struct Raw {
    head: Env,
    flags: Vec<i16>,
    body_length: Vec<i64>,
    size: Vec<i32>,
    body_offsets: Vec<i32>,
    body: Vec<u8>,
}

enum Kind {
    Envelope(Box<Env>),
    Raw(Box<Raw>),
    Typed(TypedColumns),
    Problems,
}

/// A batch being decoded: messages are pushed, then [`Builder::finish`].
pub struct Builder<'d> {
    dec: &'d Decoder,
    pub rows: usize,
    kind: Kind,
    pub problems: Vec<Problem>,
}

impl Builder<'_> {
    /// Appends message (or, for the raw table, record) `m`.
    #[inline]
    pub fn push(&mut self, m: &Msg<'_>) {
        let w = &self.dec.want;
        match &mut self.kind {
            Kind::Envelope(env) => {
                env.head(m, w);
                let header = m.header();
                let (sid, tid, ver) = header.unwrap_or((0, 0, 0));
                if w[7] {
                    env.schema_id.push(sid as i32);
                }
                if w[8] {
                    env.template_id.push(tid as i32);
                }
                if w[9] {
                    env.version.push(ver as i32);
                }
                if w[10] {
                    let names = &self.dec.names;
                    env.type_name.push((sid, tid), |out| match header {
                        Some(_) => out.extend_from_slice(type_name(names, sid, tid).as_bytes()),
                        None => out.extend_from_slice(NO_BODY.as_bytes()),
                    });
                }
                if w[11] {
                    env.size.push(m.size() as i32);
                }
                if w[12] {
                    env.fragments.push(m.fragments as i32);
                }
                self.rows += 1;
            }
            Kind::Raw(raw) => {
                raw.head.head(m, w);
                if w[7] {
                    raw.flags.push(m.envelope[27] as i16);
                }
                if w[8] {
                    raw.body_length.push(le_u32(m.envelope, 28) as i64);
                }
                if w[9] {
                    raw.size.push(m.size() as i32);
                }
                if w[10] {
                    raw.body.extend_from_slice(&m.body);
                    raw.body_offsets.push(raw.body.len() as i32);
                }
                self.rows += 1;
            }
            Kind::Typed(cols) => {
                let Table::Typed(d) = &self.dec.table else {
                    unreachable!()
                };
                d.push(m, cols, w, &mut self.problems);
                self.rows = cols.rows;
            }
            Kind::Problems => {}
        }
    }

    pub fn finish(self) -> Batch {
        let w = &self.dec.want;
        let mut cols = Vec::new();
        match self.kind {
            Kind::Envelope(env) => {
                let mut env = env.finish_head(w, &mut cols);
                if w[7] {
                    cols.push(JCol::fixed(std::mem::take(&mut env.schema_id)));
                }
                if w[8] {
                    cols.push(JCol::fixed(std::mem::take(&mut env.template_id)));
                }
                if w[9] {
                    cols.push(JCol::fixed(std::mem::take(&mut env.version)));
                }
                if w[10] {
                    cols.push(env.type_name.finish());
                }
                if w[11] {
                    cols.push(JCol::fixed(env.size));
                }
                if w[12] {
                    cols.push(JCol::fixed(env.fragments));
                }
            }
            Kind::Raw(raw) => {
                let raw = *raw;
                raw.head.finish_head(w, &mut cols);
                if w[7] {
                    cols.push(JCol::fixed(raw.flags));
                }
                if w[8] {
                    cols.push(JCol::fixed(raw.body_length));
                }
                if w[9] {
                    cols.push(JCol::fixed(raw.size));
                }
                if w[10] {
                    cols.push(JCol {
                        len: raw.body_offsets.len() - 1,
                        offsets: raw.body_offsets,
                        bytes: raw.body,
                        dict: -1,
                        ..Default::default()
                    });
                }
            }
            Kind::Typed(tc) => {
                for (c, want) in tc.columns.into_iter().zip(w) {
                    if *want {
                        cols.push(JCol::from_column(c));
                    }
                }
            }
            Kind::Problems => {}
        }
        Batch {
            rows: self.rows,
            cols,
            problems: self.problems,
        }
    }
}

//! Typed tables: the messages of one type decoded into columns, driven by the schema IR alone.
//!
//! Type mapping (docs/spark.md): bool → bool; u8/u16/u32 → the next wider signed integer;
//! u64 → decimal128(20, 0) (exact); i8..i64, f32, f64 as they are; char[N] → utf8 (padding
//! removed); byte[N] and bytes → binary; string → utf8; enum → utf8 (the value's name, or its
//! number if the schema does not know it); flags → list<utf8> of the names of the bits set;
//! struct → struct; optional T → T, nullable; group → list<struct>.
//! Every row starts with `sequence, timestamp_ns, account, instance, command_seq, version`.
//!
//! Each message is checked and written in one walk; a body that turns out corrupt is a
//! [`Problem`] and is taken back out of the columns (no partial row). Fields newer than the writer read as absent: optionals
//! null, fixed fields zero, groups empty, strings and bytes empty.

use std::collections::HashMap;

use crate::columns::{account_text, Column, Data};
use crate::format::{le_u16, le_u32, le_u64, MESSAGE_HEADER_LEN};
use crate::ir;
use crate::reader::{ArchiveReader, Mode, Msg};
use crate::segment::Problem;

const MAX_DEPTH: usize = 16;
/// Columns every typed table starts with: sequence, timestamp_ns, account, instance,
/// command_seq, version.
pub const PREFIX_COLUMNS: usize = 6;
static ZEROS: [u8; 4096] = [0; 4096];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Prim {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
}

impl Prim {
    fn parse(s: &str) -> Result<Prim, String> {
        Ok(match s {
            "bool" => Prim::Bool,
            "u8" => Prim::U8,
            "u16" => Prim::U16,
            "u32" => Prim::U32,
            "u64" => Prim::U64,
            "i8" => Prim::I8,
            "i16" => Prim::I16,
            "i32" => Prim::I32,
            "i64" => Prim::I64,
            "f32" => Prim::F32,
            "f64" => Prim::F64,
            _ => return Err(format!("unknown primitive {s:?}")),
        })
    }
    fn size(self) -> usize {
        match self {
            Prim::Bool | Prim::U8 | Prim::I8 => 1,
            Prim::U16 | Prim::I16 => 2,
            Prim::U32 | Prim::I32 | Prim::F32 => 4,
            Prim::U64 | Prim::I64 | Prim::F64 => 8,
        }
    }
    /// Bytes per value in the output column.
    fn out_width(self) -> usize {
        match self {
            Prim::Bool => 1,
            Prim::U8 => 2,
            Prim::U16 => 4,
            Prim::U32 => 8,
            Prim::U64 => 16,
            p => p.size(),
        }
    }
    /// The integer value (sign-extended for signed types).
    fn int(self, b: &[u8]) -> i128 {
        match self {
            Prim::Bool | Prim::U8 => b[0] as i128,
            Prim::I8 => b[0] as i8 as i128,
            Prim::U16 => le_u16(b, 0) as i128,
            Prim::I16 => le_u16(b, 0) as i16 as i128,
            Prim::U32 => le_u32(b, 0) as i128,
            Prim::I32 => le_u32(b, 0) as i32 as i128,
            Prim::U64 => le_u64(b, 0) as i128,
            Prim::I64 => le_u64(b, 0) as i64 as i128,
            Prim::F32 | Prim::F64 => 0,
        }
    }
}

#[derive(Debug, Clone)]
enum Ty {
    Prim(Prim),
    Char(usize),
    Byte(usize),
    Enum(Prim, HashMap<i128, String>),
    Flags(Prim, Vec<Option<String>>),
    Struct(Vec<(usize, Ty)>),
}

impl Ty {
    fn size(&self) -> usize {
        match self {
            Ty::Prim(p) | Ty::Enum(p, _) | Ty::Flags(p, _) => p.size(),
            Ty::Char(n) | Ty::Byte(n) => *n,
            Ty::Struct(fs) => fs.iter().map(|(_, t)| t.size()).sum(),
        }
    }
    fn column(&self, nullable: bool) -> Column {
        match self {
            Ty::Prim(Prim::Bool) => Column::new(Data::Bool { values: Vec::new() }, nullable),
            Ty::Prim(p) => Column::fixed(p.out_width(), nullable),
            Ty::Char(_) | Ty::Byte(_) | Ty::Enum(..) => Column::var(nullable),
            Ty::Flags(..) => Column::list(Column::var(false), nullable),
            Ty::Struct(fs) => Column::new(
                Data::Struct {
                    children: fs.iter().map(|(_, t)| t.column(false)).collect(),
                },
                nullable,
            ),
        }
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Fixed { offset: usize, ty: Ty },
    Optional { offset: usize, ty: Ty },
    Var { string: bool },
    Group { block: Box<BlockPlan> },
}

#[derive(Debug, Clone)]
struct BlockPlan {
    path: String,
    fields: Vec<(String, Kind)>,
    /// Column position of the k-th group / variable-length field of this level.
    groups: Vec<usize>,
    vars: Vec<usize>,
}

struct Builder<'a> {
    schema: &'a ir::Schema,
}

impl Builder<'_> {
    fn ty(&self, t: &ir::Type, depth: usize) -> Result<Ty, String> {
        if depth > MAX_DEPTH {
            return Err("structs nested too deep".into());
        }
        let prim = || {
            Prim::parse(
                t.primitive
                    .as_deref()
                    .ok_or_else(|| format!("type {} has no primitive", t.name))?,
            )
        };
        Ok(match t.kind.as_str() {
            "primitive" => Ty::Prim(prim()?),
            "char" => Ty::Char(t.length.unwrap_or(t.size) as usize),
            "byte" => Ty::Byte(t.length.unwrap_or(t.size) as usize),
            "enum" => {
                let e = self
                    .schema
                    .enums
                    .iter()
                    .find(|e| e.name == t.name)
                    .ok_or_else(|| format!("unknown enum {}", t.name))?;
                Ty::Enum(
                    prim()?,
                    e.values
                        .iter()
                        .map(|v| (v.value as i128, v.name.clone()))
                        .collect(),
                )
            }
            "flags" => {
                let e = self
                    .schema
                    .enums
                    .iter()
                    .find(|e| e.name == t.name)
                    .ok_or_else(|| format!("unknown flags {}", t.name))?;
                let p = prim()?;
                let mut bits = vec![None; p.size() * 8];
                for v in &e.values {
                    if let Some(b) = bits.get_mut(v.value as usize) {
                        *b = Some(v.name.clone());
                    }
                }
                Ty::Flags(p, bits)
            }
            "struct" => {
                let s = self
                    .schema
                    .structs
                    .iter()
                    .find(|s| s.name == t.name)
                    .ok_or_else(|| format!("unknown struct {}", t.name))?;
                let mut fs = Vec::new();
                for f in &s.fields {
                    let ft =
                        f.ty.as_ref()
                            .ok_or_else(|| format!("{}.{} has no type", s.name, f.name))?;
                    fs.push((f.offset.unwrap_or(0) as usize, self.ty(ft, depth + 1)?));
                }
                Ty::Struct(fs)
            }
            k => return Err(format!("unknown type kind {k:?}")),
        })
    }

    fn block(&self, b: &ir::Block, depth: usize) -> Result<BlockPlan, String> {
        if depth > MAX_DEPTH {
            return Err("groups nested too deep".into());
        }
        let mut plan = BlockPlan {
            path: b.path.clone(),
            fields: Vec::new(),
            groups: Vec::new(),
            vars: Vec::new(),
        };
        for f in &b.fields {
            let at = plan.fields.len();
            let kind = match f.kind.as_str() {
                "fixed" | "optional" => {
                    let t =
                        f.ty.as_ref()
                            .ok_or_else(|| format!("{}.{} has no type", b.path, f.name))?;
                    let ty = self.ty(t, 0)?;
                    let offset = f
                        .offset
                        .ok_or_else(|| format!("{}.{} has no offset", b.path, f.name))?
                        as usize;
                    if f.kind == "fixed" {
                        Kind::Fixed { offset, ty }
                    } else {
                        Kind::Optional { offset, ty }
                    }
                }
                "string" | "bytes" => {
                    plan.vars.push(at);
                    Kind::Var {
                        string: f.kind == "string",
                    }
                }
                "group" => {
                    plan.groups.push(at);
                    let g = f
                        .group
                        .as_ref()
                        .ok_or_else(|| format!("{}.{} has no group", b.path, f.name))?;
                    Kind::Group {
                        block: Box::new(self.block(g, depth + 1)?),
                    }
                }
                k => return Err(format!("{}.{}: unknown field kind {k:?}", b.path, f.name)),
            };
            plan.fields.push((f.name.clone(), kind));
        }
        Ok(plan)
    }
}

impl BlockPlan {
    fn columns(&self) -> Vec<Column> {
        self.fields
            .iter()
            .map(|(_, k)| match k {
                Kind::Fixed { ty, .. } => ty.column(false),
                Kind::Optional { ty, .. } => ty.column(true),
                Kind::Var { .. } => Column::var(false),
                Kind::Group { block } => Column::list(
                    Column::new(
                        Data::Struct {
                            children: block.columns(),
                        },
                        false,
                    ),
                    false,
                ),
            })
            .collect()
    }
}

/// Where decoding failed: the field path and the byte offset in the body.
struct Fail {
    path: String,
    offset: usize,
    reason: String,
}

type Walk<T> = Result<T, Fail>;

fn fail<T>(path: &str, offset: usize, reason: impl Into<String>) -> Walk<T> {
    Err(Fail {
        path: path.to_string(),
        offset,
        reason: reason.into(),
    })
}

/// Where a value is, for error messages only: (block path, field name).
type At<'a> = (&'a str, &'a str);

fn fail_at<T>(at: At<'_>, offset: usize, reason: impl Into<String>) -> Walk<T> {
    fail(&format!("{}.{}", at.0, at.1), offset, reason)
}

fn put(ty: &Ty, b: &[u8], col: &mut Column, emit: bool, path: At<'_>, at: usize) -> Walk<()> {
    match ty {
        Ty::Prim(Prim::Bool) => {
            if b[0] > 1 {
                return fail_at(path, at, format!("bool byte is {}, not 0 or 1", b[0]));
            }
            if emit {
                col.push_bool(b[0] == 1);
            }
        }
        Ty::Prim(p) => {
            if emit {
                match p {
                    Prim::U8 => col.push_fixed(&(b[0] as i16).to_le_bytes()),
                    Prim::U16 => col.push_fixed(&(le_u16(b, 0) as i32).to_le_bytes()),
                    Prim::U32 => col.push_fixed(&(le_u32(b, 0) as i64).to_le_bytes()),
                    Prim::U64 => col.push_fixed(&(le_u64(b, 0) as i128).to_le_bytes()),
                    _ => col.push_fixed(&b[..p.size()]),
                }
            }
        }
        Ty::Char(n) => {
            let mut k = *n;
            while k > 0 && (b[k - 1] == 0 || b[k - 1] == b' ') {
                k -= 1;
            }
            if let Some(i) = b[..k].iter().position(|c| !c.is_ascii()) {
                return fail_at(path, at + i, "char field holds a non-ASCII byte");
            }
            if emit {
                col.push_var(&b[..k]);
            }
        }
        Ty::Byte(n) => {
            if emit {
                col.push_var(&b[..*n]);
            }
        }
        Ty::Enum(p, names) => {
            if emit {
                let v = p.int(b);
                match names.get(&v) {
                    Some(name) => col.push_var(name.as_bytes()),
                    None => col.push_var(v.to_string().as_bytes()),
                }
            }
        }
        Ty::Flags(p, bits) => {
            if emit {
                let v = p.int(b) as u64;
                if let Data::List { offsets, child } = &mut col.data {
                    for (i, name) in bits.iter().enumerate() {
                        if v >> i & 1 == 1 {
                            match name {
                                Some(n) => child.push_var(n.as_bytes()),
                                None => child.push_var(format!("bit{i}").as_bytes()),
                            }
                        }
                    }
                    offsets.push(child.len as i32);
                }
                col.len += 1;
            }
        }
        Ty::Struct(fs) => {
            if let Data::Struct { children } = &mut col.data {
                for ((off, t), c) in fs.iter().zip(children.iter_mut()) {
                    put(t, &b[*off..*off + t.size()], c, emit, path, at + off)?;
                }
            }
            if emit {
                col.len += 1;
            }
        }
    }
    Ok(())
}

fn zeros(n: usize) -> std::borrow::Cow<'static, [u8]> {
    if n <= ZEROS.len() {
        std::borrow::Cow::Borrowed(&ZEROS[..n])
    } else {
        std::borrow::Cow::Owned(vec![0; n])
    }
}

/// Decodes one block (message body block or group entry) at `pos` of `buf`, `bl` bytes long,
/// followed by `ng` groups and `nv` variable-length fields; returns the end of its tail.
#[allow(clippy::too_many_arguments)]
fn walk_block(
    plan: &BlockPlan,
    buf: &[u8],
    pos: usize,
    bl: usize,
    tail: usize,
    ng: usize,
    nv: usize,
    cols: &mut [Column],
    emit: bool,
    want: &[bool],
    depth: usize,
) -> Walk<usize> {
    // `want` (top level only; empty: every column) prunes the columns written, not the checks
    let wanted = |c: usize| emit && (want.is_empty() || want[c]);
    let block = &buf[pos..pos + bl];
    for (i, ((name, kind), col)) in plan.fields.iter().zip(cols.iter_mut()).enumerate() {
        let emit = wanted(i);
        match kind {
            Kind::Fixed { offset, ty } => {
                let size = ty.size();
                let path = (plan.path.as_str(), name.as_str());
                if offset + size <= bl {
                    put(
                        ty,
                        &block[*offset..offset + size],
                        col,
                        emit,
                        path,
                        pos + offset,
                    )?;
                } else {
                    put(ty, &zeros(size), col, emit, path, pos + offset)?;
                }
                if emit {
                    col.set_valid(true);
                }
            }
            Kind::Optional { offset, ty } => {
                let size = ty.size();
                if offset + 1 + size <= bl && block[*offset] != 0 {
                    if block[*offset] > 1 {
                        return fail(
                            &format!("{}.{}", plan.path, name),
                            pos + offset,
                            format!("presence byte is {}, not 0 or 1", block[*offset]),
                        );
                    }
                    let path = (plan.path.as_str(), name.as_str());
                    put(
                        ty,
                        &block[offset + 1..offset + 1 + size],
                        col,
                        emit,
                        path,
                        pos + offset + 1,
                    )?;
                    if emit {
                        col.set_valid(true);
                    }
                } else if emit {
                    col.set_valid(false);
                    col.push_default();
                }
            }
            _ => {}
        }
    }
    let mut p = tail;
    for k in 0..ng {
        let known = plan.groups.get(k).copied();
        let (gname, gblock): (std::borrow::Cow<'_, str>, _) = match known.map(|c| &plan.fields[c]) {
            Some((name, Kind::Group { block })) => (name.as_str().into(), Some(block)),
            _ => (format!("<group {k}>").into(), None),
        };
        let gpath = || format!("{}.{}", plan.path, gname);
        if buf.len() - p < 8 {
            return fail(&gpath(), p, "group header runs past the end of the body");
        }
        let gbl = le_u16(buf, p) as usize;
        let gng = buf[p + 2] as usize;
        let gnv = buf[p + 3] as usize;
        let count = le_u32(buf, p + 4) as usize;
        p += 8;
        if depth >= MAX_DEPTH {
            return fail(&gpath(), p, "groups nested too deep");
        }
        match (known, gblock) {
            (Some(c), Some(block)) => {
                let emit = wanted(c);
                let col = &mut cols[c];
                let Data::List { offsets, child } = &mut col.data else {
                    unreachable!()
                };
                let Data::Struct { children } = &mut child.data else {
                    unreachable!()
                };
                for _ in 0..count {
                    if buf.len() - p < gbl {
                        return fail(
                            &gpath(),
                            p,
                            format!("group entry of {gbl} bytes runs past the end of the body"),
                        );
                    }
                    p = walk_block(
                        block,
                        buf,
                        p,
                        gbl,
                        p + gbl,
                        gng,
                        gnv,
                        children,
                        emit,
                        &[],
                        depth + 1,
                    )?;
                    if emit {
                        child.len += 1;
                    }
                }
                if emit {
                    offsets.push(child.len as i32);
                    col.len += 1;
                }
            }
            _ => {
                let empty = BlockPlan {
                    path: gpath(),
                    fields: Vec::new(),
                    groups: Vec::new(),
                    vars: Vec::new(),
                };
                for _ in 0..count {
                    if buf.len() - p < gbl {
                        return fail(
                            &gpath(),
                            p,
                            format!("group entry of {gbl} bytes runs past the end of the body"),
                        );
                    }
                    p = walk_block(
                        &empty,
                        buf,
                        p,
                        gbl,
                        p + gbl,
                        gng,
                        gnv,
                        &mut [],
                        false,
                        &[],
                        depth + 1,
                    )?;
                }
            }
        }
    }
    for &c in plan.groups.iter().skip(ng) {
        if wanted(c) {
            cols[c].push_default();
        }
    }
    for k in 0..nv {
        let known = plan.vars.get(k).copied();
        let vpath = || match known {
            Some(c) => format!("{}.{}", plan.path, plan.fields[c].0),
            None => format!("{}.<var {k}>", plan.path),
        };
        if buf.len() - p < 4 {
            return fail(
                &vpath(),
                p,
                "length of variable-length field runs past the end of the body",
            );
        }
        let n = le_u32(buf, p) as usize;
        if buf.len() - p - 4 < n {
            return fail(
                &vpath(),
                p,
                format!("variable-length field of {n} bytes runs past the end of the body"),
            );
        }
        let v = &buf[p + 4..p + 4 + n];
        if let Some(c) = known {
            if let (_, Kind::Var { string: true }) = &plan.fields[c] {
                if let Err(e) = std::str::from_utf8(v) {
                    return fail(
                        &vpath(),
                        p + 4 + e.valid_up_to(),
                        "string is not valid UTF-8",
                    );
                }
            }
            if wanted(c) {
                cols[c].push_var(v);
            }
        }
        p += 4 + n;
    }
    for &c in plan.vars.iter().skip(nv) {
        if wanted(c) {
            cols[c].push_default();
        }
    }
    Ok(p)
}

/// A compiled decoder for one message type of one schema.
pub struct TypedDecoder {
    pub schema_id: u16,
    pub template_id: u16,
    pub name: String,
    plan: BlockPlan,
}

/// The table being built: the envelope prefix and one column per message field.
pub struct TypedColumns {
    pub rows: usize,
    pub columns: Vec<Column>,
}

impl TypedDecoder {
    pub fn new(schema: &ir::Schema, message: &str) -> Result<TypedDecoder, String> {
        let m = schema.message(message).ok_or_else(|| {
            let names: Vec<&str> = schema.messages.iter().map(|m| m.name.as_str()).collect();
            format!(
                "package {} has no message {message:?} (it has: {})",
                schema.package,
                names.join(", ")
            )
        })?;
        let plan = Builder { schema }.block(&m.body, 0)?;
        Ok(TypedDecoder {
            schema_id: schema.schema_id,
            template_id: m.id,
            name: m.name.clone(),
            plan,
        })
    }

    pub fn columns(&self) -> TypedColumns {
        let mut cols: Vec<Column> = vec![
            Column::fixed(8, false), // sequence
            Column::fixed(8, false), // timestamp_ns
            Column::var(false),      // account
            Column::fixed(4, false), // instance
            Column::fixed(8, false), // command_seq
            Column::fixed(4, false), // version
        ];
        cols.extend(self.plan.columns());
        TypedColumns {
            rows: 0,
            columns: cols,
        }
    }

    /// Decodes the message `body` (starting with its 8-byte header) into the field columns
    /// (`want`: which of them to write; empty: all).
    fn body(&self, body: &[u8], cols: &mut [Column], emit: bool, want: &[bool]) -> Walk<()> {
        let path = &self.plan.path;
        let bl = le_u16(body, 0) as usize;
        if body.len() - MESSAGE_HEADER_LEN < bl + 2 {
            return fail(
                path,
                0,
                format!("block of {bl} bytes and its section header run past the end of the body"),
            );
        }
        let pos = MESSAGE_HEADER_LEN;
        let ng = body[pos + bl] as usize;
        let nv = body[pos + bl + 1] as usize;
        // Bytes after the last known item are left alone, as a reader of an older version would.
        walk_block(
            &self.plan,
            body,
            pos,
            bl,
            pos + bl + 2,
            ng,
            nv,
            cols,
            emit,
            want,
            0,
        )
        .map(|_| ())
    }

    /// Whether `msg` is a message of this type.
    #[inline]
    pub fn is_mine(&self, msg: &Msg<'_>) -> bool {
        let body = &msg.body[..];
        body.len() >= MESSAGE_HEADER_LEN
            && le_u16(body, 4) == self.schema_id
            && le_u16(body, 2) == self.template_id
    }

    /// Appends `msg`, when it is of this type, as a row; a body that does not decode is a
    /// problem and adds no row. `want` (one flag per column of [`TypedDecoder::columns`];
    /// empty: all) prunes the columns written — every message is still checked whole.
    pub fn push(
        &self,
        msg: &Msg<'_>,
        out: &mut TypedColumns,
        want: &[bool],
        problems: &mut Vec<Problem>,
    ) {
        if !self.is_mine(msg) {
            return;
        }
        let body = &msg.body[..];
        let (pre, fields) = out.columns.split_at_mut(PREFIX_COLUMNS);
        let (want_pre, want_fields) = if want.is_empty() {
            (&[true; PREFIX_COLUMNS][..], &[][..])
        } else {
            want.split_at(PREFIX_COLUMNS)
        };
        // One pass that checks and writes; a body that fails is taken back out of the columns
        // (a query that reads no field of the message only checks).
        let write = want_fields.is_empty() || want_fields.iter().any(|w| *w);
        if let Err(f) = self.body(body, fields, write, want_fields) {
            for c in fields.iter_mut() {
                c.truncate(out.rows);
            }
            problems.push(msg.problem(format!(
                "{}: body offset {}: {}",
                f.path, f.offset, f.reason
            )));
            return;
        }
        let m = msg.envelope;
        if want_pre[0] {
            pre[0].push_fixed(&(msg.sequence as i64).to_le_bytes());
        }
        if want_pre[1] {
            pre[1].push_fixed(&m[0..8]);
        }
        if want_pre[2] {
            if let Data::Var { offsets, bytes } = &mut pre[2].data {
                account_text(&m[16..24], bytes);
                offsets.push(bytes.len() as i32);
            }
            pre[2].len += 1;
        }
        if want_pre[3] {
            pre[3].push_fixed(&(le_u16(m, 24) as i32).to_le_bytes());
        }
        if want_pre[4] {
            pre[4].push_fixed(&m[8..16]);
        }
        if want_pre[5] {
            pre[5].push_fixed(&(le_u16(body, 6) as i32).to_le_bytes());
        }
        out.rows += 1;
    }

    /// Decodes the messages of this type with sequence in `[lo, hi]` (fragmented ones
    /// reassembled); corrupt records and undecodable bodies go to `problems`.
    pub fn decode(
        &self,
        a: &ArchiveReader,
        lo: u64,
        hi: u64,
        out: &mut TypedColumns,
        problems: &mut Vec<Problem>,
    ) {
        let mut bad = Vec::new();
        a.read(lo, hi, Mode::Messages, problems, &mut |msg| {
            self.push(msg, out, &[], &mut bad)
        });
        problems.append(&mut bad);
        problems.sort_by_key(|p| p.sequence);
    }
}

//! Reading an archive as messages, across segments.
//!
//! A message is read whole and once, however the archive is cut into segments and however a
//! reader cuts it into ranges: a message belongs to the range holding its last record (its
//! only record, or its last fragment). A last fragment finds the earlier fragments of its
//! sender account by walking back through the archive, into earlier segments when it must, and
//! seqbus-core joins them (`seqbus_core::delivery::Reassembler`, as on the live stream: the
//! rule is written once); fragments before the last are not messages of their own (the raw
//! view, [`Mode::Raw`], lists every record). A message that cannot be reassembled is a
//! [`Problem`] at its last fragment, never skipped silently. The walk back stops at the
//! message's first fragment (flag [`FLAG_FIRST`]): fragments before it whose sender stopped
//! between them (abandoned, reported by `verify`) are never joined to it.
//!
//! Ranges are sequence ranges, independent of segments: sequencer time never decreases in a
//! session, so time bounds become one sequence range too ([`ArchiveReader::bounds`]), which
//! [`ArchiveReader::plan`] cuts into pieces of a given number of records.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use seqbus_core::delivery::{Piece, Reassembler as CoreReassembler};
use seqbus_wire::envelope::valid_flags;
use seqbus_wire::Envelope;

use crate::columns::TypeNames;
use crate::format::{le_u16, le_u32, ENVELOPE_LEN, MESSAGE_HEADER_LEN};
use crate::manifest::Manifest;
use crate::segment::{Problem, Record, Segment};
use crate::{ir, ArchiveError, Result};

/// Envelope flag: more fragments of this body follow.
pub const FLAG_MORE: u8 = 1;
/// Envelope flag: the last fragment of a body.
pub const FLAG_LAST: u8 = 2;
/// Envelope flag, with [`FLAG_MORE`]: the first fragment of a body.
pub const FLAG_FIRST: u8 = 4;
const FIRST_MORE: u8 = FLAG_FIRST | FLAG_MORE;

/// What a record with envelope flags that are none of 0, 1, 5 and 2 is.
pub fn bad_flags(flags: u8) -> String {
    format!("envelope flags are {flags}: not 1 (fragment), 5 (first fragment) or 2 (last fragment)")
}

/// The bus's own schema (`seqc ir --json schemas/bus.idl`): control messages are decoded with
/// it even when an archive does not store it (tests/archive checks it against seqc).
pub const BUS_IR: &str = include_str!("bus.ir.json");
pub const BUS_SCHEMA_ID: u16 = 1;

/// What a read hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Messages, fragmented ones reassembled at their last fragment.
    Messages,
    /// Every record as stored, fragments included.
    Raw,
}

/// One message (or, in [`Mode::Raw`], one record).
pub struct Msg<'a> {
    pub sequence: u64,
    /// Where its last record is: the file (or stream) and the byte offset in it.
    pub file: &'a str,
    pub offset: u64,
    /// The envelope of its last record (its flags as recorded).
    pub envelope: &'a [u8],
    /// The whole body (reassembled for a fragmented message; the record's part in raw mode).
    pub body: Cow<'a, [u8]>,
    /// Records it was sent in (1 unless fragmented; 1 in raw mode).
    pub fragments: u32,
}

impl Msg<'_> {
    /// (schema id, template id, version) from the body's message header, if it has one.
    #[inline]
    pub fn header(&self) -> Option<(u16, u16, u16)> {
        let b = &self.body;
        (b.len() >= MESSAGE_HEADER_LEN).then(|| (le_u16(b, 4), le_u16(b, 2), le_u16(b, 6)))
    }
    /// Bytes of the message: the envelope and the whole body (one record in raw mode).
    pub fn size(&self) -> usize {
        ENVELOPE_LEN + self.body.len()
    }
    /// A problem at this message (its last record).
    pub fn problem(&self, message: impl Into<String>) -> Problem {
        Problem {
            file: self.file.to_string(),
            offset: self.offset,
            sequence: self.sequence,
            message: message.into(),
        }
    }
}

/// Reassembles fragmented messages from records handed over in sequence order, from the
/// start of a stream (or from a point where no sender is between fragments): seqbus-core's
/// reassembly (`seqbus_core::delivery::Reassembler`, the one a node's delivery runs), with
/// the archive's reports.
#[derive(Default)]
pub struct Reassembler {
    inner: CoreReassembler,
    abandoned: Option<Abandoned>,
}

/// What a record is, once reassembly has seen it.
pub enum Step {
    /// A whole message: the record's own body, or (fragments > 1) a reassembled one.
    Whole(Option<Vec<u8>>, u32),
    /// A fragment with more to follow.
    More,
    /// A last fragment whose body does not add up: what is wrong.
    Bad(String),
}

pub use seqbus_core::delivery::Abandoned;

impl Reassembler {
    /// Takes record `message` (envelope + part); a whole body is returned when it completes.
    /// A record of an account between fragments that begins anew (a first fragment, a
    /// whole message) discards the account's open chain: [`Reassembler::abandoned`] tells.
    pub fn push(&mut self, message: &[u8]) -> Step {
        self.abandoned = None;
        let flags = message[27];
        if flags == 0 {
            if !self.inner.is_idle() {
                if let Ok(env) = Envelope::parse(message) {
                    self.inner.push(&env, &message[ENVELOPE_LEN..]);
                    self.abandoned = self.inner.abandoned();
                }
            }
            return Step::Whole(None, 1);
        }
        if !valid_flags(flags) {
            return Step::Bad(bad_flags(flags));
        }
        let env = match Envelope::parse(message) {
            Ok(env) => env,
            Err(e) => return Step::Bad(e.to_string()),
        };
        let piece = self.inner.push(&env, &message[ENVELOPE_LEN..]);
        let step = match piece {
            Piece::Whole { body, fragments } => Step::Whole(Some(body.to_vec()), fragments),
            Piece::More => Step::More,
            Piece::Short { have, want } => Step::Bad(format!(
                "reassembled body is {have} bytes, the envelope says {want}"
            )),
        };
        self.abandoned = self.inner.abandoned();
        step
    }

    /// Whether no sender is between fragments (a clean point to cut a stream at).
    pub fn is_idle(&self) -> bool {
        self.inner.is_idle()
    }

    /// The chain of fragments the last [`Reassembler::push`] discarded, if it did.
    pub fn abandoned(&self) -> Option<Abandoned> {
        self.abandoned
    }
}

/// One segment as the manifest (and, for the live segment, its index) lists it.
#[derive(Debug, Clone)]
pub struct SegRef {
    pub number: u32,
    /// The segment's file name (problems name it).
    pub name: String,
    pub seg: PathBuf,
    pub idx: PathBuf,
    pub first_sequence: u64,
    pub count: u64,
    pub first_timestamp_ns: u64,
    pub last_timestamp_ns: u64,
}

/// A schema the archive's tables are decoded with.
#[derive(Debug, Clone)]
pub struct SchemaText {
    pub schema_id: u16,
    pub package: String,
    pub ir: String,
    /// Not stored in the archive: the bus's schema built into this crate.
    pub builtin: bool,
}

pub struct ArchiveReader {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub segments: Vec<SegRef>,
    opened: Vec<OnceLock<std::result::Result<Segment, Problem>>>,
    pub schemas: Vec<SchemaText>,
    pub names: TypeNames,
}

impl ArchiveReader {
    /// Opens the archive in `dir`: its manifest and schemas (segments are mapped on use).
    /// The live segment of an unsealed archive counts what its index lists now.
    pub fn open(dir: &Path) -> Result<ArchiveReader> {
        let manifest = Manifest::load(dir)?;
        let mut segments = Vec::with_capacity(manifest.segments.len());
        let mut opened = Vec::with_capacity(manifest.segments.len());
        let last = manifest.segments.len().saturating_sub(1);
        for (k, s) in manifest.segments.iter().enumerate() {
            let r = SegRef {
                number: s.number,
                name: s.file.clone(),
                seg: dir.join(&s.file),
                idx: dir.join(&s.index),
                first_sequence: s.first_sequence,
                count: s.count,
                first_timestamp_ns: s.first_timestamp_ns,
                last_timestamp_ns: s.last_timestamp_ns,
            };
            let cell = OnceLock::new();
            let mut r = r;
            if !manifest.sealed && k == last {
                let seg = Segment::open(&r.seg, &r.idx)?;
                r.count = seg.len() as u64;
                if r.count > 0 {
                    r.first_timestamp_ns = seg.entry(0).1;
                    r.last_timestamp_ns = seg.entry(seg.len() - 1).1;
                }
                let _ = cell.set(Ok(seg));
            }
            segments.push(r);
            opened.push(cell);
        }
        let mut schemas = Vec::new();
        for s in &manifest.schemas {
            let p = dir.join(&s.ir);
            let ir = std::fs::read_to_string(&p).map_err(|e| ArchiveError::io(&p, e))?;
            schemas.push(SchemaText {
                schema_id: s.schema_id,
                package: s.package.clone(),
                ir,
                builtin: false,
            });
        }
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
            let parsed = ir::Schema::parse(&s.ir).map_err(|e| {
                ArchiveError::format(dir.join("schemas"), format!("{}: {e}", s.package))
            })?;
            for m in &parsed.messages {
                names.insert(
                    (s.schema_id, m.id),
                    format!("{}.{}", parsed.package, m.name),
                );
            }
        }
        Ok(ArchiveReader {
            dir: dir.to_path_buf(),
            manifest,
            segments,
            opened,
            schemas,
            names,
        })
    }

    /// The segment at position `k` as its files are, whatever the manifest counts (for
    /// `verify`, which says where they disagree); not kept.
    pub fn segment_as_is(&self, k: usize) -> std::result::Result<Segment, Problem> {
        let s = &self.segments[k];
        Segment::open(&s.seg, &s.idx).map_err(|e| Problem {
            file: s.name.clone(),
            offset: 0,
            sequence: s.first_sequence,
            message: format!("segment cannot be read: {e}"),
        })
    }

    /// The segment at position `k`, mapped on first use.
    pub fn segment(&self, k: usize) -> std::result::Result<&Segment, Problem> {
        let r = self.opened[k].get_or_init(|| {
            let s = &self.segments[k];
            let seg = self.segment_as_is(k)?;
            // a finished segment holds what the manifest counted: an index that lists fewer
            // (torn, cut) would drop whole records in silence
            if seg.len() as u64 != s.count {
                return Err(Problem {
                    file: s.name.clone(),
                    offset: 0,
                    sequence: s.first_sequence,
                    message: format!(
                        "segment cannot be read: the manifest lists {} records, its index {} \
                         (seqbus archive verify says where it is damaged)",
                        s.count,
                        seg.len()
                    ),
                });
            }
            Ok(seg)
        });
        r.as_ref().map_err(|p| p.clone())
    }

    /// Records the archive holds: `(first, last)` sequence, or None when empty.
    pub fn span(&self) -> Option<(u64, u64)> {
        let first = self.segments.iter().find(|s| s.count > 0)?;
        let last = self.segments.iter().rev().find(|s| s.count > 0)?;
        Some((first.first_sequence, last.first_sequence + last.count - 1))
    }

    /// The (inclusive) sequence range of the records within the sequence and time bounds, or
    /// None when none is. Timestamps never decrease in a session, so the records within time
    /// bounds are contiguous; segments outside the bounds are not opened (the manifest holds
    /// their time span), the two at the edges are searched through their index.
    pub fn bounds(&self, seq_lo: u64, seq_hi: u64, ts_lo: u64, ts_hi: u64) -> Option<(u64, u64)> {
        let (first, last) = self.span()?;
        let mut lo = seq_lo.max(first);
        let mut hi = seq_hi.min(last);
        if lo > hi || ts_lo > ts_hi {
            return None;
        }
        if ts_lo > 0 {
            // the first record at or after ts_lo
            let k = self
                .segments
                .iter()
                .position(|s| s.count > 0 && s.last_timestamp_ns >= ts_lo)?;
            let s = &self.segments[k];
            let at = match self.segment(k) {
                Ok(seg) => s.first_sequence + seg.range(0, u64::MAX, ts_lo, u64::MAX).0 as u64,
                Err(_) => s.first_sequence,
            };
            lo = lo.max(at);
        }
        if ts_hi < u64::MAX {
            // the last record at or before ts_hi
            let k = self
                .segments
                .iter()
                .rposition(|s| s.count > 0 && s.first_timestamp_ns <= ts_hi)?;
            let s = &self.segments[k];
            let at = match self.segment(k) {
                Ok(seg) => {
                    let (start, end) = seg.range(0, u64::MAX, 0, ts_hi);
                    if end == start {
                        return None;
                    }
                    s.first_sequence + end as u64 - 1
                }
                Err(_) => s.first_sequence + s.count - 1,
            };
            hi = hi.min(at);
        }
        (lo <= hi).then_some((lo, hi))
    }

    /// The records within the bounds cut into inclusive sequence ranges of at most
    /// `max_rows` records each (partitions, batches).
    pub fn plan(
        &self,
        seq_lo: u64,
        seq_hi: u64,
        ts_lo: u64,
        ts_hi: u64,
        max_rows: u64,
    ) -> Vec<(u64, u64)> {
        let Some((lo, hi)) = self.bounds(seq_lo, seq_hi, ts_lo, ts_hi) else {
            return Vec::new();
        };
        let step = max_rows.max(1);
        let mut out = Vec::new();
        let mut a = lo;
        loop {
            let b = a.saturating_add(step - 1).min(hi);
            out.push((a, b));
            if b >= hi {
                break;
            }
            a = b + 1;
        }
        out
    }

    /// The position of the segment holding `sequence`, if any.
    fn locate(&self, sequence: u64) -> Option<usize> {
        let k = self
            .segments
            .partition_point(|s| s.first_sequence <= sequence)
            .checked_sub(1)?;
        let s = &self.segments[k];
        (sequence < s.first_sequence + s.count).then_some(k)
    }

    /// Hands every message (or record, in raw mode) with sequence in `[lo, hi]` to `f`, in
    /// sequence order; corrupt records and messages that cannot be reassembled go to
    /// `problems`.
    pub fn read(
        &self,
        lo: u64,
        hi: u64,
        mode: Mode,
        problems: &mut Vec<Problem>,
        f: &mut dyn FnMut(&Msg<'_>),
    ) {
        if lo > hi {
            return;
        }
        let Some(mut k) = self.locate(lo).or_else(|| {
            // lo before the archive's first record: start at the first segment after it
            self.segments
                .iter()
                .position(|s| s.count > 0 && s.first_sequence > lo)
        }) else {
            return;
        };
        while k < self.segments.len() {
            let s = &self.segments[k];
            if s.first_sequence > hi {
                break;
            }
            if s.count == 0 {
                k += 1;
                continue;
            }
            let seg = match self.segment(k) {
                Ok(seg) => seg,
                Err(p) => {
                    problems.push(p);
                    k += 1;
                    continue;
                }
            };
            let n = (s.count as usize).min(seg.len());
            let start = lo.saturating_sub(s.first_sequence).min(n as u64) as usize;
            let end = (hi - s.first_sequence).saturating_add(1).min(n as u64) as usize;
            for i in start..end {
                let r = match seg.record(i) {
                    Ok(r) => r,
                    Err(p) => {
                        problems.push(p);
                        continue;
                    }
                };
                let m = r.message;
                if mode == Mode::Raw {
                    f(&Msg {
                        sequence: r.sequence,
                        file: &s.name,
                        offset: r.offset,
                        envelope: &m[..ENVELOPE_LEN],
                        body: Cow::Borrowed(&m[ENVELOPE_LEN..]),
                        fragments: 1,
                    });
                    continue;
                }
                match m[27] {
                    0 => f(&Msg {
                        sequence: r.sequence,
                        file: &s.name,
                        offset: r.offset,
                        envelope: &m[..ENVELOPE_LEN],
                        body: Cow::Borrowed(&m[ENVELOPE_LEN..]),
                        fragments: 1,
                    }),
                    // delivered with the message, at its last fragment
                    FLAG_MORE | FIRST_MORE => {}
                    FLAG_LAST => match self.reassemble(k, i, &r) {
                        Ok((body, fragments)) => f(&Msg {
                            sequence: r.sequence,
                            file: &s.name,
                            offset: r.offset,
                            envelope: &m[..ENVELOPE_LEN],
                            body: Cow::Owned(body),
                            fragments,
                        }),
                        Err(p) => problems.push(p),
                    },
                    x => problems.push(seg.problem(r.offset, r.sequence, bad_flags(x))),
                }
            }
            k += 1;
        }
    }

    /// The whole body of the message whose last fragment is record `i` of segment `k`, and
    /// how many fragments it had. This only finds the records: the earlier fragments of the
    /// same sender account (envelope flag "more follow"), walking back from it (into earlier
    /// segments when they lie there) until they carry the length its envelope gives, its first
    /// fragment (flag [`FLAG_FIRST`]) is reached, or the account's previous message is. Joining them is seqbus-core's reassembly (the
    /// one a node's delivery runs), fed the records in stream order.
    fn reassemble(
        &self,
        k: usize,
        i: usize,
        last: &Record<'_>,
    ) -> std::result::Result<(Vec<u8>, u32), Problem> {
        let m = last.message;
        let total = le_u32(m, 28) as usize;
        let account = &m[16..24];
        let here = |msg: String| Problem {
            file: self.segments[k].name.clone(),
            offset: last.offset,
            sequence: last.sequence,
            message: msg,
        };
        // the message's records, last first
        let mut records: Vec<&[u8]> = vec![m];
        let mut have = m.len() - ENVELOPE_LEN;
        let (mut kk, mut ii) = (k, i);
        let mut seg = self.segment(k)?;
        // A corrupt record on the way may be anyone's: it is passed over, and named if the
        // body then comes out short.
        let mut unreadable: Option<Problem> = None;
        while have < total {
            if ii == 0 {
                if kk == 0 {
                    return Err(here(format!(
                        "fragmented message starts before the archive's first sequence ({have} of its {total} bytes are here)"
                    )));
                }
                kk -= 1;
                seg = self.segment(kk).map_err(|p| {
                    here(format!(
                        "an earlier fragment's segment cannot be read ({p})"
                    ))
                })?;
                ii = seg.len().min(self.segments[kk].count as usize);
                continue;
            }
            ii -= 1;
            let pm = match seg.record(ii) {
                Ok(p) => p.message,
                Err(p) => {
                    unreadable.get_or_insert(p);
                    continue;
                }
            };
            if &pm[16..24] != account {
                continue;
            }
            if pm[27] != FLAG_MORE && pm[27] != FIRST_MORE {
                break; // the account's previous message: this one is short of fragments
            }
            records.push(pm);
            have += pm.len() - ENVELOPE_LEN;
            if pm[27] == FIRST_MORE {
                break; // what lies before is another (abandoned) message's
            }
        }
        let mut joined = CoreReassembler::new();
        for record in records.iter().rev() {
            let env = Envelope::parse(record).map_err(|e| here(e.to_string()))?;
            match joined.push(&env, &record[ENVELOPE_LEN..]) {
                Piece::More => {}
                Piece::Whole { body, fragments } => return Ok((body.to_vec(), fragments)),
                Piece::Short { have, want } => {
                    return Err(here(match unreadable {
                        Some(p) => format!("an earlier fragment is unreadable ({p})"),
                        None => {
                            format!("reassembled body is {have} bytes, the envelope says {want}")
                        }
                    }))
                }
            }
        }
        unreachable!("the last record pushed is the last fragment: Whole or Short")
    }

    /// The schema with id `schema_id`.
    pub fn schema(&self, schema_id: u16) -> Option<&SchemaText> {
        self.schemas.iter().find(|s| s.schema_id == schema_id)
    }
}

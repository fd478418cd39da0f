//! Checking a segment end to end: every record's length, sequence and CRC32C, the index
//! against the records laid back to back, timestamps in order, nothing after the last record;
//! and, across segments, that every fragmented message reassembles ([`Fragments`]).
//! Fragments whose sender stopped before their last one (the account's next message began
//! anew) are warnings naming their sequences, not damage: the stream is as it was sequenced.

use std::collections::HashMap;

use seqbus_core::delivery::{Piece, Reassembler};
use seqbus_wire::envelope::valid_flags;
use seqbus_wire::Envelope;

use crate::columns::account_text;
use crate::format::{self, le_u32, le_u64, ENVELOPE_LEN};
use crate::reader::bad_flags;
use crate::segment::{Problem, Record, Segment};

/// Where a fragmented message being followed lies, for the reports: its first fragment, its
/// last so far, their number and bytes.
struct Chain {
    file: String,
    offset: u64,
    first: u64,
    last: u64,
    bytes: usize,
    count: u32,
}

/// The fragment chains of every sender account, followed record by record across segments
/// through seqbus-core's reassembly (`seqbus_core::delivery::Reassembler`, the one the live
/// stream goes through): each last fragment must complete a body of the length its envelope
/// gives; in a sealed archive every chain must end, or be abandoned: its account's next
/// message (a first fragment, a whole message) began anew.
#[derive(Default)]
pub struct Fragments {
    joined: Reassembler,
    open: HashMap<[u8; 8], Chain>,
    /// Fragmented messages that reassembled.
    pub messages: u64,
    /// Fragmented messages abandoned by their sender, and where (warnings, not problems).
    pub abandoned: u64,
    pub warnings: Vec<Problem>,
    /// Records that could not be read, in order: a message short of fragments with one of
    /// these among its sequences is described by it, as the readers describe it.
    unreadable: Vec<Problem>,
    /// Once a record was unreadable: the sequence at which each account's last message
    /// ended (whole, completed, abandoned or short). An account missing here ended before the
    /// first unreadable record.
    ended: HashMap<[u8; 8], u64>,
}

impl Fragments {
    /// A record that could not be read (`p` names it).
    fn unreadable(&mut self, p: &Problem) {
        self.unreadable.push(p.clone());
    }

    /// The message of `account` that ends at `sequence` is done (tracked only once a record
    /// was unreadable: before that no message can be short of one).
    fn ended(&mut self, account: [u8; 8], sequence: u64) {
        if !self.unreadable.is_empty() {
            self.ended.insert(account, sequence);
        }
    }

    fn record(&mut self, seg: &Segment, r: &Record<'_>, problems: &mut Vec<Problem>) {
        let m = r.message;
        let flags = m[27];
        if flags == 0 {
            if !self.unreadable.is_empty() {
                self.ended
                    .insert(m[16..24].try_into().expect("8 bytes"), r.sequence);
            }
            if !self.open.is_empty() {
                // a whole message ends its account's open chain, if any
                if let Ok(env) = Envelope::parse(m) {
                    self.joined.push(&env, &m[ENVELOPE_LEN..]);
                    self.abandon(r.sequence);
                }
            }
            return;
        }
        if !valid_flags(flags) {
            problems.push(seg.problem(r.offset, r.sequence, bad_flags(flags)));
            return;
        }
        let env = match Envelope::parse(m) {
            Ok(env) => env,
            Err(e) => {
                problems.push(seg.problem(r.offset, r.sequence, e.to_string()));
                return;
            }
        };
        let part = m.len() - ENVELOPE_LEN;
        let seen = match self.joined.push(&env, &m[ENVELOPE_LEN..]) {
            Piece::More => None,
            Piece::Whole { .. } => Some(Ok(())),
            Piece::Short { have, want } => Some(Err((have, want))),
        };
        // before this record's chain is entered: a first fragment may have ended another
        self.abandon(r.sequence);
        match seen {
            None => {
                let c = self.open.entry(env.account).or_insert_with(|| Chain {
                    file: seg.problem(0, 0, "").file,
                    offset: r.offset,
                    first: r.sequence,
                    last: r.sequence,
                    bytes: 0,
                    count: 0,
                });
                c.bytes += part;
                c.count += 1;
                c.last = r.sequence;
            }
            Some(Ok(())) => {
                self.open.remove(&env.account);
                self.messages += 1;
                self.ended(env.account, r.sequence);
            }
            Some(Err((have, want))) => {
                let first = self
                    .open
                    .remove(&env.account)
                    .map_or(r.sequence, |c| c.first);
                // a record of this message's span that could not be read is the cause: say
                // so as the readers (cat, export, Spark's skipped()) do
                let since = self.ended.get(&env.account).copied().unwrap_or(0);
                let cause = self
                    .unreadable
                    .iter()
                    .rev()
                    .find(|u| u.sequence > since && u.sequence < r.sequence);
                let message = match cause {
                    Some(u) => format!("an earlier fragment is unreadable ({u})"),
                    None => format!(
                        "fragmented message (from sequence {first}) reassembles to {have} bytes, the envelope says {want}"
                    ),
                };
                problems.push(seg.problem(r.offset, r.sequence, message));
                self.ended(env.account, r.sequence);
            }
        }
    }

    /// Makes the chain the last push discarded (if it did) a warning: the record at `next`
    /// began its account anew.
    fn abandon(&mut self, next: u64) {
        let Some(a) = self.joined.abandoned() else {
            return;
        };
        let Some(c) = self.open.remove(&a.account) else {
            return;
        };
        self.ended(a.account, c.last);
        self.abandoned += 1;
        let mut name = Vec::new();
        account_text(&a.account, &mut name);
        self.warnings.push(Problem {
            file: c.file,
            offset: c.offset,
            sequence: c.first,
            message: format!(
                "fragmented message of account {} (sequences {}-{}, {} fragments, {} bytes) abandoned by its sender: the account's message at sequence {next} begins anew",
                String::from_utf8_lossy(&name),
                c.first,
                c.last,
                c.count,
                c.bytes
            ),
        });
    }

    /// Problems left at the end of the archive: in a sealed archive, fragmented messages
    /// whose last fragment never came (a live archive may still get it).
    pub fn finish(&mut self, sealed: bool) -> Vec<Problem> {
        if !sealed {
            return Vec::new();
        }
        let mut out: Vec<Problem> = self
            .open
            .drain()
            .map(|(account, c)| {
                let mut name = Vec::new();
                account_text(&account, &mut name);
                Problem {
                    file: c.file,
                    offset: c.offset,
                    sequence: c.first,
                    message: format!(
                        "fragmented message of account {} (sequences {}-{}, {} fragments, {} bytes) has no last fragment",
                        String::from_utf8_lossy(&name),
                        c.first,
                        c.last,
                        c.count,
                        c.bytes
                    ),
                }
            })
            .collect();
        out.sort_by_key(|p| p.sequence);
        out
    }
}

#[derive(Debug, Default, Clone)]
pub struct SegmentReport {
    pub records: u64,
    pub good: u64,
    pub first_sequence: u64,
    pub last_timestamp_ns: u64,
    pub problems: Vec<Problem>,
}

/// Verifies `seg`; `expect_first`: the sequence this segment must start at (the previous
/// segment's end), if known; `frags`: the fragment chains the previous segments left open.
pub fn verify_segment(
    seg: &Segment,
    expect_first: Option<u64>,
    frags: &mut Fragments,
) -> SegmentReport {
    let mut rep = SegmentReport {
        first_sequence: seg.first_sequence,
        records: seg.len() as u64,
        ..Default::default()
    };
    if let Some(e) = expect_first {
        if e != seg.first_sequence {
            rep.problems.push(seg.problem(
                0,
                seg.first_sequence,
                if e < seg.first_sequence {
                    format!(
                        "gap: sequences {e} to {} are missing before this segment",
                        seg.first_sequence - 1
                    )
                } else {
                    format!(
                        "overlap: segment starts at {} but {} was expected",
                        seg.first_sequence, e
                    )
                },
            ));
        }
    }
    let bytes = seg.bytes();
    let mut expect_offset = format::SEGMENT_HEADER_LEN as u64;
    let mut last_ts = 0u64;
    for i in 0..seg.len() {
        let (offset, ts) = seg.entry(i);
        let sequence = seg.first_sequence + i as u64;
        if offset != expect_offset {
            rep.problems.push(seg.problem(
                offset,
                sequence,
                format!("index says offset {offset}, the previous record ends at {expect_offset}"),
            ));
        }
        match seg.record(i) {
            Ok(r) => {
                rep.good += 1;
                frags.record(seg, &r, &mut rep.problems);
                let mts = le_u64(r.message, 0);
                if mts != ts {
                    rep.problems.push(seg.problem(
                        offset,
                        sequence,
                        format!("index timestamp {ts} differs from the envelope's {mts}"),
                    ));
                }
                if mts < last_ts {
                    rep.problems.push(seg.problem(
                        offset,
                        sequence,
                        format!("timestamp {mts} is earlier than the previous message's {last_ts}"),
                    ));
                }
                last_ts = mts;
            }
            Err(p) => {
                frags.unreadable(&p);
                rep.problems.push(p);
            }
        }
        let at = offset as usize;
        expect_offset = if at + 4 <= bytes.len() {
            offset + (format::RECORD_HEADER_LEN as u64) + le_u32(bytes, at) as u64
        } else {
            offset
        };
        // Resynchronise on the index after a bad length.
        if i + 1 < seg.len() {
            let next = seg.entry(i + 1).0;
            if next != expect_offset && rep.problems.last().map(|p| p.offset) == Some(offset) {
                expect_offset = next;
            }
        }
    }
    if (bytes.len() as u64) > expect_offset {
        rep.problems.push(seg.problem(
            expect_offset,
            seg.first_sequence + seg.len() as u64,
            format!(
                "{} bytes after the last indexed record (a torn write, or records the index does not list)",
                bytes.len() as u64 - expect_offset
            ),
        ));
    }
    rep.last_timestamp_ns = last_ts;
    rep
}

/// What [`verify_archive`] found.
#[derive(Debug, Default)]
pub struct ArchiveReport {
    pub segments: u64,
    pub records: u64,
    pub good: u64,
    pub fragmented_messages: u64,
    pub problems: Vec<Problem>,
    /// Fragmented messages abandoned by their sender ([`Fragments`]): not damage.
    pub abandoned_messages: u64,
    pub warnings: Vec<Problem>,
}

/// Verifies a whole archive: every segment ([`verify_segment`]), sequence contiguity across
/// segments, the manifest's counts, fragmented messages across segments, and that it is
/// sealed. `progress` is called after each segment.
pub fn verify_archive(
    a: &crate::ArchiveReader,
    progress: &mut dyn FnMut(&crate::reader::SegRef),
) -> ArchiveReport {
    let mut rep = ArchiveReport::default();
    let mut frags = Fragments::default();
    let mut expect = None;
    for (k, s) in a.segments.iter().enumerate() {
        rep.segments += 1;
        let seg = match a.segment_as_is(k) {
            Ok(seg) => seg,
            Err(p) => {
                rep.problems.push(p);
                continue;
            }
        };
        let r = verify_segment(&seg, expect, &mut frags);
        rep.records += r.records;
        rep.good += r.good;
        rep.problems.extend(r.problems);
        expect = Some(r.first_sequence + r.records);
        if a.manifest.sealed && r.records != s.count {
            rep.problems.push(seg.problem(
                0,
                r.first_sequence,
                format!(
                    "the manifest lists {} records, the index {}",
                    s.count, r.records
                ),
            ));
        }
        progress(s);
    }
    rep.problems.extend(frags.finish(a.manifest.sealed));
    rep.fragmented_messages = frags.messages;
    rep.abandoned_messages = frags.abandoned;
    rep.warnings = std::mem::take(&mut frags.warnings);
    if !a.manifest.sealed {
        rep.problems.push(Problem {
            file: format::MANIFEST.into(),
            offset: 0,
            sequence: expect.unwrap_or(0),
            message: "the archive is not sealed".into(),
        });
    }
    rep
}

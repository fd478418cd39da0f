//! Checking a segment end to end: every record's length, sequence and CRC32C, the index
//! against the records laid back to back, timestamps in order, nothing after the last record.

use crate::format::{self, le_u32, le_u64};
use crate::segment::{Problem, Segment};

#[derive(Debug, Default, Clone)]
pub struct SegmentReport {
    pub records: u64,
    pub good: u64,
    pub first_sequence: u64,
    pub last_timestamp_ns: u64,
    pub problems: Vec<Problem>,
}

/// Verifies `seg`; `expect_first`: the sequence this segment must start at (the previous
/// segment's end), if known.
pub fn verify_segment(seg: &Segment, expect_first: Option<u64>) -> SegmentReport {
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
            Err(p) => rep.problems.push(p),
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

//! Reading one segment through its index. Every record is checked as it is read: its offset
//! from the index, its length, its sequence and its CRC32C. A bad record is a [`Problem`]
//! naming the file, the byte offset and the sequence; reading goes on at the next index entry.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use seqbus_journal::RecordError;

use crate::format::{self, le_u32, le_u64};
use crate::{ArchiveError, Result};

/// A corrupt or inconsistent record, reported and skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub offset: u64,
    pub sequence: u64,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: sequence {}: {}",
            self.file, self.offset, self.sequence, self.message
        )
    }
}

fn map(path: &Path) -> Result<Option<Mmap>> {
    let f = File::open(path).map_err(|e| ArchiveError::io(path, e))?;
    let len = f.metadata().map_err(|e| ArchiveError::io(path, e))?.len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: archive files are append-only and never truncated while mapped; readers only
    // look at bytes below the length they mapped.
    // populate: fault the pages in at once (one sequential pass reads them all anyway).
    let m = unsafe { memmap2::MmapOptions::new().populate().map(&f) }
        .map_err(|e| ArchiveError::io(path, e))?;
    Ok(Some(m))
}

pub struct Segment {
    pub seg_path: PathBuf,
    pub idx_path: PathBuf,
    seg: Option<Mmap>,
    idx: Option<Mmap>,
    pub first_sequence: u64,
    count: usize,
}

/// One record as read: its sequence, where it starts, and the message bytes.
pub struct Record<'a> {
    pub sequence: u64,
    pub offset: u64,
    pub message: &'a [u8],
}

impl Segment {
    pub fn open(seg_path: &Path, idx_path: &Path) -> Result<Segment> {
        // The index first: the writer flushes records before their index entries, so every
        // entry mapped here points at bytes the segment mapping below holds.
        let idx = map(idx_path)?;
        let seg = map(seg_path)?;
        let s = seg.as_deref().unwrap_or(&[]);
        if s.len() < format::SEGMENT_HEADER_LEN || &s[0..8] != format::SEGMENT_MAGIC {
            return Err(ArchiveError::format(
                seg_path,
                "not a seqbus archive segment (bad magic)",
            ));
        }
        if le_u32(s, 8) != format::FORMAT_VERSION {
            return Err(ArchiveError::format(
                seg_path,
                format!(
                    "segment format version {}, expected {}",
                    le_u32(s, 8),
                    format::FORMAT_VERSION
                ),
            ));
        }
        let first_sequence = le_u64(s, 16);
        let i = idx.as_deref().unwrap_or(&[]);
        if i.len() < format::INDEX_HEADER_LEN || &i[0..8] != format::INDEX_MAGIC {
            return Err(ArchiveError::format(
                idx_path,
                "not a seqbus archive index (bad magic)",
            ));
        }
        if le_u64(i, 8) != first_sequence {
            return Err(ArchiveError::format(
                idx_path,
                format!(
                    "index starts at sequence {}, its segment at {first_sequence}",
                    le_u64(i, 8)
                ),
            ));
        }
        // A torn trailing entry (a writer mid-append) is not counted.
        let count = (i.len() - format::INDEX_HEADER_LEN) / format::INDEX_ENTRY_LEN;
        Ok(Segment {
            seg_path: seg_path.to_path_buf(),
            idx_path: idx_path.to_path_buf(),
            seg,
            idx,
            first_sequence,
            count,
        })
    }

    /// Records the index lists.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn bytes(&self) -> &[u8] {
        self.seg.as_deref().unwrap_or(&[])
    }

    fn index(&self) -> &[u8] {
        self.idx.as_deref().unwrap_or(&[])
    }

    /// (offset, timestamp_ns) of index entry `i`.
    #[inline]
    pub fn entry(&self, i: usize) -> (u64, u64) {
        let at = format::INDEX_HEADER_LEN + i * format::INDEX_ENTRY_LEN;
        let x = self.index();
        (le_u64(x, at), le_u64(x, at + 8))
    }

    fn file_name(&self) -> String {
        self.seg_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub fn problem(&self, offset: u64, sequence: u64, message: impl Into<String>) -> Problem {
        Problem {
            file: self.file_name(),
            offset,
            sequence,
            message: message.into(),
        }
    }

    /// Record `i` (sequence `first_sequence + i`), checked.
    #[inline]
    pub fn record(&self, i: usize) -> std::result::Result<Record<'_>, Problem> {
        let sequence = self.first_sequence + i as u64;
        let (offset, _) = self.entry(i);
        let s = self.bytes();
        let at = offset as usize;
        if offset < format::SEGMENT_HEADER_LEN as u64
            || offset > s.len() as u64
            || s.len() - at < format::RECORD_HEADER_LEN
        {
            return Err(self.problem(offset, sequence, "index entry points outside the segment"));
        }
        let len = le_u32(s, at) as usize;
        if len < format::ENVELOPE_LEN {
            return Err(self.problem(offset, sequence, format!("bad record length {len}")));
        }
        // the journal's codec: its length limit, its checksum over sequence and message
        let (seq, message) = match seqbus_journal::decode_record(&s[at..]) {
            Ok((r, _)) => (r.sequence, r.message),
            Err(RecordError::Incomplete) => {
                let left = s.len() - at - format::RECORD_HEADER_LEN;
                return Err(self.problem(
                    offset,
                    sequence,
                    format!("a record of {len} bytes runs past the end of the file ({left} left)"),
                ));
            }
            Err(RecordError::Invalid(_)) if len > format::MAX_MESSAGE_LEN => {
                return Err(self.problem(offset, sequence, format!("bad record length {len}")));
            }
            Err(RecordError::Invalid(_)) => {
                let seq = le_u64(s, at + 8);
                return Err(self.problem(
                    offset,
                    sequence,
                    if seq != sequence {
                        format!("record holds sequence {seq} and fails its checksum")
                    } else {
                        "checksum (crc32c) mismatch".to_string()
                    },
                ));
            }
        };
        if seq != sequence {
            return Err(self.problem(
                offset,
                sequence,
                format!(
                    "record holds sequence {seq}, not the {sequence} of its place in the index"
                ),
            ));
        }
        Ok(Record {
            sequence,
            offset,
            message,
        })
    }

    /// Index positions `[start, end)` of the records with sequence in `[seq_lo, seq_hi]` and
    /// timestamp in `[ts_lo, ts_hi]` (timestamps are non-decreasing in a session, so a binary
    /// search over the index finds the time bounds).
    pub fn range(&self, seq_lo: u64, seq_hi: u64, ts_lo: u64, ts_hi: u64) -> (usize, usize) {
        let n = self.count as u64;
        let f = self.first_sequence;
        let mut start = seq_lo.saturating_sub(f).min(n) as usize;
        let mut end = if seq_hi < f {
            0
        } else {
            (seq_hi - f).saturating_add(1).min(n) as usize
        };
        if start >= end {
            return (0, 0);
        }
        if ts_lo > 0 {
            let (mut lo, mut hi) = (start, end);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if self.entry(mid).1 < ts_lo {
                    lo = mid + 1
                } else {
                    hi = mid
                }
            }
            start = lo;
        }
        if ts_hi < u64::MAX {
            let (mut lo, mut hi) = (start, end);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if self.entry(mid).1 <= ts_hi {
                    lo = mid + 1
                } else {
                    hi = mid
                }
            }
            end = lo;
        }
        (start, end.max(start))
    }
}

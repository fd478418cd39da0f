//! seqbus-journal: the sequencer's append-only journal (format: `docs/journal.md`).
//!
//! A journal is a directory of segment files `<first sequence, 20 digits>.seg`. Each starts
//! with a 32-byte header (`"SEQBUSJ1"`, session, first sequence) followed by records
//! `length u32 | crc32c u32 | sequence u64 | message[length]` (little-endian; the CRC-32C
//! covers the sequence bytes and the message). An in-memory index maps each sequence number
//! to its record's offset.
//!
//! [`Journal`] is the single writer: [`Journal::append`] buffers, [`Journal::flush`] writes the
//! buffer with one `write` (after it the records survive a crash of the process), and
//! [`Journal::sync`] calls `fdatasync` (after it they survive a crash of the machine). On
//! open it recovers from a torn tail by truncating the last segment after its last whole,
//! checksum-valid record. [`JournalReader`] follows a journal another process (or thread)
//! writes, for replayers.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use seqbus_core::{Store, StoreError};

const MAGIC: &[u8; 8] = b"SEQBUSJ1";
/// Length of a segment header.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest message a record holds.
pub const MAX_MESSAGE_LEN: usize = 1 << 20;
/// Most bytes one read of the journal takes from a segment at once (whole records).
const READ_CHUNK: u64 = 4 << 20;

/// A journal that cannot be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("journal {path}: belongs to session {found:?}, not {expected:?}")]
    SessionMismatch {
        path: PathBuf,
        found: String,
        expected: String,
    },
    #[error("journal {path}: corrupt at offset {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("journal: sequence {0} is not in the journal")]
    Missing(u64),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One record of the journal, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub sequence: u64,
    pub message: &'a [u8],
}

/// Why bytes are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Not enough bytes for the whole record (a torn tail when at the end of a file).
    Incomplete,
    /// The bytes are there but wrong.
    Invalid(String),
}

/// Encodes a record.
pub fn encode_record(out: &mut Vec<u8>, sequence: u64, message: &[u8]) {
    let seq = sequence.to_le_bytes();
    let mut crc = crc32c::crc32c(&seq);
    crc = crc32c::crc32c_append(crc, message);
    out.extend_from_slice(&(message.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&seq);
    out.extend_from_slice(message);
}

/// Decodes the record at the front of `buf`; returns it and its total length.
pub fn decode_record(buf: &[u8]) -> Result<(Record<'_>, usize), RecordError> {
    if buf.len() < RECORD_HEADER_LEN {
        return Err(RecordError::Incomplete);
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4")) as usize;
    if len > MAX_MESSAGE_LEN {
        return Err(RecordError::Invalid(format!("record length {len} too large")));
    }
    if buf.len() < RECORD_HEADER_LEN + len {
        return Err(RecordError::Incomplete);
    }
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4"));
    let message = &buf[RECORD_HEADER_LEN..RECORD_HEADER_LEN + len];
    // the checksum covers the sequence and the message, which lie back to back: one pass
    let actual = crc32c::crc32c(&buf[8..RECORD_HEADER_LEN + len]);
    if crc != actual {
        return Err(RecordError::Invalid(format!(
            "checksum {crc:#010x} does not match {actual:#010x}"
        )));
    }
    let sequence = u64::from_le_bytes(buf[8..16].try_into().expect("8"));
    Ok((Record { sequence, message }, RECORD_HEADER_LEN + len))
}

fn segment_header(session: &[u8; 10], first_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..18].copy_from_slice(session);
    h[24..32].copy_from_slice(&first_seq.to_le_bytes());
    h
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}.seg"))
}

/// One segment file and the offsets of its records.
#[derive(Debug)]
struct Segment {
    path: PathBuf,
    file: File,
    first_seq: u64,
    offsets: Vec<u32>,
    /// Bytes of whole, valid records (plus the header).
    len: u64,
}

impl Segment {
    fn next_seq(&self) -> u64 {
        self.first_seq + self.offsets.len() as u64
    }
}

/// The index of a journal directory, shared by the writer and the reader.
#[derive(Debug)]
struct Index {
    dir: PathBuf,
    session: [u8; 10],
    segments: Vec<Segment>,
}

/// What scanning the tail of a segment found after its last whole record.
enum Tail {
    Clean,
    /// Bytes after the last whole record that do not form one: (offset, reason).
    Torn(u64, String),
}

impl Index {
    fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, JournalError> {
        let mut segs = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(".seg") {
                if let Ok(first) = stem.parse::<u64>() {
                    segs.push((first, entry.path()));
                }
            }
        }
        segs.sort();
        Ok(segs)
    }

    /// Opens `path` and checks its header.
    fn open_segment(
        &self,
        path: &Path,
        first_seq: u64,
        writable: bool,
    ) -> Result<Segment, JournalError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(io_err(path))?;
        let mut h = [0u8; SEGMENT_HEADER_LEN];
        file.read_exact(&mut h).map_err(|e| JournalError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            reason: format!("segment header: {e}"),
        })?;
        if &h[..8] != MAGIC {
            return Err(JournalError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: "not a seqbus journal segment (bad magic)".into(),
            });
        }
        if h[8..18] != self.session {
            return Err(JournalError::SessionMismatch {
                path: path.to_path_buf(),
                found: String::from_utf8_lossy(&h[8..18]).trim_end().to_string(),
                expected: String::from_utf8_lossy(&self.session).trim_end().to_string(),
            });
        }
        let hdr_first = u64::from_le_bytes(h[24..32].try_into().expect("8"));
        if hdr_first != first_seq {
            return Err(JournalError::Corrupt {
                path: path.to_path_buf(),
                offset: 24,
                reason: format!("header says first sequence {hdr_first}, file name {first_seq}"),
            });
        }
        Ok(Segment {
            path: path.to_path_buf(),
            file,
            first_seq,
            offsets: Vec::new(),
            len: SEGMENT_HEADER_LEN as u64,
        })
    }

    /// Indexes the whole records of `seg` from `seg.len` on.
    fn scan(seg: &mut Segment) -> Result<Tail, JournalError> {
        // a chunk always holds at least one whole record
        const CHUNK: u64 = 2 * (MAX_MESSAGE_LEN + RECORD_HEADER_LEN) as u64;
        let size = seg.file.metadata().map_err(io_err(&seg.path))?.len();
        let mut buf = Vec::new();
        loop {
            let pos = seg.len;
            if pos >= size {
                return Ok(Tail::Clean);
            }
            let want = (size - pos).min(CHUNK);
            buf.resize(want as usize, 0);
            seg.file
                .read_exact_at(&mut buf, pos)
                .map_err(io_err(&seg.path))?;
            let mut at = 0;
            loop {
                match decode_record(&buf[at..]) {
                    Ok((r, n)) => {
                        if r.sequence != seg.next_seq() {
                            return Ok(Tail::Torn(
                                pos + at as u64,
                                format!(
                                    "sequence {} where {} was expected",
                                    r.sequence,
                                    seg.next_seq()
                                ),
                            ));
                        }
                        if pos + at as u64 > u32::MAX as u64 {
                            return Err(JournalError::Corrupt {
                                path: seg.path.clone(),
                                offset: pos + at as u64,
                                reason: "segment larger than 4 GiB".into(),
                            });
                        }
                        seg.offsets.push((pos + at as u64) as u32);
                        at += n;
                        seg.len = pos + at as u64;
                    }
                    Err(RecordError::Incomplete) => break,
                    Err(RecordError::Invalid(reason)) => {
                        return Ok(Tail::Torn(pos + at as u64, reason));
                    }
                }
            }
            if at == 0 {
                // the chunk reaches the end of the file and holds no whole record
                return Ok(Tail::Torn(pos, "incomplete record".into()));
            }
        }
    }

    fn next_seq(&self) -> u64 {
        self.segments.last().map_or(1, Segment::next_seq)
    }

    fn read(
        &self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, JournalError> {
        if from == 0 || from >= self.next_seq() {
            return Ok(0);
        }
        let mut si = self.segments.partition_point(|s| s.first_seq <= from) - 1;
        let mut seq = from;
        let mut n = 0;
        let mut buf = Vec::new();
        while n < max && si < self.segments.len() {
            let seg = &self.segments[si];
            if seq >= seg.next_seq() {
                si += 1;
                continue;
            }
            let idx = (seq - seg.first_seq) as usize;
            let start = seg.offsets[idx] as u64;
            let last_idx = idx.saturating_add(max - n).min(seg.offsets.len());
            let end = if last_idx == seg.offsets.len() {
                seg.len
            } else {
                seg.offsets[last_idx] as u64
            };
            // read at most about 4 MiB at once, ending on a record boundary (and holding at
            // least one whole record)
            let cap = start + READ_CHUNK;
            let chunk_end = if end <= cap {
                end
            } else {
                let k = seg.offsets[idx + 1..last_idx].partition_point(|&o| o as u64 <= cap);
                if k == 0 {
                    seg.offsets.get(idx + 1).map_or(seg.len, |&o| o as u64)
                } else {
                    seg.offsets[idx + k] as u64
                }
            };
            buf.resize((chunk_end - start) as usize, 0);
            seg.file
                .read_exact_at(&mut buf, start)
                .map_err(io_err(&seg.path))?;
            let mut at = 0;
            while at < buf.len() && n < max {
                let (r, len) = decode_record(&buf[at..]).map_err(|e| JournalError::Corrupt {
                    path: seg.path.clone(),
                    offset: start + at as u64,
                    reason: format!("{e:?}"),
                })?;
                if r.sequence != seq {
                    return Err(JournalError::Corrupt {
                        path: seg.path.clone(),
                        offset: start + at as u64,
                        reason: format!("sequence {} where {seq} was expected", r.sequence),
                    });
                }
                n += 1;
                seq += 1;
                at += len;
                if !f(r.sequence, r.message) {
                    return Ok(n);
                }
            }
        }
        Ok(n)
    }
}

/// Counts of what opening a journal found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub records: u64,
    /// Bytes cut off the end of the last segment (a torn write).
    pub truncated_bytes: u64,
}

/// The single writer of a journal.
#[derive(Debug)]
pub struct Journal {
    index: Index,
    segment_size: u64,
    /// Records appended but not yet written.
    buf: Vec<u8>,
    report: RecoveryReport,
}

impl Journal {
    /// Opens (creating if needed) the journal of `session` in `dir`, recovering from a torn
    /// tail. Fails if the directory belongs to another session or a non-final segment is
    /// corrupt.
    pub fn open(dir: &Path, session: [u8; 10], segment_size: u64) -> Result<Journal, JournalError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut index = Index {
            dir: dir.to_path_buf(),
            session,
            segments: Vec::new(),
        };
        let listed = Index::list(dir)?;
        let mut report = RecoveryReport::default();
        let last = listed.len().saturating_sub(1);
        for (i, (first, path)) in listed.iter().enumerate() {
            if let Some(prev) = index.segments.last() {
                if prev.next_seq() != *first {
                    return Err(JournalError::Corrupt {
                        path: path.clone(),
                        offset: 0,
                        reason: format!("segment starts at {first}, previous ends before {}", prev.next_seq()),
                    });
                }
            }
            let mut seg = index.open_segment(path, *first, i == last)?;
            match Index::scan(&mut seg)? {
                Tail::Clean => {}
                Tail::Torn(offset, reason) if i == last => {
                    let size = seg.file.metadata().map_err(io_err(path))?.len();
                    report.truncated_bytes = size - offset;
                    seg.file.set_len(offset).map_err(io_err(path))?;
                    seg.file.sync_all().map_err(io_err(path))?;
                    let _ = reason;
                }
                Tail::Torn(offset, reason) => {
                    return Err(JournalError::Corrupt {
                        path: path.clone(),
                        offset,
                        reason,
                    })
                }
            }
            report.records += seg.offsets.len() as u64;
            index.segments.push(seg);
        }
        report.segments = index.segments.len();
        let mut j = Journal {
            index,
            segment_size,
            buf: Vec::with_capacity(1 << 20),
            report,
        };
        if j.index.segments.is_empty() {
            j.new_segment(1)?;
        }
        Ok(j)
    }

    /// What recovery found.
    pub fn recovery(&self) -> RecoveryReport {
        self.report
    }

    fn new_segment(&mut self, first_seq: u64) -> Result<(), JournalError> {
        let path = segment_path(&self.index.dir, first_seq);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err(&path))?;
        file.write_all(&segment_header(&self.index.session, first_seq))
            .map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
        File::open(&self.index.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.index.dir))?;
        self.index.segments.push(Segment {
            path,
            file,
            first_seq,
            offsets: Vec::new(),
            len: SEGMENT_HEADER_LEN as u64,
        });
        Ok(())
    }

    /// Sequence number the next appended message must have.
    pub fn next_seq(&self) -> u64 {
        self.index.next_seq()
    }

    /// Buffers a message; `sequence` must be [`Journal::next_seq`].
    pub fn append(&mut self, sequence: u64, message: &[u8]) -> Result<(), JournalError> {
        assert_eq!(sequence, self.next_seq(), "journal appends in sequence order");
        assert!(message.len() <= MAX_MESSAGE_LEN);
        let rec_len = (RECORD_HEADER_LEN + message.len()) as u64;
        let seg = self.index.segments.last().expect("a segment");
        let pos = seg.len + self.buf.len() as u64;
        if pos + rec_len > self.segment_size && !seg.offsets.is_empty() {
            self.flush()?;
            let seg = self.index.segments.last().expect("a segment");
            seg.file.sync_data().map_err(io_err(&seg.path))?;
            self.new_segment(sequence)?;
            return self.append(sequence, message);
        }
        let seg = self.index.segments.last_mut().expect("a segment");
        seg.offsets.push(pos as u32);
        encode_record(&mut self.buf, sequence, message);
        Ok(())
    }

    /// Writes the buffered records to the file (one `write`): they now survive a crash of
    /// this process.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let seg = self.index.segments.last_mut().expect("a segment");
        seg.file
            .write_all_at(&self.buf, seg.len)
            .map_err(io_err(&seg.path))?;
        seg.len += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// `fdatasync`s the current segment: written records now survive a crash of the machine.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        let seg = self.index.segments.last().expect("a segment");
        seg.file.sync_data().map_err(io_err(&seg.path))
    }

    /// Calls `f(seq, message)` for appended messages from `from` on (flushing first; see
    /// [`Store::read`]).
    pub fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, JournalError> {
        self.flush()?;
        self.index.read(from, max, f)
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        &self.index.dir
    }
}

/// Follows a journal written by a [`Journal`] elsewhere (another thread or process).
#[derive(Debug)]
pub struct JournalReader {
    index: Index,
}

impl JournalReader {
    /// Opens the journal of `session` in `dir` read-only (the directory must exist).
    pub fn open(dir: &Path, session: [u8; 10]) -> Result<JournalReader, JournalError> {
        if !dir.is_dir() {
            return Err(JournalError::Io {
                path: dir.to_path_buf(),
                source: io::Error::new(io::ErrorKind::NotFound, "journal directory not found"),
            });
        }
        let mut r = JournalReader {
            index: Index {
                dir: dir.to_path_buf(),
                session,
                segments: Vec::new(),
            },
        };
        r.refresh()?;
        Ok(r)
    }

    /// Picks up records and segments written since the last call.
    pub fn refresh(&mut self) -> Result<(), JournalError> {
        if let Some(seg) = self.index.segments.last_mut() {
            // an incomplete tail is a record being written: look again next time
            Index::scan(seg)?;
        }
        let next = self.index.next_seq();
        let known = self.index.segments.last().map(|s| s.first_seq);
        for (first, path) in Index::list(&self.index.dir)? {
            if known.is_some_and(|k| first <= k) {
                continue;
            }
            if first != next {
                break; // written later, once the current segment is complete
            }
            let mut seg = self.index.open_segment(&path, first, false)?;
            Index::scan(&mut seg)?;
            self.index.segments.push(seg);
        }
        Ok(())
    }

    pub fn next_seq(&self) -> u64 {
        self.index.next_seq()
    }

    /// Calls `f(seq, message)` for messages from `from` on (see [`Store::read`]).
    pub fn read(
        &self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, JournalError> {
        self.index.read(from, max, f)
    }
}

impl Store for JournalReader {
    fn next_seq(&mut self) -> u64 {
        if let Err(e) = self.refresh() {
            // reported on the next read
            let _ = e;
        }
        self.index.next_seq()
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        self.index
            .read(from, max, f)
            .map_err(|e| StoreError(e.to_string()))
    }
}

impl Store for Journal {
    fn next_seq(&mut self) -> u64 {
        self.index.next_seq()
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        Journal::read(self, from, max, f).map_err(|e| StoreError(e.to_string()))
    }
}

//! seqbus-journal: the sequencer's append-only journal (format: `docs/journal.md`).
//!
//! A journal is a directory of segment files `<first sequence, 20 digits>.seg`. Each starts
//! with a 32-byte header (`"SEQBUSJ2"`, session, a CRC-32C of the header, first sequence;
//! segments of the first format, `"SEQBUSJ1"` without the CRC, are still read) followed by records
//! `length u32 | crc32c u32 | sequence u64 | message[length]` (little-endian; the CRC-32C
//! covers the sequence bytes and the message). An in-memory index maps each sequence number
//! to its record's offset.
//!
//! [`Journal`] is the single writer: [`Journal::append`] buffers, [`Journal::flush`] puts the
//! buffer into the file — up to 4 KiB copied into a shared mapping of a file grown ahead, more
//! with one `pwrite` — (after it the records survive a crash of the process), and
//! [`Journal::sync`] calls `fdatasync` (after it they survive a crash of the machine). On
//! open it recovers from a torn tail by truncating the last segment after its last whole,
//! checksum-valid record. [`JournalReader`] follows a journal another process (or thread)
//! writes, for replayers.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use seqbus_core::{Store, StoreError};

mod sigbus;
pub mod syncer;

/// The magic of the segments written now: the header carries a CRC-32C (format 2).
const MAGIC: &[u8; 8] = b"SEQBUSJ2";
/// The magic of format 1, still read: the same header without a checksum.
const MAGIC_V1: &[u8; 8] = b"SEQBUSJ1";
/// Where a format-2 header keeps its CRC-32C, which covers the other 28 bytes.
const HEADER_CRC_AT: usize = 20;
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
    #[error(
        "journal {path}: written by another process{}: a journal has one writer (is a \
         sequencer of the same configuration running?)",
        holder.map_or(String::new(), |p| format!(" (pid {p})"))
    )]
    InUse { path: PathBuf, holder: Option<u32> },
    /// A cluster member's vote record is missing or older than its own journal: Raft's
    /// persistent state was lost, and a member that forgot its vote could vote twice in one
    /// term (docs/ha.md, "The vote record").
    #[error(
        "cluster member's vote record {path}: {}, but the journal holds entries of term \
         {journal_term}: Raft's persistent state was lost, and a member that forgot its vote \
         could vote twice in one term; restore the file from a backup, or move this member's \
         journal directory aside so that it rejoins empty and catches up from the leader \
         (docs/ha.md, \"The vote record\")",
        recorded.map_or("is missing".to_string(), |t| format!("says term {t}"))
    )]
    VoteLost {
        path: PathBuf,
        /// The term the file records (None: there is no file).
        recorded: Option<u64>,
        journal_term: u64,
    },
}

/// The writer's hold on a journal directory: an exclusive `flock` of `DIR/lock`, which holds
/// the writer's pid; the kernel lets go when the process ends, however it ends.
#[derive(Debug)]
struct DirLock {
    _file: File,
}

impl DirLock {
    fn take(dir: &Path) -> Result<DirLock, JournalError> {
        let path = dir.join("lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        // SAFETY: flock on an fd this function owns.
        let r = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(JournalError::InUse {
                    path: dir.to_path_buf(),
                    holder: text.trim().parse().ok(),
                });
            }
            return Err(JournalError::Io { path, source: e });
        }
        file.set_len(0).map_err(io_err(&path))?;
        file.write_all_at(std::process::id().to_string().as_bytes(), 0)
            .map_err(io_err(&path))?;
        Ok(DirLock { _file: file })
    }
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

/// Encodes a record (the archive's segments hold the same records).
#[inline]
pub fn encode_record(out: &mut Vec<u8>, sequence: u64, message: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&(message.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(message);
    // the checksum covers the sequence and the message, now back to back: one pass (two calls
    // cost a third of the sequencer's checksum time on short messages)
    let crc = crc32c::crc32c(&out[start + 8..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the front of `buf`; returns it and its total length.
#[inline]
pub fn decode_record(buf: &[u8]) -> Result<(Record<'_>, usize), RecordError> {
    if buf.len() < RECORD_HEADER_LEN {
        return Err(RecordError::Incomplete);
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4")) as usize;
    if len > MAX_MESSAGE_LEN {
        return Err(RecordError::Invalid(format!(
            "record length {len} too large"
        )));
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
    let crc = header_crc(&h);
    h[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The CRC-32C of a header's bytes other than the CRC's own four.
fn header_crc(h: &[u8; SEGMENT_HEADER_LEN]) -> u32 {
    let crc = crc32c::crc32c(&h[..HEADER_CRC_AT]);
    crc32c::crc32c_append(crc, &h[HEADER_CRC_AT + 4..])
}

/// A segment header, checked: its session and first sequence, or where and why it is
/// damaged (offset in the file, reason). Format 1 headers have no checksum and are taken
/// as they read.
pub fn check_segment_header(
    h: &[u8; SEGMENT_HEADER_LEN],
) -> Result<([u8; 10], u64), (u64, String)> {
    if &h[..8] == MAGIC {
        let stored = u32::from_le_bytes(h[HEADER_CRC_AT..HEADER_CRC_AT + 4].try_into().expect("4"));
        if stored != header_crc(h) {
            return Err((
                HEADER_CRC_AT as u64,
                "segment header: checksum does not match (the header is damaged)".into(),
            ));
        }
    } else if &h[..8] != MAGIC_V1 {
        return Err((0, "not a seqbus journal segment (bad magic)".into()));
    }
    let session = h[8..18].try_into().expect("10");
    Ok((
        session,
        u64::from_le_bytes(h[24..32].try_into().expect("8")),
    ))
}

/// The session of the journal in `dir`, from its segments' headers: the one every header
/// whose checksum holds names (a damaged header is skipped: it is damage for `verify` and
/// `repair` to report, not the journal's session). Headers of format 1 have no checksum;
/// among those the session most of them name is taken. An error names the directory when no
/// segment's header can be read, or when sound headers name different sessions.
pub fn journal_session(dir: &Path) -> Result<[u8; 10], JournalError> {
    let mut checked: Vec<([u8; 10], PathBuf)> = Vec::new();
    let mut unchecked: Vec<[u8; 10]> = Vec::new();
    let mut damaged: Option<JournalError> = None;
    for (_, path) in Index::list(dir)? {
        let mut h = [0u8; SEGMENT_HEADER_LEN];
        let read = File::open(&path).and_then(|mut f| f.read_exact(&mut h));
        if read.is_err() {
            continue; // shorter than a header: never written, or damage verify reports
        }
        match check_segment_header(&h) {
            Ok((session, _)) if &h[..8] == MAGIC => checked.push((session, path)),
            Ok((session, _)) => unchecked.push(session),
            Err((offset, reason)) => {
                damaged.get_or_insert(JournalError::Corrupt {
                    path,
                    offset,
                    reason,
                });
            }
        }
    }
    if let Some((first, first_path)) = checked.first() {
        if let Some((other, path)) = checked.iter().find(|(s, _)| s != first) {
            return Err(JournalError::Corrupt {
                path: path.clone(),
                offset: 8,
                reason: format!(
                    "segment header names session {:?}, {} names {:?}",
                    String::from_utf8_lossy(other).trim_end(),
                    first_path.display(),
                    String::from_utf8_lossy(first).trim_end()
                ),
            });
        }
        return Ok(*first);
    }
    let mut best: Option<([u8; 10], usize)> = None;
    for s in &unchecked {
        let n = unchecked.iter().filter(|t| *t == s).count();
        if !matches!(best, Some((_, m)) if m >= n) {
            best = Some((*s, n));
        }
    }
    match (best, damaged) {
        (Some((s, _)), _) => Ok(s),
        (None, Some(damage)) => Err(damage),
        (None, None) => Err(JournalError::Io {
            path: dir.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::NotFound,
                "no journal segment (*.seg) in the directory",
            ),
        }),
    }
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
    /// Bytes after the last whole record that do not form one, with no valid record after
    /// them: (offset, reason). At the end of the last segment this is a write cut short.
    Torn(u64, String),
    /// A bad record with a valid one after it: (offset, reason, later offset, later
    /// sequence). Never a torn write: the journal is damaged.
    Corrupt(u64, String, u64, u64),
}

/// The first offset after `from` where a whole, checksum-valid record of a sequence above
/// `after` starts: proof that bytes at `from` are damage, not a write cut short. A candidate's
/// sequence must be plausible (above `after`, and no further on than one record per 16 bytes
/// could reach) before its checksum is computed, so a scan of a large segment stays cheap.
fn valid_record_after(
    file: &File,
    path: &Path,
    from: u64,
    size: u64,
    after: u64,
) -> Result<Option<(u64, u64)>, JournalError> {
    const CHUNK: usize = 8 << 20;
    let overlap = (MAX_MESSAGE_LEN + RECORD_HEADER_LEN) as u64;
    let mut base = from + 1;
    let mut buf = Vec::new();
    while base + RECORD_HEADER_LEN as u64 <= size {
        let want = ((size - base) as usize).min(CHUNK + overlap as usize);
        buf.resize(want, 0);
        match file.read_exact_at(&mut buf, base) {
            Ok(()) => {}
            // the writer cut the zero reserve past its end: nothing was after it
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(io_err(path)(e)),
        }
        let scan_to = if base + (want as u64) < size {
            CHUNK
        } else {
            want
        };
        let max_seq = after + 1 + (size - from) / RECORD_HEADER_LEN as u64;
        for at in 0..scan_to.min(want.saturating_sub(RECORD_HEADER_LEN - 1)) {
            let b = &buf[at..];
            let seq = u64::from_le_bytes(b[8..16].try_into().expect("8"));
            if seq <= after || seq > max_seq {
                continue;
            }
            if let Ok((r, _)) = decode_record(b) {
                return Ok(Some((base + at as u64, r.sequence)));
            }
        }
        if scan_to == want {
            break;
        }
        base += CHUNK as u64;
    }
    Ok(None)
}

/// True when every byte is zero.
fn is_zero(b: &[u8]) -> bool {
    let words = b.chunks_exact(8);
    let rest = words.remainder();
    words
        .map(|w| u64::from_ne_bytes(w.try_into().expect("8")))
        .all(|w| w == 0)
        && rest.iter().all(|&x| x == 0)
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
        // the checksum first: a damaged session field is damage, not another session
        let (session, hdr_first) =
            check_segment_header(&h).map_err(|(offset, reason)| JournalError::Corrupt {
                path: path.to_path_buf(),
                offset,
                reason,
            })?;
        if session != self.session {
            return Err(JournalError::SessionMismatch {
                path: path.to_path_buf(),
                found: String::from_utf8_lossy(&session).trim_end().to_string(),
                expected: String::from_utf8_lossy(&self.session)
                    .trim_end()
                    .to_string(),
            });
        }
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

    /// Indexes the whole records of `seg` from `seg.len` on, and tells a torn tail (nothing
    /// valid after the first bad byte) from damage (a valid record further on).
    fn scan(seg: &mut Segment) -> Result<Tail, JournalError> {
        match Index::scan_records(seg)? {
            (Tail::Torn(offset, reason), size) => {
                // the size the records were read against, not the file's size now: a writer
                // that extends the file while it is scanned must not make a record that was
                // incomplete at `size` look like damage with a whole record after it
                let last = seg.next_seq() - 1;
                match valid_record_after(&seg.file, &seg.path, offset, size, last)? {
                    Some((later, seq)) => Ok(Tail::Corrupt(offset, reason, later, seq)),
                    None => Ok(Tail::Torn(offset, reason)),
                }
            }
            (t, _) => Ok(t),
        }
    }

    /// Indexes the whole records from `seg.len` on, up to the file's size when called (also
    /// returned).
    fn scan_records(seg: &mut Segment) -> Result<(Tail, u64), JournalError> {
        // a chunk always holds at least one whole record
        const CHUNK: u64 = 2 * (MAX_MESSAGE_LEN + RECORD_HEADER_LEN) as u64;
        let mut size = seg.file.metadata().map_err(io_err(&seg.path))?.len();
        let mut buf = Vec::new();
        loop {
            let pos = seg.len;
            if pos >= size {
                return Ok((Tail::Clean, size));
            }
            let want = (size - pos).min(CHUNK);
            buf.resize(want as usize, 0);
            match seg.file.read_exact_at(&mut buf, pos) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    // the writer cut the zero reserve past its end meanwhile: look again
                    size = seg.file.metadata().map_err(io_err(&seg.path))?.len();
                    continue;
                }
                Err(e) => return Err(io_err(&seg.path)(e)),
            }
            let mut at = 0;
            loop {
                match decode_record(&buf[at..]) {
                    Ok((r, n)) => {
                        if r.sequence != seg.next_seq() {
                            return Ok((
                                Tail::Torn(
                                    pos + at as u64,
                                    format!(
                                        "sequence {} where {} was expected",
                                        r.sequence,
                                        seg.next_seq()
                                    ),
                                ),
                                size,
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
                    Err(_) if pos + buf.len() as u64 == size && is_zero(&buf[at..]) => {
                        // the writer's reserve past its end (it grows the file ahead of what
                        // it writes and cuts the rest when it closes the segment): the end
                        return Ok((Tail::Clean, size));
                    }
                    Err(RecordError::Incomplete) => break,
                    Err(RecordError::Invalid(reason)) => {
                        return Ok((Tail::Torn(pos + at as u64, reason), size));
                    }
                }
            }
            if at == 0 {
                // the chunk reaches the end of the file and holds no whole record
                return Ok((Tail::Torn(pos, "incomplete record".into()), size));
            }
        }
    }

    /// [`Index::scan`] for a reader following a writer: a page written after the one before
    /// it can be read first, so a record still being written may look damaged with a whole
    /// record after it; damage counts only when a second read, after the writer finished the
    /// earlier page, shows it again.
    fn follow(seg: &mut Segment) -> Result<Option<u64>, JournalError> {
        let start = (seg.len, seg.offsets.len());
        match Index::scan(seg)? {
            Tail::Corrupt(..) => {
                seg.len = start.0;
                seg.offsets.truncate(start.1);
                match Index::scan(seg)? {
                    Tail::Corrupt(offset, reason, later, seq) => Err(JournalError::Corrupt {
                        path: seg.path.clone(),
                        offset,
                        reason: format!(
                            "{reason}; a valid record (sequence {seq}) follows at offset {later}: \
                             damage, not a torn write"
                        ),
                    }),
                    Tail::Torn(offset, _) => Ok(Some(offset)),
                    Tail::Clean => Ok(None),
                }
            }
            Tail::Torn(offset, _) => Ok(Some(offset)),
            Tail::Clean => Ok(None),
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

/// What opening a journal found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub records: u64,
    /// Bytes cut off the end of the last segment (a torn write).
    pub truncated_bytes: u64,
    /// Where the torn tail was cut: (file, offset, what was found there).
    pub truncated_at: Option<(PathBuf, u64, String)>,
    /// A last segment shorter than its header (created when the process died), moved aside.
    pub torn_segment: Option<PathBuf>,
    /// Zero bytes past the last record of the last segment, cut: space a writer that did not
    /// close had reserved for its next records (no record was lost).
    pub reserved_bytes: u64,
}

/// The single writer of a journal.
#[derive(Debug)]
pub struct Journal {
    index: Index,
    segment_size: u64,
    /// Records appended but not yet written.
    buf: Vec<u8>,
    report: RecoveryReport,
    /// The last segment, mapped for small batches once one came.
    map: Option<Mapping>,
    /// Held while the journal is open: a second writer is refused before it touches a file.
    _lock: DirLock,
}

/// A shared mapping of the last segment: `cap` bytes of the file exist (the zero tail past the
/// written end is cut when the segment is left or the journal closed).
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
    cap: u64,
    /// A SIGBUS in the mapping (the file cut short by someone else) names the segment.
    _watch: Option<sigbus::Watch>,
}

// SAFETY: the mapping is owned by the single writer; no aliasing pointers escape.
unsafe impl Send for Mapping {}

/// Batches up to this many bytes are copied into the mapping, larger ones written.
const SMALL_WRITE: usize = 4096;
/// How far ahead of the written end the file is grown for the mapping.
const GROW_AHEAD: u64 = 64 << 10;

impl Journal {
    /// Opens (creating if needed) the journal of `session` in `dir`, recovering from a torn
    /// tail. Fails if the directory belongs to another session or a non-final segment is
    /// corrupt.
    pub fn open(dir: &Path, session: [u8; 10], segment_size: u64) -> Result<Journal, JournalError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let lock = DirLock::take(dir)?;
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
                        reason: format!(
                            "segment starts at {first}, previous ends before {}",
                            prev.next_seq()
                        ),
                    });
                }
            }
            if i == last
                && fs::metadata(path).map_err(io_err(path))?.len() < SEGMENT_HEADER_LEN as u64
            {
                // a segment whose header was being written when the process died holds no
                // record: kept aside, and the journal goes on from the previous one
                let aside = path.with_extension("seg.torn");
                fs::rename(path, &aside).map_err(io_err(path))?;
                report.torn_segment = Some(aside);
                continue;
            }
            let mut seg = index.open_segment(path, *first, i == last)?;
            match Index::scan(&mut seg)? {
                Tail::Clean => {
                    let size = seg.file.metadata().map_err(io_err(path))?.len();
                    if size > seg.len && i == last {
                        // zeros the writer had reserved past its end (it did not close)
                        report.reserved_bytes = size - seg.len;
                        seg.file.set_len(seg.len).map_err(io_err(path))?;
                        seg.file.sync_all().map_err(io_err(path))?;
                    }
                }
                Tail::Torn(offset, reason) if i == last => {
                    let size = seg.file.metadata().map_err(io_err(path))?.len();
                    report.truncated_bytes = size - offset;
                    report.truncated_at = Some((path.clone(), offset, reason));
                    seg.file.set_len(offset).map_err(io_err(path))?;
                    seg.file.sync_all().map_err(io_err(path))?;
                }
                Tail::Torn(offset, reason) => {
                    return Err(JournalError::Corrupt {
                        path: path.clone(),
                        offset,
                        reason: format!("{reason}, in a segment that is not the last"),
                    })
                }
                Tail::Corrupt(offset, reason, later, seq) => {
                    return Err(JournalError::Corrupt {
                        path: path.clone(),
                        offset,
                        reason: format!(
                            "{reason}; a valid record (sequence {seq}) follows at offset \
                             {later}: damage, not a torn write (repair it from a peer's copy: \
                             seqbus journal repair)"
                        ),
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
            map: None,
            _lock: lock,
        };
        if j.index.segments.is_empty() {
            j.new_segment(1)?;
        }
        Ok(j)
    }

    /// What recovery found.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    fn new_segment(&mut self, first_seq: u64) -> Result<(), JournalError> {
        let path = segment_path(&self.index.dir, first_seq);
        // the segment appears with its header, never without: written under a name no reader
        // lists, then linked under its own (which fails if a segment already has it, so none
        // is ever replaced). A following reader that found the file before its header was
        // written took it for damage, and stopped its process.
        let new = self.index.dir.join(format!(".{first_seq:020}.seg.new"));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&new)
            .map_err(io_err(&new))?;
        file.write_all(&segment_header(&self.index.session, first_seq))
            .map_err(io_err(&new))?;
        file.sync_all().map_err(io_err(&new))?;
        fs::hard_link(&new, &path).map_err(io_err(&path))?;
        fs::remove_file(&new).map_err(io_err(&new))?;
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
        assert_eq!(
            sequence,
            self.next_seq(),
            "journal appends in sequence order"
        );
        assert!(message.len() <= MAX_MESSAGE_LEN);
        let rec_len = (RECORD_HEADER_LEN + message.len()) as u64;
        let seg = self.index.segments.last().expect("a segment");
        let pos = seg.len + self.buf.len() as u64;
        if pos + rec_len > self.segment_size && !seg.offsets.is_empty() {
            self.flush()?;
            self.unmap()?;
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

    /// Puts the buffered records into the file — a small batch copied into the mapped
    /// segment, a large one with one `pwrite` —: they now survive a crash of this process.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.buf.len() <= SMALL_WRITE && self.copy_into_map()? {
            let seg = self.index.segments.last_mut().expect("a segment");
            seg.len += self.buf.len() as u64;
            self.buf.clear();
            return Ok(());
        }
        let seg = self.index.segments.last_mut().expect("a segment");
        seg.file
            .write_all_at(&self.buf, seg.len)
            .map_err(io_err(&seg.path))?;
        seg.len += self.buf.len() as u64;
        if let Some(m) = &mut self.map {
            m.cap = m.cap.max(seg.len);
        }
        self.buf.clear();
        Ok(())
    }

    /// Copies the buffer into the mapped segment at its end, growing the file ahead first
    /// when needed; false when it cannot (the caller writes instead).
    fn copy_into_map(&mut self) -> Result<bool, JournalError> {
        let seg = self.index.segments.last().expect("a segment");
        let end = seg.len + self.buf.len() as u64;
        if self.map.is_none() {
            let len = (self.segment_size as usize + MAX_MESSAGE_LEN + RECORD_HEADER_LEN)
                .next_multiple_of(1 << 21);
            // SAFETY: a shared mapping of the segment's fd; only [0, cap) is ever touched.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    std::os::fd::AsRawFd::as_raw_fd(&seg.file),
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return Ok(false);
            }
            let cap = seg.file.metadata().map_err(io_err(&seg.path))?.len();
            self.map = Some(Mapping {
                ptr: ptr.cast(),
                len,
                cap,
                _watch: sigbus::watch(ptr.cast(), len, &seg.path),
            });
        }
        let m = self.map.as_mut().expect("mapped");
        if end as usize > m.len {
            return Ok(false);
        }
        if end > m.cap {
            let want = (end + GROW_AHEAD).min(m.len as u64);
            // SAFETY: fallocate on the segment's fd.
            let r = unsafe {
                libc::fallocate(
                    std::os::fd::AsRawFd::as_raw_fd(&seg.file),
                    0,
                    m.cap as libc::off_t,
                    (want - m.cap) as libc::off_t,
                )
            };
            if r != 0 {
                return Ok(false);
            }
            m.cap = want;
        }
        // Record by record, in order, each copy made visible before the next begins: a reader
        // (another thread or process) that sees any byte of a record sees every record before
        // it whole, so a record being copied is never followed by a valid one — which would
        // read as damage (one copy of the batch may store its first bytes last).
        let mut at = 0;
        while at < self.buf.len() {
            let len = u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4")) as usize;
            let rec = &self.buf[at..at + RECORD_HEADER_LEN + len];
            // SAFETY: [seg.len + at, seg.len + at + rec.len()) lies inside [seg.len, end), which
            // lies inside both the mapping and the file.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    rec.as_ptr(),
                    m.ptr.add(seg.len as usize + at),
                    rec.len(),
                );
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            at += rec.len();
        }
        Ok(true)
    }

    /// Cuts the zero tail the mapping grew the file by and unmaps it.
    fn unmap(&mut self) -> Result<(), JournalError> {
        if let Some(m) = self.map.take() {
            // SAFETY: the mapping made in copy_into_map.
            unsafe { libc::munmap(m.ptr.cast(), m.len) };
            let seg = self.index.segments.last().expect("a segment");
            if m.cap > seg.len {
                seg.file.set_len(seg.len).map_err(io_err(&seg.path))?;
            }
        }
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

    /// The segment being written, and its file (for a [`syncer::Syncer`]).
    pub fn current_segment(&self) -> (&Path, &File) {
        let seg = self.index.segments.last().expect("a segment");
        (&seg.path, &seg.file)
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        &self.index.dir
    }

    /// Removes the messages from `sequence` on from the journal WITHOUT destroying them: they
    /// are moved to `discarded/` in the journal directory (a segment file of their own, named
    /// after their first sequence and the time), and the journal continues at `sequence`.
    /// For messages that were never published (a replica's suffix that the cluster's new
    /// leader does not hold, docs/ha.md); returns the path they were moved to, if any.
    pub fn discard_from(&mut self, sequence: u64) -> Result<Option<PathBuf>, JournalError> {
        self.flush()?;
        self.unmap()?;
        if sequence >= self.next_seq() {
            return Ok(None);
        }
        let aside_dir = self.index.dir.join("discarded");
        fs::create_dir_all(&aside_dir).map_err(io_err(&aside_dir))?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let aside = aside_dir.join(format!("{sequence:020}-{stamp}.seg"));
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&aside)
            .map_err(io_err(&aside))?;
        out.write_all(&segment_header(&self.index.session, sequence))
            .map_err(io_err(&aside))?;
        let mut rec = Vec::new();
        self.index.read(sequence, usize::MAX, &mut |q, m| {
            encode_record(&mut rec, q, m);
            true
        })?;
        out.write_all(&rec).map_err(io_err(&aside))?;
        out.sync_all().map_err(io_err(&aside))?;
        // whole segments after the cut go; the one holding it is cut at the record
        while let Some(seg) = self.index.segments.last() {
            if seg.first_seq < sequence
                || (seg.first_seq == sequence && self.index.segments.len() == 1)
            {
                break;
            }
            let seg = self.index.segments.pop().expect("present");
            fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
        }
        if self.index.segments.is_empty() {
            self.new_segment(sequence)?;
        }
        let seg = self.index.segments.last_mut().expect("a segment");
        // earlier segments were opened read-only: the one now last is written from here on
        seg.file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&seg.path)
            .map_err(io_err(&seg.path))?;
        if sequence < seg.next_seq() {
            let idx = (sequence - seg.first_seq) as usize;
            let cut = seg.offsets[idx] as u64;
            seg.file.set_len(cut).map_err(io_err(&seg.path))?;
            seg.file.sync_all().map_err(io_err(&seg.path))?;
            seg.offsets.truncate(idx);
            seg.len = cut;
        }
        File::open(&self.index.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.index.dir))?;
        Ok(Some(aside))
    }
}

impl Drop for Journal {
    /// Cuts the zero tail of the mapped segment (what was never flushed stays unwritten, as
    /// before there was a mapping).
    fn drop(&mut self) {
        let _ = self.unmap();
    }
}

/// What [`repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Segment files rewritten from the peer's copy: (file, first damaged offset).
    pub rewritten: Vec<(PathBuf, u64)>,
    /// Where each damaged file was kept (`<name>.damaged`).
    pub kept: Vec<PathBuf>,
    /// Messages restored (the damaged segments' messages, all taken from the peer).
    pub messages: u64,
}

/// The first damage of one segment file: (offset, reason), or None for a clean one (a torn
/// tail counts as clean: opening the journal cuts it).
fn damage_of(
    index: &Index,
    path: &Path,
    first: u64,
    last_segment: bool,
) -> Result<Option<(u64, String)>, JournalError> {
    let mut seg = match index.open_segment(path, first, false) {
        Ok(seg) => seg,
        Err(JournalError::Corrupt { offset, reason, .. }) => return Ok(Some((offset, reason))),
        // a header of format 1 (no checksum) naming another session than the journal's
        // other segments is damage to the header, which the peer's copy restores
        Err(JournalError::SessionMismatch {
            found, expected, ..
        }) => {
            return Ok(Some((
                8,
                format!("segment header names session {found:?}, the journal's is {expected:?}"),
            )))
        }
        Err(e) => return Err(e),
    };
    Ok(match Index::scan(&mut seg)? {
        Tail::Clean => None,
        Tail::Torn(..) if last_segment => None,
        Tail::Torn(offset, reason) | Tail::Corrupt(offset, reason, ..) => Some((offset, reason)),
    })
}

/// Repairs the journal in `dir` from a peer's copy of the same session (another sequencer's
/// journal, or a replayer's): every damaged segment is rewritten whole, record by record,
/// from the peer's messages of the same sequences, and the damaged file is kept beside it as
/// `<name>.damaged`. A message the damaged segment still holds intact must equal the peer's
/// byte for byte, or nothing is changed and the disagreement is the error (the peer is then
/// not a copy of this journal). The damaged range of a segment runs from its first sequence to
/// the next segment's (for the last segment: to its last valid record).
pub fn repair(dir: &Path, session: [u8; 10], peer: &Path) -> Result<RepairReport, JournalError> {
    let _lock = DirLock::take(dir)?; // not while a writer has it open
    let peer = JournalReader::open_at_rest(peer, session)?;
    let index = Index {
        dir: dir.to_path_buf(),
        session,
        segments: Vec::new(),
    };
    let listed = Index::list(dir)?;
    let mut report = RepairReport::default();
    for (i, (first, path)) in listed.iter().enumerate() {
        let last_segment = i + 1 == listed.len();
        let Some((bad, _reason)) = damage_of(&index, path, *first, last_segment)? else {
            continue;
        };
        // the sequences this segment must hold
        let end = match listed.get(i + 1) {
            Some((next, _)) => *next,
            None => {
                let f = File::open(path).map_err(io_err(path))?;
                let size = f.metadata().map_err(io_err(path))?.len();
                let mut last = *first - 1;
                let mut from = SEGMENT_HEADER_LEN as u64 - 1;
                while let Some((at, seq)) = valid_record_after(&f, path, from, size, last)? {
                    last = seq;
                    from = at;
                }
                last + 1
            }
        };
        if end > peer.next_seq() || *first < peer.first_seq() {
            return Err(JournalError::Corrupt {
                path: path.clone(),
                offset: bad,
                reason: format!(
                    "damaged; the peer's copy holds sequences {}..{}, not all of {first}..{end}",
                    peer.first_seq(),
                    peer.next_seq()
                ),
            });
        }
        // the intact records of the damaged file must agree with the peer
        let damaged = fs::read(path).map_err(io_err(path))?;
        let mut at = SEGMENT_HEADER_LEN;
        while at < damaged.len() {
            match decode_record(&damaged[at..]) {
                Ok((r, n)) => {
                    if r.sequence >= *first && r.sequence < end {
                        let mut same = false;
                        peer.read(r.sequence, 1, &mut |_, m| {
                            same = m == r.message;
                            false
                        })?;
                        if !same {
                            return Err(JournalError::Corrupt {
                                path: path.clone(),
                                offset: at as u64,
                                reason: format!(
                                    "sequence {} differs from the peer's copy: the peer is not a \
                                     copy of this journal",
                                    r.sequence
                                ),
                            });
                        }
                    }
                    at += n;
                }
                Err(_) => at += 1,
            }
        }
        let mut rebuilt = segment_header(&session, *first).to_vec();
        let mut n = 0u64;
        peer.read(*first, (end - first) as usize, &mut |q, m| {
            encode_record(&mut rebuilt, q, m);
            n += 1;
            true
        })?;
        let tmp = path.with_extension("seg.repair");
        fs::write(&tmp, &rebuilt).map_err(io_err(&tmp))?;
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(io_err(&tmp))?;
        let kept = path.with_extension("seg.damaged");
        fs::rename(path, &kept).map_err(io_err(path))?;
        fs::rename(&tmp, path).map_err(io_err(path))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))?;
        report.rewritten.push((path.clone(), bad));
        report.kept.push(kept);
        report.messages += n;
    }
    Ok(report)
}

/// The vote a cluster member must remember across restarts (docs/ha.md): the highest term it
/// has seen and whom it voted for in it. Kept in `cluster-state` in the journal directory,
/// replaced atomically (written, synced, renamed) on every change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HardState {
    pub term: u64,
    /// Member id voted for in `term` (0: none).
    pub voted_for: u16,
}

const HARD_STATE_MAGIC: &[u8; 8] = b"SEQBUSV1";

impl HardState {
    fn path(dir: &Path) -> PathBuf {
        dir.join("cluster-state")
    }

    /// Reads the state (default when the file does not exist yet); a damaged file is an
    /// error, never a silent reset of the vote.
    pub fn load(dir: &Path) -> Result<HardState, JournalError> {
        let path = HardState::path(dir);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HardState::default()),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let bad = |reason: &str| JournalError::Corrupt {
            path: path.clone(),
            offset: 0,
            reason: reason.to_string(),
        };
        if bytes.len() != 22 || &bytes[..8] != HARD_STATE_MAGIC {
            return Err(bad("not a cluster state file"));
        }
        let crc = u32::from_le_bytes(bytes[18..22].try_into().expect("4"));
        if crc != crc32c::crc32c(&bytes[..18]) {
            return Err(bad("checksum does not match"));
        }
        Ok(HardState {
            term: u64::from_le_bytes(bytes[8..16].try_into().expect("8")),
            voted_for: u16::from_le_bytes(bytes[16..18].try_into().expect("2")),
        })
    }

    /// Reads the state of a member whose journal's last entry is of term `journal_term`
    /// (0: an empty journal, or entries from before any election). A vote record that is
    /// missing, or that records an older term, is [`JournalError::VoteLost`]: a member
    /// persists every term it sees before it writes an entry of that term, so only lost state
    /// makes the journal run ahead of it.
    pub fn load_for(dir: &Path, journal_term: u64) -> Result<HardState, JournalError> {
        let path = HardState::path(dir);
        let exists = path.try_exists().map_err(io_err(&path))?;
        let state = HardState::load(dir)?;
        if journal_term > state.term {
            return Err(JournalError::VoteLost {
                path,
                recorded: exists.then_some(state.term),
                journal_term,
            });
        }
        Ok(state)
    }

    /// Replaces the state durably.
    pub fn store(&self, dir: &Path) -> Result<(), JournalError> {
        let path = HardState::path(dir);
        let tmp = dir.join("cluster-state.tmp");
        let mut b = HARD_STATE_MAGIC.to_vec();
        b.extend_from_slice(&self.term.to_le_bytes());
        b.extend_from_slice(&self.voted_for.to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&b).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))
    }
}

/// Follows a journal written by a [`Journal`] elsewhere (another thread or process).
#[derive(Debug)]
pub struct JournalReader {
    index: Index,
    /// Where the last segment's bytes stopped forming records at the last look: a record
    /// being written, or a torn tail the writer cuts when it opens the journal.
    torn: Option<(PathBuf, u64)>,
    /// When `discarded/` last changed, at the last look: the writer moves a suffix there
    /// before it cuts the journal ([`Journal::discard_from`]).
    discards: Option<std::time::SystemTime>,
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
            torn: None,
            discards: None,
        };
        r.discards = r.discard_stamp();
        r.refresh()?;
        Ok(r)
    }

    /// Picks up records and segments written since the last call. A bad record with a
    /// valid one after it is damage and an error naming the file and offset; a bad or
    /// incomplete tail is a record being written (looked at again next time).
    pub fn refresh(&mut self) -> Result<(), JournalError> {
        // a cluster member's writer cuts an unpublished suffix (`Journal::discard_from`) and
        // writes anew from the cut: what this reader read past the cut is gone, so the segment
        // holding the cut is read again; a cut seen only as a bad record (the writer cut and
        // wrote between two looks) is told from damage by reading the segment again too
        let discards = self.discard_stamp();
        if discards != self.discards {
            self.discards = discards;
            self.reread_tail()?;
        }
        match self.follow() {
            Err(JournalError::Corrupt { .. }) if !self.index.segments.is_empty() => {
                self.reread_tail()?;
                self.follow()
            }
            r => r,
        }
    }

    fn discard_stamp(&self) -> Option<std::time::SystemTime> {
        fs::metadata(self.index.dir.join("discarded"))
            .and_then(|m| m.modified())
            .ok()
    }

    /// Forgets the segments whose file is gone and reads the last one again from its start.
    fn reread_tail(&mut self) -> Result<(), JournalError> {
        while self.index.segments.len() > 1
            && self.index.segments.last().is_some_and(|s| !s.path.exists())
        {
            self.index.segments.pop();
        }
        if let Some(seg) = self.index.segments.pop() {
            let fresh = self.index.open_segment(&seg.path, seg.first_seq, false)?;
            self.index.segments.push(fresh);
        }
        Ok(())
    }

    fn follow(&mut self) -> Result<(), JournalError> {
        self.torn = None;
        if let Some(seg) = self.index.segments.last_mut() {
            self.torn = Index::follow(seg)?.map(|o| (seg.path.clone(), o));
        }
        let known = self.index.segments.last().map(|s| s.first_seq);
        for (first, path) in Index::list(&self.index.dir)? {
            if known.is_some_and(|k| first <= k) {
                continue;
            }
            // each segment that follows the last read on from where it ends (a journal may
            // start past 1: its first segment is taken as it is)
            if !self.index.segments.is_empty() && first != self.index.next_seq() {
                break; // written later, once the current segment is complete
            }
            let mut seg = self.index.open_segment(&path, first, false)?;
            self.torn = Index::follow(&mut seg)?.map(|o| (seg.path.clone(), o));
            self.index.segments.push(seg);
        }
        Ok(())
    }

    pub fn next_seq(&self) -> u64 {
        self.index.next_seq()
    }

    /// Opens a journal no process writes any more (to verify it, repair another from it, or
    /// read it whole): [`JournalReader::open`], then [`JournalReader::check_complete`].
    pub fn open_at_rest(dir: &Path, session: [u8; 10]) -> Result<JournalReader, JournalError> {
        let r = JournalReader::open(dir, session)?;
        r.check_complete()?;
        Ok(r)
    }

    /// Damage naming the file when a segment lies past the end of what was read (the
    /// segments between are missing, or the one before it ends short). For a journal at
    /// rest: while a writer appends, the next segment may appear before the end of the one
    /// before it is read.
    pub fn check_complete(&self) -> Result<(), JournalError> {
        let known = self.index.segments.last().map(|s| s.first_seq);
        let next = self.index.next_seq();
        for (first, path) in Index::list(&self.index.dir)? {
            if known.is_some_and(|k| first <= k) {
                continue;
            }
            return Err(JournalError::Corrupt {
                path,
                offset: 0,
                reason: format!(
                    "segment starts at {first}, but the journal before it ends before {next}: \
                     what lies between is missing"
                ),
            });
        }
        Ok(())
    }

    /// Segment files read.
    pub fn segments(&self) -> usize {
        self.index.segments.len()
    }

    /// Where the bytes at the end of the last segment stopped forming records, if they did
    /// (a record being written, or a torn tail: nothing valid follows).
    pub fn torn_tail(&self) -> Option<(&Path, u64)> {
        self.torn.as_ref().map(|(p, o)| (p.as_path(), *o))
    }

    /// The first sequence the journal holds (1 unless it started later).
    pub fn first_seq(&self) -> u64 {
        self.index.segments.first().map_or(1, |s| s.first_seq)
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

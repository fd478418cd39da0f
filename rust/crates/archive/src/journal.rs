//! The archiver: reads a sequencer's journal (docs/journal.md) through `seqbus-journal`'s
//! `JournalReader`, which follows segments as the sequencer writes them, and appends every
//! message to an archive; sealing it at the end of the session.

use std::path::Path;

use seqbus_journal::JournalReader;

use crate::writer::ArchiveWriter;
use crate::{ArchiveError, Result};

/// The journal's session, from its segments' headers (`seqbus_journal::journal_session`:
/// a damaged header is not taken for the session).
pub fn journal_session(dir: &Path) -> Result<[u8; 10]> {
    seqbus_journal::journal_session(dir).map_err(|e| match e {
        seqbus_journal::JournalError::Io { path, source } => ArchiveError::io(path, source),
        other => ArchiveError::format(dir, other.to_string()),
    })
}

pub struct Archiver {
    reader: JournalReader,
    pub writer: ArchiveWriter,
    next: Option<u64>,
}

impl Archiver {
    /// Opens the journal in `journal_dir` and creates the archive `out`. The archive starts at
    /// `from` (default: the journal's first sequence).
    pub fn create(
        journal_dir: &Path,
        out: &Path,
        segment_bytes: u64,
        schemas: &[(u16, String, String)],
        from: Option<u64>,
    ) -> Result<Archiver> {
        let session = journal_session(journal_dir)?;
        let reader = JournalReader::open(journal_dir, session)
            .map_err(|e| ArchiveError::format(journal_dir, e.to_string()))?;
        let name = String::from_utf8_lossy(&session).trim_end().to_string();
        let writer = ArchiveWriter::create(out, &name, segment_bytes, schemas)?;
        Ok(Archiver {
            reader,
            writer,
            next: from,
        })
    }

    /// Copies up to `max` messages the journal holds beyond what is archived, then flushes
    /// them to the archive's readers; returns how many.
    pub fn poll(&mut self, max: usize) -> Result<usize> {
        self.reader
            .refresh()
            .map_err(|e| ArchiveError::Usage(e.to_string()))?;
        let from = match self.next {
            Some(n) => n,
            None => match first_sequence(&self.reader)? {
                Some(f) => f,
                None => return Ok(0),
            },
        };
        if from >= self.reader.next_seq() {
            return Ok(0);
        }
        let mut err = None;
        let w = &mut self.writer;
        let n = self
            .reader
            .read(from, max, &mut |seq, msg| match w.append(seq, msg) {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            })
            .map_err(|e| ArchiveError::Usage(e.to_string()))?;
        if let Some(e) = err {
            return Err(e);
        }
        self.writer.flush()?;
        self.next = Some(from + n as u64);
        Ok(n)
    }

    /// Before sealing: a segment of the journal past what was read (those between are
    /// missing) is damage, and the archive is not sealed as if the journal ended there. A
    /// writer's next segment can appear before the end of the one before it was read: read
    /// again once before taking it for damage.
    pub fn check_journal(&mut self) -> Result<()> {
        let check = |r: &mut JournalReader| r.refresh().and_then(|()| r.check_complete());
        if check(&mut self.reader).is_err() {
            check(&mut self.reader).map_err(|e| ArchiveError::Usage(e.to_string()))?;
        }
        Ok(())
    }

    /// Where the journal's last segment stops forming records, if it does (a record being
    /// written, or torn by a crash: never published), as of the last poll.
    pub fn torn_tail(&self) -> Option<(&Path, u64)> {
        self.reader.torn_tail()
    }

    /// The next sequence the journal will hold (everything below it is written).
    pub fn journal_next(&self) -> u64 {
        self.reader.next_seq()
    }

    /// The next sequence the archive needs.
    pub fn archive_next(&self) -> Option<u64> {
        self.next
    }
}

/// The journal's first sequence, or None while it is empty. A journal that cannot be read
/// is an error (the archiver never seals a silent prefix).
fn first_sequence(r: &JournalReader) -> Result<Option<u64>> {
    let mut first = None;
    for from in [0, 1] {
        r.read(from, 1, &mut |seq, _| {
            first = Some(seq);
            false
        })
        .map_err(|e| ArchiveError::Usage(e.to_string()))?;
        if first.is_some() {
            break;
        }
    }
    Ok(first)
}

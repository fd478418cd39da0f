//! seqbus-archive: sealed session archives (docs/archive.md).
//!
//! An archive is a directory: segment files holding the sequenced messages of one session
//! exactly as broadcast, one offset index per segment, the schema IR of every package the
//! session carries (`seqc ir --json`) and a manifest, `archive.json`, written last when the
//! archive is sealed. Any tool decodes an archive with these files alone.
//!
//! * [`writer`]: appends sequenced messages (live, from the stream or a journal) and seals.
//! * [`segment`]: a memory-mapped segment and its index; every record checked (CRC32C,
//!   sequence) as it is read, so corruption is reported with its position and skipped.
//! * [`reader`]: the archive as messages over sequence ranges, across segments: a fragmented
//!   message is reassembled at its last fragment wherever its fragments lie.
//! * [`columns`]: decoding into Arrow-layout column buffers: the envelope table and, driven by
//!   the IR ([`ir`], [`typed`]), one typed table per message.
//! * [`verify`]: the whole-archive check behind `seqbus archive verify`.
//! * [`journal`]: the archiver: copies (and follows) a sequencer's journal into an archive.

pub mod columns;
pub mod format;
pub mod ir;
pub mod journal;
pub mod manifest;
pub mod reader;
pub mod segment;
pub mod typed;
pub mod verify;
pub mod writer;

pub use manifest::{Manifest, SegmentInfo};
pub use reader::ArchiveReader;
pub use segment::{Problem, Segment};
pub use writer::ArchiveWriter;

/// Errors that stop an operation (corrupt records are [`Problem`]s, reported and skipped).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    #[error("{0}")]
    Usage(String),
}

impl ArchiveError {
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        ArchiveError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
    pub fn format(path: impl AsRef<std::path::Path>, message: impl Into<String>) -> Self {
        ArchiveError::Format {
            path: path.as_ref().display().to_string(),
            message: message.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, ArchiveError>;

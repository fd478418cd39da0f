//! The on-disk layout of an archive (docs/archive.md). Little-endian throughout.
//!
//! Segment file `seg-NNNNNNNN.sqa`:
//! `header (32) | record*` where header = `magic "SQBARSG1" | format_version u32 |
//! segment_number u32 | first_sequence u64 | created_ns u64` and a record is
//! `length u32 | crc32c u32 | sequence u64 | message[length]`, the journal's record, written and
//! read by its codec (`seqbus_journal::encode_record` / `decode_record`); `message` is the
//! sequenced message exactly as broadcast (32-byte envelope, then the body) and the CRC32C
//! covers `sequence | message`. Record `i` of a segment has sequence `first_sequence + i`.
//!
//! Index file `seg-NNNNNNNN.sqx`: `magic "SQBARIX1" | first_sequence u64 | entry*`, one 16-byte
//! entry per record: `offset u64 | timestamp_ns u64` (offset of the record in the segment file).

pub const SEGMENT_MAGIC: &[u8; 8] = b"SQBARSG1";
pub const INDEX_MAGIC: &[u8; 8] = b"SQBARIX1";
pub const FORMAT_VERSION: u32 = 1;
pub const SEGMENT_HEADER_LEN: usize = 32;
pub const INDEX_HEADER_LEN: usize = 16;
pub const INDEX_ENTRY_LEN: usize = 16;
/// The journal's record header and the longest message a record may hold (a longer length is
/// corrupt): the archive's records are the journal's.
pub use seqbus_journal::{MAX_MESSAGE_LEN, RECORD_HEADER_LEN};
pub const ENVELOPE_LEN: usize = 32;
pub const MESSAGE_HEADER_LEN: usize = 8;
pub const MANIFEST: &str = "archive.json";

pub fn segment_file(number: u32) -> String {
    format!("seg-{number:08}.sqa")
}

pub fn index_file(number: u32) -> String {
    format!("seg-{number:08}.sqx")
}

pub use seqbus_wire::{le_u16, le_u32, le_u64};

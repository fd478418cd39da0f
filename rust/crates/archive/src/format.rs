//! The on-disk layout of an archive (docs/archive.md). Little-endian throughout.
//!
//! Segment file `seg-NNNNNNNN.sqa`:
//! `header (32) | record*` where header = `magic "SQBARSG1" | format_version u32 |
//! segment_number u32 | first_sequence u64 | created_ns u64` and a record is
//! `length u32 | crc32c u32 | sequence u64 | message[length]`; `message` is the sequenced message
//! exactly as broadcast (32-byte envelope, then the body) and the CRC32C covers
//! `sequence | message`. Record `i` of a segment has sequence `first_sequence + i`.
//!
//! Index file `seg-NNNNNNNN.sqx`: `magic "SQBARIX1" | first_sequence u64 | entry*`, one 16-byte
//! entry per record: `offset u64 | timestamp_ns u64` (offset of the record in the segment file).

pub const SEGMENT_MAGIC: &[u8; 8] = b"SQBARSG1";
pub const INDEX_MAGIC: &[u8; 8] = b"SQBARIX1";
pub const FORMAT_VERSION: u32 = 1;
pub const SEGMENT_HEADER_LEN: usize = 32;
pub const INDEX_HEADER_LEN: usize = 16;
pub const INDEX_ENTRY_LEN: usize = 16;
pub const RECORD_HEADER_LEN: usize = 16;
/// A record longer than this is corrupt (a message is at most 64 KiB of MoldUDP64 block).
pub const MAX_MESSAGE_LEN: usize = 1 << 20;
pub const ENVELOPE_LEN: usize = 32;
pub const MESSAGE_HEADER_LEN: usize = 8;
pub const MANIFEST: &str = "archive.json";

pub fn segment_file(number: u32) -> String {
    format!("seg-{number:08}.sqa")
}

pub fn index_file(number: u32) -> String {
    format!("seg-{number:08}.sqx")
}

#[inline]
pub fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
pub fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
pub fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// CRC32C of a record: over the sequence (8 bytes LE) then the message.
pub fn record_crc(sequence: u64, message: &[u8]) -> u32 {
    let c = crc32c::crc32c(&sequence.to_le_bytes());
    crc32c::crc32c_append(c, message)
}

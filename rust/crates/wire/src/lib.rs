//! seqbus-wire: the bytes on the wire, as flyweights over `&[u8]`. No I/O.
//!
//! * [`mold`]: MoldUDP64 downstream packets and request packets (big-endian, NASDAQ's format).
//! * [`envelope`]: the 32-byte seqbus envelope at the front of every sequenced message.
//! * [`upstream`]: node → sequencer command packets (our own format, `docs/upstream.md`).
//! * [`auth`]: keys, MACs and the anti-replay window of authenticated upstream packets.
//! * [`control`]: the bodies of the bus's own control messages (`schemas/bus.idl`).
//! * [`cluster`]: sequencer ↔ sequencer messages of a cluster, replayer announcements.
//! * [`soupbin`]: SoupBinTCP 4.0 packets (NASDAQ's format; the sessions that use them are in
//!   `seqbus-transport`).
//!
//! Every parser validates its whole input before handing out views, so a view never reads
//! past its buffer; malformed input is a [`WireError`].

pub mod auth;
pub mod cluster;
pub mod control;
pub mod envelope;
pub mod mold;
pub mod soupbin;
pub mod upstream;

pub use envelope::{Envelope, ENVELOPE_LEN};
pub use mold::{MoldPacket, MoldWriter, Request, MOLD_HEADER_LEN, REQUEST_LEN};
pub use upstream::{UpstreamPacket, UpstreamWriter};

/// How many inputs a fuzz target of the workspace runs: `SEQBUS_FUZZ_INPUTS` when set (`make
/// fuzz` sets 1,000,000; docs/fuzzing.md), else `default`.
pub fn fuzz_inputs(default: u64) -> u64 {
    std::env::var("SEQBUS_FUZZ_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A datagram or buffer that is not what it claims to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the fixed header (or a block) needs.
    #[error("{what}: truncated: need {need} bytes at offset {offset}, have {have}")]
    Truncated {
        what: &'static str,
        offset: usize,
        need: usize,
        have: usize,
    },
    /// Bytes left over after the last block the header announces.
    #[error("{what}: {extra} trailing bytes after the last block")]
    Trailing { what: &'static str, extra: usize },
    /// A field holds a value the format does not allow.
    #[error("{what}: invalid {field}: {value}")]
    Invalid {
        what: &'static str,
        field: &'static str,
        value: u64,
    },
}

/// A MoldUDP64 session name: 10 ASCII characters, space padded on the right.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Session(pub [u8; 10]);

impl Session {
    /// Builds a session from at most 10 printable ASCII characters (padded with spaces).
    pub fn new(name: &str) -> Result<Session, String> {
        if name.is_empty() || name.len() > 10 || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "session {name:?} must be 1 to 10 printable ASCII characters without spaces"
            ));
        }
        let mut s = [b' '; 10];
        s[..name.len()].copy_from_slice(name.as_bytes());
        Ok(Session(s))
    }

    /// The name without its padding.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("?").trim_end()
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:?})", self.as_str())
    }
}

/// An account name: up to 8 ASCII characters, NUL padded (the envelope's `account`).
pub type Account = [u8; 8];

/// Builds an [`Account`] from at most 8 printable ASCII characters.
pub fn account(name: &str) -> Result<Account, String> {
    if name.is_empty() || name.len() > 8 || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "account {name:?} must be 1 to 8 printable ASCII characters"
        ));
    }
    let mut a = [0u8; 8];
    a[..name.len()].copy_from_slice(name.as_bytes());
    Ok(a)
}

/// The account the sequencer uses for its own control messages.
pub const SEQUENCER_ACCOUNT: Account = *b"SEQUENCR";

pub(crate) fn need(
    what: &'static str,
    buf: &[u8],
    offset: usize,
    len: usize,
) -> Result<(), WireError> {
    if buf.len() < offset + len {
        Err(WireError::Truncated {
            what,
            offset,
            need: len,
            have: buf.len().saturating_sub(offset),
        })
    } else {
        Ok(())
    }
}

pub(crate) fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
/// The little-endian `u16` at `at` (panics past the end: callers check lengths first). These
/// three are the project's one set of byte readers; the archive's formats use them too.
#[inline]
pub fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
/// The little-endian `u32` at `at`.
#[inline]
pub fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
/// The little-endian `u64` at `at`.
#[inline]
pub fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

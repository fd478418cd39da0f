//! The 32-byte envelope at the front of every sequenced message (little-endian;
//! `struct Envelope` in `schemas/bus.idl`, layout in `docs/architecture.md`).

use crate::{le_u16, le_u32, le_u64, need, Account, WireError};

/// Length of the envelope.
pub const ENVELOPE_LEN: usize = 32;

/// `kind`: an application message (body is the sender's IDL message).
pub const KIND_APPLICATION: u8 = 1;
/// `kind`: a control message (body is a `bus.idl` message).
pub const KIND_CONTROL: u8 = 2;
/// `flags` bit 0: this is a fragment and more follow.
pub const FLAG_FRAGMENT: u8 = 1;
/// `flags` bit 1: this is the last fragment of a fragmented body.
pub const FLAG_LAST_FRAGMENT: u8 = 2;
/// `flags` bit 2, only with bit 0: the first fragment of a fragmented body. A reader that
/// meets it while it holds earlier fragments of the same account discards them (their
/// sender stopped before their last fragment; docs/upstream.md "Fragments").
pub const FLAG_FIRST_FRAGMENT: u8 = 4;

/// Whether `flags` is one of the four values a message (or an upstream command) may carry:
/// 0 (whole body), 1 (fragment, more follow), 5 (first fragment, more follow), 2 (last
/// fragment).
#[inline]
pub fn valid_flags(flags: u8) -> bool {
    matches!(flags, 0 | FLAG_FRAGMENT | FLAG_LAST_FRAGMENT)
        || flags == FLAG_FIRST_FRAGMENT | FLAG_FRAGMENT
}

/// The decoded envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Envelope {
    pub timestamp_ns: u64,
    pub command_seq: u64,
    pub account: Account,
    pub instance: u16,
    pub kind: u8,
    pub flags: u8,
    pub body_length: u32,
}

impl Envelope {
    /// Decodes the envelope at the front of a sequenced message, checking `kind` and `flags`.
    pub fn parse(msg: &[u8]) -> Result<Envelope, WireError> {
        const WHAT: &str = "envelope";
        need(WHAT, msg, 0, ENVELOPE_LEN)?;
        let e = Envelope {
            timestamp_ns: le_u64(msg, 0),
            command_seq: le_u64(msg, 8),
            account: msg[16..24].try_into().expect("8 bytes"),
            instance: le_u16(msg, 24),
            kind: msg[26],
            flags: msg[27],
            body_length: le_u32(msg, 28),
        };
        if e.kind != KIND_APPLICATION && e.kind != KIND_CONTROL {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "kind",
                value: e.kind as u64,
            });
        }
        if !valid_flags(e.flags) {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "flags",
                value: e.flags as u64,
            });
        }
        let frag_len = msg.len() - ENVELOPE_LEN;
        if e.flags == 0 && frag_len != e.body_length as usize
            || e.flags != 0 && frag_len > e.body_length as usize
        {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "body_length",
                value: e.body_length as u64,
            });
        }
        Ok(e)
    }

    /// The 32 bytes of the envelope.
    pub fn encode(&self) -> [u8; ENVELOPE_LEN] {
        let mut b = [0u8; ENVELOPE_LEN];
        self.write(&mut b);
        b
    }

    /// Writes the envelope into the first 32 bytes of `b`.
    pub fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.timestamp_ns.to_le_bytes());
        b[8..16].copy_from_slice(&self.command_seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.account);
        b[24..26].copy_from_slice(&self.instance.to_le_bytes());
        b[26] = self.kind;
        b[27] = self.flags;
        b[28..32].copy_from_slice(&self.body_length.to_le_bytes());
    }

    /// True when this message is a fragment that is not the last one.
    pub fn more_fragments(&self) -> bool {
        self.flags & FLAG_FRAGMENT != 0
    }

    /// True when this message is part of a fragmented body.
    pub fn is_fragmented(&self) -> bool {
        self.flags != 0
    }

    /// True when this message is the first fragment of a body (flag set by its sender).
    pub fn first_fragment(&self) -> bool {
        self.flags & FLAG_FIRST_FRAGMENT != 0
    }
}

/// The 8-byte IDL message header at the front of every body:
/// `block_length u16 | template_id u16 | schema_id u16 | version u16` (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageHeader {
    pub block_length: u16,
    pub template_id: u16,
    pub schema_id: u16,
    pub version: u16,
}

/// Length of the IDL message header.
pub const MESSAGE_HEADER_LEN: usize = 8;

impl MessageHeader {
    /// Reads the header at the front of a body.
    pub fn parse(body: &[u8]) -> Result<MessageHeader, WireError> {
        need("message header", body, 0, MESSAGE_HEADER_LEN)?;
        Ok(MessageHeader {
            block_length: le_u16(body, 0),
            template_id: le_u16(body, 2),
            schema_id: le_u16(body, 4),
            version: le_u16(body, 6),
        })
    }

    /// The 8 bytes of the header.
    pub fn encode(&self) -> [u8; MESSAGE_HEADER_LEN] {
        let mut b = [0u8; MESSAGE_HEADER_LEN];
        b[0..2].copy_from_slice(&self.block_length.to_le_bytes());
        b[2..4].copy_from_slice(&self.template_id.to_le_bytes());
        b[4..6].copy_from_slice(&self.schema_id.to_le_bytes());
        b[6..8].copy_from_slice(&self.version.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let e = Envelope {
            timestamp_ns: 0x0102030405060708,
            command_seq: 9,
            account: *b"ME\0\0\0\0\0\0",
            instance: 2,
            kind: KIND_APPLICATION,
            flags: 0,
            body_length: 3,
        };
        let mut msg = e.encode().to_vec();
        assert_eq!(msg[0], 0x08);
        assert_eq!(msg[26], 1);
        msg.extend_from_slice(b"abc");
        assert_eq!(Envelope::parse(&msg).unwrap(), e);
    }

    #[test]
    fn bad_envelopes() {
        let e = Envelope {
            kind: KIND_CONTROL,
            body_length: 0,
            ..Envelope::default()
        };
        let ok = e.encode();
        assert!(Envelope::parse(&ok).is_ok());
        assert!(Envelope::parse(&ok[..31]).is_err());
        let mut bad_kind = ok;
        bad_kind[26] = 9;
        assert!(Envelope::parse(&bad_kind).is_err());
        for flags in [3u8, 4, 6, 7, 8, 0x81] {
            let mut bad_flags = ok;
            bad_flags[27] = flags;
            assert!(Envelope::parse(&bad_flags).is_err(), "flags {flags}");
        }
        // a fragment (1), the first of its body (5), the last (2): part of a 4-byte body
        for flags in [
            FLAG_FRAGMENT,
            FLAG_FIRST_FRAGMENT | FLAG_FRAGMENT,
            FLAG_LAST_FRAGMENT,
        ] {
            let mut frag = Envelope {
                kind: KIND_APPLICATION,
                flags,
                body_length: 4,
                ..Envelope::default()
            }
            .encode()
            .to_vec();
            frag.extend_from_slice(b"ab");
            let e = Envelope::parse(&frag).expect("a valid fragment");
            assert_eq!(e.first_fragment(), flags == 5);
            assert_eq!(e.more_fragments(), flags != FLAG_LAST_FRAGMENT);
        }
        let mut bad_len = ok.to_vec();
        bad_len.push(1);
        assert!(Envelope::parse(&bad_len).is_err());
    }
}

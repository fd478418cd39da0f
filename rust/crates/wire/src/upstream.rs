//! Node → sequencer packets over UDP (our own format; specified in `docs/upstream.md`).
//!
//! Little-endian, like the envelope. Header (28 bytes):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `"SU"` |
//! | 2 | 1 | version = 1 |
//! | 3 | 1 | type: 1 commands, 2 hello |
//! | 4 | 10 | session (MoldUDP64 session name) |
//! | 14 | 8 | account, NUL padded |
//! | 22 | 2 | instance |
//! | 24 | 2 | count of command blocks (0 for hello) |
//! | 26 | 2 | reserved, zero |
//!
//! Command block (16-byte header then the fragment):
//! `command_seq u64 | body_length u32 | flags u8 | reserved u8 | fragment_length u16 | fragment`;
//! flags as in the envelope ([`crate::envelope::valid_flags`]).
//!
//! The sequencer answers a gap in an account's commands with a **NAK** (type 3, sequencer →
//! the sender's address, 36 bytes): the same header with count 0, then `expected u64`, the
//! command sequence it needs next from that account ([`Nak`]).
//!
//! **Version 2** is the authenticated packet (`crate::auth`): the same header with version 2,
//! the same command blocks, then `boot_ns u64 | counter u64 | mac [16]`, the MAC (BLAKE3
//! keyed with the account's key) covering every byte before it. A version-2 NAK is the
//! version-1 NAK with version 2, then the MAC of the 36 bytes before it (52 bytes). Version 1
//! stays valid where keys are off.

use crate::auth::{Key, Nonce, MAC_LEN, TRAILER_LEN};
use crate::envelope::valid_flags;
use crate::{le_u16, le_u32, le_u64, need, Account, Session, WireError};

/// Length of the upstream packet header.
pub const UPSTREAM_HEADER_LEN: usize = 28;
/// Length of a command block header.
pub const COMMAND_HEADER_LEN: usize = 16;
/// Packet type: commands.
pub const TYPE_COMMANDS: u8 = 1;
/// Packet type: hello (asks the sequencer to publish the sender's `SenderState`).
pub const TYPE_HELLO: u8 = 2;
/// Packet type: NAK (sequencer → sender: resend from `expected`).
pub const TYPE_NAK: u8 = 3;
/// Length of a NAK.
pub const NAK_LEN: usize = UPSTREAM_HEADER_LEN + 8;
/// Length of an authenticated (version 2) NAK.
pub const NAK_SIGNED_LEN: usize = NAK_LEN + TRAILER_LEN;
const MAGIC: [u8; 2] = *b"SU";
/// Version of a packet without authentication.
pub const VERSION: u8 = 1;
/// Version of an authenticated packet (`crate::auth`).
pub const VERSION_SIGNED: u8 = 2;

/// A validated upstream packet.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamPacket<'a> {
    buf: &'a [u8],
    /// End of the command blocks (the trailer of a version-2 packet follows).
    end: usize,
}

/// One command (or fragment of one) inside an upstream packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command<'a> {
    pub command_seq: u64,
    pub body_length: u32,
    pub flags: u8,
    pub fragment: &'a [u8],
}

impl<'a> UpstreamPacket<'a> {
    /// Validates a whole datagram.
    pub fn parse(buf: &'a [u8]) -> Result<UpstreamPacket<'a>, WireError> {
        const WHAT: &str = "upstream packet";
        need(WHAT, buf, 0, UPSTREAM_HEADER_LEN)?;
        if buf[0..2] != MAGIC {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "magic",
                value: le_u16(buf, 0) as u64,
            });
        }
        let end = match buf[2] {
            VERSION => buf.len(),
            VERSION_SIGNED => {
                need(WHAT, buf, 0, UPSTREAM_HEADER_LEN + TRAILER_LEN)?;
                buf.len() - TRAILER_LEN
            }
            v => {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "version",
                    value: v as u64,
                })
            }
        };
        let body = &buf[..end];
        let kind = buf[3];
        let count = le_u16(buf, 24);
        match kind {
            TYPE_COMMANDS if count > 0 => {}
            TYPE_HELLO if count == 0 => {}
            TYPE_COMMANDS | TYPE_HELLO => {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "count",
                    value: count as u64,
                })
            }
            _ => {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "type",
                    value: kind as u64,
                })
            }
        }
        let mut at = UPSTREAM_HEADER_LEN;
        for _ in 0..count {
            need(WHAT, body, at, COMMAND_HEADER_LEN)?;
            let seq = le_u64(body, at);
            let body_len = le_u32(body, at + 8);
            let flags = body[at + 12];
            let frag_len = le_u16(body, at + 14) as usize;
            if seq == 0 {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "command_seq",
                    value: 0,
                });
            }
            if !valid_flags(flags) {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "flags",
                    value: flags as u64,
                });
            }
            if (flags == 0 && frag_len != body_len as usize) || frag_len > body_len as usize {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "body_length",
                    value: body_len as u64,
                });
            }
            need(WHAT, body, at + COMMAND_HEADER_LEN, frag_len)?;
            at += COMMAND_HEADER_LEN + frag_len;
        }
        if at != end {
            return Err(WireError::Trailing {
                what: WHAT,
                extra: end - at,
            });
        }
        Ok(UpstreamPacket { buf, end })
    }

    /// [`VERSION`] or [`VERSION_SIGNED`].
    pub fn version(&self) -> u8 {
        self.buf[2]
    }

    /// The sender's nonce (version 2 only).
    pub fn nonce(&self) -> Option<Nonce> {
        (self.version() == VERSION_SIGNED).then(|| Nonce {
            boot_ns: le_u64(self.buf, self.end),
            counter: le_u64(self.buf, self.end + 8),
        })
    }

    /// True when the packet is authenticated (version 2) and its MAC is `key`'s.
    pub fn verify(&self, key: &Key) -> bool {
        if self.version() != VERSION_SIGNED {
            return false;
        }
        let at = self.buf.len() - MAC_LEN;
        key.verify(&self.buf[..at], &self.buf[at..])
    }

    /// [`TYPE_COMMANDS`] or [`TYPE_HELLO`].
    pub fn kind(&self) -> u8 {
        self.buf[3]
    }

    pub fn session(&self) -> Session {
        Session(self.buf[4..14].try_into().expect("10 bytes"))
    }

    pub fn account(&self) -> Account {
        self.buf[14..22].try_into().expect("8 bytes")
    }

    pub fn instance(&self) -> u16 {
        le_u16(self.buf, 22)
    }

    pub fn count(&self) -> u16 {
        le_u16(self.buf, 24)
    }

    /// The command blocks in order.
    pub fn commands(&self) -> Commands<'a> {
        Commands {
            buf: self.buf,
            at: UPSTREAM_HEADER_LEN,
            left: self.count(),
        }
    }
}

/// The sequencer's request to a sender to resend its commands from `expected` on: a command
/// after it arrived while it was missing (lost, or still on its way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nak {
    pub session: Session,
    pub account: Account,
    pub instance: u16,
    pub expected: u64,
    /// How many commands from `expected` on are missing before the first one the sequencer
    /// holds (it keeps commands that came after the gap); 0: it holds none, resend from
    /// `expected` on. Carried in the header's count field.
    pub missing: u16,
    /// The nonce of the sender's packet this NAK answers (signed NAKs only, inside the MAC):
    /// the sender takes a NAK only for a packet newer than any it took one for, so a NAK
    /// captured and sent again is refused as stale (docs/upstream.md, "Authentication").
    pub answers: Option<Nonce>,
}

impl Nak {
    /// The NAK authenticated with the account's `key` (version 2): the NAK, the nonce of the
    /// packet it answers (zeros without one: no sender takes it), and the MAC of both.
    pub fn encode_signed(&self, key: &Key) -> [u8; NAK_SIGNED_LEN] {
        let mut b = [0u8; NAK_SIGNED_LEN];
        b[..NAK_LEN].copy_from_slice(&self.encode());
        b[2] = VERSION_SIGNED;
        let n = self.answers.unwrap_or(Nonce {
            boot_ns: 0,
            counter: 0,
        });
        b[NAK_LEN..NAK_LEN + 8].copy_from_slice(&n.boot_ns.to_le_bytes());
        b[NAK_LEN + 8..NAK_LEN + 16].copy_from_slice(&n.counter.to_le_bytes());
        let mac = key.mac(&b[..NAK_LEN + 16]);
        b[NAK_LEN + 16..].copy_from_slice(&mac);
        b
    }

    /// True when `buf` is a version-2 NAK whose MAC is `key`'s.
    pub fn verify(buf: &[u8], key: &Key) -> bool {
        buf.len() == NAK_SIGNED_LEN
            && buf[2] == VERSION_SIGNED
            && key.verify(&buf[..NAK_LEN + 16], &buf[NAK_LEN + 16..])
    }

    pub fn encode(&self) -> [u8; NAK_LEN] {
        let mut b = [0u8; NAK_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[3] = TYPE_NAK;
        b[4..14].copy_from_slice(&self.session.0);
        b[14..22].copy_from_slice(&self.account);
        b[22..24].copy_from_slice(&self.instance.to_le_bytes());
        b[24..26].copy_from_slice(&self.missing.to_le_bytes());
        b[UPSTREAM_HEADER_LEN..].copy_from_slice(&self.expected.to_le_bytes());
        b
    }

    /// The datagram to send: signed with the account's `key` when upstream is authenticated.
    pub fn datagram(&self, key: Option<&Key>) -> Vec<u8> {
        let mut out = Vec::with_capacity(NAK_SIGNED_LEN);
        self.write_datagram(key, &mut out);
        out
    }

    /// [`Nak::datagram`] into `out` (cleared first), a buffer kept from one NAK to the next.
    pub fn write_datagram(&self, key: Option<&Key>, out: &mut Vec<u8>) {
        out.clear();
        match key {
            Some(k) => out.extend_from_slice(&self.encode_signed(k)),
            None => out.extend_from_slice(&self.encode()),
        }
    }

    /// Validates a whole datagram.
    pub fn parse(buf: &[u8]) -> Result<Nak, WireError> {
        const WHAT: &str = "NAK";
        need(WHAT, buf, 0, NAK_LEN)?;
        let len = match buf[2] {
            VERSION => NAK_LEN,
            _ => NAK_SIGNED_LEN,
        };
        if buf[0..2] != MAGIC || !matches!(buf[2], VERSION | VERSION_SIGNED) || buf[3] != TYPE_NAK {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "magic/version/type",
                value: le_u32(buf, 0) as u64,
            });
        }
        need(WHAT, buf, 0, len)?;
        if buf.len() != len {
            return Err(WireError::Trailing {
                what: WHAT,
                extra: buf.len() - len,
            });
        }
        let expected = le_u64(buf, UPSTREAM_HEADER_LEN);
        if expected == 0 {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "expected",
                value: expected,
            });
        }
        Ok(Nak {
            session: Session(buf[4..14].try_into().expect("10 bytes")),
            account: buf[14..22].try_into().expect("8 bytes"),
            instance: le_u16(buf, 22),
            expected,
            missing: le_u16(buf, 24),
            answers: (len == NAK_SIGNED_LEN).then(|| Nonce {
                boot_ns: le_u64(buf, NAK_LEN),
                counter: le_u64(buf, NAK_LEN + 8),
            }),
        })
    }

    /// True when `buf` starts like a NAK (to tell it from replayer answers on one socket).
    pub fn is_nak(buf: &[u8]) -> bool {
        buf.len() >= 4 && buf[0..2] == MAGIC && buf[3] == TYPE_NAK
    }
}

/// Iterator over the command blocks of a validated packet.
pub struct Commands<'a> {
    buf: &'a [u8],
    at: usize,
    left: u16,
}

impl<'a> Iterator for Commands<'a> {
    type Item = Command<'a>;
    fn next(&mut self) -> Option<Command<'a>> {
        if self.left == 0 {
            return None;
        }
        let b = self.buf;
        let at = self.at;
        let frag_len = le_u16(b, at + 14) as usize;
        let c = Command {
            command_seq: le_u64(b, at),
            body_length: le_u32(b, at + 8),
            flags: b[at + 12],
            fragment: &b[at + COMMAND_HEADER_LEN..at + COMMAND_HEADER_LEN + frag_len],
        };
        self.at += COMMAND_HEADER_LEN + frag_len;
        self.left -= 1;
        Some(c)
    }
}

/// The key and nonce a writer seals its packets with.
#[derive(Debug)]
struct Sealing {
    key: Key,
    boot_ns: u64,
    counter: u64,
}

/// Builds upstream packets in a reusable buffer.
#[derive(Debug)]
pub struct UpstreamWriter {
    buf: Vec<u8>,
    max_len: usize,
    count: u16,
    sealing: Option<Sealing>,
    sealed: bool,
}

impl UpstreamWriter {
    /// A writer whose packets never exceed `max_len` bytes.
    pub fn new(max_len: usize) -> UpstreamWriter {
        assert!((UPSTREAM_HEADER_LEN + COMMAND_HEADER_LEN + 1..=65_507).contains(&max_len));
        UpstreamWriter {
            buf: Vec::with_capacity(max_len),
            max_len,
            count: 0,
            sealing: None,
            sealed: false,
        }
    }

    /// The nonce of the last packet this writer sealed (None: it seals none, or none yet).
    pub fn last_nonce(&self) -> Option<Nonce> {
        self.sealing
            .as_ref()
            .filter(|s| s.counter > 0)
            .map(|s| Nonce {
                boot_ns: s.boot_ns,
                counter: s.counter,
            })
    }

    /// Authenticates every packet from the next [`UpstreamWriter::begin`] on (version 2): the
    /// nonce is `boot_ns` (the sender's start, ns since the epoch) and a counter from 1.
    pub fn set_key(&mut self, key: Key, boot_ns: u64) {
        assert!(
            self.max_len > UPSTREAM_HEADER_LEN + COMMAND_HEADER_LEN + TRAILER_LEN,
            "no room for a command beside the trailer"
        );
        self.sealing = Some(Sealing {
            key,
            boot_ns,
            counter: 0,
        });
    }

    /// Room the trailer takes.
    fn reserved(&self) -> usize {
        if self.sealing.is_some() {
            TRAILER_LEN
        } else {
            0
        }
    }

    /// Largest fragment one packet can carry.
    pub fn max_fragment_len(&self) -> usize {
        (self.max_len - UPSTREAM_HEADER_LEN - COMMAND_HEADER_LEN - self.reserved())
            .min(u16::MAX as usize)
    }

    /// Room for command blocks (16-byte header and fragment each) in one packet.
    pub fn command_room(&self) -> usize {
        self.max_len - UPSTREAM_HEADER_LEN - self.reserved()
    }

    /// Starts a packet of `kind` from `account`/`instance`.
    pub fn begin(&mut self, kind: u8, session: Session, account: Account, instance: u16) {
        self.buf.clear();
        self.sealed = false;
        self.buf.extend_from_slice(&MAGIC);
        self.buf.push(if self.sealing.is_some() {
            VERSION_SIGNED
        } else {
            VERSION
        });
        self.buf.push(kind);
        self.buf.extend_from_slice(&session.0);
        self.buf.extend_from_slice(&account);
        self.buf.extend_from_slice(&instance.to_le_bytes());
        self.buf.extend_from_slice(&[0, 0, 0, 0]);
        self.count = 0;
    }

    /// Appends a command block; false (nothing written) when it does not fit.
    pub fn push(&mut self, c: &Command<'_>) -> bool {
        debug_assert!(!self.sealed, "push after finish");
        if self.buf.len() + COMMAND_HEADER_LEN + c.fragment.len() + self.reserved() > self.max_len
            || self.count == u16::MAX
        {
            return false;
        }
        self.buf.extend_from_slice(&c.command_seq.to_le_bytes());
        self.buf.extend_from_slice(&c.body_length.to_le_bytes());
        self.buf.push(c.flags);
        self.buf.push(0);
        self.buf
            .extend_from_slice(&(c.fragment.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(c.fragment);
        self.count += 1;
        self.buf[24..26].copy_from_slice(&self.count.to_le_bytes());
        true
    }

    pub fn count(&self) -> u16 {
        self.count
    }

    /// The packet as it stands (unsealed: see [`UpstreamWriter::finish`]).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The finished packet: with a key, the nonce and MAC appended (once; the counter
    /// advances per packet).
    pub fn finish(&mut self) -> &[u8] {
        if let (Some(s), false) = (self.sealing.as_mut(), self.sealed) {
            s.counter += 1;
            self.buf.extend_from_slice(&s.boot_ns.to_le_bytes());
            self.buf.extend_from_slice(&s.counter.to_le_bytes());
            let mac = s.key.mac(&self.buf);
            self.buf.extend_from_slice(&mac);
            self.sealed = true;
        }
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{FLAG_FIRST_FRAGMENT, FLAG_FRAGMENT};

    #[test]
    fn round_trip() {
        let s = Session::new("S1").unwrap();
        let a = crate::account("ME").unwrap();
        let mut w = UpstreamWriter::new(200);
        w.begin(TYPE_COMMANDS, s, a, 3);
        let c1 = Command {
            command_seq: 1,
            body_length: 3,
            flags: 0,
            fragment: b"abc",
        };
        let c2 = Command {
            command_seq: 2,
            body_length: 10,
            flags: FLAG_FIRST_FRAGMENT | FLAG_FRAGMENT,
            fragment: b"xy",
        };
        assert!(w.push(&c1));
        assert!(w.push(&c2));
        let p = UpstreamPacket::parse(w.bytes()).unwrap();
        assert_eq!(
            (p.kind(), p.session(), p.account(), p.instance()),
            (TYPE_COMMANDS, s, a, 3)
        );
        assert_eq!(p.commands().collect::<Vec<_>>(), vec![c1, c2]);
    }

    #[test]
    fn malformed() {
        let s = Session::new("S1").unwrap();
        let a = crate::account("ME").unwrap();
        let mut w = UpstreamWriter::new(200);
        w.begin(TYPE_COMMANDS, s, a, 3);
        // a commands packet with no command is malformed
        assert!(UpstreamPacket::parse(w.bytes()).is_err());
        w.push(&Command {
            command_seq: 1,
            body_length: 3,
            flags: 0,
            fragment: b"abc",
        });
        let good = w.bytes().to_vec();
        assert!(UpstreamPacket::parse(&good).is_ok());
        assert!(UpstreamPacket::parse(&good[..good.len() - 1]).is_err());
        let mut m = good.clone();
        m[0] = b'X';
        assert!(UpstreamPacket::parse(&m).is_err());
        let mut m = good.clone();
        m[UPSTREAM_HEADER_LEN + 8] = 4; // body_length 4 but unfragmented fragment of 3
        assert!(UpstreamPacket::parse(&m).is_err());
        let mut m = good.clone();
        m[UPSTREAM_HEADER_LEN..UPSTREAM_HEADER_LEN + 8].copy_from_slice(&0u64.to_le_bytes());
        assert!(UpstreamPacket::parse(&m).is_err());
        // flags: only 0, 1, 5 (first fragment) and 2 (last fragment)
        for (flags, ok) in [
            (1u8, true),
            (5, true),
            (2, true),
            (3, false),
            (4, false),
            (6, false),
            (8, false),
        ] {
            let mut m = good.clone();
            m[UPSTREAM_HEADER_LEN + 8] = 9; // a fragment of a 9-byte body
            m[UPSTREAM_HEADER_LEN + 12] = flags;
            assert_eq!(UpstreamPacket::parse(&m).is_ok(), ok, "flags {flags}");
        }
        w.begin(TYPE_HELLO, s, a, 1);
        assert!(UpstreamPacket::parse(w.bytes()).is_ok());
    }

    #[test]
    fn signed_packets_verify_only_with_their_key_and_unchanged() {
        let s = Session::new("S1").unwrap();
        let a = crate::account("ME").unwrap();
        let key = Key::new([7; 32]);
        let mut w = UpstreamWriter::new(200);
        let plain_room = w.max_fragment_len();
        w.set_key(key.clone(), 1_000);
        assert_eq!(w.max_fragment_len(), plain_room - TRAILER_LEN);
        w.begin(TYPE_COMMANDS, s, a, 3);
        let c = Command {
            command_seq: 9,
            body_length: 3,
            flags: 0,
            fragment: b"abc",
        };
        assert!(w.push(&c));
        let first = w.finish().to_vec();
        assert_eq!(w.finish(), &first[..], "sealed once");
        let p = UpstreamPacket::parse(&first).unwrap();
        assert_eq!(p.version(), VERSION_SIGNED);
        assert_eq!(
            p.nonce(),
            Some(Nonce {
                boot_ns: 1_000,
                counter: 1
            })
        );
        assert_eq!(p.commands().collect::<Vec<_>>(), vec![c]);
        assert!(p.verify(&key));
        assert!(!p.verify(&Key::new([8; 32])));
        // any changed byte: rejected by the parser or by the MAC
        for i in 0..first.len() {
            let mut m = first.clone();
            m[i] ^= 0x20;
            if let Ok(p) = UpstreamPacket::parse(&m) {
                assert!(!p.verify(&key), "byte {i} changed and still verified");
            }
        }
        // the next packet has the next counter
        w.begin(TYPE_HELLO, s, a, 3);
        let hello = UpstreamPacket::parse(w.finish()).unwrap();
        assert_eq!(hello.nonce().unwrap().counter, 2);
        assert!(hello.verify(&key));
        // a version-1 packet carries no nonce and never verifies
        let mut plain = UpstreamWriter::new(200);
        plain.begin(TYPE_HELLO, s, a, 3);
        let p = UpstreamPacket::parse(plain.finish()).unwrap();
        assert_eq!((p.version(), p.nonce()), (VERSION, None));
        assert!(!p.verify(&key));
        // too short for a trailer
        assert!(UpstreamPacket::parse(&first[..UPSTREAM_HEADER_LEN + 8]).is_err());
    }

    #[test]
    fn signed_naks() {
        let n = Nak {
            session: Session::new("S1").unwrap(),
            account: crate::account("ME").unwrap(),
            instance: 2,
            expected: 41,
            missing: 0,
            answers: Some(Nonce {
                boot_ns: 77,
                counter: 5,
            }),
        };
        let key = Key::new([3; 32]);
        let b = n.encode_signed(&key);
        assert!(Nak::is_nak(&b));
        assert_eq!(Nak::parse(&b).unwrap(), n);
        assert!(Nak::verify(&b, &key));
        assert!(!Nak::verify(&b, &Key::new([4; 32])));
        assert!(!Nak::verify(&n.encode(), &key), "unsigned");
        let mut m = b;
        m[UPSTREAM_HEADER_LEN] ^= 1;
        assert!(!Nak::verify(&m, &key));
        // the nonce it answers is inside the MAC
        let mut m = b;
        m[NAK_LEN + 8] ^= 1;
        assert!(!Nak::verify(&m, &key));
        assert!(
            Nak::parse(&b[..NAK_LEN]).is_err(),
            "a version-2 NAK cut short"
        );
    }

    #[test]
    fn nak_round_trip_and_errors() {
        let n = Nak {
            session: Session::new("S1").unwrap(),
            account: crate::account("ME").unwrap(),
            instance: 2,
            expected: 41,
            missing: 3,
            answers: None,
        };
        let b = n.encode();
        assert!(Nak::is_nak(&b));
        assert_eq!(Nak::parse(&b).unwrap(), n);
        assert!(Nak::parse(&b[..NAK_LEN - 1]).is_err());
        assert!(
            UpstreamPacket::parse(&b).is_err(),
            "a NAK is no upstream packet"
        );
        let mut z = b;
        z[UPSTREAM_HEADER_LEN..].copy_from_slice(&0u64.to_le_bytes());
        assert!(Nak::parse(&z).is_err());
    }
}

//! MoldUDP64, exactly as NASDAQ specifies it (big-endian).
//!
//! Downstream packet: `session char[10] | sequence u64 | count u16` (20 bytes), then `count`
//! message blocks `length u16 | data[length]`. `sequence` is the number of the first message
//! in the packet (for a heartbeat: the next sequence number the sender will use).
//! `count == 0` is a heartbeat, `count == 0xFFFF` is the end of the session; both carry no
//! blocks.
//!
//! Request packet (node → replayer): `session char[10] | sequence u64 | count u16`
//! (20 bytes): "send me `count` messages starting at `sequence`".

use crate::{be_u16, be_u64, need, Session, WireError};

/// Length of the MoldUDP64 header and of a request packet.
pub const MOLD_HEADER_LEN: usize = 20;
/// Length of a request packet.
pub const REQUEST_LEN: usize = 20;
/// `count` of an end-of-session packet.
pub const END_OF_SESSION: u16 = 0xFFFF;

/// What a downstream packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// `count` messages (at least one).
    Messages,
    /// No messages; `sequence` is the next sequence number.
    Heartbeat,
    /// The session is over; `sequence` is one past the last message.
    EndOfSession,
}

/// A validated MoldUDP64 downstream packet.
#[derive(Debug, Clone, Copy)]
pub struct MoldPacket<'a> {
    buf: &'a [u8],
}

impl<'a> MoldPacket<'a> {
    /// Validates a whole datagram: header, every block, and no trailing bytes.
    pub fn parse(buf: &'a [u8]) -> Result<MoldPacket<'a>, WireError> {
        const WHAT: &str = "MoldUDP64 packet";
        need(WHAT, buf, 0, MOLD_HEADER_LEN)?;
        let count = be_u16(buf, 18);
        let mut at = MOLD_HEADER_LEN;
        if count != END_OF_SESSION {
            for _ in 0..count {
                need(WHAT, buf, at, 2)?;
                let len = be_u16(buf, at) as usize;
                need(WHAT, buf, at + 2, len)?;
                at += 2 + len;
            }
        }
        if at != buf.len() {
            return Err(WireError::Trailing {
                what: WHAT,
                extra: buf.len() - at,
            });
        }
        let seq = be_u64(buf, 10);
        if seq == 0 {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "sequence",
                value: 0,
            });
        }
        if count != END_OF_SESSION && seq.checked_add(count as u64).is_none() {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "sequence",
                value: seq,
            });
        }
        Ok(MoldPacket { buf })
    }

    /// The session the packet belongs to.
    pub fn session(&self) -> Session {
        Session(self.buf[..10].try_into().expect("10 bytes"))
    }

    /// Sequence number of the first message (heartbeat: the next sequence number).
    pub fn sequence(&self) -> u64 {
        be_u64(self.buf, 10)
    }

    /// The raw `count` field.
    pub fn count(&self) -> u16 {
        be_u16(self.buf, 18)
    }

    /// Number of messages carried (0 for heartbeats and end of session).
    pub fn message_count(&self) -> usize {
        match self.count() {
            END_OF_SESSION => 0,
            n => n as usize,
        }
    }

    /// Heartbeat, end of session, or messages.
    pub fn kind(&self) -> PacketKind {
        match self.count() {
            0 => PacketKind::Heartbeat,
            END_OF_SESSION => PacketKind::EndOfSession,
            _ => PacketKind::Messages,
        }
    }

    /// The messages with their sequence numbers, in order.
    pub fn messages(&self) -> Messages<'a> {
        Messages {
            buf: self.buf,
            at: MOLD_HEADER_LEN,
            left: self.message_count(),
            seq: self.sequence(),
        }
    }
}

/// Iterator over `(sequence, message)` of a validated packet.
pub struct Messages<'a> {
    buf: &'a [u8],
    at: usize,
    left: usize,
    seq: u64,
}

impl<'a> Iterator for Messages<'a> {
    type Item = (u64, &'a [u8]);
    fn next(&mut self) -> Option<(u64, &'a [u8])> {
        if self.left == 0 {
            return None;
        }
        let len = be_u16(self.buf, self.at) as usize;
        let msg = &self.buf[self.at + 2..self.at + 2 + len];
        self.at += 2 + len;
        self.left -= 1;
        let seq = self.seq;
        self.seq += 1;
        Some((seq, msg))
    }
}

/// Builds downstream packets in a reusable buffer.
#[derive(Debug)]
pub struct MoldWriter {
    buf: Vec<u8>,
    max_len: usize,
    count: u16,
}

impl MoldWriter {
    /// A writer whose packets never exceed `max_len` bytes (at least header + one block of 1).
    pub fn new(max_len: usize) -> MoldWriter {
        assert!((MOLD_HEADER_LEN + 3..=65_507).contains(&max_len));
        MoldWriter {
            buf: Vec::with_capacity(max_len),
            max_len,
            count: 0,
        }
    }

    /// Largest message a packet of this writer can carry.
    pub fn max_message_len(&self) -> usize {
        (self.max_len - MOLD_HEADER_LEN - 2).min(u16::MAX as usize)
    }

    /// Starts a packet whose first message has sequence `seq`.
    pub fn begin(&mut self, session: Session, seq: u64) {
        self.buf.clear();
        self.buf.extend_from_slice(&session.0);
        self.buf.extend_from_slice(&seq.to_be_bytes());
        self.buf.extend_from_slice(&0u16.to_be_bytes());
        self.count = 0;
    }

    /// Appends a message; false (and nothing written) when it does not fit.
    pub fn push(&mut self, msg: &[u8]) -> bool {
        if self.buf.len() + 2 + msg.len() > self.max_len || self.count == END_OF_SESSION - 1 {
            return false;
        }
        self.buf
            .extend_from_slice(&(msg.len() as u16).to_be_bytes());
        self.buf.extend_from_slice(msg);
        self.count += 1;
        self.buf[18..20].copy_from_slice(&self.count.to_be_bytes());
        true
    }

    /// Appends a message given as two parts (e.g. envelope and body).
    pub fn push2(&mut self, a: &[u8], b: &[u8]) -> bool {
        let len = a.len() + b.len();
        if self.buf.len() + 2 + len > self.max_len
            || len > u16::MAX as usize
            || self.count == END_OF_SESSION - 1
        {
            return false;
        }
        self.buf.extend_from_slice(&(len as u16).to_be_bytes());
        self.buf.extend_from_slice(a);
        self.buf.extend_from_slice(b);
        self.count += 1;
        self.buf[18..20].copy_from_slice(&self.count.to_be_bytes());
        true
    }

    /// Number of messages in the current packet.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// The packet so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// A heartbeat packet announcing `next_seq`.
pub fn heartbeat(session: Session, next_seq: u64) -> [u8; MOLD_HEADER_LEN] {
    header(session, next_seq, 0)
}

/// An end-of-session packet; `next_seq` is one past the last message.
pub fn end_of_session(session: Session, next_seq: u64) -> [u8; MOLD_HEADER_LEN] {
    header(session, next_seq, END_OF_SESSION)
}

fn header(session: Session, seq: u64, count: u16) -> [u8; MOLD_HEADER_LEN] {
    let mut h = [0u8; MOLD_HEADER_LEN];
    h[..10].copy_from_slice(&session.0);
    h[10..18].copy_from_slice(&seq.to_be_bytes());
    h[18..20].copy_from_slice(&count.to_be_bytes());
    h
}

/// A MoldUDP64 request packet: retransmit `count` messages from `sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub session: Session,
    pub sequence: u64,
    pub count: u16,
}

impl Request {
    /// Parses a request datagram (exactly 20 bytes, sequence ≥ 1, count ≥ 1).
    pub fn parse(buf: &[u8]) -> Result<Request, WireError> {
        const WHAT: &str = "MoldUDP64 request";
        need(WHAT, buf, 0, REQUEST_LEN)?;
        if buf.len() != REQUEST_LEN {
            return Err(WireError::Trailing {
                what: WHAT,
                extra: buf.len() - REQUEST_LEN,
            });
        }
        let r = Request {
            session: Session(buf[..10].try_into().expect("10 bytes")),
            sequence: be_u64(buf, 10),
            count: be_u16(buf, 18),
        };
        if r.sequence == 0 {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "sequence",
                value: 0,
            });
        }
        if r.count == 0 || r.count == END_OF_SESSION {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "count",
                value: r.count as u64,
            });
        }
        Ok(r)
    }

    /// The 20 bytes of the request.
    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        header(self.session, self.sequence, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> Session {
        Session::new("TEST").unwrap()
    }

    #[test]
    fn packet_round_trip() {
        let mut w = MoldWriter::new(100);
        w.begin(s(), 7);
        assert!(w.push(b"hello"));
        assert!(w.push2(b"ab", b"cd"));
        let p = MoldPacket::parse(w.bytes()).unwrap();
        assert_eq!(p.session(), s());
        assert_eq!(p.sequence(), 7);
        assert_eq!(p.kind(), PacketKind::Messages);
        let m: Vec<_> = p.messages().collect();
        assert_eq!(m, vec![(7, &b"hello"[..]), (8, &b"abcd"[..])]);
        // exact bytes: header then length-prefixed blocks, big-endian
        assert_eq!(&w.bytes()[10..20], &[0, 0, 0, 0, 0, 0, 0, 7, 0, 2]);
        assert_eq!(&w.bytes()[20..22], &[0, 5]);
    }

    #[test]
    fn packet_respects_max_len() {
        let mut w = MoldWriter::new(30);
        w.begin(s(), 1);
        assert!(w.push(b"12345678"));
        assert!(!w.push(b"x"));
        assert_eq!(w.bytes().len(), 30);
    }

    #[test]
    fn heartbeat_and_end() {
        let hb = heartbeat(s(), 42);
        let p = MoldPacket::parse(&hb).unwrap();
        assert_eq!(
            (p.kind(), p.sequence(), p.message_count()),
            (PacketKind::Heartbeat, 42, 0)
        );
        let e = end_of_session(s(), 42);
        assert_eq!(
            MoldPacket::parse(&e).unwrap().kind(),
            PacketKind::EndOfSession
        );
    }

    #[test]
    fn malformed_packets_are_errors() {
        assert!(MoldPacket::parse(&[0; 19]).is_err());
        let mut w = MoldWriter::new(100);
        w.begin(s(), 1);
        w.push(b"hello");
        let good = w.bytes().to_vec();
        assert!(MoldPacket::parse(&good[..good.len() - 1]).is_err());
        let mut extra = good.clone();
        extra.push(0);
        assert!(MoldPacket::parse(&extra).is_err());
        let mut zero = good.clone();
        zero[10..18].copy_from_slice(&0u64.to_be_bytes());
        assert!(MoldPacket::parse(&zero).is_err());
        let mut eos_with_body = end_of_session(s(), 3).to_vec();
        eos_with_body.push(1);
        assert!(MoldPacket::parse(&eos_with_body).is_err());
    }

    #[test]
    fn request_round_trip_and_errors() {
        let r = Request {
            session: s(),
            sequence: 5,
            count: 10,
        };
        assert_eq!(Request::parse(&r.encode()).unwrap(), r);
        assert!(Request::parse(&r.encode()[..19]).is_err());
        let zero = Request { count: 0, ..r };
        assert!(Request::parse(&zero.encode()).is_err());
        let mut long = r.encode().to_vec();
        long.push(0);
        assert!(Request::parse(&long).is_err());
    }
}

//! Sequencer ↔ sequencer messages of a cluster (our own format, `docs/ha.md`), and the
//! replayers' announcements (`docs/ha.md`, "Replayer discovery").
//!
//! The cluster protocol is Raft's (Ongaro & Ousterhout, "In Search of an Understandable
//! Consensus Algorithm", and the PreVote and leadership-transfer extensions of Ongaro's
//! thesis, §9.6 and §3.10): vote requests and answers, appends with their answers, and
//! timeout-now. The log is the sequenced stream itself: index = sequence number.
//!
//! Little-endian. Header (24 bytes) of every message:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `"SC"` |
//! | 2 | 1 | version = 1 |
//! | 3 | 1 | type (below) |
//! | 4 | 10 | session (MoldUDP64 session name) |
//! | 14 | 2 | sender's member id |
//! | 16 | 8 | term |
//!
//! Bodies:
//!
//! * 1 `RequestVote`: `last_index u64 | last_term u64 | flags u8` (bit 0 pre-vote, bit 1
//!   leadership transfer) `| reserved u8[7]`
//! * 2 `Vote`: `granted u8 | pre_vote u8 | reserved u8[6]`
//! * 3 `Append`: `prev_index u64 | prev_term u64 | commit u64 | count u16 | reserved u16`,
//!   then `count` entries `length u16 | message` (each message exactly as published:
//!   envelope + body)
//! * 4 `AppendReply`: `success u8 | reserved u8[7] | index u64` (success: the last index
//!   the sender now holds matching the leader's log; failure: the next index the leader
//!   should try)
//! * 5 `TimeoutNow`: no body (start an election now; planned switchover)
//!
//! Announcement of a replayer (28 bytes; type 16 under magic `"SD"`): `magic "SD" | version
//! u8 = 1 | type u8 = 16 | session [10] | ipv4 [4] | port u16 | next_seq u64`.

use crate::{le_u16, le_u64, need, Session, WireError};

/// Length of the header of every cluster message.
pub const CLUSTER_HEADER_LEN: usize = 24;
/// Header of an `Append` (cluster header included) before its entries.
pub const APPEND_HEADER_LEN: usize = CLUSTER_HEADER_LEN + 28;
/// Length of a replayer announcement.
pub const ANNOUNCE_LEN: usize = 28;

const MAGIC: [u8; 2] = *b"SC";
const ANNOUNCE_MAGIC: [u8; 2] = *b"SD";
const VERSION: u8 = 1;

pub const TYPE_REQUEST_VOTE: u8 = 1;
pub const TYPE_VOTE: u8 = 2;
pub const TYPE_APPEND: u8 = 3;
pub const TYPE_APPEND_REPLY: u8 = 4;
pub const TYPE_TIMEOUT_NOW: u8 = 5;
const TYPE_ANNOUNCE: u8 = 16;

/// A cluster message, decoded (an `Append`'s entries stay in the datagram: [`Append`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body<'a> {
    RequestVote {
        last_index: u64,
        last_term: u64,
        pre_vote: bool,
        transfer: bool,
    },
    Vote {
        granted: bool,
        pre_vote: bool,
    },
    Append(Append<'a>),
    AppendReply {
        success: bool,
        index: u64,
    },
    TimeoutNow,
}

/// The entries of an `Append`, validated: `count` messages back to back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Append<'a> {
    pub prev_index: u64,
    pub prev_term: u64,
    pub commit: u64,
    count: u16,
    entries: &'a [u8],
}

impl<'a> Append<'a> {
    /// Number of entries.
    pub fn count(&self) -> usize {
        self.count as usize
    }

    /// The entries in order.
    pub fn entries(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let mut at = 0;
        let buf = self.entries;
        (0..self.count).map(move |_| {
            let len = le_u16(buf, at) as usize;
            let m = &buf[at + 2..at + 2 + len];
            at += 2 + len;
            m
        })
    }
}

/// A validated cluster message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub session: Session,
    pub from: u16,
    pub term: u64,
    pub body: Body<'a>,
}

/// True when `buf` starts like a cluster message (to tell it from MoldUDP64 answers arriving
/// on the same socket).
pub fn is_cluster_message(buf: &[u8]) -> bool {
    buf.len() >= 2 && buf[0..2] == MAGIC
}

impl<'a> Message<'a> {
    /// Validates a whole datagram.
    pub fn parse(buf: &'a [u8]) -> Result<Message<'a>, WireError> {
        const WHAT: &str = "cluster message";
        need(WHAT, buf, 0, CLUSTER_HEADER_LEN)?;
        if buf[0..2] != MAGIC {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "magic",
                value: le_u16(buf, 0) as u64,
            });
        }
        if buf[2] != VERSION {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "version",
                value: buf[2] as u64,
            });
        }
        let session = Session(buf[4..14].try_into().expect("10"));
        let from = le_u16(buf, 14);
        if from == 0 {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "from",
                value: 0,
            });
        }
        let term = le_u64(buf, 16);
        let b = CLUSTER_HEADER_LEN;
        let exact = |len: usize| -> Result<(), WireError> {
            need(WHAT, buf, b, len)?;
            if buf.len() != b + len {
                return Err(WireError::Trailing {
                    what: WHAT,
                    extra: buf.len() - b - len,
                });
            }
            Ok(())
        };
        let body = match buf[3] {
            TYPE_REQUEST_VOTE => {
                exact(24)?;
                let flags = buf[b + 16];
                if flags & !3 != 0 {
                    return Err(WireError::Invalid {
                        what: WHAT,
                        field: "flags",
                        value: flags as u64,
                    });
                }
                Body::RequestVote {
                    last_index: le_u64(buf, b),
                    last_term: le_u64(buf, b + 8),
                    pre_vote: flags & 1 != 0,
                    transfer: flags & 2 != 0,
                }
            }
            TYPE_VOTE => {
                exact(8)?;
                Body::Vote {
                    granted: buf[b] != 0,
                    pre_vote: buf[b + 1] != 0,
                }
            }
            TYPE_APPEND => {
                need(WHAT, buf, b, 28)?;
                let count = le_u16(buf, b + 24);
                let mut at = APPEND_HEADER_LEN;
                for _ in 0..count {
                    need(WHAT, buf, at, 2)?;
                    let len = le_u16(buf, at) as usize;
                    need(WHAT, buf, at + 2, len)?;
                    at += 2 + len;
                }
                if at != buf.len() {
                    return Err(WireError::Trailing {
                        what: WHAT,
                        extra: buf.len() - at,
                    });
                }
                let prev_index = le_u64(buf, b);
                if prev_index.checked_add(count as u64 + 1).is_none() {
                    return Err(WireError::Invalid {
                        what: WHAT,
                        field: "prev_index",
                        value: prev_index,
                    });
                }
                Body::Append(Append {
                    prev_index,
                    prev_term: le_u64(buf, b + 8),
                    commit: le_u64(buf, b + 16),
                    count,
                    entries: &buf[APPEND_HEADER_LEN..],
                })
            }
            TYPE_APPEND_REPLY => {
                exact(16)?;
                Body::AppendReply {
                    success: buf[b] != 0,
                    index: le_u64(buf, b + 8),
                }
            }
            TYPE_TIMEOUT_NOW => {
                exact(0)?;
                Body::TimeoutNow
            }
            t => {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "type",
                    value: t as u64,
                })
            }
        };
        Ok(Message {
            session,
            from,
            term,
            body,
        })
    }
}

fn header(out: &mut Vec<u8>, ty: u8, session: Session, from: u16, term: u64) {
    out.clear();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(ty);
    out.extend_from_slice(&session.0);
    out.extend_from_slice(&from.to_le_bytes());
    out.extend_from_slice(&term.to_le_bytes());
}

/// Encodes a message other than `Append` (see [`AppendWriter`]) into `out`.
pub fn encode(out: &mut Vec<u8>, session: Session, from: u16, term: u64, body: &Body<'_>) {
    match *body {
        Body::RequestVote {
            last_index,
            last_term,
            pre_vote,
            transfer,
        } => {
            header(out, TYPE_REQUEST_VOTE, session, from, term);
            out.extend_from_slice(&last_index.to_le_bytes());
            out.extend_from_slice(&last_term.to_le_bytes());
            out.push(u8::from(pre_vote) | (u8::from(transfer) << 1));
            out.extend_from_slice(&[0; 7]);
        }
        Body::Vote { granted, pre_vote } => {
            header(out, TYPE_VOTE, session, from, term);
            out.push(u8::from(granted));
            out.push(u8::from(pre_vote));
            out.extend_from_slice(&[0; 6]);
        }
        Body::AppendReply { success, index } => {
            header(out, TYPE_APPEND_REPLY, session, from, term);
            out.push(u8::from(success));
            out.extend_from_slice(&[0; 7]);
            out.extend_from_slice(&index.to_le_bytes());
        }
        Body::TimeoutNow => header(out, TYPE_TIMEOUT_NOW, session, from, term),
        Body::Append(a) => {
            let mut w = AppendWriter::new(usize::MAX);
            w.begin(session, from, term, a.prev_index, a.prev_term, a.commit);
            for e in a.entries() {
                w.push(e);
            }
            out.clear();
            out.extend_from_slice(w.bytes());
        }
    }
}

/// Builds `Append` datagrams of at most `max_len` bytes.
#[derive(Debug, Clone)]
pub struct AppendWriter {
    buf: Vec<u8>,
    max_len: usize,
    count: u16,
}

impl AppendWriter {
    pub fn new(max_len: usize) -> AppendWriter {
        AppendWriter {
            buf: Vec::with_capacity(max_len.min(1 << 16)),
            max_len,
            count: 0,
        }
    }

    /// Starts a datagram.
    pub fn begin(
        &mut self,
        session: Session,
        from: u16,
        term: u64,
        prev_index: u64,
        prev_term: u64,
        commit: u64,
    ) {
        header(&mut self.buf, TYPE_APPEND, session, from, term);
        self.buf.extend_from_slice(&prev_index.to_le_bytes());
        self.buf.extend_from_slice(&prev_term.to_le_bytes());
        self.buf.extend_from_slice(&commit.to_le_bytes());
        self.buf.extend_from_slice(&[0; 4]);
        self.count = 0;
    }

    /// Adds an entry; false when it does not fit (the datagram is then unchanged). An entry
    /// always fits an empty datagram.
    pub fn push(&mut self, msg: &[u8]) -> bool {
        if self.count == u16::MAX
            || (self.count > 0 && self.buf.len() + 2 + msg.len() > self.max_len)
        {
            return false;
        }
        self.buf
            .extend_from_slice(&(msg.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(msg);
        self.count += 1;
        self.buf[CLUSTER_HEADER_LEN + 24..CLUSTER_HEADER_LEN + 26]
            .copy_from_slice(&self.count.to_le_bytes());
        true
    }

    pub fn count(&self) -> usize {
        self.count as usize
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// A replayer's announcement: where it serves requests and how far its journal reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announce {
    pub session: Session,
    pub address: std::net::SocketAddrV4,
    /// One past the last message the replayer holds.
    pub next_seq: u64,
}

impl Announce {
    pub fn parse(buf: &[u8]) -> Result<Announce, WireError> {
        const WHAT: &str = "replayer announcement";
        need(WHAT, buf, 0, ANNOUNCE_LEN)?;
        if buf[0..2] != ANNOUNCE_MAGIC || buf[2] != VERSION || buf[3] != TYPE_ANNOUNCE {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "magic",
                value: le_u16(buf, 0) as u64,
            });
        }
        if buf.len() != ANNOUNCE_LEN {
            return Err(WireError::Trailing {
                what: WHAT,
                extra: buf.len() - ANNOUNCE_LEN,
            });
        }
        let ip: [u8; 4] = buf[14..18].try_into().expect("4");
        Ok(Announce {
            session: Session(buf[4..14].try_into().expect("10")),
            address: std::net::SocketAddrV4::new(ip.into(), le_u16(buf, 18)),
            next_seq: le_u64(buf, 20),
        })
    }

    pub fn encode(&self) -> [u8; ANNOUNCE_LEN] {
        let mut b = [0u8; ANNOUNCE_LEN];
        b[0..2].copy_from_slice(&ANNOUNCE_MAGIC);
        b[2] = VERSION;
        b[3] = TYPE_ANNOUNCE;
        b[4..14].copy_from_slice(&self.session.0);
        b[14..18].copy_from_slice(&self.address.ip().octets());
        b[18..20].copy_from_slice(&self.address.port().to_le_bytes());
        b[20..28].copy_from_slice(&self.next_seq.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s() -> Session {
        Session::new("T").unwrap()
    }

    #[test]
    fn round_trip_every_message() {
        let mut out = Vec::new();
        for body in [
            Body::RequestVote {
                last_index: 9,
                last_term: 3,
                pre_vote: true,
                transfer: false,
            },
            Body::RequestVote {
                last_index: 0,
                last_term: 0,
                pre_vote: false,
                transfer: true,
            },
            Body::Vote {
                granted: true,
                pre_vote: false,
            },
            Body::AppendReply {
                success: false,
                index: 77,
            },
            Body::TimeoutNow,
        ] {
            encode(&mut out, s(), 2, 5, &body);
            let m = Message::parse(&out).unwrap();
            assert_eq!((m.session, m.from, m.term), (s(), 2, 5));
            assert_eq!(m.body, body);
            assert!(Message::parse(&out[..out.len() - 1]).is_err());
        }
        let mut w = AppendWriter::new(70);
        w.begin(s(), 3, 7, 10, 6, 9);
        assert!(w.push(b"0123456789"));
        assert!(!w.push(b"0123456789abcdefghijk"), "too large for 70 bytes");
        assert!(w.push(b"xy"));
        let m = Message::parse(w.bytes()).unwrap();
        let Body::Append(a) = m.body else { panic!() };
        assert_eq!(
            (a.prev_index, a.prev_term, a.commit, a.count()),
            (10, 6, 9, 2)
        );
        let e: Vec<&[u8]> = a.entries().collect();
        assert_eq!(e, vec![&b"0123456789"[..], &b"xy"[..]]);
        let mut bytes = w.bytes().to_vec();
        bytes.push(0);
        assert!(Message::parse(&bytes).is_err());
        let a2 = Announce {
            session: s(),
            address: "127.0.0.1:31002".parse().unwrap(),
            next_seq: 12345,
        };
        assert_eq!(Announce::parse(&a2.encode()).unwrap(), a2);
        assert!(is_cluster_message(w.bytes()) && !is_cluster_message(&a2.encode()));
    }
}

//! SoupBinTCP 4.0 packets, byte-exact, over byte slices. No I/O.
//!
//! Every packet is `packet_length u16 (big-endian, counts the type byte and the payload) |
//! packet_type char | payload`. Alpha fields are ASCII, left-justified and padded with
//! spaces on the right; numeric fields are ASCII decimal. We send numeric fields
//! right-justified (padded with spaces on the left) and accept them justified either way.
//!
//! | type | from | payload |
//! |---|---|---|
//! | `+` debug | both | free text |
//! | `A` login accepted | server | session alpha(10), sequence numeric(20) |
//! | `J` login rejected | server | reason alpha(1): `A` not authorized, `S` session not available |
//! | `S` sequenced data | server | one message |
//! | `H` server heartbeat | server | — |
//! | `Z` end of session | server | — |
//! | `L` login request | client | username alpha(6), password alpha(10), session alpha(10), sequence numeric(20) |
//! | `U` unsequenced data | client | one message |
//! | `R` client heartbeat | client | — |
//! | `O` logout request | client | — |

/// Bytes of the length prefix.
pub const LEN_PREFIX: usize = 2;
/// Largest payload of a data packet (the length field counts the type byte too).
pub const MAX_PAYLOAD: usize = u16::MAX as usize - 1;
/// Payload length of a login request.
pub const LOGIN_REQUEST_PAYLOAD: usize = 46;
/// Payload length of a login accepted.
pub const LOGIN_ACCEPTED_PAYLOAD: usize = 30;

/// Why a login was rejected (`J`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// `A`: username or password wrong (which one is never said).
    NotAuthorized,
    /// `S`: the requested session does not exist (or is not this server's).
    SessionNotAvailable,
}

impl RejectReason {
    pub fn code(self) -> u8 {
        match self {
            RejectReason::NotAuthorized => b'A',
            RejectReason::SessionNotAvailable => b'S',
        }
    }
}

/// A login request (`L`) with its fields as sent (alpha fields keep their padding).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct LoginRequest {
    pub username: [u8; 6],
    pub password: [u8; 10],
    /// All spaces: the session currently active.
    pub session: [u8; 10],
    /// 0: start at live; 1: from the first message; N: from message N.
    pub sequence: u64,
}

impl std::fmt::Debug for LoginRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginRequest")
            .field("username", &String::from_utf8_lossy(&self.username))
            .field("password", &"<hidden>")
            .field("session", &String::from_utf8_lossy(&self.session))
            .field("sequence", &self.sequence)
            .finish()
    }
}

impl LoginRequest {
    /// Builds a request from text fields (each at most its width, printable ASCII).
    pub fn new(
        username: &str,
        password: &str,
        session: &str,
        sequence: u64,
    ) -> Result<LoginRequest, String> {
        Ok(LoginRequest {
            username: alpha::<6>("username", username)?,
            password: alpha::<10>("password", password)?,
            session: alpha::<10>("session", session)?,
            sequence,
        })
    }

    /// True when the request names no session (the server's current one is meant).
    pub fn session_is_blank(&self) -> bool {
        self.session.iter().all(|&b| b == b' ')
    }
}

/// Pads `text` to an alpha field of width `N`.
pub fn alpha<const N: usize>(field: &str, text: &str) -> Result<[u8; N], String> {
    if text.len() > N || !text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(format!(
            "{field} must be at most {N} printable ASCII characters"
        ));
    }
    let mut a = [b' '; N];
    a[..text.len()].copy_from_slice(text.as_bytes());
    Ok(a)
}

/// One SoupBinTCP packet, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packet<'a> {
    Debug(&'a [u8]),
    LoginAccepted { session: [u8; 10], sequence: u64 },
    LoginRejected(RejectReason),
    SequencedData(&'a [u8]),
    ServerHeartbeat,
    EndOfSession,
    LoginRequest(LoginRequest),
    UnsequencedData(&'a [u8]),
    ClientHeartbeat,
    LogoutRequest,
}

/// Bytes that are not a SoupBinTCP packet; the link is closed with this as the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SoupError {
    #[error("SoupBinTCP: packet length 0 (no packet type)")]
    EmptyPacket,
    #[error("SoupBinTCP: unknown packet type 0x{0:02x}")]
    UnknownType(u8),
    #[error("SoupBinTCP: packet type {kind:?} needs a {need}-byte payload, got {got}")]
    BadLength { kind: char, need: usize, got: usize },
    #[error("SoupBinTCP: {field}: not a right- or left-justified decimal number")]
    BadNumber { field: &'static str },
    #[error("SoupBinTCP: login rejected with unknown reason 0x{0:02x}")]
    BadReason(u8),
    #[error("SoupBinTCP: packet type {0:?} is not allowed from this side")]
    WrongDirection(char),
    #[error("SoupBinTCP: packet of {got} bytes exceeds the limit of {limit}")]
    TooLong { got: usize, limit: usize },
}

/// Parses a numeric field: ASCII digits with spaces on either side (right- or left-justified).
pub fn parse_numeric(field: &'static str, b: &[u8]) -> Result<u64, SoupError> {
    let bad = || SoupError::BadNumber { field };
    let start = b.iter().position(|&c| c != b' ').ok_or_else(bad)?;
    let end = b
        .iter()
        .rposition(|&c| c != b' ')
        .expect("a non-space exists")
        + 1;
    let mut v: u64 = 0;
    for &c in &b[start..end] {
        if !c.is_ascii_digit() {
            return Err(bad());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(v)
}

/// Writes `v` right-justified into a 20-byte numeric field.
pub fn write_numeric20(out: &mut [u8; 20], v: u64) {
    *out = [b' '; 20];
    let mut v = v;
    let mut i = 20;
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
}

/// The payload length of the fixed-size packet types.
fn fixed_payload(kind: u8) -> Option<usize> {
    match kind {
        b'H' | b'Z' | b'R' | b'O' => Some(0),
        b'J' => Some(1),
        b'A' => Some(LOGIN_ACCEPTED_PAYLOAD),
        b'L' => Some(LOGIN_REQUEST_PAYLOAD),
        _ => None,
    }
}

fn fixed(kind: u8, payload: &[u8], need: usize) -> Result<(), SoupError> {
    if payload.len() == need {
        Ok(())
    } else {
        Err(SoupError::BadLength {
            kind: kind as char,
            need,
            got: payload.len(),
        })
    }
}

/// Parses the packet at the front of `buf`.
///
/// `Ok(None)`: more bytes are needed. `Ok(Some((packet, used)))`: `used` bytes form the
/// packet. `max_len` bounds the packet length field (the type byte and payload).
pub fn parse(buf: &[u8], max_len: usize) -> Result<Option<(Packet<'_>, usize)>, SoupError> {
    if buf.len() < LEN_PREFIX {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[0], buf[1]]) as usize;
    if len == 0 {
        return Err(SoupError::EmptyPacket);
    }
    if len > max_len {
        return Err(SoupError::TooLong {
            got: len,
            limit: max_len,
        });
    }
    if buf.len() < LEN_PREFIX + len {
        // Check the type and fixed lengths early, so garbage is refused before its whole
        // announced length arrives.
        if buf.len() > LEN_PREFIX {
            let kind = buf[2];
            match fixed_payload(kind) {
                None if !b"+SU".contains(&kind) => return Err(SoupError::UnknownType(kind)),
                Some(need) if need != len - 1 => {
                    return Err(SoupError::BadLength {
                        kind: kind as char,
                        need,
                        got: len - 1,
                    })
                }
                _ => {}
            }
        }
        return Ok(None);
    }
    let kind = buf[2];
    let p = &buf[3..LEN_PREFIX + len];
    let packet = match kind {
        b'+' => Packet::Debug(p),
        b'S' => Packet::SequencedData(p),
        b'U' => Packet::UnsequencedData(p),
        b'H' => fixed(kind, p, 0).map(|_| Packet::ServerHeartbeat)?,
        b'Z' => fixed(kind, p, 0).map(|_| Packet::EndOfSession)?,
        b'R' => fixed(kind, p, 0).map(|_| Packet::ClientHeartbeat)?,
        b'O' => fixed(kind, p, 0).map(|_| Packet::LogoutRequest)?,
        b'J' => {
            fixed(kind, p, 1)?;
            Packet::LoginRejected(match p[0] {
                b'A' => RejectReason::NotAuthorized,
                b'S' => RejectReason::SessionNotAvailable,
                other => return Err(SoupError::BadReason(other)),
            })
        }
        b'A' => {
            fixed(kind, p, LOGIN_ACCEPTED_PAYLOAD)?;
            Packet::LoginAccepted {
                session: p[..10].try_into().expect("10 bytes"),
                sequence: parse_numeric("sequence", &p[10..30])?,
            }
        }
        b'L' => {
            fixed(kind, p, LOGIN_REQUEST_PAYLOAD)?;
            Packet::LoginRequest(LoginRequest {
                username: p[..6].try_into().expect("6 bytes"),
                password: p[6..16].try_into().expect("10 bytes"),
                session: p[16..26].try_into().expect("10 bytes"),
                sequence: parse_numeric("requested sequence number", &p[26..46])?,
            })
        }
        other => return Err(SoupError::UnknownType(other)),
    };
    Ok(Some((packet, LEN_PREFIX + len)))
}

/// True for the packet types a server sends.
pub fn from_server(p: &Packet<'_>) -> bool {
    matches!(
        p,
        Packet::Debug(_)
            | Packet::LoginAccepted { .. }
            | Packet::LoginRejected(_)
            | Packet::SequencedData(_)
            | Packet::ServerHeartbeat
            | Packet::EndOfSession
    )
}

/// The type character of a packet.
pub fn type_char(p: &Packet<'_>) -> char {
    (match p {
        Packet::Debug(_) => b'+',
        Packet::LoginAccepted { .. } => b'A',
        Packet::LoginRejected(_) => b'J',
        Packet::SequencedData(_) => b'S',
        Packet::ServerHeartbeat => b'H',
        Packet::EndOfSession => b'Z',
        Packet::LoginRequest(_) => b'L',
        Packet::UnsequencedData(_) => b'U',
        Packet::ClientHeartbeat => b'R',
        Packet::LogoutRequest => b'O',
    }) as char
}

/// Appends the encoding of `p` to `out`. Data payloads must be at most [`MAX_PAYLOAD`].
pub fn write(out: &mut Vec<u8>, p: &Packet<'_>) {
    let kind = type_char(p) as u8;
    let mut head = |len: usize| {
        debug_assert!(len <= MAX_PAYLOAD, "payload too long for SoupBinTCP");
        out.extend_from_slice(&((len + 1) as u16).to_be_bytes());
        out.push(kind);
    };
    match p {
        Packet::Debug(d) | Packet::SequencedData(d) | Packet::UnsequencedData(d) => {
            head(d.len());
            out.extend_from_slice(d);
        }
        Packet::ServerHeartbeat
        | Packet::EndOfSession
        | Packet::ClientHeartbeat
        | Packet::LogoutRequest => head(0),
        Packet::LoginRejected(r) => {
            head(1);
            out.push(r.code());
        }
        Packet::LoginAccepted { session, sequence } => {
            head(LOGIN_ACCEPTED_PAYLOAD);
            out.extend_from_slice(session);
            let mut n = [0u8; 20];
            write_numeric20(&mut n, *sequence);
            out.extend_from_slice(&n);
        }
        Packet::LoginRequest(l) => {
            head(LOGIN_REQUEST_PAYLOAD);
            out.extend_from_slice(&l.username);
            out.extend_from_slice(&l.password);
            out.extend_from_slice(&l.session);
            let mut n = [0u8; 20];
            write_numeric20(&mut n, l.sequence);
            out.extend_from_slice(&n);
        }
    }
}

/// Appends a sequenced data packet (`S`) carrying `msg`.
#[inline]
pub fn write_sequenced(out: &mut Vec<u8>, msg: &[u8]) {
    out.extend_from_slice(&((msg.len() + 1) as u16).to_be_bytes());
    out.push(b'S');
    out.extend_from_slice(msg);
}

/// Compares two byte strings in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // Keep the optimiser from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(p: &Packet<'_>) -> Vec<u8> {
        let mut v = Vec::new();
        write(&mut v, p);
        v
    }

    #[test]
    fn login_request_is_byte_exact() {
        let l = LoginRequest::new("ME", "secret", "", 42).unwrap();
        let b = enc(&Packet::LoginRequest(l));
        let mut want = vec![0, 47, b'L'];
        want.extend_from_slice(b"ME    secret              ");
        want.extend_from_slice(b"                  42");
        assert_eq!(b, want);
        assert_eq!(b.len(), 49);
        let (p, used) = parse(&b, 65535).unwrap().unwrap();
        assert_eq!(used, 49);
        assert_eq!(p, Packet::LoginRequest(l));
    }

    #[test]
    fn login_accepted_is_byte_exact_and_both_justifications_parse() {
        let s = alpha::<10>("session", "TEST").unwrap();
        let b = enc(&Packet::LoginAccepted {
            session: s,
            sequence: 7,
        });
        let mut want = vec![0, 31, b'A'];
        want.extend_from_slice(b"TEST      ");
        want.extend_from_slice(b"                   7");
        assert_eq!(b, want);
        let mut left = want.clone();
        left[13..].copy_from_slice(b"7                   ");
        for bytes in [want, left] {
            let (p, _) = parse(&bytes, 65535).unwrap().unwrap();
            assert_eq!(
                p,
                Packet::LoginAccepted {
                    session: s,
                    sequence: 7
                }
            );
        }
    }

    #[test]
    fn fixed_packets() {
        assert_eq!(enc(&Packet::ServerHeartbeat), [0, 1, b'H']);
        assert_eq!(enc(&Packet::ClientHeartbeat), [0, 1, b'R']);
        assert_eq!(enc(&Packet::EndOfSession), [0, 1, b'Z']);
        assert_eq!(enc(&Packet::LogoutRequest), [0, 1, b'O']);
        assert_eq!(
            enc(&Packet::LoginRejected(RejectReason::NotAuthorized)),
            [0, 2, b'J', b'A']
        );
        assert_eq!(
            enc(&Packet::LoginRejected(RejectReason::SessionNotAvailable)),
            [0, 2, b'J', b'S']
        );
        assert_eq!(enc(&Packet::SequencedData(b"xy")), [0, 3, b'S', b'x', b'y']);
        let mut v = Vec::new();
        write_sequenced(&mut v, b"xy");
        assert_eq!(v, [0, 3, b'S', b'x', b'y']);
        assert_eq!(enc(&Packet::UnsequencedData(b"")), [0, 1, b'U']);
    }

    #[test]
    fn malformed_packets_are_errors() {
        assert_eq!(parse(&[0, 0], 100), Err(SoupError::EmptyPacket));
        assert_eq!(parse(&[0, 1, b'Q'], 100), Err(SoupError::UnknownType(b'Q')));
        assert_eq!(parse(&[0, 9, b'Q'], 100), Err(SoupError::UnknownType(b'Q')));
        assert!(matches!(
            parse(&[0, 2, b'H', 0], 100),
            Err(SoupError::BadLength { kind: 'H', .. })
        ));
        assert_eq!(
            parse(&[0, 2, b'J', b'X'], 100),
            Err(SoupError::BadReason(b'X'))
        );
        assert!(matches!(
            parse(&[1, 0, b'S'], 100),
            Err(SoupError::TooLong { .. })
        ));
        assert_eq!(parse(&[0, 5, b'S', 1], 100), Ok(None));
        assert_eq!(parse(&[0], 100), Ok(None));
        let mut l = enc(&Packet::LoginRequest(
            LoginRequest::new("a", "b", "", 1).unwrap(),
        ));
        l[40] = b'x';
        assert!(matches!(parse(&l, 100), Err(SoupError::BadNumber { .. })));
        l[29..49].copy_from_slice(&[b' '; 20]);
        assert!(matches!(parse(&l, 100), Err(SoupError::BadNumber { .. })));
        l[29..49].copy_from_slice(b"99999999999999999999");
        assert!(matches!(parse(&l, 100), Err(SoupError::BadNumber { .. })));
        l[29..49].copy_from_slice(b"  1 2               ");
        assert!(matches!(parse(&l, 100), Err(SoupError::BadNumber { .. })));
    }

    #[test]
    fn numeric_fields() {
        let mut n = [0u8; 20];
        write_numeric20(&mut n, 0);
        assert_eq!(&n, b"                   0");
        write_numeric20(&mut n, u64::MAX);
        assert_eq!(&n, b"18446744073709551615");
        assert_eq!(parse_numeric("x", b"  12  ").unwrap(), 12);
        assert_eq!(parse_numeric("x", b"00012").unwrap(), 12);
    }

    #[test]
    fn constant_time_compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]

        /// Any bytes: parse never panics, and what parses re-encodes to the same bytes
        /// (numeric fields re-justified).
        #[test]
        fn parse_any_bytes(buf in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(Some((p, used))) = parse(&buf, 65535) {
                prop_assert!(used <= buf.len());
                let again = enc(&p);
                prop_assert_eq!(again.len(), used);
                let (q, _) = parse(&again, 65535).unwrap().unwrap();
                prop_assert_eq!(p, q);
            }
        }

        #[test]
        fn round_trip_data(kind in 0u8..3, payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let p = match kind {
                0 => Packet::SequencedData(&payload),
                1 => Packet::UnsequencedData(&payload),
                _ => Packet::Debug(&payload),
            };
            let b = enc(&p);
            prop_assert_eq!(parse(&b, 65535).unwrap().unwrap(), (p, b.len()));
            // Every strict prefix asks for more bytes.
            for cut in 0..b.len() {
                prop_assert_eq!(parse(&b[..cut], 65535).unwrap(), None);
            }
        }

        #[test]
        fn round_trip_login(seq in any::<u64>(), u in "[ -~]{0,6}", pw in "[ -~]{0,10}", s in "[ -~]{0,10}") {
            let l = LoginRequest::new(&u, &pw, &s, seq).unwrap();
            let b = enc(&Packet::LoginRequest(l));
            prop_assert_eq!(parse(&b, 65535).unwrap().unwrap(), (Packet::LoginRequest(l), 49));
        }
    }
}

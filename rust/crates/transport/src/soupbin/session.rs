//! SoupBinTCP 4.0 sessions as state machines: bytes and the time in, bytes to send and
//! events out. No I/O: the TCP layer (`crate::tcp`) moves the bytes, tests use a virtual
//! clock.
//!
//! Both sides send a heartbeat after `heartbeat_ns` (1 s) without sending anything and drop
//! the link after `timeout_ns` (15 s) without receiving anything.

use super::frame::{self, LoginRequest, Packet, RejectReason, SoupError};

/// Heartbeat and silence limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// A heartbeat is sent after this long without sending.
    pub heartbeat_ns: u64,
    /// The link is dropped after this long without receiving.
    pub timeout_ns: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            heartbeat_ns: 1_000_000_000,
            timeout_ns: 15_000_000_000,
        }
    }
}

/// Bytes waiting to be written to the socket, consumed from the front without moving the
/// rest on every write.
#[derive(Debug, Default)]
pub struct OutBuf {
    buf: Vec<u8>,
    start: usize,
}

impl OutBuf {
    /// The bytes not yet written.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `n` bytes were written.
    pub fn consume(&mut self, n: usize) {
        self.start += n;
        debug_assert!(self.start <= self.buf.len());
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > (1 << 20) && self.start > self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
    /// The vector to append packets to.
    pub fn vec(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// Bytes received but not yet parsed.
#[derive(Debug, Default)]
struct InBuf {
    buf: Vec<u8>,
}

/// Runs `each` over the whole packets in `held` + `data`; keeps the partial tail in `held`.
/// `each` returns false to stop early (the rest is kept for later).
fn feed(
    held: &mut InBuf,
    data: &[u8],
    max_len: usize,
    mut each: impl FnMut(Packet<'_>) -> bool,
) -> Result<(), SoupError> {
    let stopped = std::cell::Cell::new(false);
    let mut run = |buf: &[u8]| -> Result<usize, SoupError> {
        let mut at = 0;
        while !stopped.get() {
            let Some((p, used)) = frame::parse(&buf[at..], max_len)? else {
                break;
            };
            at += used;
            stopped.set(!each(p));
        }
        Ok(at)
    };
    let mut data = data;
    if !held.buf.is_empty() {
        // Complete the held partial packet with just the bytes it lacks, so the rest of
        // `data` is parsed in place rather than copied.
        if held.buf.len() < frame::LEN_PREFIX {
            let k = (frame::LEN_PREFIX - held.buf.len()).min(data.len());
            held.buf.extend_from_slice(&data[..k]);
            data = &data[k..];
        }
        if held.buf.len() >= frame::LEN_PREFIX {
            let total = frame::LEN_PREFIX + u16::from_be_bytes([held.buf[0], held.buf[1]]) as usize;
            let k = total.saturating_sub(held.buf.len()).min(data.len());
            held.buf.extend_from_slice(&data[..k]);
            data = &data[k..];
        }
        let buf = std::mem::take(&mut held.buf);
        let used = run(&buf);
        held.buf = buf;
        let used = used?;
        held.buf.drain(..used);
        if !held.buf.is_empty() || stopped.get() {
            // Still incomplete (or stopped early): keep the rest too.
            held.buf.extend_from_slice(data);
            return Ok(());
        }
    }
    let used = run(data)?;
    held.buf.extend_from_slice(&data[used..]);
    Ok(())
}

/// Where a server-side session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Connected, waiting for a login request.
    AwaitingLogin,
    /// A login request arrived; the server must [`ServerSession::accept`] or
    /// [`ServerSession::reject`] it.
    LoginPending(LoginRequest),
    /// Logged in: sequenced data flows.
    Active,
    /// Finished: the output is flushed, then the link is closed for `reason`.
    Closing(String),
}

/// The server's side of one client connection.
#[derive(Debug)]
pub struct ServerSession {
    state: ServerState,
    timing: Timing,
    max_in: usize,
    inbuf: InBuf,
    out: OutBuf,
    last_recv_ns: u64,
    last_sent_ns: u64,
    next_seq: u64,
    /// Unsequenced packets received.
    pub unsequenced: u64,
}

impl ServerSession {
    /// A new connection at `now_ns`; `max_in` bounds the client's packet length.
    pub fn new(now_ns: u64, timing: Timing, max_in: usize) -> ServerSession {
        ServerSession {
            state: ServerState::AwaitingLogin,
            timing,
            max_in: max_in.max(frame::LOGIN_REQUEST_PAYLOAD + 1),
            inbuf: InBuf::default(),
            out: OutBuf::default(),
            last_recv_ns: now_ns,
            last_sent_ns: now_ns,
            next_seq: 0,
            unsequenced: 0,
        }
    }

    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// Sequence number of the next sequenced message this client gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn out(&mut self) -> &mut OutBuf {
        &mut self.out
    }

    /// Bytes queued and not yet written.
    pub fn out_len(&self) -> usize {
        self.out.len()
    }

    /// True once the session is over and its output has been written: close the socket.
    pub fn is_done(&self) -> bool {
        matches!(self.state, ServerState::Closing(_)) && self.out.is_empty()
    }

    /// Why the session is closing, if it is.
    pub fn close_reason(&self) -> Option<&str> {
        match &self.state {
            ServerState::Closing(r) => Some(r),
            _ => None,
        }
    }

    /// Ends the session now for `reason` (pending output is still flushed).
    pub fn close(&mut self, reason: impl Into<String>) {
        if !matches!(self.state, ServerState::Closing(_)) {
            self.state = ServerState::Closing(reason.into());
        }
    }

    /// Bytes from the client. Unsequenced data is handed to `upstream`. Stops at a login
    /// request until it is accepted or rejected; call again (with no bytes) after that.
    pub fn handle_input(&mut self, now_ns: u64, data: &[u8], upstream: &mut dyn FnMut(&[u8])) {
        if !data.is_empty() {
            self.last_recv_ns = now_ns;
        }
        if !matches!(self.state, ServerState::AwaitingLogin | ServerState::Active) {
            if let ServerState::LoginPending(_) = self.state {
                self.inbuf.buf.extend_from_slice(data);
            }
            return;
        }
        let mut next_state: Option<ServerState> = None;
        let mut unseq = 0u64;
        let active = self.state == ServerState::Active;
        let r = feed(&mut self.inbuf, data, self.max_in, |p| match (active, p) {
            (_, Packet::Debug(_)) | (_, Packet::ClientHeartbeat) => true,
            (false, Packet::LoginRequest(l)) => {
                next_state = Some(ServerState::LoginPending(l));
                false
            }
            (true, Packet::UnsequencedData(d)) => {
                unseq += 1;
                upstream(d);
                true
            }
            (_, Packet::LogoutRequest) => {
                next_state = Some(ServerState::Closing(
                    "logout requested by the client".into(),
                ));
                false
            }
            (true, Packet::LoginRequest(_)) => {
                next_state = Some(ServerState::Closing(
                    "protocol error: login request on a logged-in session".into(),
                ));
                false
            }
            (false, p) if !frame::from_server(&p) => {
                next_state = Some(ServerState::Closing(format!(
                    "protocol error: packet type {:?} before login",
                    frame::type_char(&p)
                )));
                false
            }
            (_, p) => {
                next_state = Some(ServerState::Closing(
                    SoupError::WrongDirection(frame::type_char(&p)).to_string(),
                ));
                false
            }
        });
        self.unsequenced += unseq;
        if let Err(e) = r {
            self.close(format!("malformed input: {e}"));
            return;
        }
        if let Some(s) = next_state {
            self.state = s;
        }
    }

    /// Accepts the pending login: the client's next sequenced message is `next_seq`.
    pub fn accept(&mut self, now_ns: u64, session: [u8; 10], next_seq: u64) {
        debug_assert!(matches!(self.state, ServerState::LoginPending(_)));
        self.state = ServerState::Active;
        self.next_seq = next_seq;
        frame::write(
            self.out.vec(),
            &Packet::LoginAccepted {
                session,
                sequence: next_seq,
            },
        );
        self.last_sent_ns = now_ns;
    }

    /// Rejects the pending login and ends the session.
    pub fn reject(&mut self, now_ns: u64, reason: RejectReason) {
        frame::write(self.out.vec(), &Packet::LoginRejected(reason));
        self.last_sent_ns = now_ns;
        self.state = ServerState::Closing(match reason {
            RejectReason::NotAuthorized => "login rejected: not authorized".into(),
            RejectReason::SessionNotAvailable => "login rejected: session not available".into(),
        });
    }

    /// Queues the client's next sequenced message (it must be number [`Self::next_seq`]).
    #[inline]
    pub fn push_sequenced(&mut self, now_ns: u64, msg: &[u8]) {
        frame::write_sequenced(self.out.vec(), msg);
        self.next_seq += 1;
        self.last_sent_ns = now_ns;
    }

    /// Queues end of session and ends the session.
    pub fn end_of_session(&mut self, now_ns: u64) {
        if self.state == ServerState::Active {
            frame::write(self.out.vec(), &Packet::EndOfSession);
            self.last_sent_ns = now_ns;
        }
        self.close("end of session");
    }

    /// Heartbeats and the silence limit. Returns the next time this needs to be called.
    pub fn handle_timeout(&mut self, now_ns: u64) -> u64 {
        if matches!(self.state, ServerState::Closing(_)) {
            return u64::MAX;
        }
        if now_ns.saturating_sub(self.last_recv_ns) >= self.timing.timeout_ns {
            self.close(format!(
                "no data from the client for {} ms",
                self.timing.timeout_ns / 1_000_000
            ));
            return u64::MAX;
        }
        if self.state == ServerState::Active
            && now_ns.saturating_sub(self.last_sent_ns) >= self.timing.heartbeat_ns
        {
            frame::write(self.out.vec(), &Packet::ServerHeartbeat);
            self.last_sent_ns = now_ns;
        }
        let hb = if self.state == ServerState::Active {
            self.last_sent_ns + self.timing.heartbeat_ns
        } else {
            u64::MAX
        };
        hb.min(self.last_recv_ns + self.timing.timeout_ns)
    }
}

/// What a client session reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent<'a> {
    /// Logged in; the next sequenced message is number `next_seq`.
    Accepted {
        session: [u8; 10],
        next_seq: u64,
    },
    Rejected(RejectReason),
    /// Sequenced message number `seq`.
    Sequenced {
        seq: u64,
        msg: &'a [u8],
    },
    EndOfSession,
    /// The link is finished; the reason says why.
    Closed(String),
}

/// Where a client session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientState {
    LoggingIn,
    Active,
    Closed(String),
}

/// A client of a SoupBinTCP server.
#[derive(Debug)]
pub struct ClientSession {
    state: ClientState,
    timing: Timing,
    max_in: usize,
    inbuf: InBuf,
    out: OutBuf,
    last_recv_ns: u64,
    last_sent_ns: u64,
    next_seq: u64,
}

impl ClientSession {
    /// A new connection at `now_ns`: the login request is queued at once.
    pub fn new(now_ns: u64, login: &LoginRequest, timing: Timing, max_in: usize) -> ClientSession {
        let mut out = OutBuf::default();
        frame::write(out.vec(), &Packet::LoginRequest(*login));
        ClientSession {
            state: ClientState::LoggingIn,
            timing,
            max_in: max_in.max(frame::LOGIN_ACCEPTED_PAYLOAD + 1),
            inbuf: InBuf::default(),
            out,
            last_recv_ns: now_ns,
            last_sent_ns: now_ns,
            next_seq: login.sequence,
        }
    }

    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// The sequence number of the next sequenced message expected.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn out(&mut self) -> &mut OutBuf {
        &mut self.out
    }

    fn closed(&mut self, reason: String, f: &mut dyn FnMut(ClientEvent<'_>)) {
        if !matches!(self.state, ClientState::Closed(_)) {
            self.state = ClientState::Closed(reason.clone());
            f(ClientEvent::Closed(reason));
        }
    }

    /// Bytes from the server.
    pub fn handle_input(&mut self, now_ns: u64, data: &[u8], f: &mut dyn FnMut(ClientEvent<'_>)) {
        if matches!(self.state, ClientState::Closed(_)) {
            return;
        }
        if !data.is_empty() {
            self.last_recv_ns = now_ns;
        }
        let mut state = std::mem::replace(&mut self.state, ClientState::LoggingIn);
        let mut next_seq = self.next_seq;
        let r = feed(&mut self.inbuf, data, self.max_in, |p| match (&state, p) {
            (_, Packet::Debug(_)) | (_, Packet::ServerHeartbeat) => true,
            (ClientState::LoggingIn, Packet::LoginAccepted { session, sequence }) => {
                state = ClientState::Active;
                next_seq = sequence;
                f(ClientEvent::Accepted {
                    session,
                    next_seq: sequence,
                });
                true
            }
            (ClientState::LoggingIn, Packet::LoginRejected(r)) => {
                f(ClientEvent::Rejected(r));
                state = ClientState::Closed(format!("login rejected ({})", r.code() as char));
                false
            }
            (ClientState::Active, Packet::SequencedData(msg)) => {
                f(ClientEvent::Sequenced { seq: next_seq, msg });
                next_seq += 1;
                true
            }
            (ClientState::Active, Packet::EndOfSession) => {
                f(ClientEvent::EndOfSession);
                state = ClientState::Closed("end of session".into());
                false
            }
            (_, p) => {
                state = ClientState::Closed(format!(
                    "protocol error: unexpected packet type {:?}",
                    frame::type_char(&p)
                ));
                false
            }
        });
        self.next_seq = next_seq;
        match (r, state) {
            (Err(e), _) => self.closed(format!("malformed input: {e}"), f),
            (Ok(()), ClientState::Closed(reason)) => self.closed(reason, f),
            (Ok(()), s) => self.state = s,
        }
    }

    /// Queues a message for the server (unsequenced data).
    pub fn send_unsequenced(&mut self, now_ns: u64, msg: &[u8]) {
        frame::write(self.out.vec(), &Packet::UnsequencedData(msg));
        self.last_sent_ns = now_ns;
    }

    /// Queues a logout request; the server closes the link after it.
    pub fn logout(&mut self, now_ns: u64) {
        frame::write(self.out.vec(), &Packet::LogoutRequest);
        self.last_sent_ns = now_ns;
    }

    /// Heartbeats and the silence limit; returns when to call again.
    pub fn handle_timeout(&mut self, now_ns: u64, f: &mut dyn FnMut(ClientEvent<'_>)) -> u64 {
        if matches!(self.state, ClientState::Closed(_)) {
            return u64::MAX;
        }
        if now_ns.saturating_sub(self.last_recv_ns) >= self.timing.timeout_ns {
            let reason = format!(
                "no data from the server for {} ms",
                self.timing.timeout_ns / 1_000_000
            );
            self.closed(reason, f);
            return u64::MAX;
        }
        if self.state == ClientState::Active
            && now_ns.saturating_sub(self.last_sent_ns) >= self.timing.heartbeat_ns
        {
            frame::write(self.out.vec(), &Packet::ClientHeartbeat);
            self.last_sent_ns = now_ns;
        }
        (self.last_sent_ns + self.timing.heartbeat_ns)
            .min(self.last_recv_ns + self.timing.timeout_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn session() -> [u8; 10] {
        frame::alpha::<10>("s", "TEST").unwrap()
    }

    /// Moves bytes both ways between a client and a server session at `now`.
    fn pump(
        now: u64,
        c: &mut ClientSession,
        s: &mut ServerSession,
        events: &mut Vec<String>,
        up: &mut Vec<Vec<u8>>,
    ) {
        let cb = c.out().pending().to_vec();
        c.out().consume(cb.len());
        s.handle_input(now, &cb, &mut |d| up.push(d.to_vec()));
        let sb = s.out().pending().to_vec();
        s.out().consume(sb.len());
        c.handle_input(now, &sb, &mut |e| events.push(format!("{e:?}")));
    }

    #[test]
    fn login_data_heartbeats_and_timeout_with_a_virtual_clock() {
        let t = Timing::default();
        let login = LoginRequest::new("u", "p", "", 5).unwrap();
        let mut c = ClientSession::new(0, &login, t, 65535);
        let mut s = ServerSession::new(0, t, 65535);
        let (mut ev, mut up) = (Vec::new(), Vec::new());
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        let ServerState::LoginPending(l) = s.state().clone() else {
            panic!("{:?}", s.state())
        };
        assert_eq!(l.sequence, 5);
        assert!(l.session_is_blank());
        s.accept(0, session(), 5);
        s.push_sequenced(0, b"five");
        s.push_sequenced(0, b"six");
        c.send_unsequenced(0, b"cmd");
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        assert_eq!(up, vec![b"cmd".to_vec()]);
        assert_eq!(ev.len(), 3, "{ev:?}");
        assert!(ev[1].contains("seq: 5"), "{ev:?}");
        assert!(ev[2].contains("seq: 6"), "{ev:?}");
        assert_eq!(c.next_seq(), 7);
        assert_eq!(s.next_seq(), 7);

        // Heartbeats after 1 s without sending, on both sides.
        assert_eq!(s.handle_timeout(S / 2), S);
        assert!(s.out().is_empty());
        s.handle_timeout(S);
        assert_eq!(s.out().pending(), [0, 1, b'H']);
        c.handle_timeout(S, &mut |_| {});
        assert_eq!(c.out().pending(), [0, 1, b'R']);
        pump(S, &mut c, &mut s, &mut ev, &mut up);

        // 15 s of silence from the client: the server drops it.
        s.handle_timeout(16 * S - 1);
        assert_eq!(s.state(), &ServerState::Active);
        s.handle_timeout(16 * S);
        assert_eq!(
            s.close_reason(),
            Some("no data from the client for 15000 ms")
        );
        // And the client drops a silent server.
        let mut closed = Vec::new();
        c.handle_timeout(16 * S, &mut |e| closed.push(format!("{e:?}")));
        assert!(closed[0].contains("no data from the server"), "{closed:?}");
    }

    #[test]
    fn rejection_and_end_of_session() {
        let t = Timing::default();
        let login = LoginRequest::new("u", "bad", "", 1).unwrap();
        let mut c = ClientSession::new(0, &login, t, 65535);
        let mut s = ServerSession::new(0, t, 65535);
        let (mut ev, mut up) = (Vec::new(), Vec::new());
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        s.reject(0, RejectReason::NotAuthorized);
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        assert!(s.is_done());
        assert_eq!(ev[0], "Rejected(NotAuthorized)");
        assert!(matches!(c.state(), ClientState::Closed(_)));

        let mut c = ClientSession::new(0, &login, t, 65535);
        let mut s = ServerSession::new(0, t, 65535);
        ev.clear();
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        s.accept(0, session(), 1);
        s.end_of_session(0);
        pump(0, &mut c, &mut s, &mut ev, &mut up);
        assert_eq!(ev[1], "EndOfSession");
        assert!(s.is_done());
    }

    #[test]
    fn input_split_at_every_byte() {
        let t = Timing::default();
        let mut s = ServerSession::new(0, t, 65535);
        let mut bytes = Vec::new();
        frame::write(
            &mut bytes,
            &Packet::LoginRequest(LoginRequest::new("u", "p", "TEST", 0).unwrap()),
        );
        frame::write(&mut bytes, &Packet::UnsequencedData(b"a"));
        frame::write(&mut bytes, &Packet::ClientHeartbeat);
        frame::write(&mut bytes, &Packet::UnsequencedData(b"bc"));
        let mut up = Vec::new();
        for b in &bytes {
            s.handle_input(0, std::slice::from_ref(b), &mut |d| up.push(d.to_vec()));
            if let ServerState::LoginPending(_) = s.state() {
                s.accept(0, session(), 1);
            }
        }
        s.handle_input(0, &[], &mut |d| up.push(d.to_vec()));
        assert_eq!(up, vec![b"a".to_vec(), b"bc".to_vec()]);
    }

    #[test]
    fn malformed_and_out_of_place_packets_close_with_a_reason() {
        let t = Timing::default();
        let cases: [(&[u8], &str); 4] = [
            (&[0, 0], "malformed input: SoupBinTCP: packet length 0"),
            (
                &[0, 2, b'U', 1],
                "protocol error: packet type 'U' before login",
            ),
            (&[0, 1, b'H'], "SoupBinTCP: packet type 'H' is not allowed"),
            (
                &[0, 3, b'L', 1, 2],
                "malformed input: SoupBinTCP: packet type 'L' needs a 46-byte",
            ),
        ];
        for (bytes, want) in cases {
            let mut s = ServerSession::new(0, t, 65535);
            s.handle_input(0, bytes, &mut |_| {});
            let r = s.close_reason().unwrap_or("");
            assert!(r.starts_with(want), "{r:?} vs {want:?}");
        }
        // A logged-in client that logs in again, or sends more than the limit.
        let mut s = ServerSession::new(0, t, 100);
        let mut b = Vec::new();
        frame::write(
            &mut b,
            &Packet::LoginRequest(LoginRequest::new("u", "p", "", 0).unwrap()),
        );
        s.handle_input(0, &b, &mut |_| {});
        s.accept(0, session(), 1);
        let mut big = Vec::new();
        frame::write(&mut big, &Packet::UnsequencedData(&[0; 200]));
        s.handle_input(0, &big, &mut |_| {});
        assert!(s.close_reason().unwrap().contains("exceeds the limit"));
    }

    #[test]
    fn silent_login_times_out() {
        let mut s = ServerSession::new(0, Timing::default(), 65535);
        s.handle_timeout(15 * S);
        assert!(s.is_done());
    }
}

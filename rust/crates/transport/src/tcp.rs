//! SoupBinTCP 4.0 on sockets: the server the sequencer publishes through, and the client a
//! node (or a dispatcher) reads the stream with.
//!
//! Server: each client logs in with a sequence number (0 = live, 1 = from the start, N = from
//! message N); messages it has not got are read from the [`Store`] (the journal) while it
//! catches up, then it gets every message as it is published. Each client has its own output
//! buffer, bounded by `client_buffer` bytes: a live client whose buffer would pass the bound is
//! disconnected with the reason logged (it can log in again and rewind). Nothing here ever
//! blocks: the sequencer and the other clients keep their rate. Unsequenced data from a
//! logged-in client is an upstream packet and is handed to the caller as a UDP datagram would
//! be.
//!
//! Client: logs in with the next sequence number it expects, repacks the sequenced data it
//! receives into MoldUDP64 packets (so a node's protocol logic sees the same packets as over
//! UDP), and after a lost connection logs in again from where it stopped: no gap, no duplicate.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use seqbus_core::replayer::Store;
use seqbus_wire::mold::{self, MOLD_HEADER_LEN};
use seqbus_wire::{MoldPacket, Session};

use crate::soupbin::frame::{self, constant_time_eq, LoginRequest, RejectReason};
use crate::soupbin::session::{ClientEvent, ClientSession, ServerSession, ServerState, Timing};
use crate::tls::{ClientTls, Link, ServerTls};

/// One username and password a client may log in with.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({:?}, <hidden>)", self.username)
    }
}

/// Settings of a [`TcpServer`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub session: Session,
    /// Accepted logins; at least one.
    pub credentials: Vec<Credential>,
    pub timing: Timing,
    /// Most bytes queued for one client before it is disconnected as too slow.
    pub client_buffer: usize,
    /// Largest packet accepted from a client (length field), bytes.
    pub max_packet: usize,
    /// Most clients connected at once.
    pub max_clients: usize,
    /// TLS only, with this certificate (`crate::tls`); None: plain TCP.
    pub tls: Option<ServerTls>,
}

/// Counters of a [`TcpServer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub accepted_connections: u64,
    pub logins: u64,
    pub rejected_logins: u64,
    /// Clients cut off because their buffer passed `client_buffer`.
    pub slow_disconnects: u64,
    /// Links closed for malformed input or protocol errors.
    pub protocol_errors: u64,
    pub unsequenced: u64,
    /// Messages written from the store to catching-up clients.
    pub rewound_messages: u64,
}

struct Conn {
    stream: Link,
    peer: SocketAddr,
    sess: ServerSession,
    /// Gets each message as it is published (it has caught up with the store).
    live: bool,
    user: String,
    /// Counted in `protocol_errors` already.
    counted_error: bool,
    /// When the socket last took bytes (or the connection was made).
    last_progress_ns: u64,
}

/// The SoupBinTCP server of a sequencer.
pub struct TcpServer {
    cfg: ServerConfig,
    creds: Vec<([u8; 6], [u8; 10])>,
    listener: TcpListener,
    conns: Vec<Conn>,
    next_seq: u64,
    ended: bool,
    stats: ServerStats,
    log: Box<dyn FnMut(&str) + Send + Sync>,
    rbuf: Vec<u8>,
    next_accept_ns: u64,
    last_poll_ns: u64,
}

/// Messages written from the store to one client per poll, at most.
const REWIND_CHUNK: usize = 65_536;
/// A catching-up client is refilled from the store when fewer bytes than this are queued.
const REWIND_LOW_WATER: usize = 256 * 1024;

impl TcpServer {
    /// Binds `cfg.listen`. `next_seq` is one past the last message already published (1 for
    /// a new session).
    pub fn bind(cfg: ServerConfig, next_seq: u64) -> io::Result<TcpServer> {
        if cfg.credentials.is_empty() {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "SoupBinTCP server needs at least one credential",
            ));
        }
        let mut creds = Vec::new();
        for c in &cfg.credentials {
            let u = frame::alpha::<6>("username", &c.username)
                .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
            let p = frame::alpha::<10>("password", &c.password)
                .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
            creds.push((u, p));
        }
        let listener = TcpListener::bind(cfg.listen)?;
        listener.set_nonblocking(true)?;
        Ok(TcpServer {
            cfg,
            creds,
            listener,
            conns: Vec::new(),
            next_seq: next_seq.max(1),
            ended: false,
            stats: ServerStats::default(),
            log: Box::new(|line| eprintln!("seqbus tcp: {line}")),
            rbuf: vec![0; 64 * 1024],
            next_accept_ns: 0,
            last_poll_ns: 0,
        })
    }

    /// Replaces the log (default: one line per event on stderr).
    pub fn set_log(&mut self, log: Box<dyn FnMut(&str) + Send + Sync>) {
        self.log = log;
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.conns.len()
    }

    /// The next sequence number to be published.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// True while some client has bytes queued that its socket has not taken yet (or is
    /// catching up from the store): the caller should not sleep long.
    ///
    /// A client whose socket has taken nothing for 10 ms is not counted: it is not reading,
    /// and the caller's ordinary wake-ups are enough to notice when it starts again.
    pub fn has_pending_output(&self) -> bool {
        self.conns.iter().any(|c| {
            let waiting = c.sess.out_len() > 0
                || c.stream.tls_pending()
                || (!c.live && c.sess.state() == &ServerState::Active);
            waiting && self.last_poll_ns.saturating_sub(c.last_progress_ns) < 10_000_000
        })
    }

    /// File descriptors to wait on (the listener and every client).
    pub fn raw_fds(&self) -> Vec<RawFd> {
        let mut v = vec![self.listener.as_raw_fd()];
        v.extend(self.conns.iter().map(|c| c.stream.as_raw_fd()));
        v
    }

    /// Publishes message `seq` (already persisted: a client that is not live reads it from
    /// the store later). Messages must come in order.
    pub fn publish(&mut self, now_ns: u64, seq: u64, msg: &[u8]) {
        debug_assert_eq!(seq, self.next_seq, "messages are published in order");
        self.next_seq = seq + 1;
        let bound = self.cfg.client_buffer;
        for c in &mut self.conns {
            if !c.live || c.sess.next_seq() != seq {
                continue;
            }
            if c.sess.out().len() + msg.len() + 3 > bound {
                // one publish may bring more than the bound (a burst of large messages):
                // what the client's socket takes now is not unsent
                drain(c);
            }
            if c.sess.out().len() + msg.len() + 3 > bound {
                c.live = false;
                self.stats.slow_disconnects += 1;
                c.sess.close(format!(
                    "slow consumer: more than {bound} bytes unsent at message {seq}; \
                     log in again with sequence {} to rewind",
                    c.sess.next_seq()
                ));
                continue;
            }
            c.sess.push_sequenced(now_ns, msg);
        }
    }

    /// Writes what is queued for every client, without reading (call after publishing, so
    /// live clients get the messages without waiting for the next poll).
    pub fn flush(&mut self) {
        for c in &mut self.conns {
            drain(c);
        }
    }

    /// Publishes every message of a MoldUDP64 packet (heartbeats only advance the next
    /// sequence number; end of session ends every client's session).
    pub fn publish_packet(
        &mut self,
        now_ns: u64,
        packet: &[u8],
    ) -> Result<(), seqbus_wire::WireError> {
        let p = MoldPacket::parse(packet)?;
        match p.kind() {
            mold::PacketKind::Messages => {
                for (seq, m) in p.messages() {
                    self.publish(now_ns, seq, m);
                }
            }
            mold::PacketKind::Heartbeat => self.next_seq = self.next_seq.max(p.sequence()),
            mold::PacketKind::EndOfSession => self.end_of_session(now_ns),
        }
        Ok(())
    }

    /// Ends the session: every logged-in client gets end of session; new logins are refused.
    pub fn end_of_session(&mut self, now_ns: u64) {
        self.ended = true;
        for c in &mut self.conns {
            c.sess.end_of_session(now_ns);
        }
    }

    /// Accepts connections, reads logins and unsequenced data (handed to `upstream`), feeds
    /// catching-up clients from `store`, sends heartbeats and writes what is queued. Never
    /// blocks. Returns how much work was done (0: idle).
    pub fn poll(
        &mut self,
        now_ns: u64,
        store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        let mut work = 0;
        self.last_poll_ns = now_ns;
        // New connections, looked for at most every millisecond (accept is a system call).
        let accept_due = now_ns >= self.next_accept_ns;
        if accept_due {
            self.next_accept_ns = now_ns + 1_000_000;
        }
        for _ in 0..if accept_due { 16 } else { 0 } {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    work += 1;
                    self.stats.accepted_connections += 1;
                    if self.conns.len() >= self.cfg.max_clients {
                        (self.log)(&format!(
                            "{peer}: refused: already {} clients (max_clients)",
                            self.conns.len()
                        ));
                        continue;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let stream = match Link::accept(stream, self.cfg.tls.as_ref()) {
                        Ok(l) => l,
                        Err(e) => {
                            (self.log)(&format!("{peer}: refused: TLS: {e}"));
                            continue;
                        }
                    };
                    self.conns.push(Conn {
                        stream,
                        peer,
                        sess: ServerSession::new(now_ns, self.cfg.timing, self.cfg.max_packet),
                        live: false,
                        user: String::new(),
                        counted_error: false,
                        last_progress_ns: now_ns,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    (self.log)(&format!("accept failed: {e}"));
                    break;
                }
            }
        }
        let mut i = 0;
        while i < self.conns.len() {
            work += self.poll_conn(i, now_ns, store, upstream);
            let c = &self.conns[i];
            if c.sess.is_done() {
                let reason = c.sess.close_reason().unwrap_or("").to_string();
                (self.log)(&format!("{} ({}): closed: {reason}", c.peer, c.user));
                self.conns.swap_remove(i);
                work += 1;
            } else {
                i += 1;
            }
        }
        work
    }

    fn poll_conn(
        &mut self,
        i: usize,
        now_ns: u64,
        store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        let mut work = 0;
        let c = &mut self.conns[i];
        // Read what the client sent (bounded per poll so one client cannot hog the loop).
        if !matches!(c.sess.state(), ServerState::Closing(_)) {
            for _ in 0..4 {
                match c.stream.read(&mut self.rbuf) {
                    Ok(0) => {
                        c.sess.close("connection closed by the client");
                        let n = c.sess.out().len();
                        c.sess.out().consume(n);
                        break;
                    }
                    Ok(n) => {
                        work += 1;
                        let before = c.sess.unsequenced;
                        c.sess.handle_input(now_ns, &self.rbuf[..n], upstream);
                        self.stats.unsequenced += c.sess.unsequenced - before;
                        if n < self.rbuf.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        c.sess.close(format!("read failed: {e}"));
                        let n = c.sess.out().len();
                        c.sess.out().consume(n);
                        break;
                    }
                }
            }
        }
        if let ServerState::LoginPending(login) = c.sess.state().clone() {
            work += 1;
            self.login(i, now_ns, &login);
            let c = &mut self.conns[i];
            c.sess.handle_input(now_ns, &[], upstream);
        }
        let c = &mut self.conns[i];
        if let Some(r) = c.sess.close_reason() {
            let bad = r.starts_with("malformed")
                || r.starts_with("protocol")
                || r.contains("not allowed");
            if bad && !c.counted_error {
                self.stats.protocol_errors += 1;
                c.counted_error = true;
            }
        }
        // Catch up from the store.
        if c.sess.state() == &ServerState::Active && !c.live {
            // Refill from the store when little is queued, a little at a time, so the bytes
            // being written stay in cache and a rewinding client holds little memory.
            let low_water = (self.cfg.client_buffer / 2).min(REWIND_LOW_WATER);
            if c.sess.out().len() < low_water {
                let from = c.sess.next_seq();
                let want = ((self.next_seq - from) as usize).min(REWIND_CHUNK);
                if want > 0 {
                    let sess = &mut c.sess;
                    let mut given = 0usize;
                    let r = store.read(from, want, &mut |seq, m| {
                        if seq != sess.next_seq() {
                            return false;
                        }
                        sess.push_sequenced(now_ns, m);
                        given += 1;
                        sess.out().len() < low_water * 4
                    });
                    self.stats.rewound_messages += given as u64;
                    work += given;
                    match r {
                        Err(e) => c.sess.close(format!("cannot read the journal: {e}")),
                        Ok(_) if given == 0 => c.sess.close(format!(
                            "message {from} is not in the journal (published up to {})",
                            self.next_seq - 1
                        )),
                        Ok(_) => {}
                    }
                }
                if c.sess.next_seq() == self.next_seq {
                    c.live = true;
                }
            }
        }
        c.sess.handle_timeout(now_ns);
        // Write what is queued.
        while !c.sess.out().is_empty() {
            match c.stream.write(c.sess.out().pending()) {
                Ok(0) => break,
                Ok(n) => {
                    work += 1;
                    c.last_progress_ns = now_ns;
                    c.sess.out().consume(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    c.sess.close(format!("write failed: {e}"));
                    let n = c.sess.out().len();
                    c.sess.out().consume(n);
                    break;
                }
            }
        }
        if let Err(e) = c.stream.flush_tls() {
            c.sess.close(format!("write failed: {e}"));
        }
        if matches!(c.sess.state(), ServerState::Closing(_)) && !c.sess.out().is_empty() {
            // A closing client that does not read its last bytes is not waited for long.
            if c.sess
                .close_reason()
                .is_some_and(|r| r.starts_with("slow consumer"))
            {
                let n = c.sess.out().len();
                c.sess.out().consume(n);
            }
        }
        work
    }

    fn login(&mut self, i: usize, now_ns: u64, login: &LoginRequest) {
        let c = &mut self.conns[i];
        c.user = String::from_utf8_lossy(&login.username)
            .trim_end()
            .to_string();
        // Compare with every credential, each in constant time, without stopping early.
        let mut ok = false;
        for (u, p) in &self.creds {
            let m = constant_time_eq(u, &login.username) & constant_time_eq(p, &login.password);
            ok |= m;
        }
        if !ok {
            self.stats.rejected_logins += 1;
            (self.log)(&format!(
                "{}: login rejected: not authorized (username {:?})",
                c.peer, c.user
            ));
            c.sess.reject(now_ns, RejectReason::NotAuthorized);
            return;
        }
        if self.ended || (!login.session_is_blank() && login.session != self.cfg.session.0) {
            self.stats.rejected_logins += 1;
            (self.log)(&format!(
                "{}: login rejected: session {:?} not available (this is {:?}{})",
                c.peer,
                String::from_utf8_lossy(&login.session).trim_end(),
                self.cfg.session.as_str(),
                if self.ended { ", ended" } else { "" }
            ));
            c.sess.reject(now_ns, RejectReason::SessionNotAvailable);
            return;
        }
        let next = match login.sequence {
            0 => self.next_seq,
            n => n.min(self.next_seq),
        };
        self.stats.logins += 1;
        (self.log)(&format!(
            "{} ({}): logged in from sequence {next} (requested {}, live at {})",
            c.peer, c.user, login.sequence, self.next_seq
        ));
        c.sess.accept(now_ns, self.cfg.session.0, next);
        c.live = next == self.next_seq;
    }
}

/// Settings of a [`TcpClient`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub server: SocketAddr,
    pub username: String,
    pub password: String,
    /// Session to join; empty: the server's current one.
    pub session: String,
    pub timing: Timing,
    /// First wait before reconnecting; doubles up to `reconnect_max_ns`.
    pub reconnect_min_ns: u64,
    pub reconnect_max_ns: u64,
    /// Largest packet accepted from the server (length field), bytes.
    pub max_packet: usize,
    /// TLS only, trusting these certificates (`crate::tls`); None: plain TCP.
    pub tls: Option<ClientTls>,
}

/// Counters of a [`TcpClient`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub connects: u64,
    pub disconnects: u64,
    /// Logins accepted (the session became active).
    pub logins: u64,
    pub messages: u64,
}

/// What a [`TcpClient`] cannot recover from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("SoupBinTCP login to {server} rejected: {reason}")]
    Rejected {
        server: SocketAddr,
        reason: &'static str,
    },
    #[error("SoupBinTCP client: {0}")]
    Config(String),
}

struct ClientConn {
    stream: Link,
    sess: ClientSession,
}

/// A SoupBinTCP client that survives lost connections without a gap or a duplicate.
pub struct TcpClient {
    cfg: ClientConfig,
    login: LoginRequest,
    conn: Option<ClientConn>,
    /// Next sequence number expected (0 until the first login: start at live).
    next_seq: u64,
    session: Option<Session>,
    reconnect_at: u64,
    backoff: u64,
    ended: bool,
    stats: ClientStats,
    rbuf: Vec<u8>,
    packet: Vec<u8>,
    log: Box<dyn FnMut(&str) + Send + Sync>,
}

impl TcpClient {
    /// A client starting at `start_seq` (0 = live, 1 = the start, N = message N). It
    /// connects on the first [`TcpClient::poll`].
    pub fn new(cfg: ClientConfig, start_seq: u64) -> Result<TcpClient, ClientError> {
        let login = LoginRequest::new(&cfg.username, &cfg.password, &cfg.session, start_seq)
            .map_err(ClientError::Config)?;
        Ok(TcpClient {
            login,
            backoff: cfg.reconnect_min_ns,
            cfg,
            conn: None,
            next_seq: start_seq,
            session: None,
            reconnect_at: 0,
            ended: false,
            stats: ClientStats::default(),
            rbuf: vec![0; 256 * 1024],
            packet: Vec::with_capacity(64 * 1024),
            log: Box::new(|line| eprintln!("seqbus tcp client: {line}")),
        })
    }

    pub fn set_log(&mut self, log: Box<dyn FnMut(&str) + Send + Sync>) {
        self.log = log;
    }

    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// The next sequence number expected (0 before the first login when starting at live).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The next login (after a lost connection) asks for messages from `seq` on, not from
    /// where this client stopped: another channel carried the stream meanwhile (a bridge's
    /// redundant links). No effect while connected.
    pub fn resume_from(&mut self, seq: u64) {
        if self.conn.is_none() {
            self.next_seq = seq;
        }
    }

    /// The server this client logs in to.
    pub fn server(&self) -> SocketAddr {
        self.cfg.server
    }

    /// True while logged in.
    pub fn is_connected(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.sess.state() == &crate::soupbin::session::ClientState::Active)
    }

    /// True after the server ended the session.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The socket to wait on, when connected.
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.conn.as_ref().map(|c| c.stream.as_raw_fd())
    }

    /// Drops the connection (it is made again at the next poll, from where it stopped).
    pub fn disconnect(&mut self, reason: &str) {
        if let Some(c) = self.conn.take() {
            let _ = c.stream.tcp().shutdown(std::net::Shutdown::Both);
            self.stats.disconnects += 1;
            // where the next login asks from is said when it is made: the owner may still
            // move it (`resume_from`) before then
            (self.log)(&format!(
                "{}: connection lost ({reason}); logging in again",
                self.cfg.server
            ));
        }
    }

    /// Sends an upstream packet as unsequenced data. Returns false when not logged in (the
    /// packet is dropped; commands are retried until they appear in the stream).
    pub fn send_upstream(&mut self, now_ns: u64, datagram: &[u8]) -> bool {
        let Some(c) = self.conn.as_mut() else {
            return false;
        };
        if c.sess.state() != &crate::soupbin::session::ClientState::Active {
            return false;
        }
        c.sess.send_unsequenced(now_ns, datagram);
        Self::flush(c).is_ok()
    }

    fn flush(c: &mut ClientConn) -> io::Result<()> {
        while !c.sess.out().is_empty() {
            match c.stream.write(c.sess.out().pending()) {
                Ok(n) => c.sess.out().consume(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        c.stream.flush_tls()
    }

    fn connect(&mut self, now_ns: u64) {
        let stream = match TcpStream::connect_timeout(&self.cfg.server, Duration::from_secs(1)) {
            Ok(s) => s,
            Err(e) => {
                self.reconnect_at = now_ns + self.backoff;
                self.backoff = (self.backoff * 2).min(self.cfg.reconnect_max_ns);
                (self.log)(&format!("{}: cannot connect: {e}", self.cfg.server));
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let stream = match Link::connect(stream, self.cfg.tls.as_ref()) {
            Ok(l) => l,
            Err(e) => {
                self.reconnect_at = now_ns + self.backoff;
                (self.log)(&format!("{}: TLS: {e}", self.cfg.server));
                return;
            }
        };
        self.stats.connects += 1;
        let mut login = self.login;
        login.sequence = self.next_seq;
        if self.stats.disconnects > 0 {
            (self.log)(&format!(
                "{}: connected again; logging in from {}",
                self.cfg.server,
                match login.sequence {
                    0 => "the live stream".to_string(),
                    n => format!("sequence {n}"),
                }
            ));
        }
        self.conn = Some(ClientConn {
            sess: ClientSession::new(now_ns, &login, self.cfg.timing, self.cfg.max_packet),
            stream,
        });
    }

    fn flush_packet(&mut self, f: &mut dyn FnMut(&[u8])) {
        if self.packet.len() > MOLD_HEADER_LEN {
            f(&self.packet);
        }
        self.packet.clear();
    }

    /// Connects when needed, reads and hands every received message to `f` inside MoldUDP64
    /// packets (end of session too), sends heartbeats. Never blocks, except for connecting
    /// (at most 1 s). Returns the number of messages delivered.
    pub fn poll(&mut self, now_ns: u64, f: &mut dyn FnMut(&[u8])) -> Result<usize, ClientError> {
        if self.ended {
            return Ok(0);
        }
        if self.conn.is_none() {
            if now_ns < self.reconnect_at {
                return Ok(0);
            }
            self.connect(now_ns);
            if self.conn.is_none() {
                return Ok(0);
            }
        }
        let mut delivered = 0;
        let mut lost: Option<String> = None;
        let mut rejected: Option<RejectReason> = None;
        let mut ended = false;
        for _ in 0..8 {
            let c = self.conn.as_mut().expect("connected");
            let n = match c.stream.read(&mut self.rbuf) {
                Ok(0) => {
                    lost = Some("closed by the server".into());
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    lost = Some(format!("read failed: {e}"));
                    break;
                }
            };
            let packet = &mut self.packet;
            let session = &mut self.session;
            let next_seq = &mut self.next_seq;
            let logins = &mut self.stats.logins;
            let mut count: u16 = 0;
            let mut flushes: Vec<(Vec<u8>, u16)> = Vec::new();
            c.sess
                .handle_input(now_ns, &self.rbuf[..n], &mut |e| match e {
                    ClientEvent::Accepted {
                        session: s,
                        next_seq: n,
                    } => {
                        *session = Some(Session(s));
                        *next_seq = n;
                        *logins += 1;
                    }
                    ClientEvent::Sequenced { seq, msg } => {
                        if packet.is_empty()
                            || packet.len() + 2 + msg.len() > 65_536
                            || count == u16::MAX - 1
                        {
                            if packet.len() > MOLD_HEADER_LEN {
                                packet[18..20].copy_from_slice(&count.to_be_bytes());
                                flushes.push((std::mem::take(packet), count));
                            }
                            packet.clear();
                            packet.extend_from_slice(&session.map(|s| s.0).unwrap_or([b' '; 10]));
                            packet.extend_from_slice(&seq.to_be_bytes());
                            packet.extend_from_slice(&[0, 0]);
                            count = 0;
                        }
                        packet.extend_from_slice(&(msg.len() as u16).to_be_bytes());
                        packet.extend_from_slice(msg);
                        count += 1;
                        *next_seq = seq + 1;
                    }
                    ClientEvent::Rejected(r) => rejected = Some(r),
                    ClientEvent::EndOfSession => ended = true,
                    ClientEvent::Closed(reason) => {
                        if lost.is_none() {
                            lost = Some(reason)
                        }
                    }
                });
            if self.packet.len() > MOLD_HEADER_LEN {
                self.packet[18..20].copy_from_slice(&count.to_be_bytes());
            }
            for (p, k) in &flushes {
                delivered += *k as usize;
                f(p);
            }
            delivered += count as usize;
            self.flush_packet(f);
            if lost.is_some() || rejected.is_some() || ended || n < self.rbuf.len() {
                break;
            }
        }
        self.stats.messages += delivered as u64;
        if delivered > 0 {
            self.backoff = self.cfg.reconnect_min_ns;
        }
        if let Some(r) = rejected {
            self.conn = None;
            self.ended = true;
            return Err(ClientError::Rejected {
                server: self.cfg.server,
                reason: match r {
                    RejectReason::NotAuthorized => "not authorized",
                    RejectReason::SessionNotAvailable => "session not available",
                },
            });
        }
        if ended {
            self.ended = true;
            self.conn = None;
            let s = self.session.unwrap_or(Session([b' '; 10]));
            f(&mold::end_of_session(s, self.next_seq.max(1)));
            return Ok(delivered);
        }
        if let Some(c) = self.conn.as_mut() {
            let mut closed = None;
            c.sess.handle_timeout(now_ns, &mut |e| {
                if let ClientEvent::Closed(r) = e {
                    closed = Some(r)
                }
            });
            if let Err(e) = Self::flush(c) {
                closed = closed.or(Some(format!("write failed: {e}")));
            }
            lost = lost.or(closed);
        }
        if let Some(reason) = lost {
            self.disconnect(&reason);
            self.reconnect_at = now_ns + self.backoff;
            self.backoff = (self.backoff * 2).min(self.cfg.reconnect_max_ns);
        }
        Ok(delivered)
    }
}

/// Writes what is queued for `c` as far as its socket takes it now, without blocking.
fn drain(c: &mut Conn) {
    while !c.sess.out().is_empty() {
        match c.stream.write(c.sess.out().pending()) {
            Ok(0) => break,
            Ok(n) => c.sess.out().consume(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // WouldBlock, or a broken link that the next poll closes with its reason
            Err(_) => break,
        }
    }
    let _ = c.stream.flush_tls();
}

impl crate::stream::Publisher for TcpServer {
    fn publish(&mut self, now_ns: u64, packets: &mut crate::udp::Outbox) -> io::Result<()> {
        for d in packets.datagrams() {
            self.publish_packet(now_ns, d)
                .map_err(|e| io::Error::new(ErrorKind::InvalidData, e.to_string()))?;
        }
        packets.clear();
        // live clients need not wait for the next poll
        self.flush();
        Ok(())
    }

    fn poll(
        &mut self,
        now_ns: u64,
        store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        TcpServer::poll(self, now_ns, store, upstream)
    }

    fn idle_limit(&self) -> Option<Duration> {
        // output pending: the sockets are waited on for input only
        self.has_pending_output()
            .then_some(Duration::from_micros(200))
    }

    fn fds(&self) -> Vec<RawFd> {
        self.raw_fds()
    }
}

impl crate::stream::Feed for TcpClient {
    fn read(
        &mut self,
        now_ns: u64,
        _max: usize,
        f: &mut dyn FnMut(crate::stream::Received<'_>),
    ) -> io::Result<usize> {
        self.poll(now_ns, &mut |p| {
            f(crate::stream::Received {
                data: Some(p),
                from: None,
            })
        })
        .map_err(|e| io::Error::new(ErrorKind::PermissionDenied, e.to_string()))
    }

    fn send_upstream(&mut self, now_ns: u64, datagram: &[u8]) -> bool {
        // not logged in: dropped, and the node retries until it is sequenced
        TcpClient::send_upstream(self, now_ns, datagram);
        true
    }

    fn upstream_logins(&self) -> u64 {
        self.stats.logins
    }

    fn fd(&self) -> Option<RawFd> {
        self.raw_fd()
    }

    fn is_ended(&self) -> bool {
        TcpClient::is_ended(self)
    }
}

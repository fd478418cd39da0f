//! A live bus on another host, over SoupBinTCP: the sequencer's TCP server (docs/transports.md)
//! logs a client in from any sequence number and streams the session from there.
//!
//! * [`Remote`]: one login from a sequence, read message by message (an executor reads the
//!   range of its micro-batch with one).
//! * [`Follower`]: the driver's view of the live stream, a background thread logged in from
//!   the query's start, that knows how far the stream has got and where it may be cut: never
//!   between the fragments of a message that began in the batch. A message still open when
//!   the batch began (its sender is slow, or died between fragments and will never finish it)
//!   is cut through rather than waited for; the offset names its fragments so far, and the
//!   batch that holds its last fragment reads them again, so every message is handed out
//!   whole, once, at its last fragment's sequence.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seqbus_archive::reader::{Reassembler, Step};
use seqbus_transport::soupbin::{ClientEvent, ClientSession, LoginRequest, Timing};

/// Where and how to log in.
#[derive(Debug, Clone)]
pub struct Login {
    /// `host:port` of the SoupBinTCP server.
    pub server: String,
    pub username: String,
    pub password: String,
    /// Empty: the server's current session.
    pub session: String,
}

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// One SoupBinTCP login, from a sequence number on.
pub struct Remote {
    stream: TcpStream,
    sess: ClientSession,
    t0: Instant,
    buf: Vec<u8>,
    pending: VecDeque<(u64, Vec<u8>)>,
    closed: Option<String>,
    pub server: String,
}

impl Remote {
    /// Connects and logs in to read from sequence `from`; fails naming the server when it
    /// cannot connect or the login is rejected within `timeout`.
    pub fn connect(login: &Login, from: u64, timeout: Duration) -> Result<Remote, String> {
        let addr = login
            .server
            .to_socket_addrs()
            .map_err(|e| format!("soupbintcp://{}: {e}", login.server))?
            .next()
            .ok_or_else(|| format!("soupbintcp://{}: no address", login.server))?;
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| format!("soupbintcp://{}: cannot connect: {e}", login.server))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        let req = LoginRequest::new(&login.username, &login.password, &login.session, from)
            .map_err(|e| format!("soupbintcp://{}: {e}", login.server))?;
        let t0 = Instant::now();
        let mut r = Remote {
            sess: ClientSession::new(0, &req, Timing::default(), 1 << 20),
            stream,
            t0,
            buf: vec![0; 1 << 16],
            pending: VecDeque::new(),
            closed: None,
            server: login.server.clone(),
        };
        r.flush()?;
        let deadline = Instant::now() + timeout;
        let mut accepted = None;
        while accepted.is_none() {
            if Instant::now() > deadline {
                return Err(format!(
                    "soupbintcp://{}: no login answer within {} ms",
                    r.server,
                    timeout.as_millis()
                ));
            }
            accepted = r.pump(true)?;
        }
        Ok(r)
    }

    fn flush(&mut self) -> Result<(), String> {
        while !self.sess.out().is_empty() {
            match self.stream.write(self.sess.out().pending()) {
                Ok(n) => self.sess.out().consume(n),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("soupbintcp://{}: write: {e}", self.server)),
            }
        }
        Ok(())
    }

    /// Reads what the socket has (waiting up to 100 ms); returns `Some(next)` when the login
    /// was accepted in it.
    fn pump(&mut self, logging_in: bool) -> Result<Option<u64>, String> {
        let n = match self.stream.read(&mut self.buf) {
            Ok(0) => {
                self.closed
                    .get_or_insert_with(|| "closed by the server".to_string());
                0
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                0
            }
            Err(e) => return Err(format!("soupbintcp://{}: read: {e}", self.server)),
        };
        let now = now_ns(self.t0);
        let mut accepted = None;
        let mut rejected = None;
        let pending = &mut self.pending;
        let closed = &mut self.closed;
        let mut on = |ev: ClientEvent<'_>| match ev {
            ClientEvent::Accepted { next_seq, .. } => accepted = Some(next_seq),
            ClientEvent::Rejected(r) => rejected = Some(r),
            ClientEvent::Sequenced { seq, msg } => pending.push_back((seq, msg.to_vec())),
            ClientEvent::EndOfSession => {
                closed.get_or_insert_with(|| "the session ended".to_string());
            }
            ClientEvent::Closed(reason) => {
                closed.get_or_insert(reason);
            }
        };
        if n > 0 {
            self.sess.handle_input(now, &self.buf[..n], &mut on);
        }
        self.sess.handle_timeout(now, &mut on);
        self.flush()?;
        if let Some(r) = rejected {
            return Err(format!(
                "soupbintcp://{}: login rejected ({})",
                self.server,
                r.code() as char
            ));
        }
        if logging_in && accepted.is_none() {
            if let Some(c) = &self.closed {
                return Err(format!("soupbintcp://{}: {c}", self.server));
            }
        }
        Ok(accepted)
    }

    /// The next sequenced message, waiting up to `wait`; None when none came in time. An
    /// ended or broken link is an error naming the server.
    pub fn next(&mut self, wait: Duration) -> Result<Option<(u64, Vec<u8>)>, String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(m) = self.pending.pop_front() {
                return Ok(Some(m));
            }
            if let Some(c) = &self.closed {
                return Err(format!("soupbintcp://{}: {c}", self.server));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            self.pump(false)?;
        }
    }

    /// Logs out (best effort).
    pub fn close(mut self) {
        let now = now_ns(self.t0);
        self.sess.logout(now);
        let _ = self.flush();
    }
}

/// The driver's follower of a live stream.
pub struct Follower {
    state: Arc<Mutex<FollowState>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where a batch ends, and the messages still open there: for each fragmented message begun
/// before `end` and not complete (nor abandoned) before it, the sequences of its fragments
/// before `end`, in order; the messages ordered by their first fragment. An offset carries
/// them, so that the batch that holds a message's last fragment can read its first ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub end: u64,
    pub open: Vec<Vec<u64>>,
}

#[derive(Default)]
struct FollowState {
    /// One past the last sequence received.
    next: u64,
    /// The first sequence of the stream this follower cuts. It logs in earlier when messages
    /// are open there: of what comes before `from` it takes only their fragments (`before`).
    from: u64,
    before: HashSet<u64>,
    /// The messages open at `from`, as its offset named them: what a batch that ends at
    /// `from` names, whether or not this follower has read their fragments yet (a batch
    /// planned the moment it logs in must not drop them).
    at_from: Vec<Vec<u64>>,
    /// The fragments of each fragmented message seen to its end (its last fragment, or the
    /// record of its account that abandoned it), with that end: a batch may not end inside
    /// one that began inside it, and the offset of a batch that ends inside one names it.
    spans: Vec<(Vec<u64>, u64)>,
    /// The fragments so far of each sender's fragmented message still open.
    open: HashMap<[u8; 8], Vec<u64>>,
    error: Option<String>,
}

impl Follower {
    /// Logs in from `from` (a batch's end, or the start of the query) and follows the stream
    /// in a background thread. `open` are the messages open at `from`, each the sequences of
    /// its fragments before `from` (what the offset of `from` names): the login starts at the
    /// first of them.
    pub fn start(login: Login, from: u64, open: &[Vec<u64>]) -> Result<Follower, String> {
        let state = FollowState::starting(from, open);
        let login_at = state.before.iter().copied().fold(from, u64::min);
        let remote = Remote::connect(&login, login_at, Duration::from_secs(10))?;
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("seqbus-follow".into())
            .spawn(move || follow(remote, st, sp))
            .map_err(|e| e.to_string())?;
        Ok(Follower {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// The next batch starting at `start`, at most `max` records: as far as the stream has
    /// got, moved back so that it cuts no fragmented message begun inside it, and the
    /// messages open where it ends.
    pub fn latest(&self, start: u64, max: u64) -> Result<Cut, String> {
        let st = self.state.lock().expect("follower state");
        if let Some(e) = &st.error {
            return Err(e.clone());
        }
        Ok(st.cut(start, max))
    }

    /// Forgets what lies before `upto` (a committed batch's end).
    pub fn commit(&self, upto: u64) {
        self.state.lock().expect("follower state").commit_at(upto);
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The end (exclusive) of a batch from `start` of at most `max` records when the stream has
/// got to `next`, moved back so that it cuts no fragmented message that begins inside the
/// batch: `spans` are the `(first, last)` records of fragmented messages (last = `u64::MAX`
/// while open). A message open since the batch's start (or begun at it) is cut through: its
/// sender may never send the rest (it died between fragments), and a batch that waited for it
/// would wait for ever; the batch that holds its last fragment reads its first ones again.
pub fn cut(next: u64, start: u64, max: u64, spans: &[(u64, u64)]) -> u64 {
    let mut end = next.min(start.saturating_add(max)).max(start);
    while let Some(&(f, _)) = spans
        .iter()
        .find(|&&(f, l)| f > start && f < end && end <= l)
    {
        end = f;
    }
    end
}

impl FollowState {
    fn starting(from: u64, open: &[Vec<u64>]) -> FollowState {
        let mut at_from: Vec<Vec<u64>> = open
            .iter()
            .map(|m| {
                m.iter()
                    .copied()
                    .filter(|&s| s < from)
                    .collect::<Vec<u64>>()
            })
            .filter(|m| !m.is_empty())
            .collect();
        at_from.sort_unstable();
        FollowState {
            next: from,
            from,
            before: at_from.iter().flatten().copied().collect(),
            at_from,
            ..Default::default()
        }
    }

    fn commit_at(&mut self, upto: u64) {
        self.spans.retain(|(_, l)| *l >= upto);
    }

    /// The batch from `start` (see [`Follower::latest`]).
    fn cut(&self, start: u64, max: u64) -> Cut {
        let spans: Vec<(u64, u64)> = (self.spans.iter().map(|(s, l)| (s[0], *l)))
            .chain(self.open.values().map(|s| (s[0], u64::MAX)))
            .collect();
        let end = cut(self.next, start, max, &spans);
        if end <= self.from {
            // nothing read past `from` yet, maybe not even the open messages' fragments
            return Cut {
                end,
                open: self.at_from.clone(),
            };
        }
        let mut open: Vec<Vec<u64>> = (self.spans.iter().filter(|(_, l)| *l >= end))
            .map(|(s, _)| s)
            .chain(self.open.values())
            .filter(|s| s[0] < end)
            .map(|s| s.iter().copied().filter(|&q| q < end).collect())
            .collect();
        open.sort_unstable();
        Cut { end, open }
    }

    /// Takes the next message of the stream, `msg` at `seq`, through reassembly `r`.
    fn observe(&mut self, r: &mut Reassembler, seq: u64, msg: &[u8]) {
        if seq < self.from && !self.before.contains(&seq) {
            return; // before the stream this follower cuts, and no part of a message open there
        }
        if msg.len() >= 32 {
            let account: [u8; 8] = msg[16..24].try_into().expect("8 bytes");
            let step = r.push(msg);
            if let Some(a) = r.abandoned() {
                // its sender stopped between fragments: ended here, never to be whole
                if let Some(seqs) = self.open.remove(&a.account) {
                    self.spans.push((seqs, seq));
                }
            }
            match step {
                Step::More => self.open.entry(account).or_default().push(seq),
                Step::Whole(..) | Step::Bad(_) => {
                    if let Some(mut seqs) = self.open.remove(&account) {
                        seqs.push(seq);
                        self.spans.push((seqs, seq));
                    }
                }
            }
        }
        if seq >= self.from {
            self.next = seq + 1;
        }
    }
}

fn follow(mut remote: Remote, state: Arc<Mutex<FollowState>>, stop: Arc<AtomicBool>) {
    let mut r = Reassembler::default();
    while !stop.load(Ordering::Relaxed) {
        match remote.next(Duration::from_millis(200)) {
            Ok(Some((seq, msg))) => {
                state
                    .lock()
                    .expect("follower state")
                    .observe(&mut r, seq, &msg);
            }
            Ok(None) => {}
            Err(e) => {
                state.lock().expect("follower state").error = Some(e);
                return;
            }
        }
    }
    remote.close();
}

#[cfg(test)]
mod tests {
    use super::{cut, Cut, FollowState, Reassembler};

    fn at(end: u64, open: &[&[u64]]) -> Cut {
        Cut {
            end,
            open: open.iter().map(|m| m.to_vec()).collect(),
        }
    }

    fn frag(account: &[u8; 2], flags: u8, part: &[u8], total: u32) -> Vec<u8> {
        let mut m = vec![0u8; 32];
        m[16..18].copy_from_slice(account);
        m[26] = 1;
        m[27] = flags;
        m[28..32].copy_from_slice(&total.to_le_bytes());
        m.extend_from_slice(part);
        m
    }

    #[test]
    fn an_abandoned_message_does_not_hold_batches_back() {
        let mut st = FollowState::default();
        let mut r = Reassembler::default();
        // GW's first process dies after two fragments (10, 11); its next process sends a
        // body in two fragments (14, 15); another sender's message at 12
        st.observe(&mut r, 10, &frag(b"GW", 5, b"ab", 9));
        st.observe(&mut r, 11, &frag(b"GW", 1, b"cd", 9));
        st.observe(&mut r, 12, &frag(b"XX", 0, b"x", 1));
        assert_eq!(
            st.open.values().cloned().collect::<Vec<_>>(),
            [vec![10, 11]]
        );
        st.observe(&mut r, 14, &frag(b"GW", 5, b"ef", 4));
        assert_eq!(st.open.values().cloned().collect::<Vec<_>>(), [vec![14]]);
        st.observe(&mut r, 15, &frag(b"GW", 2, b"gh", 4));
        assert!(st.open.is_empty());
        // the dead chain ended at 14 (abandoned there), the next body is 14..=15
        assert_eq!(st.spans, [(vec![10, 11], 14), (vec![14, 15], 15)]);
        assert_eq!(st.cut(1, 100), at(16, &[]));
        // a batch from 1 of at most 12 records cuts no message begun inside it
        assert_eq!(st.cut(1, 12), at(10, &[]));
    }

    #[test]
    fn a_message_its_sender_never_finishes_does_not_stall_the_stream() {
        // DEAD sends two of three fragments (2, 3) and is never heard of again; LIVE goes on
        let mut st = FollowState {
            next: 1,
            from: 1,
            ..Default::default()
        };
        let mut r = Reassembler::default();
        st.observe(&mut r, 1, &frag(b"LI", 0, b"a", 1));
        st.observe(&mut r, 2, &frag(b"DE", 5, b"ab", 6));
        st.observe(&mut r, 3, &frag(b"DE", 1, b"cd", 6));
        for seq in 4..=20 {
            st.observe(&mut r, seq, &frag(b"LI", 0, b"a", 1));
        }
        // the first batch stops before the message that began in it
        assert_eq!(st.cut(1, 100), at(2, &[]));
        // the next begins with it: cut through, and its offset names its fragments
        let c = st.cut(2, 5);
        assert_eq!(c, at(7, &[&[2, 3]]));
        assert_eq!(st.cut(7, 100), at(21, &[&[2, 3]]));
        st.commit_at(21);
        assert_eq!(st.cut(21, 100), at(21, &[&[2, 3]]));
    }

    #[test]
    fn a_follower_that_has_read_nothing_yet_keeps_the_open_messages_of_its_start() {
        // the query restarts at 12 with DEAD's [3, 4] and SLOW's [5] open; the driver plans
        // the first batch before the login has read a record: its offset must still name
        // both, or the batch holding SLOW's last fragment would not read its first
        let st = FollowState::starting(12, &[vec![5], vec![3, 4]]);
        assert_eq!(st.before, [3, 4, 5].into_iter().collect());
        assert_eq!(st.cut(12, 7), at(12, &[&[3, 4], &[5]]));
    }

    #[test]
    fn a_follower_started_inside_open_messages_takes_their_fragments_only() {
        // SLOW's message: fragments 5 and 9 before the restart at 12, its last at 14; the
        // offset of 12 names [5, 9]; the login starts at 5
        let mut st = FollowState::starting(12, &[vec![5, 9]]);
        let mut r = Reassembler::default();
        for seq in 5..12 {
            let m = match seq {
                5 => frag(b"SL", 5, b"ab", 6),
                9 => frag(b"SL", 1, b"cd", 6),
                _ => frag(b"LI", 0, b"a", 1),
            };
            st.observe(&mut r, seq, &m);
        }
        assert_eq!(st.next, 12);
        assert_eq!(st.cut(12, 100), at(12, &[&[5, 9]]));
        st.observe(&mut r, 12, &frag(b"LI", 0, b"a", 1));
        st.observe(&mut r, 13, &frag(b"LI", 0, b"a", 1));
        assert_eq!(st.cut(12, 100), at(14, &[&[5, 9]]));
        st.observe(&mut r, 14, &frag(b"SL", 2, b"ef", 6));
        assert!(st.open.is_empty());
        assert_eq!(st.spans, [(vec![5, 9, 14], 14)]);
        assert_eq!(st.cut(12, 100), at(15, &[]));
        assert_eq!(st.cut(12, 2), at(14, &[&[5, 9]]));
    }

    #[test]
    fn a_batch_never_ends_inside_a_fragmented_message() {
        // fragments at 10..=12 and 11..=15 (two senders, interleaved), one open from 20
        let spans = [(10, 12), (11, 15), (20, u64::MAX)];
        assert_eq!(cut(30, 1, 100, &spans), 20); // the open one stays for the next batch
        assert_eq!(cut(30, 1, 12, &spans), 10); // 13 would cut 10..=12 and 11..=15
        assert_eq!(cut(30, 1, 15, &spans), 16); // ends right after the second message
        assert_eq!(cut(30, 1, 9, &spans), 10); // before both
        assert_eq!(cut(8, 1, 100, &spans), 8); // as far as the stream has got
        assert_eq!(cut(30, 16, 100, &spans), 20);
        // a batch that begins with the open one does not wait for it: its sender may never
        // send the rest; a message begun inside the batch is still not cut
        assert_eq!(cut(30, 20, 100, &spans), 30);
        assert_eq!(cut(30, 11, 100, &spans), 20); // 11..=15 began at the start: cut through
        assert_eq!(cut(30, 11, 2, &spans), 13);
    }
}

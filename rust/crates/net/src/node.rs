//! The node client: sockets around `seqbus_core::Node`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_config::Config;
use seqbus_core::{Dest, Node, NodeParams, NodeStats, SendError, Source, Start};
use seqbus_transport::udp::{self, Outbox};
use seqbus_transport::Feed;
use socket2::{SockAddr, Socket};

use crate::downstream_auth::Verifier;
use crate::idle::{IdleStrategy, Idler};
use crate::notify::Waker;
use crate::watch::{Stream, Watch};
use crate::{io_error, now_ns, Error};

/// Datagrams one `recvmmsg` takes from the request socket (replayer answers).
const REPLAY_SLOTS: usize = 16;

/// How a node joins the bus.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// Account, 1–8 printable ASCII characters (hot-hot instances share it).
    pub account: String,
    pub instance: u16,
    pub start: Start,
    /// `(schema_id, template_id)` of the application messages to deliver; None = all.
    pub topics: Option<Vec<(u16, u16)>>,
    /// Overrides `node.idle`.
    pub idle: Option<IdleStrategy>,
    /// Overrides `node.window`.
    pub window: Option<usize>,
    /// Overrides `node.listen` (the address a `udp-unicast` node receives on).
    pub listen: Option<SocketAddr>,
    /// The node never sends (a following replayer): it needs no key of `[auth]`.
    pub receive_only: bool,
    /// What its log records call it (default "node ACCOUNT/INSTANCE"; `crate::watch`).
    pub name: Option<String>,
}

impl NodeOptions {
    /// Options with every override left to the configuration.
    pub fn new(account: &str, instance: u16, start: Start) -> NodeOptions {
        NodeOptions {
            account: account.to_string(),
            instance,
            start,
            topics: None,
            idle: None,
            window: None,
            listen: None,
            receive_only: false,
            name: None,
        }
    }
}

/// A node's connection to the bus. See the crate documentation for the call sequence.
pub struct NodeClient {
    node: Node,
    /// Where the stream comes from (UDP, TCP, shared memory or in-process: the
    /// configuration's transport, `crate::transports`).
    feed: Box<dyn Feed>,
    /// The feed's upstream logins seen ([`Feed::upstream_logins`]).
    feed_logins: u64,
    /// Blocking idle strategy: a ring feed then sleeps on the ring's futex.
    block: bool,
    /// Sends commands and requests; receives replayer answers.
    req: Socket,
    sequencer: SockAddr,
    /// Cluster members: (id, upstream address, the address their packets come from).
    members: Vec<(u16, SockAddr, SocketAddr)>,
    replayers: Vec<SockAddr>,
    discovery: Option<crate::discovery::Listener>,
    idler: Idler,
    /// Replayer answers received by one `recvmmsg`, handed to the protocol one by one.
    rx_rep: udp::RecvBatch,
    rep_at: usize,
    /// When they were received.
    rep_now: u64,
    /// Upstream datagrams of one flush, sent with one `sendmmsg`.
    upbox: Outbox,
    /// Upstream datagrams for every cluster member.
    to_all: Outbox,
    /// The request and discovery sockets; `wait_fds` adds the feed's when idle.
    fds: Vec<RawFd>,
    wait_fds: Vec<RawFd>,
    /// Sockets of the caller's own (a replayer's servers): `poll` returns when one wakes it.
    extra_fds: Vec<RawFd>,
    reads: u32,
    /// Makes `poll` return early (`crate::notify`: another thread wants the client).
    waker: Option<Arc<Waker>>,
    /// Live packets read (of the stream, not of replayers): the watch's sign of life.
    live: u64,
    /// What the client says it is doing (`log` records: connected, silence, caught up, ...).
    watch: Watch,
    /// With a downstream key: checks replayers' answers (the feed checks the stream itself).
    answers: Option<Verifier>,
    /// Downstream datagrams dropped for a missing or wrong MAC (stream and answers).
    forged: Arc<AtomicU64>,
}

impl std::fmt::Debug for NodeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeClient")
            .field("node", &self.node)
            .field("replayers", &self.replayers.len())
            .finish_non_exhaustive()
    }
}

impl NodeClient {
    /// Binds the node's sockets and starts joining the bus (hello to the sequencer, or the
    /// first rewind request). Fails on a bad option or a socket that cannot be bound.
    pub fn connect(cfg: &Config, opts: NodeOptions) -> Result<NodeClient, Error> {
        let account = seqbus_wire::account(&opts.account).map_err(|message| Error::Option {
            name: "account",
            message,
        })?;
        if opts.start == Start::From(0) {
            return Err(Error::Option {
                name: "start",
                message: "sequence numbers start at 1".into(),
            });
        }
        let window = opts.window.unwrap_or(cfg.node.window);
        if window == 0 {
            return Err(Error::Option {
                name: "window",
                message: "must be at least 1".into(),
            });
        }
        let nc = &cfg.node;
        let feed = crate::transports::feed(cfg, opts.listen)?;
        let who = opts
            .name
            .clone()
            .unwrap_or_else(|| format!("node {}/{}", opts.account, opts.instance));
        // with a downstream key, datagrams without its MAC never reach the protocol
        let forged = Arc::new(AtomicU64::new(0));
        let feed = crate::transports::verified(
            cfg,
            nc.transport.unwrap_or(cfg.downstream.transport),
            feed,
            &forged,
            &who,
            crate::watch::TARGET,
        );
        let answers = cfg
            .downstream_key()
            .map(|k| Verifier::new(k.clone(), forged.clone(), who.clone(), crate::watch::TARGET));
        // a node asks for its next command sequence unless it rewinds from the start (it
        // numbers its commands from 1 then) or never sends
        let asks = opts.start != Start::From(1) && !opts.receive_only;
        let mut watch = Watch::new(
            cfg,
            who,
            Stream::of(cfg, opts.listen),
            opts.start,
            asks,
            now_ns(),
        );
        watch.starting(opts.start);
        let local = match cfg.sequencer.upstream {
            SocketAddr::V4(a) if a.ip().is_loopback() => Ipv4Addr::LOCALHOST,
            _ => Ipv4Addr::UNSPECIFIED,
        };
        let req = udp::bind(SocketAddr::V4(SocketAddrV4::new(local, 0)), nc.recv_buffer)
            .map_err(io_error("node request socket: bind"))?;
        let replayers: Vec<SockAddr> = cfg
            .node_replayers()
            .into_iter()
            .map(SockAddr::from)
            .collect();
        let members: Vec<(u16, SockAddr, SocketAddr)> = match &cfg.cluster {
            Some(c) => c
                .members
                .iter()
                .map(|m| (m.id, m.upstream.into(), m.publish))
                .collect(),
            None => Vec::new(),
        };
        let discovery = crate::discovery::Listener::open(cfg)?;
        udp::set_sndbuf(&req, 4 << 20);
        let now = now_ns();
        let node = Node::new(
            NodeParams {
                session: cfg.session(),
                account,
                instance: opts.instance,
                start: opts.start,
                topics: opts.topics,
                window,
                // its commands' fragments must fit a downstream packet beside the MAC
                max_packet: cfg.mold_max_packet(),
                retry_ns: nc.retry_ms * 1_000_000,
                request_timeout_ns: nc.request_timeout_ms * 1_000_000,
                request_backoff_max_ns: nc.request_backoff_max_ms.max(nc.request_timeout_ms)
                    * 1_000_000,
                failover_after: nc.failover_after.max(1),
                replayers: replayers.len(),
                max_request: cfg.replayer.max_messages_per_request,
                reorder_limit: nc.reorder_buffer,
            },
            now,
        );
        let mut node = node;
        if opts.receive_only {
            // before the first flush below: it would send the hello a new node is due
            node.never_sends();
        }
        if cfg.auth.is_some() && !opts.receive_only {
            let key = cfg
                .account_key(&opts.account)
                .ok_or_else(|| Error::Option {
                    name: "account",
                    message: format!(
                        "{:?} has no key in [auth]: upstream is authenticated on this bus",
                        opts.account
                    ),
                })?;
            node.set_key(key, now);
        }
        node.set_replay_depth(nc.replay_depth);
        node.set_discovering(discovery.is_some());
        node.set_retry_floor(nc.retry_min_us * 1000);
        let fds: Vec<RawFd> = [req.as_raw_fd()]
            .into_iter()
            .chain(discovery.as_ref().map(|d| d.fd()))
            .collect();
        let block = opts.idle.unwrap_or(nc.idle) == IdleStrategy::Block;
        let mut c = NodeClient {
            node,
            feed,
            feed_logins: 0,
            block,
            req,
            sequencer: cfg.sequencer.upstream.into(),
            members,
            replayers,
            discovery,
            idler: Idler::new(opts.idle.unwrap_or(nc.idle)),
            rx_rep: udp::RecvBatch::new(REPLAY_SLOTS, 65_536),
            rep_at: 0,
            rep_now: 0,
            upbox: Outbox::default(),
            to_all: Outbox::default(),
            fds,
            wait_fds: Vec::new(),
            extra_fds: Vec::new(),
            reads: 0,
            waker: None,
            live: 0,
            watch,
            answers,
            forged,
        };
        c.flush()?;
        Ok(c)
    }

    /// Sends whatever the protocol has due: queued commands, retries, hellos, gap requests.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.flush_at(now_ns())
    }

    /// [`NodeClient::flush`] at `now` (a clock read the caller just made).
    fn flush_at(&mut self, now: u64) -> Result<(), Error> {
        // commands sent over a SoupBinTCP session before it (re)logged in were dropped
        let logins = self.feed.upstream_logins();
        if logins != self.feed_logins {
            self.feed_logins = logins;
            self.node.resend_in_flight();
        }
        let mut err = None;
        // in a cluster: the leader the stream names, every member when none is known or the
        // protocol asks for all
        let leader = self.node.leader();
        let members = &self.members;
        while let Some((dest, d)) = self.node.poll_transmit(now) {
            match dest {
                // Over TCP or in-process, commands travel with the stream.
                Dest::Sequencer | Dest::AllSequencers if self.feed.send_upstream(now, d) => {}
                Dest::Sequencer if members.is_empty() || leader.is_some() => self.upbox.push(d),
                Dest::Sequencer | Dest::AllSequencers if members.is_empty() => self.upbox.push(d),
                Dest::Sequencer | Dest::AllSequencers => self.to_all.push(d),
                Dest::Replayer(i) => {
                    // a send buffer full for longer, or an unreachable peer: the protocol
                    // retries
                    let patience = Duration::from_millis(20);
                    if let Err(e) = udp::send_patiently(&self.req, d, &self.replayers[i], patience)
                    {
                        err = Some(e);
                    }
                }
            }
        }
        if !self.upbox.is_empty() {
            let to = match self.node.leader() {
                Some(l) => self
                    .members
                    .iter()
                    .find(|m| m.0 == l)
                    .map_or(&self.sequencer, |m| &m.1),
                None => &self.sequencer,
            };
            // what cannot be sent within the patience is retried by the protocol
            let sent =
                udp::send_all_patiently(&self.req, &self.upbox, to, Duration::from_millis(20));
            self.upbox.clear();
            if let Err(e) = sent {
                err = Some(e);
            }
        }
        if !self.to_all.is_empty() {
            for (_, upstream, _) in &self.members {
                if let Err(e) = udp::send_all_patiently(
                    &self.req,
                    &self.to_all,
                    upstream,
                    Duration::from_millis(20),
                ) {
                    err = Some(e);
                }
            }
            self.to_all.clear();
        }
        match err {
            Some(e) => Err(io_error("node: send")(e)),
            None => Ok(()),
        }
    }

    /// Hands one received datagram to the protocol; false when none was waiting.
    fn read_one(&mut self) -> Result<bool, Error> {
        // the replayer socket is looked at while an answer is expected, and now and then
        // (a late answer is still useful), so the live path costs one recvmmsg per batch
        let mut look = false;
        if self.rep_at >= self.rx_rep.len() {
            self.reads = self.reads.wrapping_add(1);
            if self.reads.is_multiple_of(64) {
                self.discover();
            }
            // (and more often while commands are in flight: the sequencer's NAKs come here)
            let in_flight = self.node.in_flight() > 0;
            look = self.node.awaits_replay()
                || self.reads.is_multiple_of(64)
                || (in_flight && self.reads.is_multiple_of(8));
        }
        if self.read_reply(look)? {
            return Ok(true);
        }
        // one live datagram at a time: the node takes no more than it can deliver at once
        let node = &mut self.node;
        let members = &self.members;
        let read = self
            .feed
            .read(now_ns(), 1, &mut |r| match (r.data, r.from) {
                (None, _) => node.note_malformed(),
                // the node reads no clock for live packets
                (Some(d), _) if members.is_empty() => node.handle_datagram(0, Source::Live, d),
                // in a cluster, which sequencer sent it decides whether it is taken (fencing)
                (Some(d), Some(from)) => match members.iter().find(|m| m.2 == from) {
                    Some(m) => node.handle_datagram(0, Source::Sequencer(m.0), d),
                    None => node.note_fenced(),
                },
                // a transport that names no sender (a ring, TCP): its source fenced already
                (Some(d), None) => node.handle_datagram(0, Source::Live, d),
            });
        let read = read.map_err(io_error("node: read (downstream)"))?;
        self.live += read as u64;
        Ok(read > 0)
    }

    /// Hands the protocol one datagram that came to the request socket (a replayer's answer,
    /// a NAK); with `look`, receives the next batch there when none is left. False when
    /// none was waiting.
    fn read_reply(&mut self, look: bool) -> Result<bool, Error> {
        if look && self.rep_at >= self.rx_rep.len() {
            self.rx_rep
                .recv(&self.req)
                .map_err(io_error("node: recv (replayer)"))?;
            self.rep_at = 0;
            self.rep_now = now_ns();
        }
        if self.rep_at >= self.rx_rep.len() {
            return Ok(false);
        }
        let i = self.rep_at;
        self.rep_at += 1;
        let from = self.rx_rep.from(i);
        let src = Source::Replayer(
            self.replayers
                .iter()
                .position(|r| r.as_socket() == from.as_socket())
                .unwrap_or(usize::MAX),
        );
        match self.rx_rep.get(i) {
            // the sequencer's NAK comes to the socket commands leave from
            Some(d) if seqbus_wire::upstream::Nak::is_nak(d) => {
                self.node.handle_nak(self.rep_now, d)
            }
            Some(d) => match self.answers.as_mut() {
                None => self.node.handle_datagram(self.rep_now, src, d),
                Some(v) => {
                    if let Some(p) = v.open(d) {
                        self.node.handle_datagram(self.rep_now, src, p)
                    }
                }
            },
            None => self.node.note_malformed(),
        }
        Ok(true)
    }

    /// Takes in the replayers announced since the last look.
    fn discover(&mut self) {
        let Some(d) = self.discovery.as_mut() else {
            return;
        };
        let mut added = false;
        for a in d.poll() {
            let a = SockAddr::from(SocketAddr::V4(a));
            if !self.replayers.contains(&a) {
                self.replayers.push(a);
                added = true;
            }
        }
        if added {
            self.node.set_replayers(self.replayers.len());
        }
    }

    /// Appends up to `max_records` records to `out` (layout: docs/architecture.md, "Batches
    /// from Rust to Python"), waiting at most `timeout` for the first. Returns how many were
    /// appended (0 on timeout). Sends queued commands first.
    pub fn poll(
        &mut self,
        out: &mut Vec<u8>,
        max_records: usize,
        timeout: Duration,
    ) -> Result<usize, Error> {
        let deadline = Instant::now() + timeout;
        let mut n = 0;
        loop {
            if self.node.awaits_replay() && !self.node.has_deliverable() {
                // an answer that arrived while this thread was away counts before a request
                // can time out in the flush below
                self.read_one()?;
            }
            let mut now = now_ns();
            self.watch.look(now, &self.node, self.live);
            if self.node.resend_due(now) {
                // this thread was away for a whole retransmission timeout: the stream that
                // arrived meanwhile may confirm the commands; read and deliver it before the
                // flush below decides they were lost and sends them all again
                while !self.node.has_deliverable() && self.read_one()? {}
                n += self.node.deliver(out, max_records - n)?;
                self.watch.delivered(&self.node, self.live);
                now = now_ns();
            }
            if self.node.request_due(now) {
                // this thread was away (the application handling a batch) while a request's
                // answers arrived: they hold it off; read every one waiting before the flush
                // below decides the request went unanswered and asks for it all again
                while self.read_reply(true)? {}
                now = now_ns();
            }
            self.flush_at(now)?;
            let delivered = self.node.deliver(out, max_records - n)?;
            self.watch.delivered(&self.node, self.live);
            n += delivered;
            if n >= max_records {
                return Ok(n);
            }
            let mut read = false;
            while !self.node.has_deliverable() && self.read_one()? {
                read = true;
            }
            if read || self.node.has_deliverable() {
                self.idler.reset();
                continue;
            }
            if n > 0 || Instant::now() >= deadline {
                if delivered > 0 {
                    // what delivering found (a gap to ask for) goes out before the caller
                    // handles the batch; otherwise nothing changed since the flush above
                    self.flush()?;
                }
                return Ok(n);
            }
            let mut until = deadline;
            if let Some(t) = self.node.next_timeout() {
                let now = now_ns();
                until = until.min(Instant::now() + Duration::from_nanos(t.saturating_sub(now)));
            }
            // A ring has no socket: sleep on its futex, at most 1 ms so that replayer answers
            // on the request socket are read promptly.
            self.watch.waiting();
            let left = until.saturating_duration_since(Instant::now());
            if !(self.block && self.feed.wait(left.min(Duration::from_millis(1)))) {
                self.wait_fds.clear();
                self.wait_fds.extend(
                    self.fds
                        .iter()
                        .copied()
                        .chain(self.feed.fd())
                        .chain(self.extra_fds.iter().copied()),
                );
                // the other strategies cannot sleep on a ring's futex: they sleep at most
                // 1 ms at a time too, and look at the ring again
                let until = match self.feed.fd() {
                    Some(_) => until,
                    None => until.min(Instant::now() + Duration::from_millis(1)),
                };
                self.idler.idle(&self.wait_fds, until);
                if !self.extra_fds.is_empty() {
                    // the caller's sockets may have woken us: let it look
                    self.discover();
                    return Ok(n);
                }
            }
            // announcements of replayers are read when the node had nothing else to do
            self.discover();
            if self.waker.as_ref().is_some_and(|w| w.take()) {
                self.flush()?;
                return Ok(n);
            }
        }
    }

    /// For a thread that sleeps outside [`NodeClient::poll`] (`crate::notify`): the fds to
    /// watch, into `fds` (the sockets, the feed's, the waker's), and the latest it may sleep:
    /// the protocol's next deadline, at most `longest` from now, and at most 1 ms on a ring
    /// (it has no fd: look at it again).
    pub fn wait_plan(&self, fds: &mut Vec<RawFd>, longest: Duration) -> Instant {
        fds.clear();
        fds.extend(self.fds.iter().copied().chain(self.feed.fd()));
        let now = Instant::now();
        let mut until = now + longest;
        if let Some(t) = self.node.next_timeout() {
            until = until.min(now + Duration::from_nanos(t.saturating_sub(now_ns())));
        }
        if self.feed.fd().is_none() {
            until = until.min(now + Duration::from_millis(1));
        }
        until
    }

    /// Its owner waits for the client's fds outside [`NodeClient::poll`] (`crate::notify`):
    /// what it says of a silent stream counts that time as waiting (a node that is busy
    /// elsewhere is not waiting for a heartbeat).
    pub fn waiting(&mut self) {
        self.watch.waiting();
    }

    /// The idle strategy this client waits with (`node.idle`, or the option's).
    pub fn idle_strategy(&self) -> IdleStrategy {
        self.idler.strategy()
    }

    /// From now on `waker` makes a waiting [`NodeClient::poll`] return (with what it has).
    pub fn set_waker(&mut self, waker: Arc<Waker>) {
        self.fds.push(waker.fd());
        self.waker = Some(waker);
    }

    /// Command fragments sent and not yet seen in the stream.
    pub fn in_flight(&self) -> usize {
        self.node.in_flight()
    }

    /// Queues a command; returns its command sequence (of the last fragment when the body is
    /// split). Sent by the next [`NodeClient::poll`] or [`NodeClient::flush`].
    /// `SendError::WindowFull` is back-pressure: poll, then try again.
    pub fn send(&mut self, body: &[u8]) -> Result<u64, SendError> {
        self.node.send(body)
    }

    /// True until a rewinding node has caught up with live.
    pub fn is_rewinding(&self) -> bool {
        self.node.is_rewinding()
    }

    /// True once the node may send.
    pub fn is_ready(&self) -> bool {
        self.node.is_ready()
    }

    /// The cluster term and leader the stream named last (0 / None without a cluster).
    pub fn epoch(&self) -> u64 {
        self.node.epoch()
    }

    pub fn leader(&self) -> Option<u16> {
        self.node.leader()
    }

    pub fn stats(&self) -> NodeStats {
        self.node.stats()
    }

    /// Downstream datagrams (of the stream or of replayers) dropped because the bus has a
    /// downstream key and their MAC was missing or wrong: forged or altered.
    pub fn downstream_forged(&self) -> u64 {
        self.forged.load(Ordering::Relaxed)
    }

    /// Raw mode for following replayers (`seqbus_core::Node::set_raw`).
    pub(crate) fn set_raw(&mut self) {
        self.node.set_raw(true);
    }

    /// Sockets `poll` also waits on, returning when woken (a replayer's own servers).
    pub(crate) fn set_extra_fds(&mut self, fds: &[RawFd]) {
        self.extra_fds.clear();
        self.extra_fds.extend_from_slice(fds);
    }

    /// Sends another sender's upstream packet (from a replayer's SoupBinTCP client) to the
    /// sequencer: in a cluster, to the leader the stream names, or to every member while none
    /// is known. The sender retries what is lost.
    pub(crate) fn forward_upstream(&mut self, datagram: &[u8]) {
        let leader = self.node.leader();
        let targets: Vec<&SockAddr> = match leader {
            _ if self.members.is_empty() => vec![&self.sequencer],
            Some(l) => self
                .members
                .iter()
                .filter(|m| m.0 == l)
                .map(|m| &m.1)
                .collect(),
            None => self.members.iter().map(|m| &m.1).collect(),
        };
        for t in targets {
            let _ = self.req.send_to(datagram, t);
        }
    }
}

//! What a node client says it is doing, one `log` record per event (target `seqbus::node`;
//! the Python SDK hands them to `logging`, docs/sdk.md "What a running node says"):
//!
//! * when it starts: what it waits for (the sequencer's address, the session, the stream's);
//! * connected: the first packet of the sequencer's stream arrived;
//! * the cluster's leader, when the stream names a new one;
//! * rewinding progress (target `seqbus::node::rewind`: every second at debug level, every
//!   ten at info) and caught up at sequence N (which may come before connected: a replayer's
//!   answer can tell the node where the stream ends before the live stream reaches it);
//! * a stream that stays silent: no heartbeat for N s, on which address, with the likely
//!   causes found by looking — is anything on this host bound to the sequencer's port, does
//!   multicast come back to this host at all — and, once it comes again, the stream is back.
//!
//! Nothing here is on the path of a message: the client counts the live packets it reads and
//! [`Watch::look`] compares a few numbers once per pass of `NodeClient::poll`.

use std::cell::RefCell;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use log::Level;
use seqbus_config::{Config, Transport};
use seqbus_core::{Node, Start};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// The target of a node's records (`seqbus.node` in Python).
pub const TARGET: &str = "seqbus::node";
/// The target of its rewinding progress (`seqbus.node.rewind` in Python).
pub const REWIND_TARGET: &str = "seqbus::node::rewind";

/// The longest interval between two warnings of a stream that stays silent.
const MAX_WARNING_INTERVAL_NS: u64 = 60_000_000_000;
/// Rewinding progress: at debug level this often, at info level every tenth.
const PROGRESS_NS: u64 = 1_000_000_000;
const PROGRESS_INFO_EVERY: u32 = 10;
/// How long the multicast probe waits for its datagram to come back.
const PROBE_WAIT: Duration = Duration::from_millis(200);

/// Where a node's stream comes from.
#[derive(Debug, Clone)]
pub(crate) enum Stream {
    Multicast {
        group: SocketAddrV4,
        interface: Ipv4Addr,
    },
    Unicast {
        listen: SocketAddr,
    },
    Tcp {
        server: SocketAddr,
    },
    Shm {
        path: PathBuf,
    },
    Memory {
        name: String,
    },
}

impl Stream {
    /// The stream of `cfg` for a node listening on `listen` (udp-unicast).
    pub(crate) fn of(cfg: &Config, listen: Option<SocketAddr>) -> Stream {
        Stream::of_transport(
            cfg,
            cfg.node.transport.unwrap_or(cfg.downstream.transport),
            listen,
        )
    }

    /// The stream of `cfg` read over `transport`.
    pub(crate) fn of_transport(
        cfg: &Config,
        transport: Transport,
        listen: Option<SocketAddr>,
    ) -> Stream {
        let unspecified = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        match transport {
            Transport::UdpMulticast => Stream::Multicast {
                group: match cfg.downstream.group {
                    Some(SocketAddr::V4(g)) => g,
                    _ => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
                },
                interface: cfg.downstream.interface,
            },
            Transport::UdpUnicast => Stream::Unicast {
                listen: listen.or(cfg.node.listen).unwrap_or(unspecified),
            },
            Transport::Tcp => Stream::Tcp {
                server: cfg.tcp.connect.unwrap_or(cfg.tcp.listen),
            },
            Transport::Shm => Stream::Shm {
                path: cfg.shm_path(),
            },
            Transport::Memory => Stream::Memory {
                name: cfg.memory_name(),
            },
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stream::Multicast { group, interface } => {
                write!(f, "udp-multicast {group} on {interface}")
            }
            Stream::Unicast { listen } => write!(f, "udp-unicast at {listen}"),
            Stream::Tcp { server } => write!(f, "SoupBinTCP from {server}"),
            Stream::Shm { path } => write!(f, "the shared-memory ring {}", path.display()),
            Stream::Memory { name } => write!(f, "the in-process bus {name:?}"),
        }
    }
}

/// A record held back: level, target, text.
type Held = (Level, &'static str, String);

thread_local! {
    /// Records this thread holds back (see [`hold_records`]).
    static HELD: RefCell<Option<Vec<Held>>> = const { RefCell::new(None) };
}

/// Logs a record of the roles, or keeps it while this thread holds records back.
pub fn record(level: Level, target: &'static str, text: String) {
    let text = HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(held) => {
            held.push((level, target, text));
            None
        }
        None => Some(text),
    });
    if let Some(text) = text {
        log::log!(target: target, level, "{text}");
    }
}

/// From now on this thread's records wait for [`log_held`]: for a thread that works under a
/// lock another thread may wait for while it holds what a logger needs (Python's GIL, which
/// the records' way into Python `logging` takes: `crate::notify`).
pub fn hold_records() {
    HELD.with(|h| {
        h.borrow_mut().get_or_insert_with(Vec::new);
    });
}

/// Logs the records this thread held back (it goes on holding them).
pub fn log_held() {
    let held = HELD.with(|h| h.borrow_mut().as_mut().map(std::mem::take));
    for (level, target, text) in held.unwrap_or_default() {
        log::log!(target: target, level, "{text}");
    }
}

/// The progress of a rewind.
#[derive(Debug)]
struct Rewind {
    from: u64,
    started: Instant,
    next_ns: u64,
    reports: u32,
}

/// A node client's events (see the module documentation).
#[derive(Debug)]
pub(crate) struct Watch {
    /// "node ME/1", or what the owner named it.
    who: String,
    session: String,
    stream: Stream,
    /// (member id, upstream address) of each sequencer: one, id 0, without `[cluster]`.
    sequencers: Vec<(u16, SocketAddr)>,
    /// A stream silent this long, while the node waits for it, is reported.
    silence_ns: u64,
    /// Live packets counted at the last look, and when that count last moved.
    live: u64,
    live_ns: u64,
    /// When the client last looked, and whether it has waited (idle) since: only the time a
    /// node spends waiting counts as silence — one busy in its handlers, or delivering a
    /// rewind, reads no live packet meanwhile and is not waiting for one.
    look_ns: u64,
    waited: bool,
    /// Time spent waiting since the stream last moved, and the amount of it that is reported
    /// next.
    quiet_ns: u64,
    warn_at_ns: u64,
    connected: bool,
    connected_ns: u64,
    /// Warnings of silence since the stream last moved.
    warnings: u32,
    ready: bool,
    ready_warned: bool,
    rewind: Option<Rewind>,
    leader: Option<u16>,
    epoch: u64,
    /// Whether a multicast datagram of this host comes back to it (probed once, when needed).
    multicast_probe: Option<Option<bool>>,
}

impl Watch {
    pub(crate) fn new(
        cfg: &Config,
        who: String,
        stream: Stream,
        start: Start,
        asks: bool,
        now_ns: u64,
    ) -> Watch {
        let sequencers = match &cfg.cluster {
            Some(c) => c.members.iter().map(|m| (m.id, m.upstream)).collect(),
            None => vec![(0, cfg.sequencer.upstream)],
        };
        // twice the heartbeat: one heartbeat lost is not yet a silence
        let silence_ns = (2 * cfg.sequencer.heartbeat_ms).max(2_000) * 1_000_000;
        let rewind = match start {
            Start::Live => None,
            Start::From(from) => Some(Rewind {
                from,
                started: Instant::now(),
                next_ns: now_ns + PROGRESS_NS,
                reports: 0,
            }),
        };
        Watch {
            who,
            session: cfg.bus.session.clone(),
            stream,
            sequencers,
            silence_ns,
            live: 0,
            live_ns: now_ns,
            look_ns: now_ns,
            waited: false,
            quiet_ns: 0,
            warn_at_ns: silence_ns,
            connected: false,
            connected_ns: 0,
            warnings: 0,
            // a node that asks for its next command sequence (hello → SenderState) is ready
            // once the sequencer answered
            ready: !asks,
            ready_warned: false,
            rewind,
            leader: None,
            epoch: 0,
            multicast_probe: None,
        }
    }

    /// The sequencers' upstream addresses, as the records name them.
    fn sequencer_addresses(&self) -> String {
        match self.sequencers.as_slice() {
            [(_, a)] => format!("the sequencer at {a}"),
            all => format!(
                "the sequencers at {}",
                all.iter()
                    .map(|(id, a)| format!("{a} (member {id})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn emit(&self, level: Level, target: &'static str, text: String) {
        record(level, target, text);
    }

    /// The node starts: what it waits for.
    pub(crate) fn starting(&mut self, start: Start) {
        let from = match start {
            Start::Live => "live".to_string(),
            Start::From(1) => "rewinding from the start".to_string(),
            Start::From(s) => format!("rewinding from sequence {s}"),
        };
        let text = format!(
            "{}: joining session {} ({from}): waiting for {} and its stream on {}",
            self.who,
            self.session,
            self.sequencer_addresses(),
            self.stream
        );
        self.emit(Level::Info, TARGET, text);
    }

    /// Once per pass of the client's poll: `live` is the count of live packets read so far.
    pub(crate) fn look(&mut self, now_ns: u64, node: &Node, live: u64) {
        let since = now_ns.saturating_sub(self.look_ns);
        self.look_ns = now_ns;
        if live != self.live {
            self.live = live;
            self.stream_moved(now_ns, node);
        } else if self.waited {
            self.quiet_ns += since;
            if self.quiet_ns >= self.warn_at_ns {
                self.silent(node);
            }
        }
        self.waited = false;
        if node.leader() != self.leader || node.epoch() != self.epoch {
            self.leader = node.leader();
            self.epoch = node.epoch();
            if let Some(l) = self.leader {
                let at = self
                    .sequencers
                    .iter()
                    .find(|(id, _)| *id == l)
                    .map_or(String::new(), |(_, a)| format!(" (upstream {a})"));
                let text = format!(
                    "{}: member {l} leads the bus in term {}{at}",
                    self.who, self.epoch
                );
                self.emit(Level::Info, TARGET, text);
            }
        }
        if !self.ready {
            if node.is_ready() {
                self.ready = true;
            } else if self.connected
                && !self.ready_warned
                && now_ns >= self.connected_ns + self.silence_ns
            {
                self.ready_warned = true;
                let text = format!(
                    "{}: the stream arrives, but {} has not answered this node's hello for {} \
                     (it cannot send until it does): do this node's commands reach it? \
                     sequencer.upstream must be the address the sequencer is bound to{}",
                    self.who,
                    self.sequencer_addresses(),
                    seconds(now_ns - self.connected_ns),
                    self.bound_note()
                );
                self.emit(Level::Warn, TARGET, text);
            }
        }
        if let Some(r) = &mut self.rewind {
            if now_ns >= r.next_ns {
                r.next_ns = now_ns + PROGRESS_NS;
                r.reports += 1;
                let level = if r.reports.is_multiple_of(PROGRESS_INFO_EVERY) {
                    Level::Info
                } else {
                    Level::Debug
                };
                let done = node.next_seq().saturating_sub(r.from);
                let rate = done as f64 / r.started.elapsed().as_secs_f64().max(1e-3);
                let text = match node.head() {
                    head if head > r.from && node.head_known() => {
                        let total = head - r.from;
                        format!(
                            "{}: rewinding: {} of {} messages ({}%), {}/s",
                            self.who,
                            thousands(done),
                            thousands(total),
                            (done.min(total) * 100) / total,
                            thousands(rate as u64)
                        )
                    }
                    _ => format!(
                        "{}: rewinding: {} messages so far (where the stream ends is not known \
                         yet: no live packet read)",
                        self.who,
                        thousands(done)
                    ),
                };
                self.emit(level, REWIND_TARGET, text);
            }
        }
    }

    /// The client is about to wait for the network (or its owner is, `crate::notify`): the
    /// time until the next look counts as silence if no live packet comes.
    #[inline]
    pub(crate) fn waiting(&mut self) {
        self.waited = true;
    }

    /// After each delivery: a rewinding node that caught up says where (`live`: as for
    /// [`Watch::look`]).
    #[inline]
    pub(crate) fn delivered(&mut self, node: &Node, live: u64) {
        if self.rewind.is_some() && !node.is_rewinding() {
            self.caught_up(node, live);
        }
    }

    #[cold]
    fn caught_up(&mut self, node: &Node, live: u64) {
        if live != self.live {
            // the live packet that ended the rewind: connected first
            self.live = live;
            self.stream_moved(crate::now_ns(), node);
        }
        let Some(r) = self.rewind.take() else { return };
        let at = node.next_seq().saturating_sub(1);
        let replayed = at.saturating_sub(r.from.saturating_sub(1));
        let text = format!(
            "{}: caught up at sequence {at}, live from here ({} message{} replayed in {:.1} s)",
            self.who,
            thousands(replayed),
            if replayed == 1 { "" } else { "s" },
            r.started.elapsed().as_secs_f64()
        );
        self.emit(Level::Info, TARGET, text);
    }

    fn stream_moved(&mut self, now_ns: u64, node: &Node) {
        if !self.connected {
            self.connected = true;
            self.connected_ns = now_ns;
            let text = format!(
                "{}: connected to {} (session {}): its stream arrives on {}",
                self.who,
                self.sequencer_addresses(),
                self.session,
                self.stream
            );
            self.emit(Level::Info, TARGET, text);
        } else if self.warnings > 0 {
            let text = format!(
                "{}: the stream is back after {} without a heartbeat (at sequence {})",
                self.who,
                seconds(now_ns - self.live_ns),
                node.next_seq().saturating_sub(1)
            );
            self.emit(Level::Info, TARGET, text);
        }
        self.live_ns = now_ns;
        self.warnings = 0;
        self.quiet_ns = 0;
        self.warn_at_ns = self.silence_ns;
    }

    #[cold]
    fn silent(&mut self, node: &Node) {
        self.warnings += 1;
        let interval = (self.silence_ns << self.warnings.min(16)).min(MAX_WARNING_INTERVAL_NS);
        self.warn_at_ns = self.quiet_ns + interval;
        let since = if self.connected {
            format!(
                " (the last at sequence {})",
                node.next_seq().saturating_sub(1)
            )
        } else {
            " since it started".to_string()
        };
        let quiet = self.quiet_ns;
        let causes = self.causes(node);
        let text = format!(
            "{}: no heartbeat for {} from {} on {} (session {}){since}; {}",
            self.who,
            seconds(quiet),
            self.sequencer_addresses(),
            self.stream,
            self.session,
            if causes.len() == 1 {
                format!("likely cause: {}", causes[0])
            } else {
                format!(
                    "likely causes: {}",
                    causes
                        .iter()
                        .enumerate()
                        .map(|(i, c)| format!("({}) {c}", i + 1))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        );
        self.emit(Level::Warn, TARGET, text);
    }

    /// What `bound_here` says of the sequencers' addresses, for a record (or nothing).
    fn bound_note(&self) -> String {
        let bound: Vec<_> = self
            .sequencers
            .iter()
            .map(|(_, a)| (a, udp_bound_here(*a)))
            .collect();
        if bound.iter().all(|(_, b)| *b == Some(false)) {
            format!(
                "; nothing on this host is bound to {}",
                bound
                    .iter()
                    .map(|(a, _)| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        }
    }

    /// Why the stream may be silent, the surest first.
    fn causes(&mut self, node: &Node) -> Vec<String> {
        let stats = node.stats();
        let mut causes = Vec::new();
        if stats.wrong_session > 0 {
            causes.push(format!(
                "{} packets of another session arrived: the sequencer's bus.session is not {:?}",
                stats.wrong_session, self.session
            ));
        }
        if stats.fenced > 0 {
            causes.push(format!(
                "{} packets came from addresses that are no [cluster] member's publish address",
                stats.fenced
            ));
        }
        let bound: Vec<Option<bool>> = self
            .sequencers
            .iter()
            .map(|(_, a)| udp_bound_here(*a))
            .collect();
        let addresses = self
            .sequencers
            .iter()
            .map(|(_, a)| a.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let running_here = bound.contains(&Some(true));
        let nothing_here = bound.iter().all(|b| *b == Some(false));
        if nothing_here {
            causes.push(format!(
                "no sequencer is running: nothing on this host is bound to {addresses} \
                 (sequencer.upstream{}); start one with `seqbus sequencer -c CONFIG`",
                if self.sequencers.len() > 1 {
                    " of each [cluster] member"
                } else {
                    ""
                }
            ));
        } else if !running_here {
            causes.push(format!(
                "no sequencer of session {} is running at {addresses}",
                self.session
            ));
        }
        match self.stream.clone() {
            Stream::Multicast { group, interface } => {
                let reaches = *self
                    .multicast_probe
                    .get_or_insert_with(|| multicast_comes_back(*group.ip(), interface));
                if reaches != Some(true) {
                    causes.push(format!(
                        "multicast does not reach this node here: a datagram this host sent to \
                         {} on {interface} did not come back. Loopback multicast needs a \
                         network namespace of its own (`unshare -rn`; the seqbus repository's \
                         scripts/in-netns.sh), or use the udp-unicast or shm transport \
                         (docs/transports.md)",
                        group.ip()
                    ));
                }
                if running_here || (reaches == Some(true) && !nothing_here) {
                    causes.push(format!(
                        "a wrong port or group: the sequencer publishes to its \
                         downstream.group, and this node listens on {group}"
                    ));
                }
            }
            Stream::Unicast { listen } => causes.push(format!(
                "the sequencer sends only to its downstream.subscribers: is {listen} one of them \
                 in the sequencer's configuration?"
            )),
            Stream::Tcp { server } => causes.push(format!(
                "nothing answers at {server} (tcp.connect), or its login refuses this node \
                 (tcp.username, tcp.password)"
            )),
            Stream::Shm { path } => causes.push(format!(
                "nothing is written to the ring {}: a dispatcher (`seqbus dispatcher`) or a \
                 sequencer publishing to shm must run on this host",
                path.display()
            )),
            Stream::Memory { name } => causes.push(format!(
                "no sequencer publishes on the in-process bus {name:?} in this process"
            )),
        }
        causes
    }
}

/// "2.0 s", "65 s".
fn seconds(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// 1234567 → "1,234,567".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether `ip` is an address of this host (binding a socket to it with port 0 works: no
/// port of anyone's is touched).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Whether a UDP socket of this host (this network namespace) is bound to `addr`, read from
/// `/proc/net/udp` and `udp6` — a socket on the wildcard address counts — rather than probed
/// with a bind of our own (which would hold the port for a moment: a sequencer starting then
/// would fail). None when `addr` is not this host's or the files cannot be read.
pub(crate) fn udp_bound_here(addr: SocketAddr) -> Option<bool> {
    if !is_local(addr.ip()) {
        return None;
    }
    let mut readable = false;
    for file in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        readable = true;
        if text
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(parse_proc_address)
            .any(|(ip, port)| {
                port == addr.port() && (ip.is_unspecified() || ip == addr.ip().to_canonical())
            })
        {
            return Some(true);
        }
    }
    readable.then_some(false)
}

/// "0100007F:1B58" (IPv4) or 32 hex digits and a port (IPv6), as `/proc/net/udp*` print a
/// socket's address: the address in words of the host's byte order.
fn parse_proc_address(text: &str) -> Option<(IpAddr, u16)> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b)).to_canonical()
        }
        _ => return None,
    };
    Some((ip, port))
}

/// Whether a multicast datagram this host sends to `group` on `interface` comes back to a
/// socket of its own that joined the group (on a port of its own, with a TTL of 0: nothing
/// leaves the host). None when the sockets cannot be made at all.
fn multicast_comes_back(group: Ipv4Addr, interface: Ipv4Addr) -> Option<bool> {
    const PROBE: &[u8] = b"seqbus multicast probe";
    let rx = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).ok()?;
    rx.bind(&SockAddr::from(SocketAddrV4::new(group, 0))).ok()?;
    let port = rx.local_addr().ok()?.as_socket()?.port();
    if rx.join_multicast_v4(&group, &interface).is_err() {
        return Some(false);
    }
    let tx = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).ok()?;
    tx.set_multicast_if_v4(&interface).ok()?;
    tx.set_multicast_loop_v4(true).ok()?;
    tx.set_multicast_ttl_v4(0).ok()?;
    if tx
        .send_to(PROBE, &SockAddr::from(SocketAddrV4::new(group, port)))
        .is_err()
    {
        return Some(false);
    }
    let rx: UdpSocket = rx.into();
    let deadline = Instant::now() + PROBE_WAIT;
    let mut buf = [0u8; 64];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || rx.set_read_timeout(Some(left)).is_err() {
            return Some(false);
        }
        match rx.recv(&mut buf) {
            Ok(n) if &buf[..n] == PROBE => return Some(true),
            Ok(_) => continue,
            Err(_) => return Some(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_addresses_are_read_in_the_hosts_byte_order() {
        let lo = u32::from_ne_bytes([127, 0, 0, 1]);
        let (ip, port) = parse_proc_address(&format!("{lo:08X}:1B58")).unwrap();
        assert_eq!((ip, port), (IpAddr::V4(Ipv4Addr::LOCALHOST), 7000));
        let (ip, _) = parse_proc_address(&format!("{}:0035", "0".repeat(32))).unwrap();
        assert!(ip.is_unspecified());
        // an IPv4-mapped IPv6 address is the IPv4 address
        let mapped = format!(
            "{:08X}{:08X}{:08X}{:08X}:0035",
            0,
            0,
            u32::from_ne_bytes([0, 0, 0xff, 0xff]),
            lo
        );
        assert_eq!(
            parse_proc_address(&mapped).unwrap().0,
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert!(parse_proc_address("nonsense").is_none());
    }

    #[test]
    fn a_bound_port_is_found_and_a_free_one_is_not() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        assert_eq!(udp_bound_here(addr), Some(true));
        drop(socket);
        assert_eq!(udp_bound_here(addr), Some(false));
        // an address of no interface of this host: nothing can be said
        assert_eq!(udp_bound_here("198.51.100.77:7000".parse().unwrap()), None);
    }

    #[test]
    fn multicast_that_cannot_be_joined_does_not_come_back() {
        // an interface address no interface of this host has: the group cannot be joined
        let elsewhere = Ipv4Addr::new(198, 51, 100, 1);
        assert_eq!(
            multicast_comes_back(Ipv4Addr::new(239, 255, 77, 78), elsewhere),
            Some(false)
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(seconds(2_000_000_000), "2.0 s");
        assert_eq!(seconds(65_000_000_000), "65 s");
    }
}

//! The transports beside UDP, picked by configuration (`downstream.transport`, `node.transport`;
//! every key in `docs/transports.md`): SoupBinTCP (`tcp`), a shared-memory ring written by the
//! sequencer or by a per-host dispatcher (`shm`), and in-process memory (`memory`). The
//! protocol and socket code is in `seqbus-transport`; this module builds it from a [`Config`]
//! and gives the sequencer loop a [`Publisher`] and the node client a [`Feed`].

use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use seqbus_core::replayer::Store;
use seqbus_core::Start;
use seqbus_transport::memory::MemoryBus;
use seqbus_transport::shm::{self, ShmPublisher, ShmSubscriber};
use seqbus_transport::soupbin::Timing;
use seqbus_transport::tcp::{self, Credential, TcpClient, TcpServer};
use serde::Deserialize;

use crate::config::{Config, Transport};
use crate::{io_error, Error};

/// One login the SoupBinTCP server accepts.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialConfig {
    /// 1–6 printable ASCII characters.
    pub username: String,
    /// 0–10 printable ASCII characters.
    pub password: String,
}

impl std::fmt::Debug for CredentialConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialConfig({:?}, <hidden>)", self.username)
    }
}

/// `[tcp]`: SoupBinTCP 4.0.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpConfig {
    /// Address the sequencer's SoupBinTCP server listens on.
    #[serde(default = "default_tcp_listen")]
    pub listen: SocketAddr,
    /// Address nodes and dispatchers connect to (default: `listen`).
    pub connect: Option<SocketAddr>,
    /// Logins the server accepts.
    #[serde(default)]
    pub credentials: Vec<CredentialConfig>,
    /// Login nodes and dispatchers use.
    pub username: Option<String>,
    pub password: Option<String>,
    /// A heartbeat is sent after this long without sending (both sides).
    #[serde(default = "default_tcp_heartbeat")]
    pub heartbeat_ms: u64,
    /// The link is dropped after this long without receiving (both sides).
    #[serde(default = "default_tcp_timeout")]
    pub timeout_ms: u64,
    /// Bytes queued for one client before it is disconnected as too slow.
    #[serde(default = "default_client_buffer")]
    pub client_buffer: usize,
    #[serde(default = "default_max_clients")]
    pub max_clients: usize,
    /// First wait before a client reconnects (doubles up to `reconnect_max_ms`).
    #[serde(default = "default_reconnect")]
    pub reconnect_ms: u64,
    #[serde(default = "default_reconnect_max")]
    pub reconnect_max_ms: u64,
}

/// `[shm]`: the per-host ring.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShmConfig {
    /// The ring file (default `/dev/shm/seqbus-<session>.ring`).
    pub path: Option<PathBuf>,
    /// Bytes of the ring's data area, a power of two.
    #[serde(default = "default_ring")]
    pub capacity: usize,
    /// Address the dispatcher receives on when `downstream.transport = "udp-unicast"`.
    pub dispatcher_listen: Option<SocketAddr>,
}

/// `[memory]`: the in-process bus.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Name the sequencer and nodes of one process meet under (default: `bus.session`).
    pub name: Option<String>,
    #[serde(default = "default_memory_ring")]
    pub capacity: usize,
    /// Most upstream packets queued for the sequencer.
    #[serde(default = "default_memory_upstream")]
    pub upstream_queue: usize,
}

fn default_tcp_listen() -> SocketAddr {
    "127.0.0.1:31003".parse().expect("literal")
}
fn default_tcp_heartbeat() -> u64 {
    1000
}
fn default_tcp_timeout() -> u64 {
    15_000
}
fn default_client_buffer() -> usize {
    64 << 20
}
fn default_max_clients() -> usize {
    1024
}
fn default_reconnect() -> u64 {
    50
}
fn default_reconnect_max() -> u64 {
    2000
}
fn default_ring() -> usize {
    64 << 20
}
fn default_memory_ring() -> usize {
    16 << 20
}
fn default_memory_upstream() -> usize {
    65_536
}

impl Default for TcpConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}
impl Default for ShmConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}
impl Default for MemoryConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

/// Checks the keys of the transports in use; the error names the key.
pub(crate) fn check(cfg: &Config) -> Result<(), (&'static str, String)> {
    let down = cfg.downstream.transport;
    let node = cfg.node.transport.unwrap_or(down);
    if node != down && node != Transport::Shm {
        return Err((
            "node.transport",
            format!(
                "nodes read what the sequencer sends ({}), or \"shm\" from this host's dispatcher",
                transport_name(down)
            ),
        ));
    }
    if node == Transport::Shm && down == Transport::Memory {
        return Err((
            "node.transport",
            "\"shm\" cannot follow an in-process bus".into(),
        ));
    }
    let t = &cfg.tcp;
    if down == Transport::Tcp {
        if t.credentials.is_empty() {
            return Err((
                "tcp.credentials",
                "at least one login required when transport = \"tcp\"".into(),
            ));
        }
        for c in &t.credentials {
            if c.username.is_empty() {
                return Err(("tcp.credentials", "a username must not be empty".into()));
            }
            seqbus_transport::soupbin::frame::alpha::<6>("username", &c.username)
                .map_err(|m| ("tcp.credentials", m))?;
            seqbus_transport::soupbin::frame::alpha::<10>("password", &c.password)
                .map_err(|m| ("tcp.credentials", m))?;
        }
        let user = t.username.as_deref().unwrap_or("");
        seqbus_transport::soupbin::frame::alpha::<6>("username", user)
            .map_err(|m| ("tcp.username", m))?;
        seqbus_transport::soupbin::frame::alpha::<10>(
            "password",
            t.password.as_deref().unwrap_or(""),
        )
        .map_err(|m| ("tcp.password", m))?;
        if t.heartbeat_ms == 0 {
            return Err(("tcp.heartbeat_ms", "must be at least 1".into()));
        }
        if t.timeout_ms <= t.heartbeat_ms {
            return Err((
                "tcp.timeout_ms",
                "must be longer than tcp.heartbeat_ms".into(),
            ));
        }
        if t.client_buffer < 1 << 16 {
            return Err(("tcp.client_buffer", "must be at least 65536".into()));
        }
        if t.max_clients == 0 {
            return Err(("tcp.max_clients", "must be at least 1".into()));
        }
        if t.reconnect_ms == 0 || t.reconnect_max_ms < t.reconnect_ms {
            return Err((
                "tcp.reconnect_ms",
                "must be at least 1 and at most tcp.reconnect_max_ms".into(),
            ));
        }
    }
    if node == Transport::Shm || down == Transport::Shm {
        let c = cfg.shm.capacity;
        if !c.is_power_of_two() || !(1 << 16..=1 << 40).contains(&c) {
            return Err((
                "shm.capacity",
                "must be a power of two between 65536 and 2^40".into(),
            ));
        }
        if c / 8 < cfg.bus.max_packet.max(cfg.replayer.max_packet) + 8 {
            return Err((
                "shm.capacity",
                "must hold at least 8 packets of the largest size".into(),
            ));
        }
        if down == Transport::UdpUnicast
            && node == Transport::Shm
            && cfg.shm.dispatcher_listen.is_none()
        {
            return Err((
                "shm.dispatcher_listen",
                "required for a dispatcher when downstream.transport = \"udp-unicast\"".into(),
            ));
        }
    }
    if down == Transport::Memory {
        let c = cfg.memory.capacity;
        if !c.is_power_of_two() || !(1 << 16..=1 << 40).contains(&c) {
            return Err((
                "memory.capacity",
                "must be a power of two between 65536 and 2^40".into(),
            ));
        }
        if cfg.memory.upstream_queue == 0 {
            return Err(("memory.upstream_queue", "must be at least 1".into()));
        }
    }
    Ok(())
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::UdpMulticast => "udp-multicast",
        Transport::UdpUnicast => "udp-unicast",
        Transport::Tcp => "tcp",
        Transport::Shm => "shm",
        Transport::Memory => "memory",
    }
}

/// The ring file of this configuration.
pub fn shm_path(cfg: &Config) -> PathBuf {
    match &cfg.shm.path {
        Some(p) => cfg.base_dir.join(p),
        None => PathBuf::from(format!("/dev/shm/seqbus-{}.ring", cfg.session().as_str())),
    }
}

fn memory_bus(cfg: &Config) -> Result<Arc<MemoryBus>, Error> {
    let name = cfg
        .memory
        .name
        .clone()
        .unwrap_or_else(|| cfg.session().as_str().to_string());
    MemoryBus::named(&name, cfg.memory.capacity, cfg.memory.upstream_queue)
        .map_err(io_error(format!("memory bus {name:?}")))
}

fn timing(t: &TcpConfig) -> Timing {
    Timing {
        heartbeat_ns: t.heartbeat_ms * 1_000_000,
        timeout_ns: t.timeout_ms * 1_000_000,
    }
}

fn tcp_client(cfg: &Config) -> Result<TcpClient, Error> {
    let t = &cfg.tcp;
    TcpClient::new(
        tcp::ClientConfig {
            server: t.connect.unwrap_or(t.listen),
            username: t.username.clone().unwrap_or_default(),
            password: t.password.clone().unwrap_or_default(),
            session: cfg.session().as_str().to_string(),
            timing: timing(t),
            reconnect_min_ns: t.reconnect_ms * 1_000_000,
            reconnect_max_ns: t.reconnect_max_ms * 1_000_000,
            max_packet: 65_535,
        },
        // At live: a rewinding node fills history from its replayers as over UDP; after a
        // lost connection the client logs in again from its next sequence number.
        0,
    )
    .map_err(|e| Error::Option {
        name: "tcp",
        message: e.to_string(),
    })
}

/// How the sequencer publishes, for the transports of this module.
pub(crate) enum Publisher {
    Tcp(Box<TcpServer>),
    Shm(ShmPublisher),
    Memory(ShmPublisher, Arc<MemoryBus>),
}

impl Publisher {
    /// The publisher of `downstream.transport`, or None for the UDP transports. `next_seq`:
    /// one past the last journaled message.
    pub(crate) fn open(cfg: &Config, next_seq: u64) -> Result<Option<Publisher>, Error> {
        Ok(Some(match cfg.downstream.transport {
            Transport::UdpMulticast | Transport::UdpUnicast => return Ok(None),
            Transport::Tcp => {
                let t = &cfg.tcp;
                let server = TcpServer::bind(
                    tcp::ServerConfig {
                        listen: t.listen,
                        session: cfg.session(),
                        credentials: t
                            .credentials
                            .iter()
                            .map(|c| Credential {
                                username: c.username.clone(),
                                password: c.password.clone(),
                            })
                            .collect(),
                        timing: timing(t),
                        client_buffer: t.client_buffer,
                        max_packet: 65_535,
                        max_clients: t.max_clients,
                    },
                    next_seq,
                )
                .map_err(io_error(format!("tcp.listen {}: bind", t.listen)))?;
                Publisher::Tcp(Box::new(server))
            }
            Transport::Shm => {
                let path = shm_path(cfg);
                Publisher::Shm(
                    ShmPublisher::create(&path, cfg.shm.capacity)
                        .map_err(io_error(format!("shm.path {}: create", path.display())))?,
                )
            }
            Transport::Memory => {
                let bus = memory_bus(cfg)?;
                let p = bus.publisher().map_err(io_error("memory bus"))?;
                Publisher::Memory(p, bus)
            }
        }))
    }

    /// Publishes one MoldUDP64 packet (persisted already).
    pub(crate) fn publish(&mut self, now_ns: u64, packet: &[u8]) -> Result<(), Error> {
        match self {
            Publisher::Tcp(s) => s.publish_packet(now_ns, packet).map_err(|e| Error::Io {
                what: "tcp: publish".into(),
                source: std::io::Error::other(e.to_string()),
            }),
            Publisher::Shm(p) | Publisher::Memory(p, _) => {
                p.publish(packet).map_err(io_error("shm: publish"))?;
                Ok(())
            }
        }
    }

    /// Serves clients (TCP: logins, rewinds from `store`, writes) and hands upstream packets
    /// that arrived over this transport to `upstream`. Returns the work done (0: idle).
    pub(crate) fn poll(
        &mut self,
        now_ns: u64,
        store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        match self {
            Publisher::Tcp(s) => s.poll(now_ns, store, upstream),
            Publisher::Shm(_) => 0,
            Publisher::Memory(_, bus) => bus.drain_upstream(upstream),
        }
    }

    /// Writes what was published to clients now (TCP), so live clients need not wait for
    /// the next poll.
    pub(crate) fn flush(&mut self) {
        if let Publisher::Tcp(s) = self {
            s.flush();
        }
    }

    /// The longest the sequencer may sleep: short while TCP output is pending (the sockets
    /// are waited on for input only) or in-process commands may arrive (no socket to wait on).
    pub(crate) fn idle_limit(&self) -> Option<Duration> {
        match self {
            Publisher::Tcp(s) if s.has_pending_output() => Some(Duration::from_micros(200)),
            Publisher::Tcp(_) | Publisher::Shm(_) => None,
            Publisher::Memory(..) => Some(Duration::from_millis(1)),
        }
    }

    /// Sockets to wait on.
    pub(crate) fn fds(&self) -> Vec<RawFd> {
        match self {
            Publisher::Tcp(s) => s.raw_fds(),
            _ => Vec::new(),
        }
    }
}

/// Where a node reads the stream from, for the transports of this module.
pub(crate) enum Feed {
    Tcp(Box<TcpClient>),
    Shm(ShmSubscriber),
    Memory(ShmSubscriber, Arc<MemoryBus>),
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Feed::Tcp(_) => "Feed::Tcp",
            Feed::Shm(_) => "Feed::Shm",
            Feed::Memory(..) => "Feed::Memory",
        })
    }
}

impl Feed {
    /// The feed of `node.transport` (default `downstream.transport`), or None for UDP.
    pub(crate) fn open(cfg: &Config, _start: Start) -> Result<Option<Feed>, Error> {
        Ok(Some(
            match cfg.node.transport.unwrap_or(cfg.downstream.transport) {
                Transport::UdpMulticast | Transport::UdpUnicast => return Ok(None),
                Transport::Tcp => Feed::Tcp(Box::new(tcp_client(cfg)?)),
                Transport::Shm => {
                    let path = shm_path(cfg);
                    Feed::Shm(ShmSubscriber::open(&path).map_err(io_error(format!(
                        "shm.path {}: open (is the dispatcher or sequencer running?)",
                        path.display()
                    )))?)
                }
                Transport::Memory => {
                    let bus = memory_bus(cfg)?;
                    Feed::Memory(bus.subscribe(), bus)
                }
            },
        ))
    }

    /// Hands waiting MoldUDP64 packets to `f`; true if there were any.
    pub(crate) fn read(&mut self, now_ns: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        match self {
            Feed::Tcp(c) => c.poll(now_ns, f).map(|n| n > 0).map_err(|e| Error::Io {
                what: "tcp".into(),
                source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string()),
            }),
            Feed::Shm(s) | Feed::Memory(s, _) => Ok(s.poll(64, f) > 0),
        }
    }

    /// Sends an upstream packet over this transport; false when it goes by UDP instead
    /// (shared memory carries the stream down only).
    pub(crate) fn send_upstream(&mut self, now_ns: u64, datagram: &[u8]) -> bool {
        match self {
            Feed::Tcp(c) => {
                // Not logged in: dropped, and the node retries until it is sequenced.
                c.send_upstream(now_ns, datagram);
                true
            }
            Feed::Memory(_, bus) => {
                bus.send_upstream(datagram);
                true
            }
            Feed::Shm(_) => false,
        }
    }

    /// The socket to wait on (TCP).
    pub(crate) fn fd(&self) -> Option<RawFd> {
        match self {
            Feed::Tcp(c) => c.raw_fd(),
            _ => None,
        }
    }

    /// Blocks until the ring has something or `timeout` passes (shm and memory; these have
    /// no socket to poll).
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        match self {
            Feed::Shm(s) | Feed::Memory(s, _) => {
                s.wait(timeout);
                true
            }
            Feed::Tcp(_) => false,
        }
    }
}

/// Runs this host's dispatcher until `stop` is set or the session ends: reads the stream as
/// `downstream.transport` says and writes every packet once into the ring at `shm.path`.
pub fn run_dispatcher(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    let d = &cfg.downstream;
    let source = match d.transport {
        Transport::UdpMulticast => {
            let Some(SocketAddr::V4(group)) = d.group else {
                unreachable!("checked when parsed")
            };
            shm::Source::multicast(
                SocketAddrV4::new(*group.ip(), group.port()),
                d.interface,
                cfg.node.recv_buffer,
            )
            .map_err(io_error(format!(
                "downstream.group {group}: join on {}",
                d.interface
            )))?
        }
        Transport::UdpUnicast => {
            let listen = cfg.shm.dispatcher_listen.expect("checked when parsed");
            shm::Source::unicast(listen, cfg.node.recv_buffer)
                .map_err(io_error(format!("shm.dispatcher_listen {listen}: bind")))?
        }
        Transport::Tcp => shm::Source::Tcp(Box::new(tcp_client(cfg)?)),
        Transport::Shm | Transport::Memory => {
            return Err(Error::Option {
                name: "downstream.transport",
                message:
                    "a dispatcher reads a network transport (udp-multicast, udp-unicast or tcp)"
                        .into(),
            })
        }
    };
    let path = shm_path(cfg);
    let mut publisher = ShmPublisher::create(&path, cfg.shm.capacity)
        .map_err(io_error(format!("shm.path {}: create", path.display())))?;
    shm::run_dispatcher(source, &mut publisher, &stop).map_err(io_error("dispatcher"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Transport};

    /// The node client is shared with Python (a pyo3 class must be Send and Sync).
    #[test]
    fn feeds_and_publishers_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::Feed>();
        check::<super::Publisher>();
        check::<crate::NodeClient>();
    }

    const BASE: &str = "[bus]\nsession = \"T\"\n";

    fn err(text: &str) -> String {
        Config::from_str(&format!("{BASE}{text}"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn every_transport_parses_with_defaults() {
        let c = Config::from_str(&format!(
            "{BASE}[downstream]\ntransport = \"tcp\"\n[tcp]\ncredentials = [{{ username = \"a\", password = \"b\" }}]\nusername = \"a\"\npassword = \"b\"\n"
        ))
        .unwrap();
        assert_eq!(c.downstream.transport, Transport::Tcp);
        assert_eq!(c.tcp.heartbeat_ms, 1000);
        assert_eq!(c.tcp.timeout_ms, 15_000);
        let c = Config::from_str(&format!("{BASE}[downstream]\ntransport = \"shm\"\n")).unwrap();
        assert_eq!(
            super::shm_path(&c),
            std::path::PathBuf::from("/dev/shm/seqbus-T.ring")
        );
        let c = Config::from_str(&format!("{BASE}[downstream]\ntransport = \"memory\"\n")).unwrap();
        assert_eq!(c.memory.capacity, 16 << 20);
        let c = Config::from_str(&format!(
            "{BASE}[downstream]\ntransport = \"udp-multicast\"\ngroup = \"239.1.1.1:5000\"\n[node]\ntransport = \"shm\"\n"
        ))
        .unwrap();
        assert_eq!(c.node.transport, Some(Transport::Shm));
    }

    #[test]
    fn bad_transport_keys_are_named() {
        let e = err("[downstream]\ntransport = \"tcp\"\n");
        assert!(
            e.starts_with("<string>: tcp.credentials: at least one login"),
            "{e}"
        );
        let e = err("[downstream]\ntransport = \"tcp\"\n[tcp]\ncredentials = [{ username = \"much too long\", password = \"\" }]\n");
        assert!(
            e.starts_with("<string>: tcp.credentials: username must be at most 6"),
            "{e}"
        );
        let e = err("[downstream]\ntransport = \"tcp\"\n[tcp]\ncredentials = [{ username = \"a\", password = \"b\" }]\ntimeout_ms = 500\n");
        assert!(e.starts_with("<string>: tcp.timeout_ms:"), "{e}");
        let e = err("[downstream]\ntransport = \"tcp\"\n[tcp]\ncredentials = [{ username = \"a\", pasword = \"b\" }]\n");
        assert!(e.contains("unknown field `pasword`"), "{e}");
        let e = err("[downstream]\ntransport = \"shm\"\n[shm]\ncapacity = 100000\n");
        assert!(
            e.starts_with("<string>: shm.capacity: must be a power of two"),
            "{e}"
        );
        let e = err("[downstream]\ntransport = \"memory\"\n[node]\ntransport = \"shm\"\n");
        assert!(e.starts_with("<string>: node.transport:"), "{e}");
        let e = err("[downstream]\ntransport = \"udp-multicast\"\ngroup = \"239.1.1.1:5000\"\n[node]\ntransport = \"tcp\"\n");
        assert!(
            e.starts_with("<string>: node.transport: nodes read what the sequencer sends"),
            "{e}"
        );
        let e = err("[downstream]\ntransport = \"udp-unicast\"\nsubscribers = [\"127.0.0.1:9\"]\n[node]\ntransport = \"shm\"\n");
        assert!(
            e.starts_with("<string>: shm.dispatcher_listen: required"),
            "{e}"
        );
        let e = err("[downstream]\ntransport = \"pigeon\"\n");
        assert!(
            e.starts_with("<string>: downstream.transport: unknown variant"),
            "{e}"
        );
    }
}

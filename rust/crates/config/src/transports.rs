//! Which transport carries the stream (`downstream.transport`, `node.transport`) and the keys
//! of the transports beside UDP: `[tcp]`, `[shm]`, `[memory]` (docs/transports.md). How they
//! must agree with each other is checked with the rest of the configuration, in the crate
//! root.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// How sequenced packets reach the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    UdpMulticast,
    UdpUnicast,
    /// SoupBinTCP 4.0 (`[tcp]`, docs/transports.md).
    Tcp,
    /// A shared-memory ring (`[shm]`).
    Shm,
    /// In-process (`[memory]`).
    Memory,
}

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

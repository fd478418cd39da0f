//! seqbus-config: the TOML configuration of a bus (every key: `docs/configuration.md`), the
//! one parser every process uses (and Python, through `seqbus._core`). It knows no sockets:
//! `seqbus-net` builds the processes from a [`Config`].
//!
//! Parsed with serde (`deny_unknown_fields`) and checked for meaning after parsing; every
//! error names the file and the key, e.g. `bus.toml: sequencer.upstream: invalid socket
//! address syntax`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use seqbus_wire::Session;
use serde::Deserialize;

mod idle;
pub mod sites;
pub mod transports;

pub use idle::IdleStrategy;
pub use sites::{AccountKeyConfig, AuthConfig, BridgeConfig, TlsConfig};
pub use transports::{CredentialConfig, MemoryConfig, ShmConfig, TcpConfig, Transport};

/// A configuration file that cannot be used; the message names the file and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {key}: {message}")]
pub struct ConfigError {
    /// The file (or `<string>`).
    pub origin: String,
    /// Dotted key path, e.g. `sequencer.upstream` (empty for a syntax error of the file).
    pub key: String,
    pub message: String,
}

/// The whole configuration of a bus.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub bus: BusConfig,
    #[serde(default)]
    pub sequencer: SequencerConfig,
    pub downstream: DownstreamConfig,
    #[serde(default)]
    pub replayer: ReplayerConfig,
    #[serde(default)]
    pub node: NodeConfig,
    /// `[tcp]`, `[shm]`, `[memory]`: docs/transports.md.
    #[serde(default)]
    pub tcp: TcpConfig,
    #[serde(default)]
    pub shm: ShmConfig,
    #[serde(default)]
    pub memory: MemoryConfig,
    /// `[cluster]`: the sequencers of the bus when there is more than one (docs/ha.md).
    #[serde(default)]
    pub cluster: Option<ClusterConfig>,
    /// `[discovery]`: where replayers announce themselves (docs/ha.md).
    #[serde(default)]
    pub discovery: Option<DiscoveryConfig>,
    /// `[auth]`: per-account keys; upstream packets are authenticated (docs/upstream.md).
    #[serde(default)]
    pub auth: Option<AuthConfig>,
    /// `[bridge]`: this site's end of a bridge to a bus at another site (docs/sites.md).
    #[serde(default)]
    pub bridge: Option<BridgeConfig>,
    /// `[tls]`: TLS of the replayers' and bridges' SoupBinTCP links (docs/sites.md).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Directory of the configuration file; relative paths are resolved against it.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The `[cluster]` member a sequencer process is (set by [`Config::for_member`]).
    #[serde(skip)]
    pub member_id: Option<u16>,
}

/// `[bus]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusConfig {
    /// MoldUDP64 session name, 1–10 printable ASCII characters.
    pub session: String,
    /// Largest downstream/upstream datagram in bytes (messages above it are fragmented).
    #[serde(default = "default_max_packet")]
    pub max_packet: usize,
}

/// When the journal is flushed to stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsyncPolicy {
    /// fdatasync before every published batch: a published message survives power loss.
    Batch,
    /// fdatasync at most every `fsync_interval_ms`: survives a process crash (the data is
    /// in the page cache before publish), may lose the last interval on power loss.
    Interval,
    /// Never fdatasync (the OS writes back): survives a process crash only.
    None,
}

/// `sequencer.pipeline`: whether the sequencer receives, sequences and publishes on threads
/// of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pipeline {
    /// Pipelined where the process may use at least 4 CPUs; one thread otherwise.
    Auto,
    /// Receiving (`seqbus-receive`), the loop, and publishing (`seqbus-publish`) on three
    /// threads; publishing stays on the loop for `tcp` and `memory`, whose clients the loop
    /// serves.
    On,
    /// Everything on the loop's one thread.
    Off,
}

/// `[sequencer]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequencerConfig {
    /// UDP address the sequencer receives node commands on.
    #[serde(default = "default_upstream")]
    pub upstream: SocketAddr,
    /// Journal directory (relative to the configuration file).
    #[serde(default = "default_journal")]
    pub journal_dir: PathBuf,
    #[serde(default = "default_fsync")]
    pub fsync: FsyncPolicy,
    #[serde(default = "default_fsync_interval")]
    pub fsync_interval_ms: u64,
    /// Journal segment size in bytes before a new segment file is started.
    #[serde(default = "default_segment_size")]
    pub segment_size: u64,
    /// A heartbeat is sent after this long without any downstream packet.
    #[serde(default = "default_heartbeat")]
    pub heartbeat_ms: u64,
    /// A clock-tick message is sequenced after this long without any message; 0 = never.
    #[serde(default = "default_clock_tick")]
    pub clock_tick_ms: u64,
    /// The first heartbeat after data comes this soon (µs; 0 = only every `heartbeat_ms`),
    /// later ones at double the interval up to `heartbeat_ms`: a node that lost the last
    /// packet of a burst learns of it this soon.
    #[serde(default = "default_tail_heartbeat")]
    pub tail_heartbeat_us: u64,
    /// At most one NAK (a request to resend, on a gap in a sender's commands) per account per
    /// this long (µs; 0 = no NAKs: senders resend on their own timer only).
    #[serde(default = "default_nak_holdoff")]
    pub nak_holdoff_us: u64,
    /// Commands held per account after a gap in its commands, so that one NAK repairs it
    /// (default: `node.window`, at least 256); 0 = none held (the sender resends everything
    /// from the missing command).
    #[serde(default)]
    pub max_held: Option<usize>,
    /// Run the replayer inside the sequencer process (serving `[replayer].listen`).
    #[serde(default = "default_true")]
    pub replayer_in_process: bool,
    #[serde(default = "default_seq_idle")]
    pub idle: IdleStrategy,
    /// Receive, sequence and publish on threads of their own (docs/configuration.md).
    #[serde(default = "default_pipeline")]
    pub pipeline: Pipeline,
    /// SO_RCVBUF of the upstream socket, bytes.
    #[serde(default = "default_rcvbuf")]
    pub recv_buffer: usize,
    /// On a graceful stop, end the session: send MoldUDP64 end-of-session packets (nodes then
    /// stop with `SessionEnded` once they have everything). Off: a restart continues the
    /// session and nodes simply wait.
    #[serde(default)]
    pub end_session_on_stop: bool,
    /// Address of the HTTP status endpoint (`GET /status` JSON, `GET /metrics` Prometheus);
    /// none by default.
    #[serde(default)]
    pub status: Option<SocketAddr>,
    /// Token the status endpoint requires (`Authorization: Bearer TOKEN`); required when
    /// `status` is not a loopback address.
    #[serde(default)]
    pub status_token: Option<String>,
}

/// `[downstream]`
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownstreamConfig {
    pub transport: Transport,
    /// Multicast group and port (`udp-multicast`).
    pub group: Option<SocketAddr>,
    /// Interface address for multicast.
    #[serde(default = "default_interface")]
    pub interface: Ipv4Addr,
    /// Multicast TTL.
    #[serde(default = "default_ttl")]
    pub ttl: u32,
    /// Node addresses the sequencer sends to (`udp-unicast`).
    #[serde(default)]
    pub subscribers: Vec<SocketAddr>,
    /// The bus's downstream key (docs/sites.md, "Downstream authentication"): 64 hexadecimal
    /// digits here, or a file holding them (or the 32 raw bytes) in `key_file`.
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The key read from `key` or `key_file` when parsed: every MoldUDP64 datagram carries
    /// its MAC.
    #[serde(skip)]
    pub signing: Option<seqbus_wire::auth::Key>,
}

impl std::fmt::Debug for DownstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownstreamConfig")
            .field("transport", &self.transport)
            .field("group", &self.group)
            .field("interface", &self.interface)
            .field("ttl", &self.ttl)
            .field("subscribers", &self.subscribers)
            .field("keyed", &self.signing.is_some())
            .finish_non_exhaustive()
    }
}

/// `[replayer]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayerConfig {
    /// UDP address replay requests are served on.
    #[serde(default = "default_replayer")]
    pub listen: SocketAddr,
    /// Journal the replayer reads; default: the sequencer's `journal_dir`.
    pub journal_dir: Option<PathBuf>,
    /// Largest answer datagram in bytes (answers are unicast; loopback allows large ones).
    #[serde(default = "default_replay_packet")]
    pub max_packet: usize,
    /// Replay answers leave at most this fast, MB/s (a token bucket of one millisecond's
    /// worth, at least one answer datagram), so that filling one node's gap does not overrun
    /// its (or the network's) buffers and cause new loss; 0 = as fast as the socket takes them.
    #[serde(default)]
    pub pace_mb_per_s: u64,
    /// Most messages sent for one request.
    #[serde(default = "default_replay_batch")]
    pub max_messages_per_request: u16,
    /// A standalone replayer follows the downstream feed into a journal of its own
    /// (`journal_dir`) instead of reading the sequencer's.
    #[serde(default)]
    pub follow: bool,
    /// Where a following replayer receives a `udp-unicast` downstream (one of
    /// `downstream.subscribers`); default `node.listen`.
    #[serde(default)]
    pub follow_listen: Option<SocketAddr>,
    /// Replayers a following replayer fills its own gaps from; default: `node.replayers`
    /// without its own `listen` address.
    #[serde(default)]
    pub sources: Vec<SocketAddr>,
    /// Address of this replayer's SoupBinTCP server (docs/sites.md): a client logs in with a
    /// sequence to rewind from the journal, then gets the stream live; its unsequenced data
    /// are upstream packets, passed on to the sequencer. Logins: `tcp.credentials`.
    #[serde(default)]
    pub tcp_listen: Option<SocketAddr>,
    /// A following replayer reads the stream from these replayers' SoupBinTCP servers
    /// instead of the downstream feed (a tier below them), one connection each: the first
    /// copy of each message wins.
    #[serde(default)]
    pub follow_tcp: Vec<SocketAddr>,
}

/// `[cluster]`: the sequencers that form the bus, one leader and its standbys (docs/ha.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Every sequencer of the bus; a process is one of them (`seqbus sequencer --id N`).
    pub members: Vec<MemberConfig>,
    /// A standby that hears no leader for a random time between this and 1.5 times this
    /// starts an election; a leader that hears no majority for this long steps down — each
    /// only once the silence is also past `suspicion_phi`.
    #[serde(default = "default_election_timeout")]
    pub election_timeout_ms: u64,
    /// The φ of the phi-accrual failure detector at which a silent leader or standby is
    /// taken for dead (docs/ha.md, "Failure detection"): 8 means a silence this long comes
    /// from a live member about once in 10⁸ by the intervals learned; 0 turns the detector
    /// off (the election timeout alone decides).
    #[serde(default = "default_suspicion_phi")]
    pub suspicion_phi: f64,
    /// The leader sends each standby an append (empty if need be) at least this often.
    #[serde(default = "default_cluster_heartbeat")]
    pub heartbeat_ms: u64,
    /// Entries a standby has not confirmed after this long are sent again (µs).
    #[serde(default = "default_retransmit")]
    pub retransmit_us: u64,
    /// How long a new leader waits for the replayers to say how far their stream reaches
    /// (µs).
    #[serde(default = "default_replayer_wait")]
    pub replayer_wait_us: u64,
    /// Largest datagram between sequencers, bytes.
    #[serde(default = "default_replay_packet")]
    pub max_packet: usize,
}

/// One sequencer of `[cluster]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberConfig {
    /// 1–65535, unique.
    pub id: u16,
    /// Where nodes send it commands (its `sequencer.upstream`).
    pub upstream: SocketAddr,
    /// Where the other sequencers reach it.
    pub peer: SocketAddr,
    /// The address its downstream packets come from: nodes tell the leader's packets from a
    /// deposed one's by it.
    pub publish: SocketAddr,
    /// Where its in-process replayer serves requests (its `replayer.listen`); none: no
    /// replayer in its process.
    #[serde(default)]
    pub replayer: Option<SocketAddr>,
    /// Its journal (default: `sequencer.journal_dir` with `-<id>` appended).
    #[serde(default)]
    pub journal_dir: Option<PathBuf>,
    /// Its status endpoint (its `sequencer.status`).
    #[serde(default)]
    pub status: Option<SocketAddr>,
}

/// `[discovery]`: replayers announce themselves on a multicast group; nodes and sequencers
/// listen, so none needs a static list of replayers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// Multicast group and port of the announcements.
    pub group: SocketAddr,
    /// A replayer announces itself this often.
    #[serde(default = "default_announce")]
    pub interval_ms: u64,
}

/// `[node]`: defaults for node processes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// How nodes read the stream: as the sequencer sends it (default) or "shm", this host's
    /// dispatcher ring (docs/transports.md).
    pub transport: Option<Transport>,
    #[serde(default = "default_node_idle")]
    pub idle: IdleStrategy,
    /// Most commands (fragments) in flight, sent but not yet seen in the stream.
    #[serde(default = "default_window")]
    pub window: usize,
    /// Replayers to request gap fills from, in order of preference.
    #[serde(default)]
    pub replayers: Vec<SocketAddr>,
    /// Address a node binds to receive `udp-unicast` downstream (one node per address).
    pub listen: Option<SocketAddr>,
    /// The longest a command waits before it is sent again: the retransmission timeout is
    /// learned from measured round trips (RFC 6298) between `retry_min_us` and this.
    #[serde(default = "default_retry")]
    pub retry_ms: u64,
    /// The least retransmission timeout of a command, µs.
    #[serde(default = "default_retry_min")]
    pub retry_min_us: u64,
    /// First wait before a gap request is repeated (doubles up to `request_backoff_max_ms`).
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
    #[serde(default = "default_request_backoff_max")]
    pub request_backoff_max_ms: u64,
    /// Requests unanswered by one replayer before the next one is tried.
    #[serde(default = "default_failover")]
    pub failover_after: u32,
    /// SO_RCVBUF of the downstream socket, bytes.
    #[serde(default = "default_rcvbuf")]
    pub recv_buffer: usize,
    /// Most out-of-order messages held while a gap is filled.
    #[serde(default = "default_reorder")]
    pub reorder_buffer: usize,
    /// Requests of `replayer.max_messages_per_request` messages a rewind keeps outstanding.
    #[serde(default = "default_replay_depth")]
    pub replay_depth: usize,
    /// What a node does when a handler raises (every account; None: what the node's code
    /// says, `Node.ON_ERROR`, fail-stop by default). Per account: `accounts`.
    pub on_error: Option<OnError>,
    /// `[node.accounts.NAME]`: settings of the nodes of one account, read by every instance
    /// of it, so that they handle the stream alike.
    #[serde(default)]
    pub accounts: std::collections::BTreeMap<String, AccountConfig>,
}

/// What a node does when one of its handlers raises (`on_error` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// The node stops at the message (fail-stop), its status names it.
    Stop,
    /// The node counts the message as skipped and goes on with the next one.
    Skip,
}

impl OnError {
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Stop => "stop",
            OnError::Skip => "skip",
        }
    }
}

/// `[node.accounts.NAME]`
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    /// Overrides `node.on_error` for this account.
    pub on_error: Option<OnError>,
    /// Sequences whose messages the nodes of this account do not hand to their handlers
    /// (counted as skipped): how a node is started past a message that made it stop.
    #[serde(default)]
    pub skip: Vec<u64>,
}

impl NodeConfig {
    /// The error policy of `account`'s nodes: (`on_error` if configured, sequences to skip).
    pub fn error_policy(&self, account: &str) -> (Option<OnError>, Vec<u64>) {
        match self.accounts.get(account) {
            Some(a) => (a.on_error.or(self.on_error), a.skip.clone()),
            None => (self.on_error, Vec::new()),
        }
    }
}

fn default_max_packet() -> usize {
    1472
}
fn default_upstream() -> SocketAddr {
    "127.0.0.1:31000".parse().expect("literal")
}
fn default_journal() -> PathBuf {
    PathBuf::from("journal")
}
fn default_fsync() -> FsyncPolicy {
    FsyncPolicy::Interval
}
fn default_fsync_interval() -> u64 {
    10
}
fn default_segment_size() -> u64 {
    256 << 20
}
fn default_heartbeat() -> u64 {
    1000
}
fn default_clock_tick() -> u64 {
    100
}
fn default_true() -> bool {
    true
}
fn default_pipeline() -> Pipeline {
    Pipeline::Auto
}
fn default_seq_idle() -> IdleStrategy {
    IdleStrategy::Hybrid
}
fn default_node_idle() -> IdleStrategy {
    IdleStrategy::Hybrid
}
fn default_rcvbuf() -> usize {
    16 << 20
}
fn default_interface() -> Ipv4Addr {
    Ipv4Addr::LOCALHOST
}
fn default_ttl() -> u32 {
    1
}
fn default_replayer() -> SocketAddr {
    "127.0.0.1:31002".parse().expect("literal")
}
fn default_replay_packet() -> usize {
    64000
}
fn default_replay_batch() -> u16 {
    8192
}
fn default_window() -> usize {
    256
}
fn default_retry() -> u64 {
    50
}
fn default_request_timeout() -> u64 {
    10
}
fn default_request_backoff_max() -> u64 {
    500
}
fn default_failover() -> u32 {
    4
}
fn default_replay_depth() -> usize {
    4
}
fn default_reorder() -> usize {
    1 << 20
}
fn default_tail_heartbeat() -> u64 {
    250
}
fn default_nak_holdoff() -> u64 {
    100
}
fn default_retry_min() -> u64 {
    200
}
fn default_election_timeout() -> u64 {
    40
}
fn default_suspicion_phi() -> f64 {
    8.0
}
fn default_cluster_heartbeat() -> u64 {
    5
}
fn default_retransmit() -> u64 {
    2_000
}
fn default_replayer_wait() -> u64 {
    2_000
}
fn default_announce() -> u64 {
    100
}

impl Default for SequencerConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}
impl Default for ReplayerConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}
impl Default for NodeConfig {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

impl Config {
    /// Reads and checks a configuration file.
    pub fn from_path(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: origin.clone(),
            key: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        Config::parse(&text, &origin, base)
    }

    /// Parses and checks configuration text; relative paths resolve against the current
    /// directory. (Also available as `text.parse::<Config>()`.)
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "<string>", PathBuf::from("."))
    }

    fn parse(text: &str, origin: &str, base_dir: PathBuf) -> Result<Config, ConfigError> {
        let de = toml::Deserializer::new(text);
        let mut cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let mut message = inner.message().to_string();
            if let Some(span) = inner.span() {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                message = format!("{message} (line {line})");
            }
            let mut key = if key == "." { String::new() } else { key };
            // a missing key is named by its own path, not its table's
            if let Some(field) = inner
                .message()
                .strip_prefix("missing field `")
                .and_then(|m| m.split('`').next())
            {
                key = if key.is_empty() {
                    field.to_string()
                } else {
                    format!("{key}.{field}")
                };
            }
            ConfigError {
                origin: origin.to_string(),
                key,
                message,
            }
        })?;
        cfg.base_dir = base_dir;
        cfg.check()
            .and_then(|()| sites::resolve(&mut cfg))
            .map_err(|(key, message)| ConfigError {
                origin: origin.to_string(),
                key: key.to_string(),
                message,
            })?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), (&'static str, String)> {
        Session::new(&self.bus.session).map_err(|m| ("bus.session", m))?;
        if !(64..=65_507).contains(&self.bus.max_packet) {
            return Err(("bus.max_packet", "must be between 64 and 65507".into()));
        }
        if !(64..=65_507).contains(&self.replayer.max_packet) {
            return Err(("replayer.max_packet", "must be between 64 and 65507".into()));
        }
        if self.replayer.max_messages_per_request == 0
            || self.replayer.max_messages_per_request == u16::MAX
        {
            return Err((
                "replayer.max_messages_per_request",
                "must be between 1 and 65534".into(),
            ));
        }
        if self.replayer.follow && self.replayer.journal_dir.is_none() {
            return Err((
                "replayer.journal_dir",
                "required when replayer.follow = true (a journal of its own)".into(),
            ));
        }
        if self.sequencer.heartbeat_ms == 0 {
            return Err(("sequencer.heartbeat_ms", "must be at least 1".into()));
        }
        if self.sequencer.fsync == FsyncPolicy::Interval && self.sequencer.fsync_interval_ms == 0 {
            return Err(("sequencer.fsync_interval_ms", "must be at least 1".into()));
        }
        if self.sequencer.segment_size < 1 << 16 {
            return Err(("sequencer.segment_size", "must be at least 65536".into()));
        }
        if self.node.window == 0 {
            return Err(("node.window", "must be at least 1".into()));
        }
        if self.node.request_timeout_ms == 0 {
            return Err(("node.request_timeout_ms", "must be at least 1".into()));
        }
        if self.node.request_backoff_max_ms < self.node.request_timeout_ms {
            return Err((
                "node.request_backoff_max_ms",
                format!(
                    "must be at least node.request_timeout_ms ({})",
                    self.node.request_timeout_ms
                ),
            ));
        }
        if self.node.failover_after == 0 {
            return Err(("node.failover_after", "must be at least 1".into()));
        }
        if self.downstream.ttl > 255 {
            return Err(("downstream.ttl", "must be between 0 and 255".into()));
        }
        for (name, account) in &self.node.accounts {
            seqbus_wire::account(name).map_err(|m| ("node.accounts", m))?;
            if account.skip.contains(&0) {
                return Err((
                    "node.accounts",
                    format!("{name}.skip: sequences start at 1"),
                ));
            }
        }
        if !(1..=64).contains(&self.node.replay_depth) {
            return Err(("node.replay_depth", "must be between 1 and 64".into()));
        }
        if self.node.retry_ms == 0 {
            return Err(("node.retry_ms", "must be at least 1".into()));
        }
        if self.node.retry_min_us == 0 || self.node.retry_min_us > self.node.retry_ms * 1000 {
            return Err((
                "node.retry_min_us",
                "must be at least 1 and at most node.retry_ms".into(),
            ));
        }
        match self.downstream.transport {
            Transport::UdpMulticast => match self.downstream.group {
                None => {
                    return Err((
                        "downstream.group",
                        "required when transport = \"udp-multicast\"".into(),
                    ))
                }
                Some(SocketAddr::V4(g)) if g.ip().is_multicast() => {}
                Some(g) => {
                    return Err((
                        "downstream.group",
                        format!("{} is not an IPv4 multicast address", g.ip()),
                    ))
                }
            },
            Transport::Tcp | Transport::Shm | Transport::Memory => {}
            Transport::UdpUnicast => {
                if self.downstream.subscribers.is_empty() {
                    return Err((
                        "downstream.subscribers",
                        "at least one address required when transport = \"udp-unicast\"".into(),
                    ));
                }
            }
        }
        if self.downstream.interface.is_multicast() || self.downstream.interface.is_unspecified() {
            return Err((
                "downstream.interface",
                format!(
                    "{} is not a unicast interface address",
                    self.downstream.interface
                ),
            ));
        }
        if let Some(addr) = self.sequencer.status {
            if !addr.ip().is_loopback() && self.sequencer.status_token.is_none() {
                return Err((
                    "sequencer.status_token",
                    format!("required when sequencer.status ({addr}) is not a loopback address"),
                ));
            }
        }
        if self
            .sequencer
            .status_token
            .as_ref()
            .is_some_and(|t| t.len() < 16)
        {
            return Err((
                "sequencer.status_token",
                "must be at least 16 characters".into(),
            ));
        }
        if let IpAddr::V4(ip) = self.sequencer.upstream.ip() {
            if ip.is_multicast() {
                return Err(("sequencer.upstream", "must be a unicast address".into()));
            }
        }
        check_transports(self)?;
        self.check_cluster()?;
        sites::check(self)?;
        Ok(())
    }

    fn check_cluster(&self) -> Result<(), (&'static str, String)> {
        if let Some(d) = &self.discovery {
            match d.group {
                SocketAddr::V4(g) if g.ip().is_multicast() => {}
                g => {
                    return Err((
                        "discovery.group",
                        format!("{} is not an IPv4 multicast address", g.ip()),
                    ))
                }
            }
            if d.interval_ms == 0 {
                return Err(("discovery.interval_ms", "must be at least 1".into()));
            }
        }
        let Some(c) = &self.cluster else {
            return Ok(());
        };
        if c.members.is_empty() {
            return Err(("cluster.members", "at least one sequencer".into()));
        }
        if !matches!(
            self.downstream.transport,
            Transport::UdpMulticast | Transport::UdpUnicast
        ) || self
            .node
            .transport
            .is_some_and(|t| t != self.downstream.transport)
        {
            return Err((
                "cluster",
                "a cluster of sequencers publishes over UDP (udp-multicast or udp-unicast) and \
                 its nodes read that feed: a TCP, shared-memory or in-process downstream has no \
                 fencing of a deposed leader yet"
                    .into(),
            ));
        }
        let mut ids = std::collections::HashSet::new();
        let mut addrs = std::collections::HashSet::new();
        for m in &c.members {
            if m.id == 0 || !ids.insert(m.id) {
                return Err((
                    "cluster.members",
                    format!("member ids must be unique and at least 1 (id {})", m.id),
                ));
            }
            for a in [
                Some(m.upstream),
                Some(m.peer),
                Some(m.publish),
                m.replayer,
                m.status,
            ]
            .into_iter()
            .flatten()
            {
                if !addrs.insert(a) {
                    return Err((
                        "cluster.members",
                        format!("address {a} is used twice (member {})", m.id),
                    ));
                }
                if a.ip().is_multicast() || a.port() == 0 {
                    return Err((
                        "cluster.members",
                        format!(
                            "{a} (member {}) must be a unicast address with a port",
                            m.id
                        ),
                    ));
                }
            }
            if m.status.is_some_and(|a| !a.ip().is_loopback())
                && self.sequencer.status_token.is_none()
            {
                return Err((
                    "sequencer.status_token",
                    format!(
                        "required when member {}'s status is not a loopback address",
                        m.id
                    ),
                ));
            }
        }
        if c.election_timeout_ms == 0
            || c.heartbeat_ms == 0
            || c.heartbeat_ms * 2 > c.election_timeout_ms
        {
            return Err((
                "cluster.heartbeat_ms",
                "must be at least 1 and at most half of cluster.election_timeout_ms".into(),
            ));
        }
        if c.retransmit_us == 0 {
            return Err(("cluster.retransmit_us", "must be at least 1".into()));
        }
        if !(0.0..=30.0).contains(&c.suspicion_phi) {
            return Err((
                "cluster.suspicion_phi",
                "must be between 0 (the election timeout alone) and 30".into(),
            ));
        }
        if !(1500..=65_507).contains(&c.max_packet) {
            return Err((
                "cluster.max_packet",
                "must be between 1500 and 65507".into(),
            ));
        }
        Ok(())
    }

    /// This configuration as sequencer `id` of `[cluster]` runs it: its upstream, journal,
    /// replayer and status addresses in `[sequencer]`/`[replayer]`. Without `[cluster]`, `id`
    /// must be None (or 1) and the configuration is returned as it is.
    pub fn for_member(&self, id: Option<u16>) -> Result<Config, ConfigError> {
        let err = |key: &str, message: String| ConfigError {
            origin: "command line".into(),
            key: key.into(),
            message,
        };
        let Some(c) = &self.cluster else {
            return match id {
                None | Some(1) => Ok(self.clone()),
                Some(i) => Err(err(
                    "--id",
                    format!("{i}: the configuration has no [cluster] of sequencers"),
                )),
            };
        };
        let Some(id) = id else {
            return Err(err(
                "--id",
                format!(
                    "the configuration names {} sequencers in [cluster]: say which this is",
                    c.members.len()
                ),
            ));
        };
        let Some(m) = c.members.iter().find(|m| m.id == id) else {
            return Err(err(
                "--id",
                format!(
                    "{id} is not a member of [cluster] ({:?})",
                    c.members.iter().map(|m| m.id).collect::<Vec<_>>()
                ),
            ));
        };
        let mut cfg = self.clone();
        cfg.member_id = Some(id);
        cfg.sequencer.upstream = m.upstream;
        cfg.sequencer.journal_dir = match &m.journal_dir {
            Some(d) => d.clone(),
            None => {
                let mut d = self.sequencer.journal_dir.clone().into_os_string();
                d.push(format!("-{id}"));
                PathBuf::from(d)
            }
        };
        cfg.sequencer.status = m.status;
        match m.replayer {
            Some(r) => cfg.replayer.listen = r,
            None => cfg.sequencer.replayer_in_process = false,
        }
        cfg.replayer.journal_dir = None;
        Ok(cfg)
    }

    /// The sequencers of the bus: `[cluster]` members, or the one of `[sequencer]` (id 1).
    pub fn members(&self) -> Vec<MemberConfig> {
        match &self.cluster {
            Some(c) => c.members.clone(),
            None => vec![MemberConfig {
                id: 1,
                upstream: self.sequencer.upstream,
                peer: self.sequencer.upstream,
                publish: self.sequencer.upstream,
                replayer: self
                    .sequencer
                    .replayer_in_process
                    .then_some(self.replayer.listen),
                journal_dir: None,
                status: self.sequencer.status,
            }],
        }
    }

    /// The replayers a node asks, in order: `node.replayers`, then the cluster members' (not
    /// already listed).
    pub fn node_replayers(&self) -> Vec<SocketAddr> {
        let mut v = self.node.replayers.clone();
        if let Some(c) = &self.cluster {
            for r in c.members.iter().filter_map(|m| m.replayer) {
                if !v.contains(&r) {
                    v.push(r);
                }
            }
        }
        v
    }

    /// The MoldUDP64 session.
    pub fn session(&self) -> Session {
        Session::new(&self.bus.session).expect("checked when parsed")
    }

    /// The sequencer's journal directory, resolved.
    pub fn journal_dir(&self) -> PathBuf {
        self.base_dir.join(&self.sequencer.journal_dir)
    }

    /// The replayer's journal directory, resolved.
    pub fn replayer_journal_dir(&self) -> PathBuf {
        match &self.replayer.journal_dir {
            Some(d) => self.base_dir.join(d),
            None => self.journal_dir(),
        }
    }

    /// The shared-memory ring file (`shm.path`, default `/dev/shm/seqbus-<session>.ring`).
    pub fn shm_path(&self) -> PathBuf {
        shm_path(self)
    }

    /// The name the in-process bus is found under (`memory.name`, default the session).
    pub fn memory_name(&self) -> String {
        self.memory
            .name
            .clone()
            .unwrap_or_else(|| self.session().as_str().to_string())
    }
}

impl std::str::FromStr for Config {
    type Err = ConfigError;
    fn from_str(text: &str) -> Result<Config, ConfigError> {
        Config::from_str(text)
    }
}

/// Checks the keys of the transports in use; the error names the key.
fn check_transports(cfg: &Config) -> Result<(), (&'static str, String)> {
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
    // SoupBinTCP is spoken by the sequencer (`tcp`), a replayer's server, and the links of
    // bridges and tiered replayers (docs/sites.md)
    let soupbin = cfg.replayer.tcp_listen.is_some()
        || !cfg.replayer.follow_tcp.is_empty()
        || cfg.bridge.is_some();
    if down == Transport::Tcp || soupbin {
        if t.credentials.is_empty() && (down == Transport::Tcp || cfg.replayer.tcp_listen.is_some())
        {
            return Err((
                "tcp.credentials",
                if down == Transport::Tcp {
                    "at least one login required when transport = \"tcp\""
                } else {
                    "at least one login required for replayer.tcp_listen"
                }
                .into(),
            ));
        }
        for c in &t.credentials {
            if c.username.is_empty() {
                return Err(("tcp.credentials", "a username must not be empty".into()));
            }
            seqbus_wire::soupbin::alpha::<6>("username", &c.username)
                .map_err(|m| ("tcp.credentials", m))?;
            seqbus_wire::soupbin::alpha::<10>("password", &c.password)
                .map_err(|m| ("tcp.credentials", m))?;
        }
        let user = t.username.as_deref().unwrap_or("");
        seqbus_wire::soupbin::alpha::<6>("username", user).map_err(|m| ("tcp.username", m))?;
        seqbus_wire::soupbin::alpha::<10>("password", t.password.as_deref().unwrap_or(""))
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
fn shm_path(cfg: &Config) -> PathBuf {
    match &cfg.shm.path {
        Some(p) => cfg.base_dir.join(p),
        None => PathBuf::from(format!("/dev/shm/seqbus-{}.ring", cfg.session().as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[bus]
session = "TEST"
[downstream]
transport = "udp-multicast"
group = "239.1.2.3:30001"
"#;

    #[test]
    fn minimal_config_with_defaults() {
        let c = Config::from_str(GOOD).unwrap();
        assert_eq!(c.bus.max_packet, 1472);
        assert_eq!(c.sequencer.fsync, FsyncPolicy::Interval);
        assert_eq!(c.node.window, 256);
        assert_eq!(c.session().as_str(), "TEST");
    }

    fn err(text: &str) -> String {
        Config::from_str(text).unwrap_err().to_string()
    }

    #[test]
    fn the_pipeline_is_auto_unless_set_and_a_wrong_value_names_the_key() {
        assert_eq!(
            Config::from_str(GOOD).unwrap().sequencer.pipeline,
            Pipeline::Auto
        );
        for (v, want) in [
            ("on", Pipeline::On),
            ("off", Pipeline::Off),
            ("auto", Pipeline::Auto),
        ] {
            let c = Config::from_str(&format!("{GOOD}[sequencer]\npipeline = \"{v}\"\n")).unwrap();
            assert_eq!(c.sequencer.pipeline, want);
        }
        let e = err(&format!("{GOOD}[sequencer]\npipeline = \"sometimes\"\n"));
        assert!(
            e.starts_with("<string>: sequencer.pipeline: unknown variant `sometimes`"),
            "{e}"
        );
        assert!(e.contains("`auto`, `on`, `off`"), "{e}");
    }

    #[test]
    fn the_failure_detector_threshold_is_checked() {
        let cluster = |phi: &str| {
            format!(
                "{GOOD}[cluster]\n{phi}members = [\n  {{ id = 1, upstream = \"127.0.0.1:31001\", \
                 peer = \"127.0.0.1:31002\", publish = \"127.0.0.1:31003\" }},\n]\n"
            )
        };
        let c = Config::from_str(&cluster("")).unwrap();
        assert_eq!(c.cluster.unwrap().suspicion_phi, 8.0);
        let c = Config::from_str(&cluster("suspicion_phi = 0\n")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.cluster.unwrap().suspicion_phi, 0.0);
        let e = err(&cluster("suspicion_phi = -1.0\n"));
        assert!(
            e.starts_with("<string>: cluster.suspicion_phi: must be between"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = err(&format!("{GOOD}[sequencer]\nupstream = \"nope\"\n"));
        assert!(
            e.starts_with("<string>: sequencer.upstream: invalid socket address"),
            "{e}"
        );
        let e = err(&format!("{GOOD}[node]\nwindoww = 3\n"));
        assert!(e.contains("unknown field `windoww`"), "{e}");
        assert!(e.starts_with("<string>: node"), "{e}");
        let e = err(&GOOD.replace("239.1.2.3", "10.0.0.1"));
        assert!(
            e.starts_with("<string>: downstream.group: 10.0.0.1 is not"),
            "{e}"
        );
        let e = err(&GOOD.replace("TEST", "MUCH TOO LONG SESSION"));
        assert!(e.starts_with("<string>: bus.session:"), "{e}");
        let e = err(&GOOD.replace("udp-multicast", "carrier-pigeon"));
        assert!(
            e.starts_with("<string>: downstream.transport: unknown variant"),
            "{e}"
        );
        let e = err(&format!("{GOOD}[sequencer]\nfsync = \"sometimes\"\n"));
        assert!(e.starts_with("<string>: sequencer.fsync:"), "{e}");
        let e = err(&format!("{GOOD}[node]\nidle = \"nap\"\n"));
        assert!(e.starts_with("<string>: node.idle:"), "{e}");
        let e = err("[bus]\n");
        assert!(e.contains("missing field `session`"), "{e}");
        assert!(e.starts_with("<string>: bus.session: missing field"), "{e}");
        let e = err("[bus]\nsession = \"T\"\n");
        assert!(
            e.starts_with("<string>: downstream: missing field `downstream`"),
            "{e}"
        );
        let e = err(&format!(
            "{GOOD}[node]\nrequest_timeout_ms = 300\nrequest_backoff_max_ms = 200\n"
        ));
        assert!(
            e.starts_with("<string>: node.request_backoff_max_ms: must be at least node.request_timeout_ms (300)"),
            "{e}"
        );
        let e = err(&format!("{GOOD}[node]\nfailover_after = 0\n"));
        assert!(
            e.starts_with("<string>: node.failover_after: must be at least 1"),
            "{e}"
        );
        let e = err(&GOOD.replace("[downstream]\n", "[downstream]\nttl = 300\n"));
        assert!(
            e.starts_with("<string>: downstream.ttl: must be between 0 and 255"),
            "{e}"
        );
    }

    #[test]
    fn error_policies_per_account() {
        let c: Config = format!(
            "{GOOD}[node]\non_error = \"skip\"\n[node.accounts.LEDGER]\nskip = [43, 97]\n\
             [node.accounts.RISK]\non_error = \"stop\"\n"
        )
        .parse()
        .unwrap();
        assert_eq!(
            c.node.error_policy("LEDGER"),
            (Some(OnError::Skip), vec![43, 97])
        );
        assert_eq!(c.node.error_policy("RISK"), (Some(OnError::Stop), vec![]));
        assert_eq!(c.node.error_policy("OTHER"), (Some(OnError::Skip), vec![]));
        let c: Config = GOOD.parse().unwrap();
        assert_eq!(c.node.error_policy("LEDGER"), (None, vec![]));

        let e = err(&format!("{GOOD}[node]\non_error = \"retry\"\n"));
        assert!(
            e.starts_with("<string>: node.on_error: unknown variant `retry`"),
            "{e}"
        );
        let e = err(&format!(
            "{GOOD}[node.accounts.LEDGER]\non_error = \"ignore\"\n"
        ));
        assert!(
            e.starts_with("<string>: node.accounts.LEDGER.on_error: unknown variant"),
            "{e}"
        );
        let e = err(&format!("{GOOD}[node.accounts.LEDGER]\nskip = [\"43\"]\n"));
        assert!(e.starts_with("<string>: node.accounts.LEDGER.skip"), "{e}");
        let e = err(&format!("{GOOD}[node.accounts.LEDGER]\nskip = [0]\n"));
        assert!(
            e.starts_with("<string>: node.accounts: LEDGER.skip: sequences start at 1"),
            "{e}"
        );
        let e = err(&format!("{GOOD}[node.accounts.MUCHTOOLONG]\nskip = [1]\n"));
        assert!(
            e.starts_with("<string>: node.accounts: account \"MUCHTOOLONG\""),
            "{e}"
        );
    }

    #[test]
    fn file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bus.toml");
        std::fs::write(&p, format!("{GOOD}[sequencer]\nupstream = \"x\"\n")).unwrap();
        let e = Config::from_path(&p).unwrap_err().to_string();
        assert!(
            e.contains("bus.toml: sequencer.upstream: invalid socket address"),
            "{e}"
        );
        let c = {
            std::fs::write(&p, GOOD).unwrap();
            Config::from_path(&p).unwrap()
        };
        assert_eq!(c.journal_dir(), dir.path().join("journal"));
    }
}

/// `[tcp]`, `[shm]`, `[memory]` and the transports they must agree with.
#[cfg(test)]
mod transport_tests {
    use crate::{Config, Transport};

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
            c.shm_path(),
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

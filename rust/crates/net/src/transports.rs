//! The transport of a configuration: `downstream.transport` picks the [`Publisher`] the
//! sequencer writes to, `node.transport` (default: the same) the [`Feed`] a node reads, from
//! `seqbus-transport`, where UDP, SoupBinTCP, the shared-memory ring and the in-process bus
//! stand side by side (keys: `docs/transports.md`). Only this module knows both the
//! configuration and the transports' own settings.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use seqbus_config::{Config, TcpConfig, Transport};
use seqbus_transport::memory::{MemoryBus, MemoryFeed, MemoryPublisher};
use seqbus_transport::shm::{self, ShmPublisher, ShmSubscriber};
use seqbus_transport::soupbin::Timing;
use seqbus_transport::tcp::{self, Credential, TcpClient, TcpServer};
use seqbus_transport::udp::{UdpFeed, UdpPublisher};
use seqbus_transport::{Feed, Publisher};

use crate::{io_error, Error};

fn memory_bus(cfg: &Config) -> Result<Arc<MemoryBus>, Error> {
    let name = cfg.memory_name();
    MemoryBus::named(&name, cfg.memory.capacity, cfg.memory.upstream_queue)
        .map_err(io_error(format!("memory bus {name:?}")))
}

pub(crate) fn timing(t: &TcpConfig) -> Timing {
    Timing {
        heartbeat_ns: t.heartbeat_ms * 1_000_000,
        timeout_ns: t.timeout_ms * 1_000_000,
    }
}

/// The logins a SoupBinTCP server accepts (`tcp.credentials`).
pub(crate) fn credentials(t: &TcpConfig) -> Vec<Credential> {
    t.credentials
        .iter()
        .map(|c| Credential {
            username: c.username.clone(),
            password: c.password.clone(),
        })
        .collect()
}

/// What a `[tcp]` client of `server` logs in with (`tls`: the server's certificate checked).
pub(crate) fn client_config(
    cfg: &Config,
    server: SocketAddr,
    tls: Option<seqbus_transport::tls::ClientTls>,
) -> tcp::ClientConfig {
    let t = &cfg.tcp;
    tcp::ClientConfig {
        server,
        username: t.username.clone().unwrap_or_default(),
        password: t.password.clone().unwrap_or_default(),
        session: cfg.session().as_str().to_string(),
        timing: timing(t),
        reconnect_min_ns: t.reconnect_ms * 1_000_000,
        reconnect_max_ns: t.reconnect_max_ms * 1_000_000,
        max_packet: 65_535,
        tls,
    }
}

fn tcp_client(cfg: &Config) -> Result<TcpClient, Error> {
    let t = &cfg.tcp;
    let server = t.connect.unwrap_or(t.listen);
    let mut client = TcpClient::new(
        client_config(cfg, server, None),
        // At live: a rewinding node fills history from its replayers as over UDP; after a
        // lost connection the client logs in again from its next sequence number.
        0,
    )
    .map_err(|e| Error::Option {
        name: "tcp",
        message: e.to_string(),
    })?;
    // its lines name the server
    client.set_log(tcp_log("SoupBinTCP client".to_string()));
    Ok(client)
}

/// A SoupBinTCP server's or client's log: one `seqbus::tcp` record per line, `who: line`. A
/// client that keeps failing to connect (it tries again, backing off) says so once at info
/// level, then at debug level until something else happens.
pub(crate) fn tcp_log(who: String) -> Box<dyn FnMut(&str) + Send + Sync> {
    let mut failing = false;
    Box::new(move |line| {
        let refused = line.contains("cannot connect");
        let level = if refused && failing {
            log::Level::Debug
        } else {
            log::Level::Info
        };
        failing = refused;
        crate::watch::record(level, "seqbus::tcp", format!("{who}: {line}"))
    })
}

/// The sequencer's publisher of `downstream.transport`. `next_seq`: one past the last
/// journaled message. `from`: the address UDP packets come from (a cluster member's
/// `publish`).
pub(crate) fn publisher(
    cfg: &Config,
    next_seq: u64,
    from: Option<SocketAddr>,
) -> Result<Box<dyn Publisher>, Error> {
    let inner = plain_publisher(cfg, next_seq, from)?;
    // with a downstream key every UDP datagram carries its MAC (crate::downstream_auth)
    Ok(match (cfg.downstream_key(), cfg.downstream.transport) {
        (Some(key), Transport::UdpMulticast | Transport::UdpUnicast) => Box::new(
            crate::downstream_auth::SealingPublisher::new(inner, key.clone()),
        ),
        _ => inner,
    })
}

fn plain_publisher(
    cfg: &Config,
    next_seq: u64,
    from: Option<SocketAddr>,
) -> Result<Box<dyn Publisher>, Error> {
    let d = &cfg.downstream;
    Ok(match d.transport {
        Transport::UdpMulticast => {
            let Some(SocketAddr::V4(group)) = d.group else {
                unreachable!("checked when parsed")
            };
            let from = match from {
                Some(SocketAddr::V4(a)) => Some(a),
                _ => None,
            };
            Box::new(
                UdpPublisher::multicast(group, d.interface, d.ttl, from).map_err(io_error(
                    format!(
                        "downstream.interface {}: multicast sender{}",
                        d.interface,
                        from.map_or(String::new(), |f| format!(" from {f}"))
                    ),
                ))?,
            )
        }
        Transport::UdpUnicast => {
            let at = from.unwrap_or(SocketAddr::new(d.interface.into(), 0));
            Box::new(
                UdpPublisher::unicast(at, &d.subscribers)
                    .map_err(io_error(format!("downstream {at}: bind")))?,
            )
        }
        Transport::Tcp => {
            let t = &cfg.tcp;
            let mut server = TcpServer::bind(
                tcp::ServerConfig {
                    listen: t.listen,
                    session: cfg.session(),
                    credentials: credentials(t),
                    timing: timing(t),
                    client_buffer: t.client_buffer,
                    max_packet: 65_535,
                    max_clients: t.max_clients,
                    tls: None,
                },
                next_seq,
            )
            .map_err(io_error(format!("tcp.listen {}: bind", t.listen)))?;
            server.set_log(tcp_log(format!("SoupBinTCP server at {}", t.listen)));
            Box::new(server)
        }
        Transport::Shm => {
            let path = cfg.shm_path();
            Box::new(
                ShmPublisher::create(&path, cfg.shm.capacity)
                    .map_err(io_error(format!("shm.path {}: create", path.display())))?,
            )
        }
        Transport::Memory => {
            Box::new(MemoryPublisher::new(memory_bus(cfg)?).map_err(io_error("memory bus"))?)
        }
    })
}

/// Where the sequencer of `cfg` publishes, as its records say it (`udp-multicast GROUP on
/// INTERFACE`, ...).
pub(crate) fn publishing(cfg: &Config) -> String {
    let d = &cfg.downstream;
    match d.transport {
        Transport::UdpMulticast => match d.group {
            Some(g) => format!("udp-multicast {g} on {}", d.interface),
            None => "udp-multicast".to_string(),
        },
        Transport::UdpUnicast => format!(
            "udp-unicast to {}",
            d.subscribers
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Transport::Tcp => format!("SoupBinTCP at {}", cfg.tcp.listen),
        Transport::Shm => format!("the shared-memory ring {}", cfg.shm_path().display()),
        Transport::Memory => format!("the in-process bus {:?}", cfg.memory_name()),
    }
}

/// `feed`, read through a [`crate::downstream_auth::Verifier`] when the bus has a downstream
/// key and `transport` is UDP (the datagrams that carry a MAC); dropped datagrams count in
/// `forged`, and `who` names the reader in its records (target `target`).
pub(crate) fn verified(
    cfg: &Config,
    transport: Transport,
    feed: Box<dyn Feed>,
    forged: &Arc<AtomicU64>,
    who: &str,
    target: &'static str,
) -> Box<dyn Feed> {
    match (cfg.downstream_key(), transport) {
        (Some(key), Transport::UdpMulticast | Transport::UdpUnicast) => {
            Box::new(crate::downstream_auth::VerifiedFeed::new(
                feed,
                crate::downstream_auth::Verifier::new(
                    key.clone(),
                    forged.clone(),
                    who.to_string(),
                    target,
                ),
            ))
        }
        _ => feed,
    }
}

/// What reads `transport` off the network: a UDP socket (multicast, or bound to `listen` for
/// unicast) or a SoupBinTCP client.
fn network_feed(
    cfg: &Config,
    transport: Transport,
    listen: Option<(SocketAddr, &'static str)>,
) -> Result<Box<dyn Feed>, Error> {
    let d = &cfg.downstream;
    Ok(match transport {
        Transport::UdpMulticast => {
            let Some(SocketAddr::V4(group)) = d.group else {
                unreachable!("checked when parsed")
            };
            Box::new(
                UdpFeed::multicast(group, d.interface, cfg.node.recv_buffer).map_err(io_error(
                    format!("downstream.group {group}: join on {}", d.interface),
                ))?,
            )
        }
        Transport::UdpUnicast => {
            let (listen, key) = listen.expect("the caller names the address");
            Box::new(
                UdpFeed::unicast(listen, cfg.node.recv_buffer)
                    .map_err(io_error(format!("{key} {listen}: bind")))?,
            )
        }
        Transport::Tcp => Box::new(tcp_client(cfg)?),
        Transport::Shm | Transport::Memory => unreachable!("not a network transport"),
    })
}

/// The feed a node reads: `node.transport` (default `downstream.transport`). `listen`: the
/// node's own address for `udp-unicast` (`node.listen` unless overridden).
pub(crate) fn feed(cfg: &Config, listen: Option<SocketAddr>) -> Result<Box<dyn Feed>, Error> {
    match cfg.node.transport.unwrap_or(cfg.downstream.transport) {
        Transport::Shm => {
            let path = cfg.shm_path();
            Ok(Box::new(ShmSubscriber::open(&path).map_err(io_error(
                format!(
                    "shm.path {}: open (is the dispatcher or sequencer running?)",
                    path.display()
                ),
            ))?))
        }
        Transport::Memory => Ok(Box::new(MemoryFeed::new(memory_bus(cfg)?))),
        Transport::UdpUnicast => {
            let Some(listen) = listen.or(cfg.node.listen) else {
                return Err(Error::Option {
                    name: "listen",
                    message: "a udp-unicast node needs node.listen (one of downstream.subscribers)"
                        .into(),
                });
            };
            // the sequencer sends to the subscribers only: a node listening elsewhere would
            // wait for a stream that never comes (the port is compared, so a node may bind
            // the wildcard or its interface's address)
            if !cfg
                .downstream
                .subscribers
                .iter()
                .any(|s| s.port() == listen.port())
            {
                return Err(Error::Option {
                    name: "listen",
                    message: format!(
                        "{listen}: no address of downstream.subscribers has port {}: the \
                         sequencer would not send there",
                        listen.port()
                    ),
                });
            }
            network_feed(cfg, Transport::UdpUnicast, Some((listen, "node.listen")))
        }
        t => network_feed(cfg, t, None),
    }
}

/// Runs this host's dispatcher until `stop` is set or the session ends: reads the stream as
/// `downstream.transport` says and writes every packet once into the ring at `shm.path`.
pub fn run_dispatcher(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    let source = match cfg.downstream.transport {
        Transport::UdpUnicast => {
            let listen = cfg.shm.dispatcher_listen.expect("checked when parsed");
            network_feed(
                cfg,
                Transport::UdpUnicast,
                Some((listen, "shm.dispatcher_listen")),
            )?
        }
        t @ (Transport::UdpMulticast | Transport::Tcp) => network_feed(cfg, t, None)?,
        Transport::Shm | Transport::Memory => {
            return Err(Error::Option {
                name: "downstream.transport",
                message:
                    "a dispatcher reads a network transport (udp-multicast, udp-unicast or tcp)"
                        .into(),
            })
        }
    };
    // the ring is host-local: what comes in keyed is checked here and written without its MAC
    let forged = Arc::new(AtomicU64::new(0));
    let mut source = verified(
        cfg,
        cfg.downstream.transport,
        source,
        &forged,
        "dispatcher",
        "seqbus::dispatcher",
    );
    let path = cfg.shm_path();
    let mut publisher = ShmPublisher::create(&path, cfg.shm.capacity)
        .map_err(io_error(format!("shm.path {}: create", path.display())))?;
    let from = crate::watch::Stream::of_transport(
        cfg,
        cfg.downstream.transport,
        cfg.shm.dispatcher_listen,
    );
    crate::watch::record(
        log::Level::Info,
        "seqbus::dispatcher",
        format!(
            "dispatcher of session {}: reading {from}, writing the ring {}",
            cfg.bus.session,
            path.display()
        ),
    );
    shm::run_dispatcher(source.as_mut(), &mut publisher, &stop).map_err(io_error("dispatcher"))?;
    let dropped = forged.load(Ordering::Relaxed);
    crate::watch::record(
        log::Level::Info,
        "seqbus::dispatcher",
        if dropped > 0 {
            format!(
                "dispatcher: stopped; {dropped} downstream datagrams without a valid MAC dropped"
            )
        } else {
            "dispatcher: stopped".to_string()
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The node client is shared with Python (a pyo3 class must be Send and Sync).
    #[test]
    fn feeds_and_publishers_are_send_and_sync() {
        fn check<T: Send + Sync + ?Sized>() {}
        check::<dyn seqbus_transport::Feed>();
        check::<dyn seqbus_transport::Publisher>();
        check::<crate::NodeClient>();
    }

    #[test]
    fn a_udp_unicast_node_listening_where_the_sequencer_does_not_send_is_refused() {
        let port = crate::ports::free_port(crate::ports::Protocol::Udp);
        let cfg = seqbus_config::Config::from_str(&format!(
            "[bus]\nsession = \"T\"\n[downstream]\ntransport = \"udp-unicast\"\n\
             subscribers = [\"127.0.0.1:{port}\"]\n"
        ))
        .unwrap();
        let elsewhere: std::net::SocketAddr = format!("127.0.0.1:{}", port + 1).parse().unwrap();
        let e = super::feed(&cfg, Some(elsewhere)).err().expect("refused");
        assert!(
            e.to_string().contains(&format!(
                "listen: {elsewhere}: no address of downstream.subscribers has port {}",
                port + 1
            )),
            "{e}"
        );
        // the subscriber's port, on the wildcard address: taken
        let any: std::net::SocketAddr = format!("0.0.0.0:{port}").parse().unwrap();
        assert!(super::feed(&cfg, Some(any)).is_ok());
    }
}

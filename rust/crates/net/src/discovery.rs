//! Replayer discovery (docs/ha.md): replayers announce where they serve and how far their
//! stream reaches on the `[discovery]` multicast group; nodes and sequencers listen and keep
//! the list, so none needs a static one (a static `node.replayers` still works beside it).

use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use seqbus_wire::cluster::Announce;
use seqbus_wire::Session;
use socket2::{SockAddr, Socket};

use crate::{io_error, Error};
use seqbus_config::{Config, DiscoveryConfig};
use seqbus_transport::udp;

/// A replayer some announcement named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard {
    pub address: SocketAddrV4,
    pub next_seq: u64,
    pub at: Instant,
}

/// Listens to the announcements of one session.
#[derive(Debug)]
pub struct Listener {
    socket: Socket,
    session: Session,
    heard: Vec<Heard>,
    /// Announcements of another session or malformed, dropped.
    pub dropped: u64,
}

impl Listener {
    /// Joins `[discovery] group` when configured.
    pub fn open(cfg: &Config) -> Result<Option<Listener>, Error> {
        let Some(d) = &cfg.discovery else {
            return Ok(None);
        };
        let SocketAddr::V4(group) = d.group else {
            unreachable!("checked when parsed")
        };
        let socket = udp::multicast_receiver(group, cfg.downstream.interface, 1 << 20)
            .map_err(io_error(format!("discovery.group {group}: join")))?;
        Ok(Some(Listener {
            socket,
            session: cfg.session(),
            heard: Vec::new(),
            dropped: 0,
        }))
    }

    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Reads every waiting announcement; returns the addresses heard for the first time.
    pub fn poll(&mut self) -> Vec<SocketAddrV4> {
        let mut buf = [0u8; 64];
        let mut new = Vec::new();
        while let Ok(Some((n, _))) = udp::try_recv(&self.socket, &mut buf) {
            match Announce::parse(&buf[..n]) {
                Ok(a) if a.session == self.session => {
                    let now = Instant::now();
                    match self.heard.iter_mut().find(|h| h.address == a.address) {
                        Some(h) => {
                            h.next_seq = a.next_seq;
                            h.at = now;
                        }
                        None => {
                            self.heard.push(Heard {
                                address: a.address,
                                next_seq: a.next_seq,
                                at: now,
                            });
                            new.push(a.address);
                        }
                    }
                }
                _ => self.dropped += 1,
            }
        }
        new
    }

    /// Every replayer heard of, in the order first heard.
    pub fn heard(&self) -> &[Heard] {
        &self.heard
    }
}

/// Announces one replayer.
#[derive(Debug)]
pub struct Announcer {
    socket: Socket,
    group: SockAddr,
    announce: Announce,
    interval: Duration,
    due: Instant,
}

impl Announcer {
    /// Announces the replayer serving at `listen`, when `[discovery]` is configured.
    pub fn open(cfg: &Config, listen: SocketAddr) -> Result<Option<Announcer>, Error> {
        let Some(DiscoveryConfig { group, interval_ms }) = &cfg.discovery else {
            return Ok(None);
        };
        let SocketAddr::V4(address) = listen else {
            return Err(Error::Option {
                name: "replayer.listen",
                message: format!("{listen}: announcements carry an IPv4 address"),
            });
        };
        if address.ip().is_unspecified() {
            return Err(Error::Option {
                name: "replayer.listen",
                message: format!(
                    "{listen}: name the address nodes reach it at (not 0.0.0.0) to announce it"
                ),
            });
        }
        let socket = udp::multicast_sender(cfg.downstream.interface, cfg.downstream.ttl)
            .map_err(io_error(format!("discovery.group {group}: sender")))?;
        Ok(Some(Announcer {
            socket,
            group: (*group).into(),
            announce: Announce {
                session: cfg.session(),
                address,
                next_seq: 1,
            },
            interval: Duration::from_millis(*interval_ms),
            due: Instant::now(),
        }))
    }

    /// Announces when due (`next_seq`: one past the last message the replayer serves).
    pub fn tick(&mut self, next_seq: u64) {
        let now = Instant::now();
        if now < self.due {
            return;
        }
        self.announce.next_seq = next_seq;
        // a lost announcement is made good by the next one
        let _ = self.socket.send_to(&self.announce.encode(), &self.group);
        self.due = now + self.interval;
    }

    /// When the next announcement is due.
    pub fn due(&self) -> Instant {
        self.due
    }
}

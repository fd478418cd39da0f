//! Free ports on loopback for a bus started on one host: tests, benchmarks, demos.
//!
//! A port from the kernel's ephemeral range (what binding to port 0 returns) can be handed to
//! another socket bound to port 0 — a node's, a connecting client's — between the moment it
//! is picked and its owner's bind, which then fails with "Address already in use". The ports
//! here come from below that range, where the kernel never picks on its own, at random (two
//! processes picking at once rarely try the same one), and never twice in one process.

use std::collections::hash_map::RandomState;
use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::net::{TcpListener, UdpSocket};
use std::sync::{Mutex, OnceLock};

/// Where picked ports start; they end below the ephemeral range.
const PORTS_FROM: u16 = 10_000;

/// The protocol a port is picked for (UDP and TCP ports are separate spaces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Udp,
    Tcp,
}

fn ephemeral_start() -> u16 {
    static START: OnceLock<u16> = OnceLock::new();
    *START.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .unwrap_or(32_768)
    })
}

fn bind(protocol: Protocol, port: u16) -> Option<u16> {
    let addr = ("127.0.0.1", port);
    match protocol {
        Protocol::Udp => UdpSocket::bind(addr).and_then(|s| s.local_addr()),
        Protocol::Tcp => TcpListener::bind(addr).and_then(|s| s.local_addr()),
    }
    .ok()
    .map(|a| a.port())
}

/// A port on 127.0.0.1 that no socket holds now and this process was not given before,
/// below the ephemeral range (the kernel's own choice where no room is left below it).
///
/// # Panics
/// When 1,000 tries find none.
pub fn free_port(protocol: Protocol) -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let start = ephemeral_start();
    let random = RandomState::new();
    for i in 0..1000u64 {
        let pick = if start.saturating_sub(PORTS_FROM) >= 1000 {
            let mut h = random.build_hasher();
            h.write_u64(i);
            let span = u64::from(start - PORTS_FROM);
            PORTS_FROM + u16::try_from(h.finish() % span).expect("below the range")
        } else {
            0
        };
        if let Some(port) = bind(protocol, pick) {
            if GIVEN.lock().unwrap().insert(port) {
                return port;
            }
        }
    }
    panic!("no free {protocol:?} port on 127.0.0.1 in 1000 tries");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_free_and_below_the_ephemeral_range() {
        let start = ephemeral_start();
        let mut seen = BTreeSet::new();
        for protocol in [Protocol::Udp, Protocol::Tcp].into_iter().cycle().take(200) {
            let port = free_port(protocol);
            assert!(seen.insert(port), "port {port} handed out twice");
            if start >= PORTS_FROM + 1000 {
                assert!(
                    (PORTS_FROM..start).contains(&port),
                    "{port} not below {start}"
                );
            }
            assert_eq!(bind(protocol, port), Some(port), "{port} not free");
        }
    }
}

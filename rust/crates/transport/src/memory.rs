//! The in-process transport: a sequencer and nodes in one process (tests, single-process
//! deployments) share a bus by name. Downstream is the same broadcast ring as shared memory,
//! in process memory; upstream is a bounded queue (a full queue drops the command, which its
//! node sends again until it appears in the stream, as with a lost datagram).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use std::time::Duration;

use seqbus_core::Store;

use crate::ring::Ring;
use crate::shm::{ShmPublisher, ShmSubscriber};
use crate::stream::{Feed, Publisher, Received};
use crate::udp::Outbox;

/// One in-process bus.
pub struct MemoryBus {
    ring: Arc<Ring>,
    publisher_taken: Mutex<bool>,
    upstream: Mutex<VecDeque<Vec<u8>>>,
    upstream_bound: usize,
    /// Upstream packets dropped because the queue was full.
    pub upstream_dropped: AtomicU64,
}

fn registry() -> &'static Mutex<HashMap<String, Arc<MemoryBus>>> {
    static R: OnceLock<Mutex<HashMap<String, Arc<MemoryBus>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

impl MemoryBus {
    /// The bus called `name` in this process, created with `capacity` ring bytes and an
    /// upstream queue of `upstream_bound` packets if it does not exist yet.
    pub fn named(name: &str, capacity: usize, upstream_bound: usize) -> io::Result<Arc<MemoryBus>> {
        let mut r = registry().lock().expect("registry lock");
        if let Some(b) = r.get(name) {
            return Ok(b.clone());
        }
        let b = Arc::new(MemoryBus::new(capacity, upstream_bound)?);
        r.insert(name.to_string(), b.clone());
        Ok(b)
    }

    /// Forgets the bus called `name` (its users keep it alive until they drop it).
    pub fn remove(name: &str) {
        registry().lock().expect("registry lock").remove(name);
    }

    /// A bus of its own, not registered by name.
    pub fn new(capacity: usize, upstream_bound: usize) -> io::Result<MemoryBus> {
        Ok(MemoryBus {
            ring: Arc::new(Ring::in_memory(capacity)?),
            publisher_taken: Mutex::new(false),
            upstream: Mutex::new(VecDeque::new()),
            upstream_bound: upstream_bound.max(1),
            upstream_dropped: AtomicU64::new(0),
        })
    }

    /// The sequencer's side of the downstream ring; there is only one per bus.
    pub fn publisher(&self) -> io::Result<ShmPublisher> {
        let mut t = self.publisher_taken.lock().expect("lock");
        if *t {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "this in-process bus already has a sequencer",
            ));
        }
        *t = true;
        Ok(ShmPublisher::on(self.ring.clone()))
    }

    /// A node's side of the downstream ring, starting at live.
    pub fn subscribe(&self) -> ShmSubscriber {
        ShmSubscriber::on(self.ring.clone())
    }

    /// Queues an upstream packet for the sequencer; false if the queue was full (dropped).
    pub fn send_upstream(&self, datagram: &[u8]) -> bool {
        let mut q = self.upstream.lock().expect("lock");
        if q.len() >= self.upstream_bound {
            self.upstream_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        q.push_back(datagram.to_vec());
        true
    }

    /// Hands every queued upstream packet to `f`; returns how many.
    pub fn drain_upstream(&self, f: &mut dyn FnMut(&[u8])) -> usize {
        let batch: Vec<Vec<u8>> = self.upstream.lock().expect("lock").drain(..).collect();
        for d in &batch {
            f(d);
        }
        batch.len()
    }
}

/// The sequencer's side of an in-process bus: the downstream ring, and the upstream queue
/// it drains.
pub struct MemoryPublisher {
    ring: ShmPublisher,
    bus: Arc<MemoryBus>,
}

impl MemoryPublisher {
    /// The one publisher of `bus`.
    pub fn new(bus: Arc<MemoryBus>) -> io::Result<MemoryPublisher> {
        Ok(MemoryPublisher {
            ring: bus.publisher()?,
            bus,
        })
    }
}

impl Publisher for MemoryPublisher {
    fn publish(&mut self, now_ns: u64, packets: &mut Outbox) -> io::Result<()> {
        Publisher::publish(&mut self.ring, now_ns, packets)
    }

    fn poll(
        &mut self,
        _now_ns: u64,
        _store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        self.bus.drain_upstream(upstream)
    }

    fn idle_limit(&self) -> Option<Duration> {
        // commands arrive in a queue no socket announces
        Some(Duration::from_millis(1))
    }
}

/// A node's side of an in-process bus: the downstream ring, commands into the queue.
pub struct MemoryFeed {
    ring: ShmSubscriber,
    bus: Arc<MemoryBus>,
}

impl MemoryFeed {
    /// Follows `bus` from live.
    pub fn new(bus: Arc<MemoryBus>) -> MemoryFeed {
        MemoryFeed {
            ring: bus.subscribe(),
            bus,
        }
    }
}

impl Feed for MemoryFeed {
    fn read(
        &mut self,
        now_ns: u64,
        max: usize,
        f: &mut dyn FnMut(Received<'_>),
    ) -> io::Result<usize> {
        self.ring.read(now_ns, max, f)
    }

    fn send_upstream(&mut self, _now_ns: u64, datagram: &[u8]) -> bool {
        // a full queue drops it, as the network drops a datagram: the node sends it again
        self.bus.send_upstream(datagram);
        true
    }

    fn wait(&self, timeout: Duration) -> bool {
        Feed::wait(&self.ring, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqbus_wire::mold::MoldWriter;
    use seqbus_wire::{MoldPacket, Session};

    #[test]
    fn sequencer_and_nodes_in_one_process() {
        let bus = MemoryBus::named("memory-test", 1 << 16, 2).unwrap();
        let again = MemoryBus::named("memory-test", 1 << 16, 2).unwrap();
        assert!(Arc::ptr_eq(&bus, &again));
        let mut publ = bus.publisher().unwrap();
        assert!(again.publisher().is_err(), "one sequencer per bus");
        let mut nodes = [bus.subscribe(), again.subscribe()];
        assert!(bus.send_upstream(b"a"));
        assert!(bus.send_upstream(b"b"));
        assert!(!bus.send_upstream(b"c"), "bounded");
        let mut up = Vec::new();
        assert_eq!(again.drain_upstream(&mut |d| up.push(d.to_vec())), 2);
        assert_eq!(up, vec![b"a".to_vec(), b"b".to_vec()]);
        let mut w = MoldWriter::new(1472);
        w.begin(Session::new("MEM").unwrap(), 1);
        w.push(b"m1");
        publ.publish(w.bytes()).unwrap();
        for n in &mut nodes {
            let mut got = Vec::new();
            n.poll(10, &mut |p| {
                got.extend(
                    MoldPacket::parse(p)
                        .unwrap()
                        .messages()
                        .map(|(s, m)| (s, m.to_vec())),
                )
            });
            assert_eq!(got, vec![(1, b"m1".to_vec())]);
        }
        MemoryBus::remove("memory-test");
    }
}

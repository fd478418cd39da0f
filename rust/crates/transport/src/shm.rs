//! Shared memory on one host: a per-host dispatcher is the only reader of the network stream
//! (UDP multicast or unicast, or SoupBinTCP) and writes each MoldUDP64 packet once into a
//! [`Ring`] file under `/dev/shm`; every node on the host reads the ring.
//!
//! A node that falls more than the ring's capacity behind is told it was lapped and continues
//! at the ring's tail; its protocol logic then sees a sequence gap and fills it from a replayer,
//! exactly as after a lost datagram. Nobody blocks and nothing torn is ever delivered.
//!
//! Upstream, nodes on shared memory send their commands directly to the sequencer over the
//! configured upstream (UDP, or their own SoupBinTCP connection): the dispatcher only carries
//! the stream down, so a dispatcher restart never loses a command in flight.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_wire::mold::PacketKind;
use seqbus_wire::MoldPacket;

use crate::ring::{Reader, Ring, Writer};
use crate::stream::{Feed, Publisher, Received};
use crate::udp::Outbox;

/// Counters of a [`ShmPublisher`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublisherStats {
    pub packets: u64,
    pub messages: u64,
    /// Packets dropped because every message in them was already written.
    pub duplicates: u64,
    /// Datagrams that were not MoldUDP64 packets of the session.
    pub malformed: u64,
}

/// Writes MoldUDP64 packets into a ring, each message once.
pub struct ShmPublisher {
    writer: Writer,
    next_seq: u64,
    stats: PublisherStats,
}

impl ShmPublisher {
    /// Creates the ring file at `path` (replacing an old one) with `capacity` data bytes.
    pub fn create(path: &Path, capacity: usize) -> io::Result<ShmPublisher> {
        Ok(Self::on(Arc::new(Ring::create(path, capacity)?)))
    }

    /// Writes into an existing ring (the in-process transport uses this).
    pub fn on(ring: Arc<Ring>) -> ShmPublisher {
        ShmPublisher {
            writer: Writer::new(ring),
            next_seq: 0,
            stats: PublisherStats::default(),
        }
    }

    pub fn stats(&self) -> PublisherStats {
        self.stats
    }

    pub fn ring(&self) -> &Arc<Ring> {
        self.writer.ring()
    }

    /// Writes a packet unless every message in it was written already. Heartbeats and end of
    /// session are written too (nodes learn the next sequence number and the end from them).
    pub fn publish(&mut self, packet: &[u8]) -> io::Result<bool> {
        let p = match MoldPacket::parse(packet) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return Ok(false);
            }
        };
        if p.kind() == PacketKind::Messages {
            let end = p.sequence() + p.message_count() as u64;
            if end <= self.next_seq {
                self.stats.duplicates += 1;
                return Ok(false);
            }
            self.next_seq = end;
            self.stats.messages += p.message_count() as u64;
        }
        self.writer.write(packet)?;
        self.stats.packets += 1;
        Ok(true)
    }
}

/// A node's view of a ring: MoldUDP64 packets in the order the dispatcher wrote them.
///
/// A dispatcher that restarts makes a new ring file at the same path; a subscriber opened
/// from a path notices (the file's inode changes) and follows the new ring from its start.
pub struct ShmSubscriber {
    reader: Reader,
    buf: Vec<u8>,
    /// The ring file and its inode, when opened from a path.
    file: Option<(PathBuf, u64)>,
    next_check: Instant,
    /// Times the ring file was replaced and reopened.
    pub reopened: u64,
}

fn inode(path: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(path)?.ino())
}

impl ShmSubscriber {
    /// Opens the ring file at `path`, starting at its current tail.
    pub fn open(path: &Path) -> io::Result<ShmSubscriber> {
        let ino = inode(path)?;
        let mut s = Self::on(Arc::new(Ring::open(path)?));
        s.file = Some((path.to_path_buf(), ino));
        Ok(s)
    }

    /// Follows an existing ring (the in-process transport uses this).
    pub fn on(ring: Arc<Ring>) -> ShmSubscriber {
        ShmSubscriber {
            reader: Reader::new(ring),
            buf: Vec::with_capacity(65_536),
            file: None,
            next_check: Instant::now(),
            reopened: 0,
        }
    }

    /// Follows a new ring file at the same path, if the writer made one.
    fn check_replaced(&mut self) {
        let Some((path, ino)) = &self.file else {
            return;
        };
        if Instant::now() < self.next_check {
            return;
        }
        self.next_check = Instant::now() + Duration::from_millis(100);
        match inode(path) {
            Ok(now) if now != *ino => {
                if let Ok(ring) = Ring::open(path) {
                    self.reader = Reader::from_start(Arc::new(ring));
                    self.file = Some((path.clone(), now));
                    self.reopened += 1;
                }
            }
            _ => {}
        }
    }

    /// Times this node fell more than the ring's capacity behind (each time it continued at
    /// the tail and filled the gap from a replayer).
    pub fn laps(&self) -> u64 {
        self.reader.laps
    }

    /// Hands up to `max` packets to `f`; returns how many.
    pub fn poll(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            match self.reader.read_batch(&mut self.buf, 256 * 1024, f) {
                Ok(0) => {
                    self.check_replaced();
                    break;
                }
                Ok(k) => n += k,
                Err(_) => continue,
            }
        }
        n
    }

    /// Blocks until the ring has something new or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        self.reader.wait(timeout)
    }
}

/// Counters of a dispatcher run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatcherStats {
    pub received: u64,
    pub publisher: PublisherStats,
}

/// Runs a dispatcher until `stop` is set or the session ends: every packet of `source` (a
/// network feed: UDP multicast or unicast, or SoupBinTCP) is written once into the ring of
/// `publisher`.
pub fn run_dispatcher(
    source: &mut dyn Feed,
    publisher: &mut ShmPublisher,
    stop: &AtomicBool,
) -> io::Result<DispatcherStats> {
    let mut stats = DispatcherStats::default();
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = t0.elapsed().as_nanos() as u64;
        let mut err = None;
        let mut ended = false;
        let n = source.read(now, 64, &mut |r| {
            let Some(p) = r.data else {
                return; // cut short: the nodes fill the gap from a replayer
            };
            stats.received += 1;
            ended |= MoldPacket::parse(p).is_ok_and(|p| p.kind() == PacketKind::EndOfSession);
            if let Err(e) = publisher.publish(p) {
                err = Some(e);
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if ended || source.is_ended() {
            break;
        }
        if n == 0 {
            wait_readable(source.fd(), Duration::from_millis(10));
        }
    }
    stats.publisher = publisher.stats();
    Ok(stats)
}

/// Waits until `fd` is readable or `timeout` passes (sleeps when there is no socket).
pub fn wait_readable(fd: Option<std::os::fd::RawFd>, timeout: Duration) {
    match fd {
        Some(fd) => {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
        }
        None => std::thread::sleep(timeout),
    }
}

impl Publisher for ShmPublisher {
    fn publish(&mut self, _now_ns: u64, packets: &mut Outbox) -> io::Result<()> {
        for d in packets.datagrams() {
            ShmPublisher::publish(self, d)?;
        }
        packets.clear();
        Ok(())
    }
}

impl Feed for ShmSubscriber {
    fn read(
        &mut self,
        _now_ns: u64,
        max: usize,
        f: &mut dyn FnMut(Received<'_>),
    ) -> io::Result<usize> {
        Ok(self.poll(max, &mut |p| {
            f(Received {
                data: Some(p),
                from: None,
            })
        }))
    }

    fn wait(&self, timeout: Duration) -> bool {
        ShmSubscriber::wait(self, timeout);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqbus_wire::mold::MoldWriter;
    use seqbus_wire::Session;

    fn packet(first: u64, n: u64) -> Vec<u8> {
        let mut w = MoldWriter::new(1472);
        w.begin(Session::new("SHM").unwrap(), first);
        for s in first..first + n {
            assert!(w.push(&s.to_le_bytes()));
        }
        w.bytes().to_vec()
    }

    #[test]
    fn each_message_is_written_once_and_garbage_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus.ring");
        let mut p = ShmPublisher::create(&path, 1 << 16).unwrap();
        let mut a = ShmSubscriber::open(&path).unwrap();
        let mut b = ShmSubscriber::open(&path).unwrap();
        assert!(p.publish(&packet(1, 3)).unwrap());
        assert!(!p.publish(&packet(1, 3)).unwrap(), "duplicate");
        assert!(!p.publish(b"not mold").unwrap());
        assert!(p.publish(&packet(4, 2)).unwrap());
        assert_eq!(p.stats().duplicates, 1);
        assert_eq!(p.stats().malformed, 1);
        for s in [&mut a, &mut b] {
            let mut seqs = Vec::new();
            s.poll(100, &mut |pk| {
                seqs.extend(MoldPacket::parse(pk).unwrap().messages().map(|(q, _)| q))
            });
            assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        }
    }

    #[test]
    fn a_restarted_dispatcher_s_new_ring_is_followed_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus.ring");
        let mut p = ShmPublisher::create(&path, 1 << 16).unwrap();
        let mut s = ShmSubscriber::open(&path).unwrap();
        p.publish(&packet(1, 2)).unwrap();
        let mut seqs = Vec::new();
        s.poll(100, &mut |pk| {
            seqs.extend(MoldPacket::parse(pk).unwrap().messages().map(|(q, _)| q))
        });
        drop(p);
        let mut p = ShmPublisher::create(&path, 1 << 16).unwrap();
        p.publish(&packet(3, 2)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while seqs.len() < 4 {
            assert!(Instant::now() < deadline, "{seqs:?}");
            s.poll(100, &mut |pk| {
                seqs.extend(MoldPacket::parse(pk).unwrap().messages().map(|(q, _)| q))
            });
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(seqs, vec![1, 2, 3, 4]);
        assert_eq!(s.reopened, 1);
    }

    #[test]
    fn a_node_behind_the_ring_is_lapped_and_sees_a_gap_not_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bus.ring");
        let mut p = ShmPublisher::create(&path, 1 << 12).unwrap();
        let mut s = ShmSubscriber::open(&path).unwrap();
        let mut seq = 1;
        for _ in 0..100 {
            p.publish(&packet(seq, 5)).unwrap();
            seq += 5;
        }
        let mut seqs = Vec::new();
        s.poll(1000, &mut |pk| {
            seqs.extend(MoldPacket::parse(pk).unwrap().messages().map(|(q, _)| q))
        });
        assert!(seqs.is_empty());
        assert_eq!(s.laps(), 1);
        p.publish(&packet(seq, 1)).unwrap();
        s.poll(1000, &mut |pk| {
            seqs.extend(MoldPacket::parse(pk).unwrap().messages().map(|(q, _)| q))
        });
        assert_eq!(
            seqs,
            vec![seq],
            "continues at the tail: the gap is for the replayer"
        );
    }
}

//! The sequencer's pipelined loop (`sequencer.pipeline`): receiving, then sequencing and
//! journalling, then publishing, each on a thread of its own, as Aeron's receiver, conductor
//! and sender agents are.
//!
//! - [`ReceiveStage`], thread `seqbus-receive`: `recvmmsg` on the upstream socket into one of
//!   a few [`RecvBatch`]es, handed whole to the loop (no copy).
//! - The loop (the thread that runs `run_sequencer`) keeps everything that decides: the
//!   cluster member, sequencing, the journal, replication, NAKs, the TCP and memory
//!   transports.
//! - [`PublishStage`], thread `seqbus-publish`: the downstream sends (`sendmmsg`, the MAC of
//!   a keyed bus, the shared-memory ring) of packets the loop hands over in [`Outbox`]es. A
//!   packet is handed over only once the member emits it: after it is journalled (and, in a
//!   cluster, held by a majority), so persist-before-publish and the gating rule hold as they
//!   do on one thread.
//! - In a cluster, thread `seqbus-peers` ([`PeerSending`]): the appends, votes and heartbeats
//!   the loop emits for the other members, sent in order; their answers come back to the loop.
//!
//! The two sending stages are one [`Stage`] each: the producing side of a handoff and the
//! thread that works through it ([`Work`]).
//!
//! Each handoff ([`handoff`]) is a pool of a few items moving round between two threads: full
//! ones one way, emptied ones back. A consumer that has nothing to do idles per the
//! sequencer's idle strategy; when the strategy sleeps it first says so (`parked`), and a
//! producer that sees that wakes it through an eventfd. A producer with every item in flight
//! waits for one to come back: the slower stage paces the faster.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use seqbus_transport::udp::{Outbox, RecvBatch};
use seqbus_transport::Publisher;
use socket2::{SockAddr, Socket};

use crate::idle::{IdleStrategy, Idler};

/// How long a stage sleeps at most before it looks at its stop flag again.
const MAX_SLEEP: Duration = Duration::from_millis(50);

/// Items in each handoff's pool: enough that the producer rarely waits while the consumer
/// works through one, few enough that a slow consumer holds the producer back soon.
pub(crate) const POOL: usize = 4;

/// A consumer's wake-up: an eventfd it sleeps on, written only while it says it sleeps.
struct Wake {
    fd: OwnedFd,
    parked: AtomicBool,
    /// Times a producer wrote the eventfd (a consumer woken).
    wakes: AtomicU64,
}

impl Wake {
    fn new() -> io::Result<Wake> {
        // SAFETY: eventfd takes no pointers; a negative result is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Wake {
            // SAFETY: fd is a new descriptor owned by nothing else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            parked: AtomicBool::new(false),
            wakes: AtomicU64::new(0),
        })
    }

    /// After an item was queued: wakes the consumer if it said it sleeps (once).
    fn notify(&self) {
        if self.parked.swap(false, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd this struct owns. A full
            // counter (EAGAIN) still leaves it readable, which is all the wake needs.
            unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const _, 8) };
            self.wakes.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn drain(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64; non-blocking, EAGAIN when nothing was written.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut _, 8) };
    }
}

/// The producing side of a handoff: fills emptied items and hands them over.
pub(crate) struct Producer<T> {
    full: mpsc::Sender<T>,
    empty: mpsc::Receiver<T>,
    wake: Arc<Wake>,
}

/// The consuming side: takes full items in order and gives them back emptied.
pub(crate) struct Consumer<T> {
    full: mpsc::Receiver<T>,
    empty: mpsc::Sender<T>,
    wake: Arc<Wake>,
    /// An item taken off the queue while looking before a sleep.
    next: Option<T>,
}

/// The producer is gone (its thread ended): nothing more will come.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Gone;

/// A handoff whose pool is `items`, all empty and on the producer's side to begin with.
pub(crate) fn handoff<T>(items: Vec<T>) -> io::Result<(Producer<T>, Consumer<T>)> {
    let (full_tx, full_rx) = mpsc::channel();
    let (empty_tx, empty_rx) = mpsc::channel();
    for item in items {
        empty_tx.send(item).expect("the receiver is here");
    }
    let wake = Arc::new(Wake::new()?);
    Ok((
        Producer {
            full: full_tx,
            empty: empty_rx,
            wake: wake.clone(),
        },
        Consumer {
            full: full_rx,
            empty: empty_tx,
            wake,
            next: None,
        },
    ))
}

impl<T> Producer<T> {
    /// An emptied item to fill, waiting for the consumer to give one back while every item
    /// is in flight. Err: the consumer is gone.
    pub fn take(&self) -> Result<T, Gone> {
        self.empty.recv().map_err(|_| Gone)
    }

    /// [`Producer::take`], waiting at most `timeout`: None when none came back meanwhile.
    pub fn take_within(&self, timeout: Duration) -> Result<Option<T>, Gone> {
        match self.empty.recv_timeout(timeout) {
            Ok(item) => Ok(Some(item)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Gone),
        }
    }

    /// Hands `item` over, waking the consumer if it sleeps. Err: the consumer is gone.
    pub fn put(&self, item: T) -> Result<(), Gone> {
        self.full.send(item).map_err(|_| Gone)?;
        self.wake.notify();
        Ok(())
    }

    /// Times this handoff woke its consumer.
    #[cfg(test)]
    pub fn wakes(&self) -> u64 {
        self.wake.wakes.load(Ordering::Relaxed)
    }
}

impl<T> Consumer<T> {
    /// The next full item, if one is waiting. Err: the producer is gone and nothing is left.
    pub fn try_next(&mut self) -> Result<Option<T>, Gone> {
        if let Some(item) = self.next.take() {
            return Ok(Some(item));
        }
        match self.full.try_recv() {
            Ok(item) => Ok(Some(item)),
            Err(mpsc::TryRecvError::Empty) => Ok(None),
            Err(mpsc::TryRecvError::Disconnected) => Err(Gone),
        }
    }

    /// Gives an emptied item back to the producer (dropped when it is gone).
    pub fn give_back(&self, item: T) {
        let _ = self.empty.send(item);
    }

    /// The eventfd to sleep on.
    pub fn fd(&self) -> RawFd {
        self.wake.fd.as_raw_fd()
    }

    /// Just before sleeping: says so, then looks once more. True: something came (or the
    /// producer is gone), do not sleep.
    pub fn park(&mut self) -> bool {
        self.wake.parked.store(true, Ordering::SeqCst);
        if self.next.is_none() {
            match self.full.try_recv() {
                Ok(item) => self.next = Some(item),
                Err(mpsc::TryRecvError::Empty) => return false,
                Err(mpsc::TryRecvError::Disconnected) => {}
            }
        }
        self.wake.parked.store(false, Ordering::SeqCst);
        true
    }

    /// After an idle turn: no longer asleep; a wake-up written meanwhile is consumed.
    pub fn unpark(&self) {
        self.wake.parked.store(false, Ordering::SeqCst);
        self.wake.drain();
    }
}

/// What a stage's thread ended with: its error, or a panic (as an error).
fn joined(h: JoinHandle<io::Result<()>>, what: &str) -> io::Result<()> {
    h.join()
        .unwrap_or_else(|_| Err(io::Error::other(format!("the {what} thread panicked"))))
}

/// What a [`Stage`]'s thread does with the items handed to it.
pub(crate) trait Work<T>: Send + 'static {
    /// Handles one item, leaving it empty for reuse. An error ends the thread.
    fn handle(&mut self, item: &mut T) -> io::Result<()>;

    /// Once the producer is gone and every item it handed over was handled.
    fn done(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A thread that works through what the loop hands it, in order: the producing side of a
/// handoff and the thread consuming it.
pub(crate) struct Stage<T> {
    to: Option<Producer<T>>,
    thread: Option<JoinHandle<io::Result<()>>>,
    name: &'static str,
}

impl<T: Default + Send + 'static> Stage<T> {
    pub fn start(
        name: &'static str,
        idle: IdleStrategy,
        mut work: impl Work<T>,
    ) -> io::Result<Self> {
        let (to, mut from) = handoff((0..POOL).map(|_| T::default()).collect())?;
        let thread =
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || -> io::Result<()> {
                    let mut idler = Idler::new(idle);
                    loop {
                        match from.try_next() {
                            Ok(Some(mut item)) => {
                                work.handle(&mut item)?;
                                from.give_back(item);
                                idler.reset();
                            }
                            Ok(None) => {
                                let fd = from.fd();
                                idler
                                    .idle_unless(&[fd], Instant::now() + MAX_SLEEP, || from.park());
                                from.unpark();
                            }
                            Err(Gone) => return work.done(),
                        }
                    }
                })?;
        Ok(Stage {
            to: Some(to),
            thread: Some(thread),
            name,
        })
    }

    /// Hands `item` to the thread, leaving an emptied one in its place (waiting for one while
    /// every item is in flight). Err: the thread ended, with its error.
    pub fn hand_over(&mut self, item: &mut T) -> io::Result<()> {
        let name = self.name;
        let ended = move || io::Error::other(format!("the {name} thread has ended"));
        let Some(to) = &self.to else {
            return Err(ended());
        };
        let put = to
            .take()
            .and_then(|spare| to.put(std::mem::replace(item, spare)));
        match put {
            Ok(()) => Ok(()),
            // its error says why
            Err(Gone) => self.end().and(Err(ended())),
        }
    }
}

impl<T> Stage<T> {
    /// Waits until the thread handled everything handed over; returns its error, if any.
    pub fn end(&mut self) -> io::Result<()> {
        self.to = None;
        match self.thread.take() {
            Some(h) => joined(h, self.name),
            None => Ok(()),
        }
    }
}

impl<T> Drop for Stage<T> {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// Publishing on a thread of its own: a [`Publisher`] whose `publish` hands the packets to
/// the `seqbus-publish` thread, which publishes them with the inner publisher. Only for a
/// publisher without clients to serve (`poll`): UDP, keyed or not, and the shared-memory
/// ring; SoupBinTCP and the in-process bus serve their clients from the loop.
pub(crate) struct PublishStage {
    /// (in a Mutex only to make the stage `Sync`, as a `Publisher` is: used through
    /// `&mut self`, never locked)
    stage: std::sync::Mutex<Stage<Outbox>>,
}

struct Publishing(Box<dyn Publisher>);

impl Work<Outbox> for Publishing {
    fn handle(&mut self, packets: &mut Outbox) -> io::Result<()> {
        // a failed send ends the thread; the loop returns the error at its next publish (a
        // heartbeat at the latest) or when it stops
        self.0.publish(crate::now_ns(), packets)?;
        packets.clear();
        Ok(())
    }

    fn done(&mut self) -> io::Result<()> {
        self.0.finish()
    }
}

impl PublishStage {
    pub fn start(inner: Box<dyn Publisher>, idle: IdleStrategy) -> io::Result<PublishStage> {
        Ok(PublishStage {
            stage: std::sync::Mutex::new(Stage::start("seqbus-publish", idle, Publishing(inner))?),
        })
    }

    fn stage(&mut self) -> &mut Stage<Outbox> {
        self.stage.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

impl Publisher for PublishStage {
    fn publish(&mut self, _now_ns: u64, packets: &mut Outbox) -> io::Result<()> {
        if packets.is_empty() {
            return Ok(());
        }
        self.stage().hand_over(packets)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.stage().end()
    }
}

/// Datagrams to the other members of a cluster, in order, each with the member it goes to;
/// and a new leader's questions to replayers, kept apart (they leave from the loop, which
/// knows the replayers found so far).
#[derive(Debug, Default)]
pub(crate) struct PeerBatch {
    packets: Outbox,
    to: Vec<u16>,
    questions: Vec<(usize, Vec<u8>)>,
}

impl PeerBatch {
    pub fn push(&mut self, to: seqbus_core::To, datagram: &[u8]) {
        match to {
            seqbus_core::To::Member(id) => {
                self.packets.push(datagram);
                self.to.push(id);
            }
            seqbus_core::To::Replayer(i) => self.questions.push((i, datagram.to_vec())),
        }
    }

    /// Sends the questions to replayers (`replayers[i]` is replayer `i`), then forgets them.
    pub fn ask_replayers(&mut self, socket: &Socket, replayers: &[SockAddr]) {
        for (i, q) in self.questions.drain(..) {
            if let Some(addr) = replayers.get(i) {
                let _ = socket.send_to(&q, addr);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.to.is_empty()
    }

    /// Sends each datagram to its member's peer address (a lost one is the protocol's to
    /// make good: retransmission, heartbeats), then clears.
    pub fn send(&mut self, socket: &Socket, others: &[(u16, SockAddr)]) {
        for (d, to) in self.packets.datagrams().zip(&self.to) {
            if let Some((_, addr)) = others.iter().find(|(id, _)| id == to) {
                let _ = socket.send_to(d, addr);
            }
        }
        self.packets.clear();
        self.to.clear();
    }
}

/// Replication's sends on a thread of their own (`seqbus-peers`): the appends, votes and
/// heartbeats a cluster member's loop emits, sent in the order emitted. Their receipt (the
/// standbys' acknowledgements) stays on the loop, which decides the commit.
pub(crate) struct PeerSending {
    /// A handle of the peer socket.
    pub socket: Socket,
    /// Each other member's peer address.
    pub others: Vec<(u16, SockAddr)>,
}

impl Work<PeerBatch> for PeerSending {
    fn handle(&mut self, batch: &mut PeerBatch) -> io::Result<()> {
        batch.send(&self.socket, &self.others);
        Ok(())
    }
}

/// Receiving on a thread of its own: the `seqbus-receive` thread reads the upstream socket
/// into [`RecvBatch`]es and hands them to the loop, which gives each back once it has handled
/// its datagrams.
pub(crate) struct ReceiveStage {
    pub from: Consumer<RecvBatch>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl ReceiveStage {
    /// `socket`: a handle of the upstream socket (the loop keeps its own to send NAKs).
    pub fn start(socket: Socket, slots: usize, idle: IdleStrategy) -> io::Result<ReceiveStage> {
        let (to, from) = handoff((0..POOL).map(|_| RecvBatch::new(slots, 65_536)).collect())?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("seqbus-receive".into())
            .spawn(move || -> io::Result<()> {
                let mut idler = Idler::new(idle);
                let fd = socket.as_raw_fd();
                let mut batch: Option<RecvBatch> = None;
                while !stopped.load(Ordering::Relaxed) {
                    // (every batch with the loop: wait for one, looking at the stop flag
                    // now and then, since a stopping loop may not hand any back)
                    let mut b = match batch.take() {
                        Some(b) => b,
                        None => match to.take_within(MAX_SLEEP) {
                            Ok(Some(b)) => b,
                            Ok(None) => continue,
                            Err(Gone) => return Ok(()),
                        },
                    };
                    if b.recv(&socket)? == 0 {
                        batch = Some(b);
                        idler.idle(&[fd], Instant::now() + MAX_SLEEP);
                        continue;
                    }
                    idler.reset();
                    if to.put(b).is_err() {
                        return Ok(());
                    }
                }
                Ok(())
            })?;
        Ok(ReceiveStage {
            from,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread (within its longest sleep) and returns its error, when it failed.
    pub fn end(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take() {
            Some(h) => joined(h, "receive"),
            None => Ok(()),
        }
    }
}

impl Drop for ReceiveStage {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// Whether `sequencer.pipeline` runs the stages: `auto` does where the process may use at
/// least [`AUTO_MIN_CPUS`] CPUs (`sched_getaffinity` and cgroup quotas, as
/// `available_parallelism` reads them).
pub fn pipelined(setting: seqbus_config::Pipeline) -> bool {
    match setting {
        seqbus_config::Pipeline::On => true,
        seqbus_config::Pipeline::Off => false,
        seqbus_config::Pipeline::Auto => {
            std::thread::available_parallelism().map_or(1, |n| n.get()) >= AUTO_MIN_CPUS
        }
    }
}

/// The CPUs `auto` needs to pipeline: the loop, the two stages and one to spare (the
/// in-process replayer, the journal's sync thread, the nodes of a small host).
pub(crate) const AUTO_MIN_CPUS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_arrive_in_order_and_come_back_for_reuse() {
        let (p, mut c) = handoff(vec![Vec::<u32>::new(), Vec::new()]).unwrap();
        let t = std::thread::spawn(move || {
            for i in 0..1000u32 {
                let mut v = p.take().unwrap();
                assert!(v.is_empty(), "an item comes back emptied");
                v.push(i);
                p.put(v).unwrap();
            }
        });
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.len() < 1000 {
            assert!(Instant::now() < deadline, "stalled at {}", seen.len());
            match c.try_next().unwrap() {
                Some(mut v) => {
                    seen.append(&mut v);
                    c.give_back(v);
                }
                None => std::thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        // the producer is gone and nothing is left
        assert_eq!(c.try_next(), Err(Gone));
    }

    #[test]
    fn a_parked_consumer_is_woken_through_its_eventfd_and_only_then() {
        let (p, mut c) = handoff(vec![0u8; 2]).unwrap();
        // not parked: no wake-up written
        let item = p.take().unwrap();
        p.put(item).unwrap();
        assert_eq!(p.wakes(), 0);
        assert_eq!(c.try_next().unwrap(), Some(0));
        c.give_back(0);
        // parked with nothing waiting: it may sleep, and the next put writes the eventfd
        assert!(!c.park());
        let item = p.take().unwrap();
        p.put(item).unwrap();
        assert_eq!(p.wakes(), 1);
        let mut pfd = libc::pollfd {
            fd: c.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 5_000) };
        assert_eq!(n, 1, "the eventfd is readable");
        c.unpark();
        // SAFETY: as above, not waiting.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        assert_eq!(n, 0, "unpark consumed the wake-up");
        // parking with an item waiting says so and keeps the item
        assert!(c.park());
        assert_eq!(c.try_next().unwrap(), Some(0));
        c.give_back(0);
        // a put while not parked does not wake
        let item = p.take().unwrap();
        p.put(item).unwrap();
        assert_eq!(p.wakes(), 1);
    }

    /// What a [`Counting`] publisher published, in order.
    type Published = Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

    #[test]
    fn the_receive_stage_stops_while_the_loop_holds_every_batch() {
        let socket = seqbus_transport::udp::bind("127.0.0.1:0".parse().unwrap(), 1 << 20).unwrap();
        let to = socket.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..20u8 {
            sender.send_to(&[i], to.as_socket().unwrap()).unwrap();
        }
        // one datagram a batch: the thread fills every batch of the pool, then waits for one
        // to come back, and the loop (this test) gives none back
        let mut stage = ReceiveStage::start(socket, 1, IdleStrategy::Block).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut held = Vec::new();
        while held.len() < POOL {
            assert!(
                Instant::now() < deadline,
                "only {} batches came",
                held.len()
            );
            match stage.from.try_next().unwrap() {
                Some(b) => held.push(b),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        let got: Vec<u8> = held.iter().map(|b| b.get(0).unwrap()[0]).collect();
        assert_eq!(got, vec![0, 1, 2, 3], "in the order sent");
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            done_tx.send(stage.end().is_ok()).unwrap();
        });
        assert_eq!(
            done_rx.recv_timeout(Duration::from_secs(10)),
            Ok(true),
            "end() returned, without error, though no batch came back"
        );
    }

    /// Counts what it is asked to publish; fails once told to.
    struct Counting {
        packets: Published,
        fail: Arc<AtomicBool>,
    }

    impl Publisher for Counting {
        fn publish(&mut self, _now_ns: u64, packets: &mut Outbox) -> io::Result<()> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(io::Error::other("no route to the group"));
            }
            let mut got = self.packets.lock().unwrap();
            got.extend(packets.datagrams().map(|d| d.to_vec()));
            packets.clear();
            Ok(())
        }
    }

    fn staged(idle: IdleStrategy) -> (PublishStage, Published, Arc<AtomicBool>) {
        let packets = Arc::new(std::sync::Mutex::new(Vec::new()));
        let fail = Arc::new(AtomicBool::new(false));
        let inner = Counting {
            packets: packets.clone(),
            fail: fail.clone(),
        };
        (
            PublishStage::start(Box::new(inner), idle).unwrap(),
            packets,
            fail,
        )
    }

    #[test]
    fn the_publish_stage_publishes_everything_in_order_before_finish_returns() {
        for idle in [
            IdleStrategy::Block,
            IdleStrategy::BusySpin,
            IdleStrategy::Hybrid,
        ] {
            let (mut stage, got, _) = staged(idle);
            let mut ob = Outbox::default();
            for i in 0..5_000u32 {
                ob.push(&i.to_le_bytes());
                if i % 7 == 0 {
                    stage.publish(0, &mut ob).unwrap();
                    assert!(ob.is_empty(), "publish empties what it was given");
                }
            }
            stage.publish(0, &mut ob).unwrap();
            stage.finish().unwrap();
            let got = got.lock().unwrap();
            let want: Vec<Vec<u8>> = (0..5_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
            assert_eq!(*got, want, "{idle:?}");
        }
    }

    #[test]
    fn a_failed_send_on_the_publish_thread_is_returned_to_the_loop() {
        let (mut stage, _, fail) = staged(IdleStrategy::Block);
        fail.store(true, Ordering::SeqCst);
        let mut ob = Outbox::default();
        let deadline = Instant::now() + Duration::from_secs(30);
        let err = loop {
            assert!(Instant::now() < deadline, "the failure never came back");
            ob.push(b"x");
            if let Err(e) = stage.publish(0, &mut ob) {
                break e;
            }
        };
        assert!(err.to_string().contains("no route to the group"), "{err}");
    }
}

//! A node client for an event loop (Python's asyncio): the client is polled on a thread of its
//! own (every transport; `NodeClient::poll` passes that do not wait, and between them the
//! configured idle strategy over the client's fds, `NodeClient::wait_plan`) and hands each
//! batch over to the loop's thread, signalling an eventfd the loop watches. The loop wakes
//! only when there is something for it: a batch, room in the command window, the node
//! becoming ready, or the error the client stopped with.
//!
//! The client's thread sleeps without holding the client, so the loop's thread sends through
//! [`LoopNode::with_client`] at once: it takes the client (waiting at most for one poll pass),
//! queues the command, gives the client back and wakes the thread ([`Waker`], an eventfd in
//! the set it sleeps on), whose next pass sends what was queued.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use crate::idle::Idler;
use crate::{Error, NodeClient};

/// The longest the client's thread waits in one poll (it is woken for commands and stop).
const POLL_WAIT: Duration = Duration::from_millis(100);

/// A Linux eventfd: one thread signals it, another waits for it to be readable.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd has no pointer arguments; a non-negative result is a new fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by eventfd and is owned by nothing else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the fd readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64; a full counter (EAGAIN) is readable anyway.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Makes the fd unreadable again; true when it was signalled.
    pub fn drain(&self) -> bool {
        let mut n: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64 (non-blocking).
        let r = unsafe { libc::read(self.0.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
        r == 8 && n > 0
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Wakes a thread waiting in [`NodeClient::poll`]: a flag it checks on every turn, and an
/// eventfd in the set it sleeps on.
#[derive(Debug)]
pub struct Waker {
    flag: AtomicBool,
    fd: EventFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        Ok(Waker {
            flag: AtomicBool::new(false),
            fd: EventFd::new()?,
        })
    }

    pub fn wake(&self) {
        if !self.flag.swap(true, Ordering::AcqRel) {
            self.fd.signal();
        }
    }

    /// True (once) when [`Waker::wake`] was called since the last call.
    pub fn take(&self) -> bool {
        if self.flag.swap(false, Ordering::AcqRel) {
            self.fd.drain();
            true
        } else {
            false
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.fd()
    }
}

/// What the client's thread hands the loop.
#[derive(Debug, Default)]
struct Handoff {
    batches: VecDeque<Vec<u8>>,
    /// The error the client stopped with, until the loop takes it.
    error: Option<Error>,
    /// The client's thread has ended (stopped or failed).
    ended: bool,
}

#[derive(Debug)]
struct Shared {
    client: Mutex<NodeClient>,
    handoff: Mutex<Handoff>,
    /// Readable while the loop has something to look at.
    readable: EventFd,
    /// Wakes the client's thread (a command to send, room in the handoff, stop).
    waker: Arc<Waker>,
    /// Calls of `with_client` waiting for the client: its thread lets them go first, parked
    /// until the last one is done.
    callers: AtomicUsize,
    thread: OnceLock<Thread>,
    /// The client stops reading while this many batches wait for the loop.
    max_queued: usize,
    /// The client's state after its last poll, for the loop to read without waiting.
    ready: AtomicBool,
    rewinding: AtomicBool,
    stop: AtomicBool,
    /// Wake-ups the loop was given (each with a cause), and batches handed over.
    signals: AtomicUsize,
    handed: AtomicUsize,
}

impl Shared {
    fn handoff(&self) -> MutexGuard<'_, Handoff> {
        self.handoff.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn client(&self) -> MutexGuard<'_, NodeClient> {
        self.client.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Under the handoff lock, so that the loop's `take` drains the fd only when nothing is
    /// left to take.
    fn signal(&self, h: &mut Handoff, batch: Option<Vec<u8>>) {
        if let Some(b) = batch {
            h.batches.push_back(b);
            self.handed.fetch_add(1, Ordering::Relaxed);
        }
        self.signals.fetch_add(1, Ordering::Relaxed);
        self.readable.signal();
    }
}

/// A node client polled on a thread of its own for a loop on another (see the module
/// documentation).
#[derive(Debug)]
pub struct LoopNode {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Counters of the handoff: wake-ups given to the loop, batches handed over.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopStats {
    pub signals: usize,
    pub batches: usize,
}

impl LoopNode {
    /// Starts polling `client` on a thread named `name`: batches of at most `max_records`
    /// records; it stops reading while `max_queued` batches wait for the loop.
    pub fn start(
        mut client: NodeClient,
        name: &str,
        max_records: usize,
        max_queued: usize,
    ) -> io::Result<LoopNode> {
        let waker = Arc::new(Waker::new()?);
        client.set_waker(waker.clone());
        let shared = Arc::new(Shared {
            client: Mutex::new(client),
            handoff: Mutex::new(Handoff::default()),
            readable: EventFd::new()?,
            waker,
            callers: AtomicUsize::new(0),
            thread: OnceLock::new(),
            max_queued: max_queued.max(1),
            ready: AtomicBool::new(false),
            rewinding: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            signals: AtomicUsize::new(0),
            handed: AtomicUsize::new(0),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(&s, max_records.max(1)))?;
        let _ = shared.thread.set(thread.thread().clone());
        Ok(LoopNode {
            shared,
            thread: Some(thread),
        })
    }

    /// The fd the loop watches: readable while [`LoopNode::take`] has something.
    pub fn ready_fd(&self) -> RawFd {
        self.shared.readable.fd()
    }

    /// The client may send (it knows its next command sequence), as of its last poll.
    pub fn is_ready(&self) -> bool {
        self.shared.ready.load(Ordering::SeqCst)
    }

    /// The client replays history, as of its last poll.
    pub fn is_rewinding(&self) -> bool {
        self.shared.rewinding.load(Ordering::SeqCst)
    }

    /// The next batch into `out` (cleared first): `Ok(true)` when there was one. The fd
    /// stays readable while more wait, so a loop takes one batch per turn and other work
    /// runs in between. Once the client's thread failed and every batch was taken: its error.
    pub fn take(&self, out: &mut Vec<u8>) -> Result<bool, Error> {
        out.clear();
        let mut h = self.shared.handoff();
        let was_full = h.batches.len() >= self.shared.max_queued;
        let batch = h.batches.pop_front();
        if h.batches.is_empty() {
            self.shared.readable.drain();
            if h.ended {
                // what remains readable is the end itself
                self.shared.readable.signal();
            }
        }
        drop(h);
        if was_full {
            // the client's thread may wait for room
            self.shared.waker.wake();
        }
        match batch {
            Some(b) => {
                *out = b;
                Ok(true)
            }
            None => {
                let mut h = self.shared.handoff();
                match h.error.take() {
                    Some(e) => Err(e),
                    None => Ok(false),
                }
            }
        }
    }

    /// Waits at most `timeout` for [`LoopNode::ready_fd`] to be readable; true when it is.
    pub fn wait(&self, timeout: Duration) -> bool {
        wait_readable(self.shared.readable.fd(), timeout)
    }

    /// Batches waiting for the loop.
    pub fn queued(&self) -> usize {
        self.shared.handoff().batches.len()
    }

    /// True once the client's thread has ended (and every batch was taken).
    pub fn ended(&self) -> bool {
        let h = self.shared.handoff();
        h.ended && h.batches.is_empty()
    }

    /// Runs `f` on the client (sending a command, reading its state) from the loop's thread:
    /// the client's thread lets the call go first, then is woken to send what `f` queued.
    pub fn with_client<R>(&self, f: impl FnOnce(&mut NodeClient) -> R) -> R {
        let s = &self.shared;
        s.callers.fetch_add(1, Ordering::SeqCst);
        let r = f(&mut s.client());
        if s.callers.fetch_sub(1, Ordering::SeqCst) == 1 {
            if let Some(t) = s.thread.get() {
                t.unpark();
            }
        }
        // its next pass, which begins with a flush, sends what `f` queued
        s.waker.wake();
        r
    }

    pub fn stats(&self) -> LoopStats {
        LoopStats {
            signals: self.shared.signals.load(Ordering::Relaxed),
            batches: self.shared.handed.load(Ordering::Relaxed),
        }
    }

    /// Stops the client's thread and sends what is queued; the error it stopped with, if
    /// the loop did not take it.
    pub fn close(&mut self) -> Result<(), Error> {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(e) = self.shared.handoff().error.take() {
            return Err(e);
        }
        self.shared.client().flush()
    }
}

impl Drop for LoopNode {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the loop is told about besides batches: a change in any of these.
#[derive(PartialEq, Eq, Clone, Copy)]
struct Seen {
    in_flight: usize,
    ready: bool,
}

fn run(s: &Shared, max_records: usize) {
    // the loop's thread waits for the client (`with_client`) holding what a logger may need
    // (Python's GIL): what the client logs while this thread holds it is logged once it is
    // let go
    crate::watch::hold_records();
    let mut out = Vec::with_capacity(1 << 16);
    let mut seen: Option<Seen> = None;
    let mut idler = Idler::new(s.client().idle_strategy());
    let mut fds = Vec::new();
    while !s.stop.load(Ordering::SeqCst) {
        if s.handoff().batches.len() >= s.max_queued {
            // the loop is behind: wait until it takes a batch (or a command, or stop)
            if !s.waker.take() {
                wait_readable(s.waker.fd(), POLL_WAIT);
            }
            continue;
        }
        if s.callers.load(Ordering::SeqCst) > 0 {
            // a caller wants the client: sleep until it is done with it (an unpark that
            // came first makes this return at once)
            std::thread::park_timeout(POLL_WAIT);
            continue;
        }
        // one pass that does not wait (flush, read, deliver), then the wait without the client
        let mut client = s.client();
        let polled = client.poll(&mut out, max_records, Duration::ZERO);
        let now = Seen {
            in_flight: client.in_flight(),
            ready: client.is_ready(),
        };
        s.ready.store(now.ready, Ordering::SeqCst);
        s.rewinding.store(client.is_rewinding(), Ordering::SeqCst);
        let until = client.wait_plan(&mut fds, POLL_WAIT);
        let n = match polled {
            Err(e) => {
                drop(client);
                crate::watch::log_held();
                let mut h = s.handoff();
                h.error = Some(e);
                h.ended = true;
                s.signal(&mut h, None);
                return;
            }
            Ok(n) => n,
        };
        // room in the window, or ready to send: the loop's waiting senders go on
        let news = match seen {
            None => now.ready,
            Some(was) => now.ready != was.ready || now.in_flight < was.in_flight,
        };
        seen = Some(now);
        if n == 0 {
            // it sleeps below (unless woken at once): waiting for the stream
            client.waiting();
        }
        if n > 0 || news {
            // handed over before the client is let go: whoever reads the client's state next
            // (its commands in flight, through `with_client`) finds the batch that confirmed
            // them already queued, so "nothing in flight and nothing queued" means handled
            let batch = (n > 0).then(|| std::mem::take(&mut out));
            s.signal(&mut s.handoff(), batch);
        }
        drop(client);
        crate::watch::log_held();
        if n > 0 || s.waker.take() {
            idler.reset();
            continue;
        }
        // `fds` has the waker's: a command from the loop ends the wait
        idler.idle(&fds, until);
    }
    let mut h = s.handoff();
    h.ended = true;
    s.signal(&mut h, None);
    drop(h);
    crate::watch::log_held();
}

/// Sleeps until `fd` is readable or `timeout` passes; true when it is readable.
fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eventfd_is_readable_from_signal_to_drain() {
        let e = EventFd::new().unwrap();
        assert!(!wait_readable(e.fd(), Duration::ZERO));
        assert!(!e.drain());
        e.signal();
        e.signal();
        assert!(wait_readable(e.fd(), Duration::ZERO));
        assert!(e.drain());
        assert!(!wait_readable(e.fd(), Duration::ZERO));
    }

    #[test]
    fn a_wake_is_taken_once_and_wakes_a_sleeper() {
        let w = Arc::new(Waker::new().unwrap());
        assert!(!w.take());
        let sleeper = {
            let w = w.clone();
            std::thread::spawn(move || wait_readable(w.fd(), Duration::from_secs(30)))
        };
        w.wake();
        w.wake();
        assert!(sleeper.join().unwrap(), "woken before its timeout");
        assert!(w.take());
        assert!(!w.take());
        assert!(!wait_readable(w.fd(), Duration::ZERO));
    }
}

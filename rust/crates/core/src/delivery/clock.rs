//! A node's deterministic clock and timers.
//!
//! The clock stands at the record being handled: its sequence and the sequencer's timestamp,
//! so a replay computes with the time the live run saw. A deterministic timer is a deadline
//! in stream time; it comes due at the first record whose time is at or past it
//! ([`super::Walk`] asks [`Clock::enter`] at every record), the same record live, in a hot
//! backup and in every replay, because which records exist depends only on the stream
//! ([`super::Delivery`]). The application runs the callbacks: this holds the deadlines and
//! hands out, in order, the ids of those due.
//!
//! The clock is shared between the loop walking a batch and the handlers it calls (which
//! read the time and set timers), possibly across an FFI: its position is atomics and the
//! timers sit behind a lock, never held while a handler runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// No timer pending.
const NONE: u64 = u64::MAX;

#[derive(Debug, Default)]
struct Timers {
    /// (deadline, id): the earliest first, timers of one deadline in the order set.
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    cancelled: HashSet<u64>,
    next_id: u64,
}

/// The node's position in the stream and its deterministic timers.
#[derive(Debug)]
pub struct Clock {
    sequence: AtomicU64,
    time_ns: AtomicU64,
    /// The earliest pending deadline ([`NONE`]: none), read at every record.
    deadline_ns: AtomicU64,
    timers: Mutex<Timers>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            sequence: AtomicU64::new(0),
            time_ns: AtomicU64::new(0),
            deadline_ns: AtomicU64::new(NONE),
            timers: Mutex::new(Timers::default()),
        }
    }
}

impl Clock {
    pub fn new() -> Clock {
        Clock::default()
    }

    /// The sequence of the record being handled (0 before the first).
    pub fn sequence(&self) -> u64 {
        self.sequence.load(Ordering::Relaxed)
    }

    /// The sequencer's timestamp of the record being handled, ns since the epoch.
    pub fn time_ns(&self) -> u64 {
        self.time_ns.load(Ordering::Relaxed)
    }

    /// Moves the clock to a record (a message or a time record); true when deterministic
    /// timers are due before it is handled.
    #[inline]
    pub fn enter(&self, sequence: u64, time_ns: u64) -> bool {
        self.sequence.store(sequence, Ordering::Relaxed);
        self.time_ns.store(time_ns, Ordering::Relaxed);
        time_ns >= self.deadline_ns.load(Ordering::Relaxed)
    }

    /// The earliest pending deadline, if any.
    pub fn deadline_ns(&self) -> Option<u64> {
        match self.deadline_ns.load(Ordering::Relaxed) {
            NONE => None,
            d => Some(d),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timers> {
        // a panicking handler cannot leave the heap half changed: no callback runs inside
        self.timers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, t: &Timers) {
        let d = t.heap.peek().map_or(NONE, |Reverse((at, _))| *at);
        self.deadline_ns.store(d, Ordering::Relaxed);
    }

    /// Sets a deterministic timer at `at_ns` of stream time; returns its id. A deadline at
    /// or before the current time comes due at the next record.
    pub fn set_timer(&self, at_ns: u64) -> u64 {
        let mut t = self.lock();
        t.next_id += 1;
        let id = t.next_id;
        t.heap.push(Reverse((at_ns.min(NONE - 1), id)));
        self.publish(&t);
        id
    }

    /// Cancels timer `id`; false if it already fired or was cancelled.
    pub fn cancel(&self, id: u64) -> bool {
        let mut t = self.lock();
        if !t.heap.iter().any(|Reverse((_, i))| *i == id) {
            return false;
        }
        t.cancelled.insert(id)
    }

    /// The next timer due at the current time (deadline at or before it), earliest first and
    /// in the order set; None when no more is due. Cancelled timers are skipped.
    pub fn pop_due(&self) -> Option<(u64, u64)> {
        let now = self.time_ns();
        let mut t = self.lock();
        while let Some(&Reverse((at, id))) = t.heap.peek() {
            if at > now {
                break;
            }
            t.heap.pop();
            if t.cancelled.remove(&id) {
                continue;
            }
            self.publish(&t);
            return Some((id, at));
        }
        self.publish(&t);
        None
    }

    /// Pending timers (cancelled ones not counted).
    pub fn pending(&self) -> usize {
        let t = self.lock();
        t.heap.len() - t.cancelled.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_come_due_at_the_first_record_at_or_past_them_in_order() {
        let c = Clock::new();
        assert!(!c.enter(1, 100));
        let a = c.set_timer(250);
        let b = c.set_timer(200);
        let d = c.set_timer(250);
        let x = c.set_timer(240);
        assert!(c.cancel(x));
        assert_eq!(c.deadline_ns(), Some(200));
        assert!(!c.enter(2, 199));
        assert!(c.enter(3, 260));
        assert_eq!(c.pop_due(), Some((b, 200)));
        assert_eq!(c.pop_due(), Some((a, 250)));
        assert_eq!(c.pop_due(), Some((d, 250)));
        assert_eq!(c.pop_due(), None);
        assert_eq!(c.deadline_ns(), None);
        assert!(!c.cancel(a), "fired already");
        assert_eq!((c.sequence(), c.time_ns()), (3, 260));
        // a timer in the past comes due at the next record
        c.set_timer(10);
        assert!(c.enter(4, 260));
        assert_eq!(c.pending(), 1);
    }
}

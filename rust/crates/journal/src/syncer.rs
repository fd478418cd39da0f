//! `fdatasync` on a thread of its own, for the journals whose policy lets publishing run ahead
//! of the disk (`sequencer.fsync = "interval"`: a written record is in the page cache and
//! survives a crash of the process; the sync makes it survive a crash of the machine).
//!
//! The thread that writes the journal also sends the cluster's heartbeats. On a busy disk one
//! `fdatasync` takes tens of milliseconds (93 ms at worst in 500 on the development machine
//! while a build ran, 55 of them over 40 ms), and a leader blocked that long in its loop is
//! silent for longer than the cluster's election timeout: its followers take it for dead. With
//! the sync here, the loop only asks for one ([`Syncer::request`]), and a sync still running
//! absorbs the requests that come meanwhile (the next one covers them all).
//!
//! With `sequencer.fsync = "batch"` nothing is published before its sync, and the loop must
//! still not wait: each request is numbered ([`Syncer::request`] returns its ticket), the
//! thread tells the writer when a sync completed (`on_done`, e.g. an eventfd the loop sleeps
//! on), and [`Syncer::done`] says up to which ticket everything is synced.
//!
//! A sync that fails is reported by the next request and by [`Syncer::done`] (the writer then
//! stops, as it does when a sync of its own fails), and one that takes longer than
//! [`SLOW_SYNC`] is reported to the writer's `on_slow` as it ends.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Journal, JournalError};

/// A sync at least this long is reported to `on_slow`.
pub const SLOW_SYNC: Duration = Duration::from_secs(1);

/// Called with the segment and how long its sync took, for each sync of [`SLOW_SYNC`] or more.
pub type OnSlow = Box<dyn Fn(&Path, Duration) + Send>;

/// Called after each sync, done or failed (from the sync thread).
pub type OnDone = Box<dyn Fn() + Send>;

#[derive(Default)]
struct State {
    /// The segment to sync next (a handle of its own: the writer may leave the segment).
    pending: Option<(PathBuf, File)>,
    /// The first failure, until a request (or [`Syncer::done`]) reports it.
    failed: Option<JournalError>,
    /// Requests made (the last ticket handed out).
    requested: u64,
    /// The inode of the file synced last (for the tests).
    #[cfg(test)]
    last_inode: u64,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Every request up to this ticket is synced (read without the lock).
    done: AtomicU64,
    /// Syncs done (read without the lock).
    synced: AtomicU64,
    /// A sync failed (read without the lock; the error is in `state`).
    failed: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A thread that `fdatasync`s a journal's current segment when asked.
pub struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Starts the thread (named `journal-sync`).
    pub fn start(on_slow: OnSlow) -> std::io::Result<Syncer> {
        Syncer::with_on_done(on_slow, Box::new(|| {}))
    }

    /// Starts the thread, which calls `on_done` after each sync it completes or fails.
    pub fn with_on_done(on_slow: OnSlow, on_done: OnDone) -> std::io::Result<Syncer> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("journal-sync".into())
            .spawn(move || run(&s, &on_slow, &on_done))?;
        Ok(Syncer {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks for the journal's current segment to be synced (what [`Journal::flush`] wrote
    /// before this call is covered; earlier segments were synced as the journal left them).
    /// Returns at once, with the request's ticket ([`Syncer::done`]): an error is an earlier
    /// sync's.
    ///
    /// The thread gets a handle of its own each time (one `dup`, at most once an interval),
    /// never one kept from an earlier request: a suffix moved aside removes the segments it
    /// began, and the next segment may start under a removed one's name, a new file that a
    /// kept handle (of the removed one, by name) would never sync.
    pub fn request(&mut self, journal: &Journal) -> Result<u64, JournalError> {
        let (path, file) = journal.current_segment();
        let dup = file.try_clone().map_err(|source| JournalError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut st = self.shared.lock();
        if let Some(e) = st.failed.take() {
            return Err(e);
        }
        st.pending = Some((path.to_path_buf(), dup));
        st.requested += 1;
        let ticket = st.requested;
        drop(st);
        self.shared.wake.notify_one();
        Ok(ticket)
    }

    /// Every request up to the ticket returned is synced; or the failure of a sync (which
    /// requests after it cannot make good: the writer stops). Takes no lock unless a sync
    /// failed.
    pub fn done(&self) -> Result<u64, JournalError> {
        if self.shared.failed.load(Ordering::Acquire) {
            if let Some(e) = self.shared.lock().failed.take() {
                return Err(e);
            }
        }
        Ok(self.shared.done.load(Ordering::Acquire))
    }

    /// Syncs done so far (takes no lock).
    pub fn synced(&self) -> u64 {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Waits for the requested sync, stops the thread, and returns any failure not yet
    /// reported.
    pub fn finish(mut self) -> Result<(), JournalError> {
        self.stop();
        match self.shared.lock().failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn stop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared, on_slow: &OnSlow, on_done: &OnDone) {
    let mut st = shared.lock();
    loop {
        if let Some((path, file)) = st.pending.take() {
            // the requests made so far: their writes came before this sync starts
            let covers = st.requested;
            drop(st);
            let began = Instant::now();
            let result = file.sync_data();
            let took = began.elapsed();
            if took >= SLOW_SYNC {
                on_slow(&path, took);
            }
            #[cfg(test)]
            let inode = std::os::unix::fs::MetadataExt::ino(&file.metadata().expect("fstat"));
            st = shared.lock();
            shared.synced.fetch_add(1, Ordering::AcqRel);
            #[cfg(test)]
            {
                st.last_inode = inode;
            }
            match result {
                Ok(()) => shared.done.store(covers, Ordering::Release),
                Err(source) => {
                    st.failed.get_or_insert(JournalError::Io { path, source });
                    shared.failed.store(true, Ordering::Release);
                }
            }
            drop(st);
            on_done();
            st = shared.lock();
            continue;
        }
        if st.stop {
            return;
        }
        st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn journal(dir: &Path) -> Journal {
        Journal::open(dir, *b"SYNCTEST01", 1 << 20).expect("open")
    }

    #[test]
    fn requests_are_synced_and_coalesced_and_the_last_one_is_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = journal(dir.path());
        let slow = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&slow);
        let mut syncer = Syncer::start(Box::new(move |_, _| {
            s.fetch_add(1, Ordering::Relaxed);
        }))
        .unwrap();
        for seq in 1..=200u64 {
            j.append(seq, &seq.to_le_bytes()).unwrap();
            j.flush().unwrap();
            syncer.request(&j).unwrap();
        }
        let synced = syncer.synced();
        assert!(synced <= 200, "{synced}");
        let shared = Arc::clone(&syncer.shared);
        syncer.finish().unwrap();
        let st = shared.lock();
        assert!(
            st.pending.is_none(),
            "the last request was synced before finish returned"
        );
        assert!(shared.synced.load(Ordering::Acquire) >= 1);
    }

    #[test]
    fn a_segment_made_again_under_a_removed_ones_name_is_the_one_synced() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        // segments of 3 records: 32-byte header + 3 × (16 + 1)
        let mut j = Journal::open(dir.path(), *b"SYNCTEST01", 32 + 3 * 17).unwrap();
        let mut syncer = Syncer::start(Box::new(|_, _| {})).unwrap();
        let sync_now = |syncer: &mut Syncer, j: &Journal| {
            let n = syncer.synced();
            syncer.request(j).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while syncer.synced() <= n {
                assert!(Instant::now() < deadline, "no sync ran");
                std::thread::sleep(Duration::from_millis(1));
            }
            syncer.shared.lock().last_inode
        };
        for seq in 1..=4u64 {
            j.append(seq, b"m").unwrap();
        }
        j.flush().unwrap();
        let (path, file) = j.current_segment();
        let (path, first) = (path.to_path_buf(), file.metadata().unwrap().ino());
        assert!(
            path.ends_with("00000000000000000004.seg"),
            "{}",
            path.display()
        );
        assert_eq!(sync_now(&mut syncer, &j), first);
        // message 4 moved aside: its segment goes, and the next append starts it again
        j.discard_from(4).unwrap();
        j.append(4, b"n").unwrap();
        j.flush().unwrap();
        let (again, file) = j.current_segment();
        assert_eq!(again, path, "the same name");
        let second = file.metadata().unwrap().ino();
        assert_eq!(
            sync_now(&mut syncer, &j),
            second,
            "the file now under that name"
        );
        syncer.finish().unwrap();
    }

    /// Hands the thread a handle that cannot be synced (fdatasync of a socket fails: EINVAL)
    /// and waits until it tried.
    fn fail_a_sync(syncer: &Syncer) {
        let (_r, w) = std::os::unix::net::UnixStream::pair().unwrap();
        let bad: File = std::os::fd::OwnedFd::from(w).into();
        let path = PathBuf::from("/bad/segment.seg");
        syncer.shared.lock().pending = Some((path, bad));
        syncer.shared.wake.notify_one();
        let deadline = Instant::now() + Duration::from_secs(10);
        while syncer.synced() == 0 {
            assert!(Instant::now() < deadline, "the sync never ran");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_failed_sync_is_reported_by_the_next_request_naming_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let j = journal(dir.path());
        let mut syncer = Syncer::start(Box::new(|_, _| {})).unwrap();
        fail_a_sync(&syncer);
        let e = syncer.request(&j).expect_err("the failure is reported");
        assert!(e.to_string().contains("/bad/segment.seg"), "{e}");
        syncer.finish().unwrap();
    }

    #[test]
    fn tickets_are_done_once_a_sync_begun_after_them_completed_and_each_completion_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = journal(dir.path());
        let (tx, rx) = std::sync::mpsc::channel();
        let syncer = Syncer::with_on_done(
            Box::new(|_, _| {}),
            Box::new(move || {
                let _ = tx.send(());
            }),
        );
        let mut syncer = syncer.unwrap();
        assert_eq!(syncer.done().unwrap(), 0, "nothing asked, nothing done");
        for seq in 1..=50u64 {
            j.append(seq, &seq.to_le_bytes()).unwrap();
            j.flush().unwrap();
            assert_eq!(
                syncer.request(&j).unwrap(),
                seq,
                "tickets count the requests"
            );
            assert!(syncer.done().unwrap() <= seq);
        }
        // each completion is told; requests made while a sync ran are covered by the next one
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut told = 0;
        while syncer.done().unwrap() < 50 {
            let left = deadline.saturating_duration_since(Instant::now());
            rx.recv_timeout(left).expect("on_done after each sync");
            told += 1;
        }
        assert!(told >= 1 && told as u64 <= syncer.synced(), "{told}");
        assert!(syncer.synced() <= 50, "coalesced: {}", syncer.synced());
        syncer.finish().unwrap();
    }

    #[test]
    fn a_failed_sync_is_reported_by_done_and_told() {
        let (tx, rx) = std::sync::mpsc::channel();
        let on_done = Box::new(move || {
            let _ = tx.send(());
        });
        let syncer = Syncer::with_on_done(Box::new(|_, _| {}), on_done).unwrap();
        fail_a_sync(&syncer);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a failed sync is told too");
        let e = syncer.done().expect_err("the failure is reported");
        assert!(e.to_string().contains("/bad/segment.seg"), "{e}");
        assert_eq!(syncer.shared.done.load(Ordering::Acquire), 0);
        syncer.finish().unwrap();
    }
}

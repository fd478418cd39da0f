//! A single-producer / multi-consumer broadcast ring: one writer appends records, any number
//! of readers follow at their own pace, and nobody waits for anybody.
//!
//! The ring lives in a file under `/dev/shm` (shared between processes, see [`Ring::create`]
//! and [`Ring::open`]) or in process memory ([`Ring::in_memory`]). Layout, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `SEQBUSRG` |
//! | 8 | 4 | layout version (1) |
//! | 16 | 8 | capacity of the data area, bytes (a power of two) |
//! | 64 | 8 | `tail_intent`: where the record being written ends |
//! | 128 | 8 | `tail`: where the last complete record ends |
//! | 192 | 4 | `notify`: futex word, bumped after each record |
//! | 196 | 4 | `waiters`: readers blocked on `notify` |
//! | 4096 | capacity | records |
//!
//! A record is `length u32 (header included, unpadded) | type u32 (1 data, 2 padding)`, then
//! the data, padded to 8 bytes. A record never wraps: the space left before the end is filled
//! with a padding record. Positions (`tail`, a reader's cursor) only grow; position `p` is
//! byte `p % capacity` of the data area.
//!
//! The writer stores `tail_intent`, writes the record, then stores `tail`. A reader copies a
//! record out, then checks that `tail_intent` has not moved more than `capacity` past the
//! record's start: if it has, the writer may have overwritten what was copied, the copy is
//! thrown away and the reader is told it was lapped ([`Read::Lapped`]), never handed torn
//! bytes. The writer is never slowed by a reader.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

const MAGIC: u64 = u64::from_le_bytes(*b"SEQBUSRG");
const VERSION: u32 = 1;
/// Bytes before the data area.
pub const HEADER_LEN: usize = 4096;
const OFF_CAPACITY: usize = 16;
const OFF_TAIL_INTENT: usize = 64;
const OFF_TAIL: usize = 128;
const OFF_NOTIFY: usize = 192;
const OFF_WAITERS: usize = 196;
const REC_HEADER: usize = 8;
const TYPE_DATA: u32 = 1;
const TYPE_PADDING: u32 = 2;

fn align8(n: usize) -> usize {
    (n + 7) & !7
}

enum Backing {
    Mapped { ptr: *mut u8, len: usize },
    Heap(#[allow(dead_code)] Box<[u64]>),
}

/// A mapped or allocated ring. Cloneable views share it through [`std::sync::Arc`].
pub struct Ring {
    backing: Backing,
    base: *mut u8,
    capacity: usize,
    path: Option<PathBuf>,
}

// The ring is shared memory accessed through atomics and validated copies.
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        if let Backing::Mapped { ptr, len } = self.backing {
            unsafe { libc::munmap(ptr.cast(), len) };
        }
    }
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.capacity)
            .field("path", &self.path)
            .field("tail", &self.tail())
            .finish()
    }
}

impl Ring {
    fn check_capacity(capacity: usize) -> io::Result<()> {
        if !capacity.is_power_of_two() || !(1 << 12..=1 << 40).contains(&capacity) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring capacity {capacity} must be a power of two between 4096 and 2^40"),
            ));
        }
        Ok(())
    }

    fn init(&mut self) {
        unsafe {
            (self.base as *mut u64).write_volatile(MAGIC);
            (self.base.add(8) as *mut u32).write_volatile(VERSION);
            (self.base.add(OFF_CAPACITY) as *mut u64).write_volatile(self.capacity as u64);
        }
    }

    /// A ring in process memory (the in-process transport).
    pub fn in_memory(capacity: usize) -> io::Result<Ring> {
        Self::check_capacity(capacity)?;
        let words = (HEADER_LEN + capacity) / 8;
        let mut heap = vec![0u64; words].into_boxed_slice();
        let base = heap.as_mut_ptr().cast::<u8>();
        let mut r = Ring {
            backing: Backing::Heap(heap),
            base,
            capacity,
            path: None,
        };
        r.init();
        Ok(r)
    }

    fn map(path: &Path, len: usize, create: bool) -> io::Result<*mut u8> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        if create {
            file.set_len(len as u64)?;
        } else if (file.metadata()?.len() as usize) < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: shorter than its header says", path.display()),
            ));
        }
        use std::os::fd::AsRawFd;
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(ptr.cast())
    }

    /// Creates (or replaces) the ring file at `path` with `capacity` data bytes. Only the
    /// writer creates; readers [`Ring::open`].
    pub fn create(path: &Path, capacity: usize) -> io::Result<Ring> {
        Self::check_capacity(capacity)?;
        let len = HEADER_LEN + capacity;
        // A new file, renamed into place, so readers never map a half-initialised ring.
        let tmp = path.with_extension("creating");
        let base = Self::map(&tmp, len, true)?;
        let mut r = Ring {
            backing: Backing::Mapped { ptr: base, len },
            base,
            capacity,
            path: Some(path.to_path_buf()),
        };
        r.init();
        std::fs::rename(&tmp, path)?;
        Ok(r)
    }

    /// Opens an existing ring file.
    pub fn open(path: &Path) -> io::Result<Ring> {
        let base = Self::map(path, HEADER_LEN, false)?;
        let (magic, version, capacity) = unsafe {
            (
                (base as *const u64).read_volatile(),
                (base.add(8) as *const u32).read_volatile(),
                (base.add(OFF_CAPACITY) as *const u64).read_volatile() as usize,
            )
        };
        unsafe { libc::munmap(base.cast(), HEADER_LEN) };
        if magic != MAGIC || version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a seqbus ring (version {VERSION})", path.display()),
            ));
        }
        Self::check_capacity(capacity)?;
        let len = HEADER_LEN + capacity;
        let base = Self::map(path, len, false)?;
        Ok(Ring {
            backing: Backing::Mapped { ptr: base, len },
            base,
            capacity,
            path: Some(path.to_path_buf()),
        })
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Largest record payload: an eighth of the capacity.
    pub fn max_payload(&self) -> usize {
        self.capacity / 8 - REC_HEADER
    }

    fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }
    fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// End of the last complete record.
    pub fn tail(&self) -> u64 {
        self.atomic_u64(OFF_TAIL).load(Ordering::Acquire)
    }

    fn data(&self, pos: u64) -> *mut u8 {
        unsafe {
            self.base
                .add(HEADER_LEN + (pos as usize & (self.capacity - 1)))
        }
    }
}

/// The single writer of a ring. Only one may exist per ring (the dispatcher, or the
/// in-process publisher).
pub struct Writer {
    ring: std::sync::Arc<Ring>,
    tail: u64,
}

impl Writer {
    /// The writer of `ring`, continuing after its current tail.
    pub fn new(ring: std::sync::Arc<Ring>) -> Writer {
        let tail = ring.tail();
        Writer { ring, tail }
    }

    pub fn ring(&self) -> &std::sync::Arc<Ring> {
        &self.ring
    }

    /// Appends one record. Fails only if `data` is longer than [`Ring::max_payload`].
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.write_parts(&[data])
    }

    /// Appends one record made of `parts` back to back.
    pub fn write_parts(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.ring.max_payload() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record of {len} bytes is larger than the ring's limit of {}",
                    self.ring.max_payload()
                ),
            ));
        }
        let r = &*self.ring;
        let rec = REC_HEADER + len;
        let aligned = align8(rec);
        let idx = self.tail as usize & (r.capacity - 1);
        let to_end = r.capacity - idx;
        let pad = if aligned > to_end { to_end } else { 0 };
        let new_tail = self.tail + (pad + aligned) as u64;
        r.atomic_u64(OFF_TAIL_INTENT)
            .store(new_tail, Ordering::Relaxed);
        // Orders the intent before the record's bytes (a store-store barrier in effect).
        fence(Ordering::Release);
        let mut at = self.tail;
        unsafe {
            if pad > 0 {
                let h = r.data(at);
                (h as *mut u32).write_volatile(pad as u32);
                (h.add(4) as *mut u32).write_volatile(TYPE_PADDING);
                at += pad as u64;
            }
            let h = r.data(at);
            (h as *mut u32).write_volatile(rec as u32);
            (h.add(4) as *mut u32).write_volatile(TYPE_DATA);
            let mut d = h.add(REC_HEADER);
            for p in parts {
                std::ptr::copy_nonoverlapping(p.as_ptr(), d, p.len());
                d = d.add(p.len());
            }
        }
        r.atomic_u64(OFF_TAIL).store(new_tail, Ordering::Release);
        self.tail = new_tail;
        // Only blocked readers cost a system call. A reader that registers just as this
        // record lands can miss the wake; its wait is bounded by its timeout.
        if r.atomic_u32(OFF_WAITERS).load(Ordering::Relaxed) > 0 {
            r.atomic_u32(OFF_NOTIFY).fetch_add(1, Ordering::Release);
            futex_wake(r.atomic_u32(OFF_NOTIFY));
        }
        Ok(())
    }
}

/// What a reader found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// A record of this many bytes was copied into the caller's buffer.
    Record(usize),
    /// Nothing new.
    Empty,
    /// The writer overwrote records this reader had not read; it now continues at the
    /// writer's tail. What was lost must be fetched elsewhere (a replayer).
    Lapped { skipped_bytes: u64 },
}

/// One reader of a ring, with its own position.
pub struct Reader {
    ring: std::sync::Arc<Ring>,
    cursor: u64,
    /// Times this reader was lapped.
    pub laps: u64,
}

impl Reader {
    /// A reader starting at the ring's current tail (only records written from now on).
    pub fn new(ring: std::sync::Arc<Ring>) -> Reader {
        let cursor = ring.tail();
        Reader {
            ring,
            cursor,
            laps: 0,
        }
    }

    /// A reader starting at the ring's first record (a ring just created by a restarted
    /// writer: everything in it is new to this reader).
    pub fn from_start(ring: std::sync::Arc<Ring>) -> Reader {
        Reader {
            ring,
            cursor: 0,
            laps: 0,
        }
    }

    pub fn ring(&self) -> &std::sync::Arc<Ring> {
        &self.ring
    }

    fn lapped(&mut self, tail: u64) -> Read {
        let skipped = tail - self.cursor;
        self.cursor = tail;
        self.laps += 1;
        Read::Lapped {
            skipped_bytes: skipped,
        }
    }

    /// Copies the next record into `buf` (replacing its contents).
    pub fn read(&mut self, buf: &mut Vec<u8>) -> Read {
        let r = &*self.ring;
        loop {
            let tail = r.tail();
            if tail == self.cursor {
                return Read::Empty;
            }
            if tail - self.cursor > r.capacity as u64 {
                return self.lapped(tail);
            }
            let h = r.data(self.cursor);
            let (len, kind) = unsafe {
                (
                    (h as *const u32).read_volatile() as usize,
                    (h.add(4) as *const u32).read_volatile(),
                )
            };
            let sane = len >= REC_HEADER
                && (self.cursor as usize & (r.capacity - 1)) + align8(len) <= r.capacity
                && (kind == TYPE_DATA || kind == TYPE_PADDING);
            if sane && kind == TYPE_DATA {
                buf.clear();
                buf.reserve(len - REC_HEADER);
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        h.add(REC_HEADER),
                        buf.as_mut_ptr(),
                        len - REC_HEADER,
                    );
                    buf.set_len(len - REC_HEADER);
                }
            }
            fence(Ordering::Acquire);
            let intent = r.atomic_u64(OFF_TAIL_INTENT).load(Ordering::Relaxed);
            if intent - self.cursor > r.capacity as u64 || !sane {
                buf.clear();
                let tail = r.tail();
                return self.lapped(tail);
            }
            self.cursor += align8(len) as u64;
            if kind == TYPE_DATA {
                return Read::Record(len - REC_HEADER);
            }
        }
    }

    /// Copies every complete record available (up to about `max_bytes`) in one go, checks
    /// once that the writer has not overwritten them, then hands each to `f`. Returns the
    /// number of records, or `Err(skipped_bytes)` when this reader was lapped (it then
    /// continues at the tail, as [`Reader::read`] does).
    pub fn read_batch(
        &mut self,
        buf: &mut Vec<u8>,
        max_bytes: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, u64> {
        // A stretch holding only the padding before the wrap is followed by the next one.
        for _ in 0..2 {
            let before = self.cursor;
            let n = self.read_stretch(buf, max_bytes, f)?;
            if n > 0 || self.cursor == before {
                return Ok(n);
            }
        }
        Ok(0)
    }

    fn read_stretch(
        &mut self,
        buf: &mut Vec<u8>,
        max_bytes: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, u64> {
        let r = &*self.ring;
        let cap = r.capacity as u64;
        let tail = r.tail();
        if tail == self.cursor {
            return Ok(0);
        }
        if tail - self.cursor > cap {
            let Read::Lapped { skipped_bytes } = self.lapped(tail) else {
                unreachable!()
            };
            return Err(skipped_bytes);
        }
        // One contiguous stretch: up to the tail, the end of the data area, or max_bytes.
        let idx = self.cursor as usize & (r.capacity - 1);
        let avail = ((tail - self.cursor) as usize).min(r.capacity - idx);
        // At least the first record, however large.
        let first = unsafe { (r.data(self.cursor) as *const u32).read_volatile() } as usize;
        let want = avail.min(max_bytes.max(align8(first.max(REC_HEADER))));
        buf.clear();
        buf.reserve(want);
        unsafe {
            std::ptr::copy_nonoverlapping(r.data(self.cursor), buf.as_mut_ptr(), want);
            buf.set_len(want);
        }
        fence(Ordering::Acquire);
        let intent = r.atomic_u64(OFF_TAIL_INTENT).load(Ordering::Relaxed);
        if intent - self.cursor > cap {
            buf.clear();
            let t = r.tail();
            let Read::Lapped { skipped_bytes } = self.lapped(t) else {
                unreachable!()
            };
            return Err(skipped_bytes);
        }
        // Whole records only; a record cut by max_bytes is read next time.
        let mut at = 0;
        let mut n = 0;
        while at + REC_HEADER <= want {
            let len = u32::from_le_bytes(buf[at..at + 4].try_into().expect("4")) as usize;
            let kind = u32::from_le_bytes(buf[at + 4..at + 8].try_into().expect("4"));
            if len < REC_HEADER || !(kind == TYPE_DATA || kind == TYPE_PADDING) {
                // Complete records are never malformed: the ring is not ours to read.
                let t = r.tail();
                let Read::Lapped { skipped_bytes } = self.lapped(t) else {
                    unreachable!()
                };
                return Err(skipped_bytes);
            }
            let step = if kind == TYPE_PADDING {
                len
            } else {
                align8(len)
            };
            if at + step > want {
                break;
            }
            if kind == TYPE_DATA {
                f(&buf[at + REC_HEADER..at + len]);
                n += 1;
            }
            at += step;
        }
        self.cursor += at as u64;
        Ok(n)
    }

    /// Waits until the writer appends something or `timeout` passes (a futex on the ring's
    /// notify word, shared between processes).
    pub fn wait(&self, timeout: Duration) {
        let r = &*self.ring;
        let notify = r.atomic_u32(OFF_NOTIFY);
        let seen = notify.load(Ordering::Acquire);
        if r.tail() != self.cursor {
            return;
        }
        let waiters = r.atomic_u32(OFF_WAITERS);
        waiters.fetch_add(1, Ordering::SeqCst);
        if r.tail() == self.cursor {
            futex_wait(notify, seen, timeout);
        }
        waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn records_in_order_across_the_wrap() {
        let ring = Arc::new(Ring::in_memory(4096).unwrap());
        let mut w = Writer::new(ring.clone());
        let mut r = Reader::new(ring.clone());
        let mut buf = Vec::new();
        for i in 0..10_000u32 {
            let len = (i % 97) as usize;
            let data: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
            w.write(&data).unwrap();
            assert_eq!(r.read(&mut buf), Read::Record(len));
            assert_eq!(buf, data);
            assert_eq!(r.read(&mut buf), Read::Empty);
        }
    }

    #[test]
    fn batches_in_order_across_the_wrap_with_records_larger_than_the_batch() {
        let ring = Arc::new(Ring::in_memory(1 << 14).unwrap());
        let mut w = Writer::new(ring.clone());
        let mut r = Reader::new(ring.clone());
        let mut buf = Vec::new();
        let mut want = std::collections::VecDeque::new();
        let mut got = 0u32;
        for i in 0..20_000u32 {
            let len = 4 + (i as usize * 7919) % 1500;
            let mut data = vec![(i % 251) as u8; len];
            data[..4].copy_from_slice(&i.to_le_bytes());
            w.write(&data).unwrap();
            want.push_back(data);
            if i % 5 == 4 {
                while !want.is_empty() {
                    let n = r
                        .read_batch(&mut buf, 512, &mut |rec| {
                            assert_eq!(rec, &want.pop_front().unwrap()[..]);
                            got += 1;
                        })
                        .unwrap();
                    assert!(n > 0);
                }
            }
        }
        assert_eq!(got, 20_000);
        assert_eq!(r.read_batch(&mut buf, 512, &mut |_| panic!()), Ok(0));
        for _ in 0..100 {
            w.write(&[1; 1000]).unwrap();
        }
        assert!(r
            .read_batch(&mut buf, 1 << 20, &mut |_| panic!("lapped"))
            .is_err());
        w.write(b"x").unwrap();
        assert_eq!(
            r.read_batch(&mut buf, 1 << 20, &mut |rec| assert_eq!(rec, b"x")),
            Ok(1)
        );
    }

    #[test]
    fn a_lapped_reader_is_told_and_resumes_at_the_tail() {
        let ring = Arc::new(Ring::in_memory(4096).unwrap());
        let mut w = Writer::new(ring.clone());
        let mut r = Reader::new(ring.clone());
        let mut buf = Vec::new();
        for i in 0..200u32 {
            w.write(&[i as u8; 40]).unwrap();
        }
        assert!(matches!(r.read(&mut buf), Read::Lapped { .. }));
        assert_eq!(r.laps, 1);
        w.write(b"after").unwrap();
        assert_eq!(r.read(&mut buf), Read::Record(5));
        assert_eq!(buf, b"after");
        assert!(
            w.write(&vec![0; 600]).is_err(),
            "larger than an eighth of the ring"
        );
    }

    #[test]
    fn shared_file_between_two_mappings_and_a_racing_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ring");
        let ring = Arc::new(Ring::create(&path, 1 << 16).unwrap());
        let other = Arc::new(Ring::open(&path).unwrap());
        assert!(Ring::open(&dir.path().join("missing")).is_err());
        std::fs::write(dir.path().join("junk"), vec![0u8; 8192]).unwrap();
        assert!(Ring::open(&dir.path().join("junk")).is_err());
        let mut r = Reader::new(other);
        let writer = std::thread::spawn(move || {
            let mut w = Writer::new(ring);
            for i in 0..200_000u64 {
                let mut rec = i.to_le_bytes().to_vec();
                rec.resize(8 + (i % 64) as usize, (i % 251) as u8);
                w.write(&rec).unwrap();
            }
        });
        // The reader checks every record it is handed is whole; it may be lapped.
        let mut buf = Vec::new();
        let mut last: Option<u64> = None;
        let (mut seen, mut laps) = (0u64, 0u64);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            assert!(std::time::Instant::now() < deadline);
            match r.read(&mut buf) {
                Read::Record(n) => {
                    let i = u64::from_le_bytes(buf[..8].try_into().unwrap());
                    assert_eq!(n, 8 + (i % 64) as usize);
                    assert!(
                        buf[8..].iter().all(|&b| b == (i % 251) as u8),
                        "torn record {i}"
                    );
                    if let Some(l) = last {
                        assert!(i > l, "records in order");
                    }
                    last = Some(i);
                    seen += 1;
                    if i == 199_999 {
                        break;
                    }
                }
                Read::Lapped { .. } => laps += 1,
                Read::Empty => {
                    if writer.is_finished() && r.ring().tail() == r.cursor {
                        break;
                    }
                    r.wait(Duration::from_millis(1));
                }
            }
        }
        writer.join().unwrap();
        assert!(seen > 0);
        assert_eq!(laps, r.laps);
    }
}

//! A member's journal on a simulated disk that fails on a seeded schedule
//! ([`StorageFaults`]): slow and stalled fsyncs, failed writes, torn writes at a crash, lost
//! writes and reads that return damaged bytes. With no faults it is a log in memory: every
//! append is durable once flushed.
//!
//! The model follows the journal (`seqbus-journal`, docs/journal.md), record by record:
//!
//! * [`Log::append`] buffers a record; [`Log::flush`] writes and syncs what was buffered. A
//!   record is **durable** once its flush has completed. A slow or stalled fsync completes
//!   later in simulated time: the flush call returns (the member's calls are synchronous), but
//!   the bus keeps the member's process busy until the fsync ends (it runs nothing and its
//!   datagrams wait, as a process blocked in `fdatasync`), and the records become durable
//!   only then ([`SimLog::take_stall`], [`SimLog::settle`]).
//! * A failed write makes `append`, `flush` or `save_vote` return a [`StoreError`]; the
//!   process stops on it (the sequencer's `Error::Persist`: fail-stop) and is restarted from
//!   its durable state.
//! * At a crash ([`SimLog::crash`]) every record not yet durable is lost, except that a flush
//!   in progress may have written some of its records whole and the next one in part: the
//!   journal's recovery at open takes the part-written record for a torn tail (nothing valid
//!   after it) and cuts it ([`SimLog::open`]).
//! * A lost write ([`SimLog::lose`], on a test's seeded schedule) is a record the disk
//!   acknowledged but never stored: reading it back gives other bytes, and its checksum (each record carries a CRC-32C in the real journal; here a
//!   64-bit FNV-1a) does not match. A read that meets it fails, naming the record; at open, a
//!   bad record with a valid record after it is damage (the member refuses to start; a
//!   person repairs the journal from a peer, `seqbus journal repair`), while a bad record with
//!   nothing valid after it cannot be told from a torn write and is cut.
//! * A damaged read is a read whose bytes come back wrong once (a bad transfer, not a bad
//!   medium): the checksum fails and the read returns an error; the bytes on disk are fine.
//!
//! The members' journals are what the invariant checkers ([`crate::checkers`]) read: the
//! records written ([`SimLog::records`]), how many are durable ([`SimLog::durable`]) and which
//! of those the disk has lost ([`SimLog::lost`]).

use std::collections::BTreeMap;

use seqbus_core::cluster::Log;
use seqbus_core::{Rng, Store, StoreError};

/// How often and how badly a member's disk fails. Percentages are per operation (per flush,
/// per append, per read call); durations are simulated nanoseconds, drawn uniformly from the
/// range.
#[derive(Debug, Clone, Copy, Default)]
pub struct StorageFaults {
    /// A flush whose fsync is slow (the process blocked for `slow_fsync_ns`).
    pub slow_fsync_pct: f64,
    pub slow_fsync_ns: (u64, u64),
    /// A flush whose fsync stalls (the process blocked for `stall_ns`: longer than an
    /// election timeout, as a disk that hangs).
    pub stall_pct: f64,
    pub stall_ns: (u64, u64),
    /// An append or flush that fails (an I/O error, a full disk).
    pub write_fail_pct: f64,
    /// A vote that cannot be saved.
    pub vote_fail_pct: f64,
    /// A crash during a flush that had not completed: some of its records are written whole,
    /// the next one in part (torn).
    pub torn_pct: f64,
    /// A read call that returns damaged bytes once.
    pub damaged_read_pct: f64,
}

impl StorageFaults {
    pub fn none() -> StorageFaults {
        StorageFaults::default()
    }

    pub fn any(&self) -> bool {
        self.slow_fsync_pct > 0.0
            || self.stall_pct > 0.0
            || self.write_fail_pct > 0.0
            || self.vote_fail_pct > 0.0
            || self.torn_pct > 0.0
            || self.damaged_read_pct > 0.0
    }
}

/// What the faults of a log did, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    pub slow_fsyncs: u64,
    pub stalls: u64,
    pub failed_writes: u64,
    pub failed_votes: u64,
    /// Crashes that left a torn record, cut at the next open.
    pub torn: u64,
    /// Records that survived a crash whole without their flush having completed.
    pub survived_unsynced: u64,
    pub lost_writes: u64,
    pub damaged_reads: u64,
    /// Records repaired from a peer's journal.
    pub repaired: u64,
    /// Records cut at open: torn, or lost at the tail (a lost write the journal cannot tell
    /// from a torn one).
    pub cut_at_open: u64,
}

/// 64-bit FNV-1a: the simulated record checksum.
fn checksum(msg: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in msg {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One member's journal on a simulated disk.
#[derive(Debug, Clone)]
pub struct SimLog {
    /// Records written (appended), sequence `i + 1` at `i`: the member's log.
    records: Vec<Vec<u8>>,
    /// Records `1..=durable` are on the disk for good.
    durable: usize,
    /// Records `1..=flushed` were flushed; those past `durable` wait for their fsync.
    flushed: usize,
    /// Records the disk lost (a lost write): what it returns instead, by sequence.
    lost: BTreeMap<u64, Vec<u8>>,
    /// Its keys.
    lost_seqs: Vec<u64>,
    /// The term and vote, saved atomically.
    pub term: u64,
    pub voted_for: u16,
    /// Every suffix moved aside: (first sequence, messages).
    pub discarded: Vec<(u64, Vec<Vec<u8>>)>,
    faults: StorageFaults,
    rng: Rng,
    /// Simulated time the fsyncs of the calls since [`SimLog::take_stall`] blocked for.
    stall_ns: u64,
    /// An injected failure happened (the member's error is the disk's, not the protocol's).
    failed: Option<String>,
    /// A torn record left by the last crash, cut at the next open.
    torn: Option<Vec<u8>>,
    /// Reads check each record's checksum (false only to show what the checkers catch
    /// without it).
    verify: bool,
    /// Syncs run off the member's loop: a flush never makes records durable by itself; the
    /// bus does when the sync completes ([`SimLog::settle_to`]).
    off_loop: bool,
    stats: StorageStats,
}

impl SimLog {
    pub fn new(faults: StorageFaults, seed: u64) -> SimLog {
        SimLog {
            records: Vec::new(),
            durable: 0,
            flushed: 0,
            lost: BTreeMap::new(),
            lost_seqs: Vec::new(),
            term: 0,
            voted_for: 0,
            discarded: Vec::new(),
            faults,
            rng: Rng(seed),
            stall_ns: 0,
            failed: None,
            torn: None,
            verify: true,
            off_loop: false,
            stats: StorageStats::default(),
        }
    }

    /// A journal that already holds `stream` (messages 1..=n), durable.
    pub fn with_stream(faults: StorageFaults, seed: u64, stream: &[Vec<u8>]) -> SimLog {
        let mut l = SimLog::new(faults, seed);
        l.records = stream.to_vec();
        l.durable = l.records.len();
        l.flushed = l.records.len();
        l
    }

    /// The records written, sequence `i + 1` at index `i` (what the member wrote, whatever
    /// the disk did with it).
    pub fn records(&self) -> &[Vec<u8>] {
        &self.records
    }

    /// How many records (from the first) are durable.
    pub fn durable(&self) -> usize {
        self.durable
    }

    /// Sequences of durable records the disk lost (reads of them fail their checksum), in
    /// order.
    pub fn lost(&self) -> &[u64] {
        &self.lost_seqs
    }

    fn relist(&mut self) {
        self.lost_seqs = self.lost.keys().copied().collect();
    }

    pub fn stats(&self) -> StorageStats {
        self.stats
    }

    pub fn faults(&self) -> StorageFaults {
        self.faults
    }

    pub fn set_faults(&mut self, faults: StorageFaults) {
        self.faults = faults;
    }

    /// Reads stop checking checksums: damaged bytes are handed on as read. Only for showing
    /// that the checkers catch what the checksums prevent.
    pub fn skip_checksums(&mut self) {
        self.verify = false;
    }

    /// The injected failure behind the member's last error, taken (None: the error was not
    /// the disk's).
    pub fn take_failure(&mut self) -> Option<String> {
        self.failed.take()
    }

    /// Simulated time the fsyncs since the last call blocked the process for.
    pub fn take_stall(&mut self) -> u64 {
        std::mem::take(&mut self.stall_ns)
    }

    /// The fsyncs in progress complete: what was flushed is durable.
    pub fn settle(&mut self) {
        self.durable = self.flushed;
    }

    /// Syncs run off the member's loop ([`crate::SimParams::sync_off_loop`]).
    pub fn set_sync_off_loop(&mut self, on: bool) {
        self.off_loop = on;
    }

    /// How many records (from the first) were flushed: durable once their sync completes.
    pub fn flushed(&self) -> usize {
        self.flushed
    }

    /// A sync off the loop completed: the first `records` are durable (as far as they are
    /// still flushed: a discard since may have removed some).
    pub fn settle_to(&mut self, records: usize) {
        self.durable = self.durable.max(records.min(self.flushed));
    }

    /// Loses the durable record `seq` (a lost write: the disk returns other bytes).
    pub fn lose(&mut self, seq: u64) {
        let i = (seq - 1) as usize;
        assert!(i < self.durable, "only a durable record can be lost");
        let mut stale = self.records[i].clone();
        // what the disk held there before: other bytes, same length
        for b in stale.iter_mut() {
            *b = !*b;
        }
        self.lost.insert(seq, stale);
        self.relist();
        self.stats.lost_writes += 1;
    }

    /// The machine (or the process) stops: what is not durable is lost, but a flush in
    /// progress may have written some of its records whole and the next in part.
    pub fn crash(&mut self) {
        let mut keep = self.durable;
        if self.flushed > self.durable && self.rng.chance(self.faults.torn_pct) {
            let whole = self.rng.range(0, (self.flushed - self.durable) as u64) as usize;
            keep += whole;
            self.stats.survived_unsynced += whole as u64;
            if keep < self.records.len() {
                let r = &self.records[keep];
                let part = self.rng.range(0, r.len().saturating_sub(1) as u64) as usize;
                self.torn = Some(r[..part].to_vec());
                self.stats.torn += 1;
            }
        }
        self.records.truncate(keep);
        self.lost.retain(|&s, _| s as usize <= keep);
        self.relist();
        self.durable = keep;
        self.flushed = keep;
        self.stall_ns = 0;
        self.failed = None;
    }

    /// Opens the journal after a crash, as the real one does: a torn record at the tail is
    /// cut; lost records at the tail (nothing valid after them) cannot be told from a torn
    /// write and are cut as well. Returns the records cut. Lost records with a valid one after
    /// them stay: they are damage, which a read reports.
    pub fn open(&mut self) -> u64 {
        let mut cut = 0;
        if self.torn.take().is_some() {
            cut += 1;
        }
        while let Some((&s, _)) = self.lost.last_key_value() {
            if s as usize != self.records.len() {
                break;
            }
            self.lost.remove(&s);
            self.records.pop();
            cut += 1;
        }
        self.relist();
        self.durable = self.durable.min(self.records.len());
        self.flushed = self.flushed.min(self.records.len());
        self.stats.cut_at_open += cut;
        cut
    }

    /// Repairs every lost record from `peer`'s journal, as `seqbus journal repair` does: only
    /// if every intact record of this journal equals the peer's at the same sequence (the
    /// peer is a copy of this journal), and the peer holds every lost one intact. Returns
    /// whether it repaired.
    pub fn repair_from(&mut self, peer: &SimLog) -> bool {
        if self.lost.is_empty() {
            return true;
        }
        for (i, r) in self.records.iter().enumerate() {
            let s = i as u64 + 1;
            if self.lost.contains_key(&s) {
                if i >= peer.durable || peer.lost.contains_key(&s) {
                    return false;
                }
            } else if peer.records.get(i) != Some(r) {
                return false;
            }
        }
        let lost: Vec<u64> = self.lost.keys().copied().collect();
        for s in lost {
            let i = (s - 1) as usize;
            self.records[i] = peer.records[i].clone();
            self.lost.remove(&s);
            self.stats.repaired += 1;
        }
        self.relist();
        true
    }

    fn fail(&mut self, what: &str) -> StoreError {
        let e = format!("simulated disk: {what} failed (an injected I/O error)");
        self.failed = Some(e.clone());
        StoreError(e)
    }
}

impl Store for SimLog {
    fn next_seq(&mut self) -> u64 {
        self.records.len() as u64 + 1
    }

    /// Reads as the journal does: every record's checksum is checked, and one that does not
    /// match fails the read, naming it (the bytes are never handed on).
    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        let damaged_read = self.faults.damaged_read_pct > 0.0
            && from as usize <= self.records.len()
            && self.rng.chance(self.faults.damaged_read_pct);
        let mut n = 0;
        let start = (from.max(1) - 1) as usize;
        let end = self.records.len().min(start.saturating_add(max));
        for i in start..end {
            let s = i as u64 + 1;
            if !damaged_read && self.lost.is_empty() {
                // every record intact: its checksum matches (not computed, for speed)
                if !f(s, &self.records[i]) {
                    break;
                }
                n += 1;
                continue;
            }
            let stored = checksum(&self.records[i]);
            let bytes: &[u8] = match self.lost.get(&s) {
                Some(stale) => stale,
                None => &self.records[i],
            };
            let mut handed: Option<Vec<u8>> = None;
            if damaged_read && i == start {
                // the transfer flipped a bit of the first record read
                let mut copy = bytes.to_vec();
                if let Some(b) = copy.first_mut() {
                    *b ^= 0x10;
                }
                handed = Some(copy);
            }
            let bytes: &[u8] = handed.as_deref().unwrap_or(bytes);
            let got = checksum(bytes);
            if got != stored {
                if self.lost.contains_key(&s) {
                    self.failed = Some(format!("simulated disk: record {s} was lost"));
                } else {
                    self.stats.damaged_reads += 1;
                    self.failed = Some(format!("simulated disk: read of record {s} damaged"));
                }
                if self.verify {
                    return Err(StoreError(format!(
                        "journal record {s}: checksum {stored:#018x} does not match \
                         {got:#018x} (damage)"
                    )));
                }
                self.failed = None;
                if !f(s, bytes) {
                    break;
                }
                n += 1;
                continue;
            }
            if !f(s, &self.records[i]) {
                break;
            }
            n += 1;
        }
        Ok(n)
    }
}

impl Log for SimLog {
    fn append(&mut self, seq: u64, msg: &[u8]) -> Result<(), StoreError> {
        if seq != self.records.len() as u64 + 1 {
            return Err(StoreError(format!(
                "append of {seq} where {} is next",
                self.records.len() + 1
            )));
        }
        if self.faults.write_fail_pct > 0.0 && self.rng.chance(self.faults.write_fail_pct) {
            self.stats.failed_writes += 1;
            return Err(self.fail(&format!("append of record {seq}")));
        }
        self.records.push(msg.to_vec());
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if self.flushed == self.records.len() {
            return Ok(());
        }
        let f = self.faults;
        if f.write_fail_pct > 0.0 && self.rng.chance(f.write_fail_pct) {
            self.stats.failed_writes += 1;
            return Err(self.fail("flush"));
        }
        self.flushed = self.records.len();
        let mut stall = 0;
        if f.slow_fsync_pct > 0.0 && self.rng.chance(f.slow_fsync_pct) {
            stall += self.rng.range(f.slow_fsync_ns.0, f.slow_fsync_ns.1);
            self.stats.slow_fsyncs += 1;
        }
        if f.stall_pct > 0.0 && self.rng.chance(f.stall_pct) {
            stall += self.rng.range(f.stall_ns.0, f.stall_ns.1);
            self.stats.stalls += 1;
        }
        if stall == 0 && self.stall_ns == 0 && !self.off_loop {
            self.durable = self.flushed;
        }
        self.stall_ns += stall;
        Ok(())
    }

    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError> {
        let at = (seq.max(1) - 1) as usize;
        if at >= self.records.len() {
            return Ok(());
        }
        let gone = self.records.split_off(at);
        self.lost.retain(|&s, _| s < seq);
        self.relist();
        self.durable = self.durable.min(at);
        self.flushed = self.flushed.min(at);
        self.discarded.push((seq, gone));
        Ok(())
    }

    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError> {
        if self.faults.vote_fail_pct > 0.0 && self.rng.chance(self.faults.vote_fail_pct) {
            self.stats.failed_votes += 1;
            return Err(self.fail("saving the vote"));
        }
        self.term = term;
        self.voted_for = voted_for;
        Ok(())
    }
}

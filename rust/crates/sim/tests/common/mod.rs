//! The load the storage and replication scenarios share: three senders on a three-member
//! cluster, each node checking that it is handed every sender's commands once and in order.

#![allow(dead_code)] // each test binary uses part of it

use seqbus_core::node::{RECORD_HEADER_LEN, RECORD_MESSAGE};
use seqbus_core::Start;
use seqbus_sim::{Bus, Faults, NodeOptions, Rng, SimParams, StorageFaults, StorageStats};

pub const SENDERS: usize = 3;

pub fn body(sender: usize, i: u64) -> Vec<u8> {
    let mut b = vec![16, 0, 1, 0, 9, 0, 1, 0];
    b.extend_from_slice(&(sender as u64).to_le_bytes());
    b.extend_from_slice(&i.to_le_bytes());
    b
}

/// Three senders on a three-member cluster; each node checks that it is handed every
/// sender's commands once and in order.
pub struct Load {
    pub bus: Bus,
    pub sent: Vec<u64>,
    /// Per node, per sender: the next command expected.
    pub next: Vec<[u64; SENDERS]>,
    out: Vec<u8>,
}

impl Load {
    pub fn new(seed: u64, storage: StorageFaults, loss_pct: f64) -> Load {
        Load::with(seed, storage, loss_pct, |_| {})
    }

    /// As [`Load::new`], with other settings of the bus changed by `edit`.
    pub fn with(
        seed: u64,
        storage: StorageFaults,
        loss_pct: f64,
        edit: impl FnOnce(&mut SimParams),
    ) -> Load {
        let faults = Faults {
            loss_pct,
            dup_pct: loss_pct / 4.0,
            delay: (20_000, 200_000),
        };
        let mut p = SimParams::new(seed, 3, faults);
        p.storage = storage;
        edit(&mut p);
        let mut bus = Bus::new(p);
        for i in 0..SENDERS {
            bus.add_node(&NodeOptions::new(&format!("N{i}"), Start::From(1)));
        }
        Load {
            bus,
            sent: vec![0; SENDERS],
            next: vec![[0; SENDERS]; SENDERS],
            out: Vec::new(),
        }
    }

    pub fn step(&mut self, quota: u64) {
        self.bus.process();
        for i in 0..SENDERS {
            self.out.clear();
            self.bus.deliver(i, &mut self.out, usize::MAX).unwrap();
            let mut at = 0;
            while at < self.out.len() {
                let len = u32::from_le_bytes(self.out[at..at + 4].try_into().unwrap()) as usize;
                let ty = u16::from_le_bytes(self.out[at + 4..at + 6].try_into().unwrap());
                if ty == RECORD_MESSAGE {
                    let b = &self.out[at + RECORD_HEADER_LEN..at + len];
                    let sender = u64::from_le_bytes(b[8..16].try_into().unwrap()) as usize;
                    let k = u64::from_le_bytes(b[16..24].try_into().unwrap());
                    assert_eq!(
                        self.next[i][sender], k,
                        "node {i}: sender {sender}'s command {k} out of order or twice"
                    );
                    self.next[i][sender] += 1;
                }
                at += len;
            }
            while self.sent[i] < quota {
                let n = &mut self.bus.node(i).unwrap().node;
                if n.is_rewinding() || n.send(&body(i, self.sent[i])).is_err() {
                    break;
                }
                self.sent[i] += 1;
            }
            self.bus.transmit(i);
        }
        self.bus.advance(1_000, 1_000_000);
    }

    pub fn handed_all(&self, quota: u64) -> bool {
        self.next.iter().all(|n| n.iter().all(|&k| k == quota))
    }

    /// Runs until every node was handed `quota` commands of every sender, calling `each`
    /// after every step (bounded: 600 s of virtual time).
    pub fn settle_with(&mut self, quota: u64, mut each: impl FnMut(&mut Load)) {
        let limit = self.bus.now() + 600_000_000_000;
        while !self.handed_all(quota) {
            assert!(
                self.bus.now() < limit,
                "no progress: handed {:?}, leader {:?}, failures {:?}",
                self.next,
                self.bus.leader(),
                self.bus.disk_failures.len()
            );
            self.step(quota);
            each(self);
        }
    }

    pub fn stats(&self) -> StorageStats {
        let mut t = StorageStats::default();
        for id in 1..=3 {
            let s = self.bus.log(id).stats();
            t.slow_fsyncs += s.slow_fsyncs;
            t.stalls += s.stalls;
            t.failed_writes += s.failed_writes;
            t.failed_votes += s.failed_votes;
            t.torn += s.torn;
            t.survived_unsynced += s.survived_unsynced;
            t.lost_writes += s.lost_writes;
            t.damaged_reads += s.damaged_reads;
            t.repaired += s.repaired;
            t.cut_at_open += s.cut_at_open;
        }
        t
    }
}

/// Kills a running member now and then (any member, leader or not) and starts it again a
/// while later, on a seeded schedule: the first kill `first_ns` from now, the next 30–90 ms
/// after each, each member down for 10–60 ms; at most `max` kills.
pub struct Kills {
    rng: Rng,
    next_ns: u64,
    down: Option<(u16, u64)>,
    left: usize,
}

impl Kills {
    pub fn new(rng: Rng, l: &Load, first_ns: u64, max: usize) -> Kills {
        Kills {
            rng,
            next_ns: l.bus.now() + first_ns,
            down: None,
            left: max,
        }
    }

    /// After each step of `l`: restarts the member that is down once its time came, or kills
    /// one when the next kill is due.
    pub fn step(&mut self, l: &mut Load) {
        let now = l.bus.now();
        if let Some((id, back)) = self.down {
            if now >= back {
                assert!(l.bus.restart_member(id));
                self.down = None;
            }
        } else if now >= self.next_ns && self.left > 0 {
            let id = 1 + (self.rng.next_u64() % 3) as u16;
            if l.bus.member(id).is_some() {
                l.bus.kill_member(id);
                self.left -= 1;
                self.down = Some((id, now + 10_000_000 + self.rng.next_u64() % 50_000_000));
            }
            self.next_ns = now + 30_000_000 + self.rng.next_u64() % 60_000_000;
        }
    }
}

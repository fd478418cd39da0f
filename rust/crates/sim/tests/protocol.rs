//! The whole protocol of one sequencer over the simulated bus: 3 senders, 5 nodes and a late
//! joiner, with random loss, duplication and reordering on every link (seeded, in-process,
//! virtual clock). Every node must be handed every message exactly once, whole, in the order
//! each sender sent them, and all the same stream.
//!
//! The default run sequences 20 000 messages per scenario; set `SEQBUS_SIM_MESSAGES` (e.g.
//! `SEQBUS_SIM_MESSAGES=1000000 cargo test --release -p seqbus-sim --test protocol`) for more.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;

use seqbus_core::delivery::{Record, RECORD_CAUGHT_UP, RECORD_MESSAGE};
use seqbus_core::{SendError, Start};
use seqbus_sim::{Bus, Faults, NodeOptions, SimParams};

const NODES: usize = 5;
const SENDERS: usize = 3;

fn body(sender: usize, i: u64) -> Vec<u8> {
    // IDL header (schema 9, template 1), then sender and counter; some messages are large
    // enough to be fragmented
    let mut b = vec![16, 0, 1, 0, 9, 0, 1, 0];
    b.extend_from_slice(&(sender as u64).to_le_bytes());
    b.extend_from_slice(&i.to_le_bytes());
    if i.is_multiple_of(997) {
        b.resize(4000 + (i % 3) as usize * 1000, (i % 251) as u8);
    }
    b
}

struct Watch {
    /// Messages this node still has to send.
    quota: u64,
    sent: u64,
    hash: DefaultHasher,
    app_messages: u64,
    last_seq: u64,
    caught_up: bool,
    per_sender: [u64; SENDERS],
}

impl Watch {
    fn new(quota: u64) -> Watch {
        Watch {
            quota,
            sent: 0,
            hash: DefaultHasher::new(),
            app_messages: 0,
            last_seq: 0,
            caught_up: false,
            per_sender: [0; SENDERS],
        }
    }
}

struct Outcome {
    hashes: Vec<u64>,
    counts: Vec<u64>,
    dropped: u64,
    virtual_ms: u64,
}

/// `depth`: replay requests every node keeps outstanding (`Node::set_replay_depth`).
fn run(seed: u64, faults: Faults, total: u64, depth: usize) -> Outcome {
    let mut p = SimParams::new(seed, 1, faults);
    p.following_replayer = false;
    let start = p.start_ns;
    let mut bus = Bus::new(p);
    let node = |bus: &mut Bus, name: String| {
        let mut o = NodeOptions::new(&name, Start::From(1));
        o.replay_depth = depth;
        bus.add_node(&o)
    };
    let mut watches: Vec<Watch> = (0..NODES)
        .map(|i| {
            node(&mut bus, format!("N{i}"));
            let quota = if i < SENDERS {
                total / SENDERS as u64 + u64::from((i as u64) < total % SENDERS as u64)
            } else {
                0
            };
            Watch::new(quota)
        })
        .collect();
    let mut late_started = false;
    let limit = start + 120_000_000_000; // 2 virtual minutes
    let mut out = Vec::new();
    loop {
        bus.process();
        for (i, w) in watches.iter_mut().enumerate() {
            out.clear();
            bus.deliver(i, &mut out, usize::MAX).unwrap();
            let mut at = 0;
            while at < out.len() {
                let r = Record::parse(&out, at).unwrap();
                at += r.len();
                if r.record_type == RECORD_CAUGHT_UP {
                    w.caught_up = true;
                }
                if r.record_type != RECORD_MESSAGE {
                    continue;
                }
                let s = r.sequence;
                assert!(s > w.last_seq, "node {i}: {s} after {}", w.last_seq);
                w.last_seq = s;
                w.hash.write_u64(s);
                w.hash.write(r.envelope);
                w.hash.write(r.body);
                w.app_messages += 1;
                // every sender's messages exactly once, whole, and in the order sent
                assert_eq!(r.envelope[27], 0, "fragments are reassembled below the API");
                let sender = u64::from_le_bytes(r.body[8..16].try_into().unwrap()) as usize;
                let k = u64::from_le_bytes(r.body[16..24].try_into().unwrap());
                assert_eq!(r.body, &body(sender, k)[..]);
                assert_eq!(w.per_sender[sender], k, "node {i}: sender {sender}");
                w.per_sender[sender] += 1;
            }
            let n = &mut bus.node(i).unwrap().node;
            while w.quota > 0 && !n.is_rewinding() {
                match n.send(&body(i, w.sent)) {
                    Ok(_) => {
                        w.quota -= 1;
                        w.sent += 1;
                    }
                    Err(SendError::WindowFull { .. }) => break,
                    Err(e) => panic!("node {i}: {e}"),
                }
            }
            bus.transmit(i);
        }
        // the late joiner starts when half the messages are sequenced
        if !late_started && bus.next_seq() > total / 2 {
            late_started = true;
            node(&mut bus, "LATE".into());
            watches.push(Watch::new(0));
        }
        let done = late_started
            && watches
                .iter()
                .all(|w| w.app_messages == total && w.caught_up && w.quota == 0);
        if done {
            break;
        }
        assert!(
            bus.now() < limit,
            "no convergence: {:?}",
            watches.iter().map(|w| w.app_messages).collect::<Vec<_>>()
        );
        // at most 1 ms of virtual time per step
        bus.advance(1_000, 1_000_000);
    }
    assert_eq!(watches.len(), NODES + 1);
    Outcome {
        hashes: watches.iter().map(|w| w.hash.finish()).collect(),
        counts: watches.iter().map(|w| w.app_messages).collect(),
        dropped: bus.dropped,
        virtual_ms: (bus.now() - start) / 1_000_000,
    }
}

fn total() -> u64 {
    std::env::var("SEQBUS_SIM_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn check(name: &str, seed: u64, faults: Faults, depth: usize) {
    let total = total();
    let o = run(seed, faults, total, depth);
    eprintln!(
        "{name}: {total} messages, {} datagrams dropped, {} virtual ms",
        o.dropped, o.virtual_ms
    );
    assert!(o.counts.iter().all(|&c| c == total), "{:?}", o.counts);
    assert!(
        o.hashes.iter().all(|&h| h == o.hashes[0]),
        "streams differ: {:x?}",
        o.hashes
    );
    if faults.loss_pct > 0.0 {
        assert!(o.dropped > 0);
    }
}

const REORDER: (u64, u64) = (20_000, 400_000);

fn lossy(loss_pct: f64, dup_pct: f64) -> Faults {
    Faults {
        loss_pct,
        dup_pct,
        delay: REORDER,
    }
}

#[test]
fn clean_network() {
    check("clean", 1, Faults::clean(20_000), 1);
}

#[test]
fn loss_1pct_with_dup_and_reorder() {
    check("1%", 2, lossy(1.0, 1.0), 1);
}

#[test]
fn loss_5pct_with_dup_and_reorder() {
    check("5%", 3, lossy(5.0, 2.0), 1);
}

#[test]
fn loss_20pct_with_dup_and_reorder() {
    check("20%", 4, lossy(20.0, 5.0), 1);
}

// Pipelined replay: several requests outstanding at once (the late joiner and every gap fill),
// answers lost, duplicated and reordered; the streams must still be identical and complete.

#[test]
fn pipelined_replay_clean_network() {
    check("clean, replay depth 4", 5, Faults::clean(20_000), 4);
}

#[test]
fn pipelined_replay_loss_5pct_with_dup_and_reorder() {
    check("5%, replay depth 4", 6, lossy(5.0, 2.0), 4);
}

#[test]
fn pipelined_replay_loss_20pct_with_dup_and_reorder() {
    check("20%, replay depth 8", 7, lossy(20.0, 5.0), 8);
}

//! A late joiner's rewind costs about what it delivers (docs/replay.md, "What a rewind
//! costs"): on a bus whose history it asks the replayer for while the live stream goes on,
//! with 5% of its datagrams lost (live packets and replay answers alike) and with a replayer
//! that stalls now and then (descheduled on a busy host), it receives at most 1.1 times the
//! messages of the stream it walks. Lost answers are asked for again as soon as answers after
//! them show the loss, and only the holes; a replayer's silence is timed against the longest
//! one it has come back from, so a stall is waited out rather than answered with a request
//! for everything again.

use seqbus_core::{NodeParams, NodeStats, Rng, Start};
use seqbus_sim::{Bus, Faults, Link, NodeOptions, SimParams};

const DELAY: u64 = 50_000;
/// Messages sequenced before the late joiner starts, and while it rewinds.
const HISTORY: u64 = 40_000;
const DURING: u64 = 15_000;

fn body(i: u64) -> Vec<u8> {
    let mut b = vec![16, 0, 1, 0, 9, 0, 1, 0];
    b.extend_from_slice(&i.to_le_bytes());
    b.extend_from_slice(&[0; 24]);
    b
}

/// What the late joiner received for what it walked, and how long its rewind took.
#[derive(Debug)]
struct Cost {
    stats: NodeStats,
    /// Messages of the stream the joiner walked (delivered, control and filtered alike).
    walked: u64,
    took_ns: u64,
}

impl Cost {
    fn ratio(&self) -> f64 {
        self.stats.received as f64 / self.walked as f64
    }
}

/// A sender fills `HISTORY` messages; a late joiner starts from 1 and rewinds them from the
/// replayer (2,000 messages a request, 4 outstanding, 64 KB answers)
/// while the sender sends `DURING` more, then follows live. `loss_pct` of the joiner's live
/// packets and answers are lost; the replayer's member is paused for each `(at, for)` of
/// `stalls`: once the joiner has walked to sequence `at`, for `for` ns.
fn rewind(seed: u64, loss_pct: f64, stalls: &[(u64, u64)]) -> Cost {
    let mut p = SimParams::new(seed, 1, Faults::clean(DELAY));
    p.following_replayer = false;
    p.replay_packet = 64_000;
    p.heartbeat_ns = 1_000_000;
    p.clock_tick_ns = 0;
    let mut bus = Bus::new(p);
    let sender = bus.add_node(&NodeOptions {
        window: 256,
        ..NodeOptions::new("S", Start::From(1))
    });
    let mut out = Vec::new();
    let mut sent = 0u64;
    let step = |bus: &mut Bus, sent: &mut u64, upto: u64, out: &mut Vec<u8>| {
        bus.advance(10_000, 10_000);
        bus.process();
        for _ in 0..8 {
            if *sent >= upto {
                break;
            }
            match bus
                .node(sender)
                .expect("on the bus")
                .node
                .send(&body(*sent))
            {
                Ok(_) => *sent += 1,
                Err(_) => break,
            }
        }
        for i in 0..bus.node_count() {
            out.clear();
            bus.deliver(i, out, usize::MAX)
                .expect("no gap without a replayer");
            bus.transmit(i);
        }
    };
    let limit = bus.now() + 60_000_000_000;
    while bus.next_seq() <= HISTORY {
        assert!(bus.now() < limit, "the history was not sequenced");
        step(&mut bus, &mut sent, HISTORY, &mut out);
    }
    let params = NodeParams {
        retry_ns: 50_000_000,
        request_timeout_ns: 10_000_000,
        request_backoff_max_ns: 500_000_000,
        failover_after: 4,
        max_request: 2000, // what the simulated replayers answer at most
        reorder_limit: 1 << 20,
        ..bus.node_params(&NodeOptions::new("LATE", Start::From(1)))
    };
    let late = bus.add_node_with(params);
    bus.node(late).expect("joined").node.set_replay_depth(4);
    let mut rng = Rng(seed ^ 0x5eed);
    bus.set_drop(Some(Box::new(move |link, _| match link {
        Link::Live { node } | Link::Answer { node } if node == late => rng.chance(loss_pct),
        _ => false,
    })));
    let start = bus.now();
    let mut paused = None;
    let mut stalls = stalls.to_vec();
    loop {
        let now = bus.now() - start;
        assert!(now < 30_000_000_000, "the late joiner never caught up");
        let walked = bus.node_ref(late).expect("joined").node.next_seq();
        match paused {
            Some(until) if now >= until => {
                bus.resume_member(1, false);
                paused = None;
            }
            None if stalls.first().is_some_and(|&(at, _)| walked >= at) => {
                let (_, d) = stalls.remove(0);
                bus.pause_member(1);
                paused = Some(now + d);
            }
            _ => {}
        }
        let target = HISTORY + DURING;
        step(&mut bus, &mut sent, target, &mut out);
        let n = &bus.node_ref(late).expect("joined").node;
        if sent >= target && !n.is_rewinding() && n.next_seq() >= bus.next_seq() {
            break;
        }
    }
    let n = &bus.node_ref(late).expect("joined").node;
    Cost {
        stats: n.stats(),
        walked: n.next_seq() - 1,
        took_ns: bus.now() - start,
    }
}

#[test]
fn a_rewind_without_loss_receives_each_message_once() {
    let c = rewind(1, 0.0, &[]);
    eprintln!("no loss: {:.3}x {c:?}", c.ratio());
    assert_eq!(c.stats.duplicates, 0, "{c:?}");
    assert!(c.ratio() <= 1.001, "{c:?}");
}

#[test]
fn a_rewind_at_5_percent_loss_receives_at_most_1_1_times_what_it_walks() {
    let base = rewind(1, 0.0, &[]);
    for seed in 1..=8 {
        let c = rewind(seed, 5.0, &[]);
        eprintln!("seed {seed}, 5% loss: {:.3}x {c:?}", c.ratio());
        assert!(c.ratio() <= 1.1, "seed {seed}: {:.3}x {c:?}", c.ratio());
        // and it is not bought with time: the joiner catches up about when it would have
        assert!(
            c.took_ns <= 2 * base.took_ns,
            "seed {seed}: {c:?} against {base:?}"
        );
    }
}

#[test]
fn a_replayer_that_stalls_is_waited_out_not_asked_for_everything_again() {
    // descheduled for 30 ms three times in the rewind (the replayer's answers to the first
    // request took about a millisecond: the learned timeout is a few)
    let stalls = [
        (500, 30_000_000),
        (12_000, 30_000_000),
        (25_000, 30_000_000),
    ];
    for seed in 1..=4 {
        let c = rewind(seed, 0.0, &stalls);
        eprintln!("seed {seed}, stalls: {:.3}x {c:?}", c.ratio());
        assert!(c.ratio() <= 1.1, "seed {seed}: {:.3}x {c:?}", c.ratio());
    }
}

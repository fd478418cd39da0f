//! Replication in batches (docs/ha.md, "Replication"): a follower takes every append that
//! came in one turn of its loop, flushes its log once, and acknowledges them with one reply
//! (the last append's index covers the others'). On a loaded bus the followers therefore send
//! fewer replies than they take appends, and every message still reaches every node once.

use seqbus_core::node::RECORD_MESSAGE;
use seqbus_core::Start;
use seqbus_sim::{Bus, Faults, NodeOptions, SimParams};

const SENDERS: usize = 3;
const QUOTA: u64 = 3_000;

fn body(sender: usize, i: u64) -> Vec<u8> {
    let mut b = vec![16, 0, 1, 0, 9, 0, 1, 0];
    b.extend_from_slice(&(sender as u64).to_le_bytes());
    b.extend_from_slice(&i.to_le_bytes());
    b
}

/// Three members, three senders sending as fast as their windows let them, every datagram
/// delayed by 20–60 µs; returns (appends the followers took, replies they sent).
fn loaded_run(seed: u64) -> (u64, u64) {
    let faults = Faults {
        loss_pct: 0.0,
        dup_pct: 0.0,
        delay: (20_000, 60_000),
    };
    let mut bus = Bus::new(SimParams::new(seed, 3, faults));
    for i in 0..SENDERS {
        bus.add_node(&NodeOptions::new(&format!("N{i}"), Start::From(1)));
    }
    let (mut sent, mut handed) = ([0u64; SENDERS], [0u64; SENDERS]);
    let mut out = Vec::new();
    let want = QUOTA * SENDERS as u64;
    for _ in 0..2_000_000 {
        if handed.iter().all(|&h| h >= want) {
            break;
        }
        bus.process();
        for i in 0..SENDERS {
            out.clear();
            bus.deliver(i, &mut out, usize::MAX).unwrap();
            let mut at = 0;
            while at < out.len() {
                let len = u32::from_le_bytes(out[at..at + 4].try_into().unwrap()) as usize;
                let ty = u16::from_le_bytes(out[at + 4..at + 6].try_into().unwrap());
                if ty == RECORD_MESSAGE {
                    handed[i] += 1;
                }
                at += len;
            }
            while sent[i] < QUOTA {
                let n = &mut bus.node(i).unwrap().node;
                if n.is_rewinding() || n.send(&body(i, sent[i])).is_err() {
                    break;
                }
                sent[i] += 1;
            }
            bus.transmit(i);
        }
        bus.advance(1_000, 1_000_000);
    }
    assert_eq!(
        handed, [want; SENDERS],
        "every node was handed every message once"
    );
    let leader = bus.leader().expect("a leader");
    let (mut appends, mut acks) = (0, 0);
    for id in (1..=3).filter(|&id| id != leader) {
        let st = bus.member(id).expect("member").stats();
        appends += st.appends_received;
        acks += st.acks_sent;
    }
    (appends, acks)
}

#[test]
fn followers_acknowledge_the_appends_of_a_turn_with_one_reply() {
    let (mut appends, mut acks) = (0, 0);
    for seed in 1..=3 {
        let (a, k) = loaded_run(seed);
        assert!(k > 0 && k <= a, "seed {seed}: {k} replies for {a} appends");
        appends += a;
        acks += k;
    }
    // every append answered alone would be one reply each
    assert!(
        acks * 10 < appends * 9,
        "{acks} replies for {appends} appends: the appends of a turn were not answered together"
    );
    println!("{appends} appends taken, {acks} replies sent");
}

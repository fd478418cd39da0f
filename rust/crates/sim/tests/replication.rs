//! Replication in batches (docs/ha.md, "The protocol"): a follower takes every append that
//! came in one turn of its loop, flushes its log once, and acknowledges them with one reply
//! (the last append's index covers the others'). On a loaded bus the followers therefore send
//! fewer replies than they take appends, and every message still reaches every node once, in
//! each sender's order.

mod common;

use common::Load;
use seqbus_sim::StorageFaults;

const QUOTA: u64 = 3_000;

#[test]
fn followers_acknowledge_the_appends_of_a_turn_with_one_reply() {
    let (mut appends, mut acks) = (0, 0);
    for seed in 1..=3 {
        let mut l = Load::new(seed, StorageFaults::none(), 0.0);
        l.settle_with(QUOTA, |_| {});
        let leader = l.bus.leader().expect("a leader");
        let (mut a, mut k) = (0, 0);
        for id in (1..=3).filter(|&id| id != leader) {
            let st = l.bus.member(id).expect("member").stats();
            a += st.appends_received;
            k += st.acks_sent;
        }
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

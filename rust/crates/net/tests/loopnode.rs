//! `LoopNode` (the client an event loop drives): what the loop reads of the client's state
//! and the batches it is handed agree. A loop that closes once "nothing in flight, nothing
//! queued" must have been handed the batch that confirmed its last command.

mod common;

use std::time::{Duration, Instant};

use common::*;
use seqbus_net::{LoopNode, NodeClient, NodeOptions, Start};

#[test]
fn the_batch_that_confirms_a_command_is_queued_before_the_client_says_none_is_in_flight() {
    let b = bus("udp-unicast", "");
    let seq = start_sequencer(&b.cfg);
    let subs = b.cfg.downstream.subscribers.clone();
    let mut opts = NodeOptions::new("LOOP", 1, Start::From(1));
    opts.listen = Some(subs[0]);
    let client = NodeClient::connect(&b.cfg, opts).unwrap();
    let node = LoopNode::start(client, "seqbus-test-loop", 4096, 64).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // ready, and live (a rewinding client numbers commands but holds them back)
    while !node.is_ready() || node.is_rewinding() {
        assert!(Instant::now() < deadline, "the client never got live");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = Vec::new();
    let mut taken = Vec::new();
    let mut take_all = |node: &LoopNode, taken: &mut Vec<Rec>| {
        while node.take(&mut out).unwrap() {
            taken.extend(parse_records(&out));
        }
    };
    // one command at a time: watch the client (as a loop's drain check does) until it says
    // none is in flight, then the batch with the command must be queued or already taken
    for i in 0..1500u32 {
        node.with_client(|c| c.send(&body(&i.to_le_bytes())))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.with_client(|c| c.in_flight()) > 0 {
            assert!(Instant::now() < deadline, "command {i} never confirmed");
        }
        take_all(&node, &mut taken);
        let mine = messages(&taken)
            .iter()
            .filter(|r| r.2.starts_with(b"LOOP\0"))
            .count();
        assert_eq!(
            mine,
            i as usize + 1,
            "command {i}: none in flight, but the batch with it was not handed over"
        );
    }
    drop(node);
    seq.shutdown();
}

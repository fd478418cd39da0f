//! A node driven by hand against a replayer (no network): how many replay requests a rewind
//! keeps outstanding, and that a finished rewind awaits no more answers. The node's behaviour
//! on a network — loss, topics, fragments, the window, rewinds — is tested on the simulated
//! bus (`seqbus-sim`: `tests/node.rs`, `tests/protocol.rs`, `tests/cluster.rs`).

use seqbus_core::{
    Dest, MemoryStore, Node, NodeParams, Recovered, Replayer, Sequencer, SequencerParams, Source,
    Start,
};
use seqbus_wire::Session;

const SESSION: &str = "SIM";

fn params(account: &str, start: Start) -> NodeParams {
    NodeParams {
        session: Session::new(SESSION).unwrap(),
        account: seqbus_wire::account(account).unwrap(),
        instance: 1,
        start,
        topics: None,
        window: 64,
        max_packet: 1472,
        retry_ns: 3_000_000,
        request_timeout_ns: 1_000_000,
        request_backoff_max_ns: 20_000_000,
        failover_after: 4,
        replayers: 1,
        max_request: 2000,
        reorder_limit: 1 << 20,
    }
}

#[test]
fn a_rewind_keeps_replay_depth_requests_outstanding() {
    use seqbus_wire::mold::Request;
    let now = 1_000_000_000;
    let requests = |depth: usize| {
        let mut n = Node::new(params("R", Start::From(1)), now);
        n.set_replay_depth(depth);
        let mut asked = Vec::new();
        for t in 0..3 {
            n.poll_transmit(now + t, &mut |d, data| {
                if let Dest::Replayer(_) = d {
                    let r = Request::parse(data).unwrap();
                    asked.push((r.sequence, r.count));
                }
            });
        }
        asked
    };
    // depth 1: one request of max_request (2000) until half of it has arrived
    assert_eq!(requests(1), vec![(1, 2000)]);
    // depth 4: four back to back, without waiting for an answer
    assert_eq!(
        requests(4),
        vec![(1, 2000), (2001, 2000), (4001, 2000), (6001, 2000)]
    );
}

#[test]
fn a_finished_rewind_awaits_no_more_answers() {
    // a rewind asks past the end of the stream; once the replayer said where it ends (and the
    // node caught up), the node must not keep looking for answers (a busy-spinning node would
    // poll its request socket on every turn)
    let session = Session::new(SESSION).unwrap();
    let now = 1_000_000_000;
    let mut seq = Sequencer::new(
        SequencerParams {
            session,
            max_packet: 1472,
            heartbeat_ns: 1_000_000,
            clock_tick_ns: 0,
            term: 0,
            leader: 0,
            max_held: seqbus_core::sequencer::MAX_HELD,
        },
        Recovered::new_session(),
        now,
    );
    let mut store = MemoryStore::default();
    for (_, m) in seq.pending() {
        store.push(m);
    }
    seq.published(now);
    let mut replayer = Replayer::new(session, 60_000, 2000);
    let mut n = Node::new(params("R", Start::From(1)), now);
    n.set_replay_depth(4);
    let mut out = Vec::new();
    for t in 0..10 {
        let mut asked = Vec::new();
        n.poll_transmit(now + t, &mut |d, data| {
            if let Dest::Replayer(_) = d {
                asked.push(data.to_vec());
            }
        });
        for r in asked {
            let mut answers = Vec::new();
            replayer
                .handle_request(&r, &mut store, &mut |p| answers.push(p.to_vec()))
                .unwrap();
            for a in answers {
                n.handle_datagram(now + t, Source::Replayer(0), &a);
            }
        }
        out.clear();
        n.deliver(&mut out, usize::MAX).unwrap();
    }
    assert!(!n.is_rewinding());
    assert!(!n.awaits_replay());
}

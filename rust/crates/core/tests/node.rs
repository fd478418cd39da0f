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

/// Every datagram `node` has to send at `now`, with where it goes.
fn transmits(node: &mut Node, now: u64) -> Vec<(Dest, Vec<u8>)> {
    std::iter::from_fn(|| node.poll_transmit(now).map(|(d, p)| (d, p.to_vec()))).collect()
}

/// The packets `replayer` answers `request` with.
fn answers(replayer: &mut Replayer, request: &[u8], store: &mut MemoryStore) -> Vec<Vec<u8>> {
    replayer.handle_request(request, store).unwrap();
    std::iter::from_fn(|| replayer.poll_transmit().map(<[u8]>::to_vec)).collect()
}

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

/// A session that holds only its start (what a sequencer sequences first), in a store, and a
/// replayer over it.
fn started_session(session: Session, now: u64) -> (MemoryStore, Replayer) {
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
    seq.mark_written();
    while seq.poll_publish(now, seq.next_seq()).is_some() {}
    (store, Replayer::new(session, 60_000, 2000))
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
            for (d, data) in transmits(&mut n, now + t) {
                if let Dest::Replayer(_) = d {
                    let r = Request::parse(&data).unwrap();
                    asked.push((r.sequence, r.count));
                }
            }
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
    let (mut store, mut replayer) = started_session(session, now);
    let mut n = Node::new(params("R", Start::From(1)), now);
    n.set_replay_depth(4);
    let mut out = Vec::new();
    for t in 0..10 {
        for (d, r) in transmits(&mut n, now + t) {
            if let Dest::Replayer(_) = d {
                for a in answers(&mut replayer, &r, &mut store) {
                    n.handle_datagram(now + t, Source::Replayer(0), &a);
                }
            }
        }
        out.clear();
        n.deliver(&mut out, usize::MAX).unwrap();
    }
    assert!(!n.is_rewinding());
    assert!(!n.awaits_replay());
}

/// Signed NAKs carry the nonce of the packet they answer: a node takes one only for a packet
/// of its own run newer than any a NAK it took answered, so a NAK captured and sent again
/// (13,105 replays of 5 NAKs made a node resend 768 times) is refused and counted stale.
#[test]
fn a_replayed_signed_nak_is_refused_as_stale() {
    use seqbus_wire::auth::{Key, Nonce};
    use seqbus_wire::upstream::{Nak, UpstreamPacket};

    let key = Key::new([7; 32]);
    let boot = 1_000;
    let mut now = 1_000_000_000;
    // a retransmission timeout of 10 s: no timeout fires between the replays below, 6 s
    // apart, which are past the half timeout that holds back a second resend for one NAK
    let mut p = params("A", Start::From(1));
    p.retry_ns = 10_000_000_000;
    let mut node = Node::new(p, now);
    node.set_key(key.clone(), boot);
    // the node rewinds a session that holds only its start, then is live (a rewinding node
    // holds its commands back)
    let session = Session::new(SESSION).unwrap();
    let (mut store, mut replayer) = started_session(session, now);
    let mut out = Vec::new();
    for _ in 0..100 {
        if !node.is_rewinding() {
            break;
        }
        now += 1_000;
        for (d, r) in transmits(&mut node, now) {
            if let Dest::Replayer(_) = d {
                for a in answers(&mut replayer, &r, &mut store) {
                    node.handle_datagram(now, Source::Replayer(0), &a);
                }
            }
        }
        out.clear();
        node.deliver(&mut out, usize::MAX).unwrap();
    }
    assert!(!node.is_rewinding());
    let mut sent = Vec::new();
    for i in 0..3u8 {
        node.send(&[i; 8]).unwrap();
        sent.extend(transmits(&mut node, now).into_iter().map(|(_, d)| d));
        now += 1_000;
    }
    // what went upstream (a rewinding node also asks its replayer for the stream)
    let nonces: Vec<Nonce> = sent
        .iter()
        .filter_map(|d| UpstreamPacket::parse(d).ok())
        .map(|p| p.nonce().unwrap())
        .collect();
    assert_eq!(nonces.len(), 3);
    let nak = |answers: Option<Nonce>| {
        Nak {
            session: Session::new(SESSION).unwrap(),
            account: seqbus_wire::account("A").unwrap(),
            instance: 1,
            expected: 2,
            missing: 1,
            answers,
        }
        .encode_signed(&key)
    };
    let resends = |node: &mut Node, now: u64| {
        transmits(node, now)
            .iter()
            .filter(|(_, d)| UpstreamPacket::parse(d).is_ok())
            .count()
    };
    // the sequencer's NAK of the third packet (command 3 came, 2 was missing): taken
    let genuine = nak(Some(nonces[2]));
    node.handle_nak(now, &genuine);
    assert_eq!(resends(&mut node, now), 1, "command 2 sent again");
    assert_eq!(node.stats().naks, 1);
    // the same NAK, captured and sent again later: refused, no resend for it (the node's
    // own retransmission timer still runs)
    for k in 0..100 {
        now += 6_000_000_000;
        node.handle_nak(now, &genuine);
        resends(&mut node, now);
        assert_eq!(node.stats().naks, 1, "replay {k} made it resend");
    }
    // one answering an older packet, another run's, or no packet at all: refused too
    node.handle_nak(now, &nak(Some(nonces[0])));
    node.handle_nak(
        now,
        &nak(Some(Nonce {
            boot_ns: boot + 1,
            counter: 99,
        })),
    );
    node.handle_nak(now, &nak(None));
    let st = node.stats();
    assert_eq!((st.naks, st.stale_naks), (1, 103));
}

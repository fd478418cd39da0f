//! The whole protocol over a simulated network with a virtual clock: 3 senders, 5 nodes and
//! a late joiner, with random loss, duplication and reordering on every link. Deterministic
//! (seeded) and in-process.
//!
//! The default run sequences 20 000 messages per scenario; set `SEQBUS_SIM_MESSAGES` (e.g.
//! `SEQBUS_SIM_MESSAGES=1000000 cargo test --release -p seqbus-core --test sim`) for more.

use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::collections::BinaryHeap;
use std::hash::Hasher;

use seqbus_core::node::{RECORD_CAUGHT_UP, RECORD_HEADER_LEN, RECORD_MESSAGE};
use seqbus_core::{
    Dest, MemoryStore, Node, NodeParams, Recovered, Replayer, Sequencer, SequencerParams, Source,
    Start,
};
use seqbus_wire::Session;

/// splitmix64: a small deterministic generator for the network's decisions.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn chance(&mut self, pct: f64) -> bool {
        (self.next() % 1_000_000) as f64 / 10_000.0 < pct
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Sequencer,
    Replayer,
    Node(usize, Source),
}

struct Event {
    at: u64,
    id: u64,
    to: To,
    data: Vec<u8>,
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.id) == (o.at, o.id)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.id).cmp(&(self.at, self.id)) // min-heap
    }
}

#[derive(Clone, Copy)]
struct Faults {
    loss_pct: f64,
    dup_pct: f64,
    /// Delay range in ns; different delays reorder datagrams.
    delay: (u64, u64),
}

struct Net {
    rng: Rng,
    faults: Faults,
    queue: BinaryHeap<Event>,
    next_id: u64,
    sent: u64,
    dropped: u64,
}

impl Net {
    fn send(&mut self, now: u64, to: To, data: &[u8]) {
        self.sent += 1;
        if self.rng.chance(self.faults.loss_pct) {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.chance(self.faults.dup_pct) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + self.rng.range(self.faults.delay.0, self.faults.delay.1);
            self.next_id += 1;
            self.queue.push(Event {
                at,
                id: self.next_id,
                to,
                data: data.to_vec(),
            });
        }
    }
}

struct SimNode {
    node: Node,
    /// Messages this node still has to send.
    quota: u64,
    sent: u64,
    hash: DefaultHasher,
    app_messages: u64,
    last_seq: u64,
    caught_up: bool,
    per_sender: [u64; 3],
    out: Vec<u8>,
}

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

struct Outcome {
    hashes: Vec<u64>,
    counts: Vec<u64>,
    dropped: u64,
    virtual_ms: u64,
}

/// `depth`: replay requests every node keeps outstanding (`Node::set_replay_depth`).
fn run(seed: u64, faults: Faults, total: u64, depth: usize) -> Outcome {
    const NODES: usize = 5;
    const SENDERS: usize = 3;
    let mut net = Net {
        rng: Rng(seed),
        faults,
        queue: BinaryHeap::new(),
        next_id: 0,
        sent: 0,
        dropped: 0,
    };
    let session = Session::new(SESSION).unwrap();
    let mut now: u64 = 1_000_000_000;
    let mut seq = Sequencer::new(
        SequencerParams {
            session,
            max_packet: 1472,
            heartbeat_ns: 1_000_000,
            clock_tick_ns: 5_000_000,
            term: 0,
            leader: 0,
        },
        Recovered::new_session(),
        now,
    );
    let mut store = MemoryStore::default();
    let mut replayer = Replayer::new(session, 60_000, 2000);
    let mk = |name: String, start: Start, quota: u64, now: u64| SimNode {
        node: {
            let mut n = Node::new(params(&name, start), now);
            n.set_replay_depth(depth);
            n
        },
        quota,
        sent: 0,
        hash: DefaultHasher::new(),
        app_messages: 0,
        last_seq: 0,
        caught_up: false,
        per_sender: [0; 3],
        out: Vec::new(),
    };
    let mut nodes: Vec<SimNode> = (0..NODES)
        .map(|i| {
            let quota = if i < SENDERS {
                total / SENDERS as u64 + u64::from((i as u64) < total % SENDERS as u64)
            } else {
                0
            };
            mk(format!("N{i}"), Start::From(1), quota, now)
        })
        .collect();
    let late_index = NODES;
    let mut late_started = false;
    let step = 1_000_000; // at most 1 ms of virtual time per step
    let limit = now + 120_000_000_000; // 2 virtual minutes
    loop {
        // deliver everything due now
        while net.queue.peek().is_some_and(|e| e.at <= now) {
            let e = net.queue.pop().unwrap();
            match e.to {
                To::Sequencer => {
                    seq.handle_upstream(now, &e.data);
                }
                To::Replayer => {
                    let mut answers = Vec::new();
                    replayer
                        .handle_request(&e.data, &mut store, &mut |p| answers.push(p.to_vec()))
                        .unwrap();
                    // the answer goes back to whoever asked: the requester id rides in the
                    // event id table below
                    let who = REQUESTER.with(|r| r.borrow_mut().remove(&e.id)).unwrap();
                    for a in answers {
                        net.send(now, To::Node(who, Source::Replayer(0)), &a);
                    }
                }
                To::Node(i, src) => {
                    if i < nodes.len() {
                        nodes[i].node.handle_datagram(now, src, &e.data);
                    }
                }
            }
        }
        // sequencer: persist, then publish to every node
        seq.handle_timeout(now);
        if seq.has_pending() {
            for (q, m) in seq.pending() {
                assert_eq!(q, store.len() as u64 + 1);
                store.push(m);
            }
            let mut packets = Vec::new();
            seq.packets(|p| packets.push(p.to_vec()));
            seq.published(now);
            for p in &packets {
                for i in 0..nodes.len() {
                    net.send(now, To::Node(i, Source::Live), p);
                }
            }
        } else if let Some(hb) = seq.poll_heartbeat(now) {
            for i in 0..nodes.len() {
                net.send(now, To::Node(i, Source::Live), &hb);
            }
        }
        // nodes: deliver, send, transmit
        for (i, n) in nodes.iter_mut().enumerate() {
            n.out.clear();
            n.node.deliver(&mut n.out, usize::MAX).unwrap();
            let mut at = 0;
            while at < n.out.len() {
                let len = u32::from_le_bytes(n.out[at..at + 4].try_into().unwrap()) as usize;
                let ty = u16::from_le_bytes(n.out[at + 4..at + 6].try_into().unwrap());
                let s = u64::from_le_bytes(n.out[at + 8..at + 16].try_into().unwrap());
                if ty == RECORD_MESSAGE {
                    assert!(s > n.last_seq, "node {i}: {s} after {}", n.last_seq);
                    n.last_seq = s;
                    n.hash.write_u64(s);
                    n.hash.write(&n.out[at + 16..at + 48]);
                    n.hash.write(&n.out[at + RECORD_HEADER_LEN..at + len]);
                    n.app_messages += 1;
                    // every sender's messages exactly once and in the order sent
                    let env = &n.out[at + 16..at + 48];
                    let frag_flags = env[27];
                    assert_eq!(frag_flags, 0, "fragments are reassembled below the API");
                    let b = &n.out[at + RECORD_HEADER_LEN..at + len];
                    let sender = u64::from_le_bytes(b[8..16].try_into().unwrap()) as usize;
                    let k = u64::from_le_bytes(b[16..24].try_into().unwrap());
                    assert_eq!(b, &body(sender, k)[..]);
                    assert_eq!(n.per_sender[sender], k, "node {i}: sender {sender}");
                    n.per_sender[sender] += 1;
                } else if ty == RECORD_CAUGHT_UP {
                    n.caught_up = true;
                }
                at += len;
            }
            while n.quota > 0 && !n.node.is_rewinding() {
                match n.node.send(&body(i, n.sent)) {
                    Ok(_) => {
                        n.quota -= 1;
                        n.sent += 1;
                    }
                    Err(seqbus_core::SendError::WindowFull { .. }) => break,
                    Err(e) => panic!("node {i}: {e}"),
                }
            }
            let mut outgoing = Vec::new();
            n.node
                .poll_transmit(now, &mut |d, data| outgoing.push((d, data.to_vec())));
            for (d, data) in outgoing {
                match d {
                    Dest::Sequencer | Dest::AllSequencers => net.send(now, To::Sequencer, &data),
                    Dest::Replayer(_) => {
                        let before = net.next_id;
                        net.send(now, To::Replayer, &data);
                        for id in before + 1..=net.next_id {
                            REQUESTER.with(|r| r.borrow_mut().insert(id, i));
                        }
                    }
                }
            }
        }
        // the late joiner starts when half the messages are sequenced
        if !late_started && seq.next_seq() > total / 2 {
            late_started = true;
            nodes.push(mk("LATE".into(), Start::From(1), 0, now));
        }
        let done = late_started
            && nodes
                .iter()
                .all(|n| n.app_messages == total && n.caught_up && n.quota == 0);
        if done {
            break;
        }
        assert!(
            now < limit,
            "no convergence: {:?}",
            nodes.iter().map(|n| n.app_messages).collect::<Vec<_>>()
        );
        let mut wake = now + step;
        if let Some(e) = net.queue.peek() {
            wake = wake.min(e.at);
        }
        wake = wake.min(seq.next_timeout());
        for n in &nodes {
            if let Some(t) = n.node.next_timeout() {
                wake = wake.min(t);
            }
        }
        now = wake.max(now + 1_000);
    }
    assert_eq!(nodes.len(), late_index + 1);
    Outcome {
        hashes: nodes.iter().map(|n| n.hash.finish()).collect(),
        counts: nodes.iter().map(|n| n.app_messages).collect(),
        dropped: net.dropped,
        virtual_ms: (now - 1_000_000_000) / 1_000_000,
    }
}

thread_local! {
    static REQUESTER: std::cell::RefCell<std::collections::HashMap<u64, usize>> = Default::default();
}

fn total() -> u64 {
    std::env::var("SEQBUS_SIM_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn check(name: &str, seed: u64, faults: Faults) {
    check_depth(name, seed, faults, 1);
}

fn check_depth(name: &str, seed: u64, faults: Faults, depth: usize) {
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

#[test]
fn clean_network() {
    check(
        "clean",
        1,
        Faults {
            loss_pct: 0.0,
            dup_pct: 0.0,
            delay: (20_000, 20_000),
        },
    );
}

#[test]
fn loss_1pct_with_dup_and_reorder() {
    check(
        "1%",
        2,
        Faults {
            loss_pct: 1.0,
            dup_pct: 1.0,
            delay: REORDER,
        },
    );
}

#[test]
fn loss_5pct_with_dup_and_reorder() {
    check(
        "5%",
        3,
        Faults {
            loss_pct: 5.0,
            dup_pct: 2.0,
            delay: REORDER,
        },
    );
}

#[test]
fn loss_20pct_with_dup_and_reorder() {
    check(
        "20%",
        4,
        Faults {
            loss_pct: 20.0,
            dup_pct: 5.0,
            delay: REORDER,
        },
    );
}

// Pipelined replay: several requests outstanding at once (the late joiner and every gap fill),
// answers lost, duplicated and reordered; the streams must still be identical and complete.

#[test]
fn pipelined_replay_clean_network() {
    check_depth(
        "clean, replay depth 4",
        5,
        Faults {
            loss_pct: 0.0,
            dup_pct: 0.0,
            delay: (20_000, 20_000),
        },
        4,
    );
}

#[test]
fn pipelined_replay_loss_5pct_with_dup_and_reorder() {
    check_depth(
        "5%, replay depth 4",
        6,
        Faults {
            loss_pct: 5.0,
            dup_pct: 2.0,
            delay: REORDER,
        },
        4,
    );
}

#[test]
fn pipelined_replay_loss_20pct_with_dup_and_reorder() {
    check_depth(
        "20%, replay depth 8",
        7,
        Faults {
            loss_pct: 20.0,
            dup_pct: 5.0,
            delay: REORDER,
        },
        8,
    );
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

//! Node behaviour without loss: topics, deterministic-time records, fragmentation, the
//! in-flight window, hello/SenderState, live start, and the gap error without replayers.

use seqbus_core::node::{RECORD_CAUGHT_UP, RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME};
use seqbus_core::{
    Dest, MemoryStore, Node, NodeError, NodeParams, Recovered, Replayer, SendError, Sequencer,
    SequencerParams, Source, Start,
};
use seqbus_wire::Session;

fn session() -> Session {
    Session::new("UNIT").unwrap()
}

fn params(account: &str, start: Start, replayers: usize) -> NodeParams {
    NodeParams {
        session: session(),
        account: seqbus_wire::account(account).unwrap(),
        instance: 1,
        start,
        topics: None,
        window: 8,
        max_packet: 1472,
        retry_ns: 1_000_000,
        request_timeout_ns: 1_000_000,
        request_backoff_max_ns: 8_000_000,
        failover_after: 2,
        replayers,
        max_request: 1000,
        reorder_limit: 10_000,
    }
}

/// (record type, sequence, envelope, body)
type Record = (u16, u64, Vec<u8>, Vec<u8>);

/// A lossless bus: sequencer, store, replayer and nodes exchanging datagrams directly.
struct Bus {
    now: u64,
    seq: Sequencer,
    store: MemoryStore,
    replayer: Replayer,
    nodes: Vec<Node>,
    records: Vec<Vec<Record>>,
}

impl Bus {
    fn new() -> Bus {
        let now = 1_000_000_000;
        Bus {
            now,
            seq: Sequencer::new(
                SequencerParams {
                    session: session(),
                    max_packet: 1472,
                    heartbeat_ns: 1_000_000,
                    clock_tick_ns: 0,
                    term: 0,
                    leader: 0,
                },
                Recovered::new_session(),
                now,
            ),
            store: MemoryStore::default(),
            replayer: Replayer::new(session(), 60_000, 1000),
            nodes: Vec::new(),
            records: Vec::new(),
        }
    }

    fn add(&mut self, p: NodeParams) -> usize {
        self.nodes.push(Node::new(p, self.now));
        self.records.push(Vec::new());
        self.nodes.len() - 1
    }

    /// Runs `steps` rounds of 100 µs; `live` filters which nodes get the live feed.
    fn run(&mut self, steps: usize, live: &dyn Fn(usize) -> bool) -> Result<(), NodeError> {
        for _ in 0..steps {
            self.now += 100_000;
            let now = self.now;
            let mut to_seq = Vec::new();
            let mut to_rep = Vec::new();
            for (i, n) in self.nodes.iter_mut().enumerate() {
                n.poll_transmit(now, &mut |d, b| match d {
                    Dest::Sequencer | Dest::AllSequencers => to_seq.push(b.to_vec()),
                    Dest::Replayer(_) => to_rep.push((i, b.to_vec())),
                });
            }
            for d in to_seq {
                self.seq.handle_upstream(now, &d);
            }
            for (i, r) in to_rep {
                let mut answers = Vec::new();
                self.replayer
                    .handle_request(&r, &mut self.store, &mut |p| answers.push(p.to_vec()))
                    .unwrap();
                for a in answers {
                    self.nodes[i].handle_datagram(now, Source::Replayer(0), &a);
                }
            }
            self.seq.handle_timeout(now);
            let mut packets = Vec::new();
            if self.seq.has_pending() {
                for (_, m) in self.seq.pending() {
                    self.store.push(m);
                }
                self.seq.packets(|p| packets.push(p.to_vec()));
                self.seq.published(now);
            } else if let Some(hb) = self.seq.poll_heartbeat(now) {
                packets.push(hb.to_vec());
            }
            for (i, n) in self.nodes.iter_mut().enumerate() {
                if live(i) {
                    for p in &packets {
                        n.handle_datagram(now, Source::Live, p);
                    }
                }
                let mut out = Vec::new();
                n.deliver(&mut out, usize::MAX)?;
                let mut at = 0;
                while at < out.len() {
                    let len = u32::from_le_bytes(out[at..at + 4].try_into().unwrap()) as usize;
                    let ty = u16::from_le_bytes(out[at + 4..at + 6].try_into().unwrap());
                    let s = u64::from_le_bytes(out[at + 8..at + 16].try_into().unwrap());
                    self.records[i].push((
                        ty,
                        s,
                        out[at + 16..at + 48].to_vec(),
                        out[at + RECORD_HEADER_LEN..at + len].to_vec(),
                    ));
                    at += len;
                }
            }
        }
        Ok(())
    }
}

fn body(schema: u16, template: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8];
    b[2..4].copy_from_slice(&template.to_le_bytes());
    b[4..6].copy_from_slice(&schema.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

#[test]
fn topics_filter_and_time_records_fire_at_the_same_stream_point() {
    let mut bus = Bus::new();
    let s = bus.add(params("S", Start::From(1), 1));
    let mut p = params("F", Start::From(1), 1);
    p.topics = Some(vec![(9, 1)]);
    let f = bus.add(p);
    bus.run(5, &|_| true).unwrap();
    bus.nodes[s].send(&body(9, 1, b"wanted")).unwrap();
    bus.nodes[s].send(&body(9, 2, b"unwanted")).unwrap();
    bus.run(5, &|_| true).unwrap();
    // a deadline in the past: the next filtered message emits a time record
    let deadline = bus.now - 1;
    bus.nodes[f].set_timer_deadline(Some(deadline));
    bus.nodes[s].send(&body(9, 2, b"unwanted again")).unwrap();
    bus.nodes[s].send(&body(9, 1, b"wanted again")).unwrap();
    bus.run(5, &|_| true).unwrap();
    let kinds: Vec<(u16, Vec<u8>)> = bus.records[f]
        .iter()
        .filter(|r| r.0 != RECORD_CAUGHT_UP)
        .map(|r| (r.0, r.3.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (RECORD_MESSAGE, body(9, 1, b"wanted")),
            (RECORD_TIME, vec![]),
            (RECORD_MESSAGE, body(9, 1, b"wanted again")),
        ]
    );
    let time = bus.records[f].iter().find(|r| r.0 == RECORD_TIME).unwrap();
    let ts = u64::from_le_bytes(time.2[0..8].try_into().unwrap());
    assert!(ts >= deadline);
    assert_eq!(
        bus.nodes[f].stats().filtered,
        bus.nodes[s].stats().filtered + 2
    );
}

#[test]
fn large_messages_are_fragmented_and_reassembled() {
    let mut bus = Bus::new();
    let mut p = params("S", Start::From(1), 1);
    p.window = 32;
    let s = bus.add(p);
    let r = bus.add(params("R", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    let big: Vec<u8> = body(
        9,
        1,
        &(0..5000u32)
            .flat_map(|i| i.to_le_bytes())
            .collect::<Vec<_>>(),
    );
    let last = bus.nodes[s].send(&big).unwrap();
    assert_eq!(last, 15, "20008 bytes in 15 fragments of at most 1418");
    bus.run(10, &|_| true).unwrap();
    let msgs: Vec<_> = bus.records[r]
        .iter()
        .filter(|x| x.0 == RECORD_MESSAGE)
        .collect();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].3, big);
    let env = &msgs[0].2;
    assert_eq!(env[27], 0, "flags cleared on the reassembled message");
    assert_eq!(
        u32::from_le_bytes(env[28..32].try_into().unwrap()) as usize,
        big.len()
    );
    // too large for the window
    let huge = vec![0u8; 32 * 1418 + 1];
    assert!(matches!(
        bus.nodes[s].send(&huge),
        Err(SendError::TooLarge { .. })
    ));
}

#[test]
fn window_back_pressure_then_drains() {
    let mut bus = Bus::new();
    let s = bus.add(params("S", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    for i in 0..8u8 {
        bus.nodes[s].send(&body(9, 1, &[i])).unwrap();
    }
    assert!(matches!(
        bus.nodes[s].send(&body(9, 1, b"x")),
        Err(SendError::WindowFull {
            in_flight: 8,
            window: 8
        })
    ));
    bus.run(3, &|_| true).unwrap();
    assert_eq!(bus.nodes[s].stats().in_flight, 0);
    bus.nodes[s].send(&body(9, 1, b"x")).unwrap();
}

#[test]
fn live_node_learns_its_command_sequence_from_sender_state() {
    let mut bus = Bus::new();
    let s = bus.add(params("S", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    for i in 0..3u8 {
        bus.nodes[s].send(&body(9, 1, &[i])).unwrap();
    }
    bus.run(5, &|_| true).unwrap();
    // a restarted instance of S that does not rewind
    let s2 = bus.add(params("S", Start::Live, 1));
    assert!(matches!(
        bus.nodes[s2].send(b"early"),
        Err(SendError::NotReady)
    ));
    bus.run(5, &|_| true).unwrap();
    assert!(bus.nodes[s2].is_ready());
    assert_eq!(bus.nodes[s2].send(&body(9, 1, b"next")).unwrap(), 4);
    bus.run(5, &|_| true).unwrap();
    assert!(
        !bus.records[s2].iter().any(|r| r.0 == RECORD_CAUGHT_UP),
        "live nodes do not rewind"
    );
    let last = bus.records[s].last().unwrap();
    assert_eq!(last.3, body(9, 1, b"next"));
}

#[test]
fn a_gap_without_replayer_is_an_error() {
    let mut bus = Bus::new();
    let s = bus.add(params("S", Start::From(1), 0));
    let r = bus.add(params("R", Start::From(1), 0));
    bus.run(5, &|_| true).unwrap();
    bus.nodes[s].send(&body(9, 1, b"lost for R")).unwrap();
    bus.run(1, &|i| i != r).unwrap_or(());
    bus.nodes[s].send(&body(9, 1, b"seen")).unwrap();
    let e = bus.run(5, &|_| true).unwrap_err();
    assert!(matches!(e, NodeError::Gap { .. }), "{e}");
}

#[test]
fn rewind_from_a_given_sequence() {
    let mut bus = Bus::new();
    let s = bus.add(params("S", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    for i in 0..20u8 {
        bus.nodes[s].send(&body(9, 1, &[i])).unwrap();
        if i % 5 == 4 {
            bus.run(2, &|_| true).unwrap();
        }
    }
    bus.run(3, &|_| true).unwrap();
    let late = bus.add(params("L", Start::From(10), 1));
    assert!(bus.nodes[late].is_rewinding());
    bus.run(5, &|_| true).unwrap();
    assert!(!bus.nodes[late].is_rewinding());
    let seqs: Vec<u64> = bus.records[late]
        .iter()
        .filter(|r| r.0 == RECORD_MESSAGE)
        .map(|r| r.1)
        .collect();
    assert_eq!(seqs.first(), Some(&10));
    assert_eq!(
        seqs.last(),
        bus.records[s]
            .iter()
            .filter(|r| r.0 == RECORD_MESSAGE)
            .map(|r| r.1)
            .next_back()
            .as_ref()
    );
}

#[test]
fn no_timeout_left_due_once_a_rewind_is_over() {
    // A finished replay request must not leave its deadline behind: a deadline in the past
    // makes the socket loop wake at once, forever (a node spinning at full CPU while idle).
    let mut bus = Bus::new();
    let s = bus.add(params("S", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    for i in 0..20u8 {
        bus.nodes[s].send(&body(9, 1, &[i])).unwrap();
        bus.run(1, &|_| true).unwrap();
    }
    bus.run(3, &|_| true).unwrap();
    let late = bus.add(params("L", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    assert!(!bus.nodes[late].is_rewinding());
    assert!(bus.nodes[late].stats().requests > 0);
    bus.run(200, &|_| true).unwrap(); // 20 ms: every request deadline has long passed
    let now = bus.now;
    let due = bus.nodes[late].next_timeout();
    assert!(
        due.is_none_or(|t| t > now),
        "a timeout at {due:?} is already due at {now}"
    );
}

#[test]
fn a_twin_catches_up_only_once_the_application_handled_every_record() {
    // A hot backup rewinds the history of its twin (same account). Its commands are numbered
    // by replaying the same handlers, so it may reconcile its numbering with the stream only
    // when the application has handled every record delivered before: records still waiting
    // in the batch (one poll calls `deliver` several times into the same buffer) would leave
    // it numbering past its twin, and the sequencer would take its different commands.
    let mut bus = Bus::new();
    let twin = bus.add(params("E", Start::From(1), 1));
    bus.run(5, &|_| true).unwrap();
    for i in 0..20u8 {
        bus.nodes[twin].send(&body(9, 1, &[i])).unwrap();
        bus.run(2, &|_| true).unwrap();
    }
    bus.run(3, &|_| true).unwrap();
    let head = bus.seq.next_seq();
    let mut p = params("E", Start::From(1), 1);
    p.instance = 2;
    let mut backup = Node::new(p, bus.now);
    assert!(backup.is_rewinding());
    let request = seqbus_wire::mold::Request {
        session: session(),
        sequence: 1,
        count: 1000,
    };
    let mut answers = Vec::new();
    bus.replayer
        .handle_request(&request.encode(), &mut bus.store, &mut |p| {
            answers.push(p.to_vec())
        })
        .unwrap();
    for a in &answers {
        backup.handle_datagram(bus.now, Source::Replayer(0), a);
    }
    let hb = seqbus_wire::mold::heartbeat(session(), head);
    backup.handle_datagram(bus.now, Source::Live, &hb);
    let mut out = Vec::new();
    let first = backup.deliver(&mut out, usize::MAX).unwrap();
    assert!(first >= 20);
    // the same poll delivers again before the application saw the batch: not caught up yet
    assert_eq!(backup.deliver(&mut out, usize::MAX).unwrap(), 0);
    assert!(backup.is_rewinding());
    // the application replays its handlers: the same 20 commands, numbered 1..=20 again
    let mut at = 0;
    let mut replayed = Vec::new();
    while at < out.len() {
        let len = u32::from_le_bytes(out[at..at + 4].try_into().unwrap()) as usize;
        let ty = u16::from_le_bytes(out[at + 4..at + 6].try_into().unwrap());
        let mine = ty == RECORD_MESSAGE
            && seqbus_wire::envelope::Envelope::parse(&out[at + 16..at + len])
                .unwrap()
                .account
                == seqbus_wire::account("E").unwrap();
        if mine {
            let i = out[at + RECORD_HEADER_LEN + 8];
            replayed.push(backup.send(&body(9, 1, &[i])).unwrap());
        }
        at += len;
    }
    assert_eq!(replayed, (1..=20).collect::<Vec<u64>>());
    out.clear();
    assert_eq!(backup.deliver(&mut out, usize::MAX).unwrap(), 1);
    assert_eq!(u16::from_le_bytes([out[4], out[5]]), RECORD_CAUGHT_UP);
    assert!(!backup.is_rewinding());
    // its next command is the twin's next one, not beyond it
    assert_eq!(backup.send(&body(9, 1, &[99])).unwrap(), 21);
}

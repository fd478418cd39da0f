//! Node behaviour on a clean simulated network: topics and time records as the delivery rules
//! say, fragmentation, the in-flight window, hello/SenderState, live start, a rewind from a
//! given sequence, and the gap error without replayers.

use seqbus_core::delivery::{
    Record, ADMIN_COMMAND_TEMPLATE_ID, BUS_SCHEMA_ID, RECORD_CAUGHT_UP, RECORD_MESSAGE,
    RECORD_TIME, TIME_GRID_NS,
};
use seqbus_core::{NodeError, SendError, Start, Store};
use seqbus_sim::{Bus, Faults, NodeOptions, SimParams};
use seqbus_wire::envelope::{Envelope, KIND_APPLICATION};

/// (record type, sequence, envelope, body)
type Rec = (u16, u64, Vec<u8>, Vec<u8>);

/// One sequencer and its replayer, nodes, a network without loss; steps of 100 µs.
struct Net {
    bus: Bus,
    records: Vec<Vec<Rec>>,
}

impl Net {
    fn new() -> Net {
        let mut p = SimParams::new(1, 1, Faults::clean(10_000));
        p.following_replayer = false;
        p.clock_tick_ns = 0;
        Net {
            bus: Bus::new(p),
            records: Vec::new(),
        }
    }

    fn add(&mut self, account: &str, start: Start, f: impl FnOnce(&mut NodeOptions)) -> usize {
        let mut o = NodeOptions::new(account, start);
        o.window = 8;
        o.retry_ns = 1_000_000;
        f(&mut o);
        self.records.push(Vec::new());
        self.bus.add_node(&o)
    }

    fn node(&mut self, i: usize) -> &mut seqbus_core::Node {
        &mut self.bus.node(i).expect("on the bus").node
    }

    /// Runs `steps` rounds of 100 µs; nodes for which `live` is false lose every live packet
    /// published meanwhile.
    fn run(&mut self, steps: usize, live: &dyn Fn(usize) -> bool) -> Result<(), NodeError> {
        let n = self.bus.node_count();
        for _ in 0..steps {
            for i in 0..n {
                // a node taken off the bus (its process died) has nothing to set
                if let Some(node) = self.bus.node(i) {
                    node.loss_pct = if live(i) { 0.0 } else { 100.0 };
                }
            }
            self.bus.process();
            for i in 0..n {
                let mut out = Vec::new();
                self.bus.deliver(i, &mut out, usize::MAX)?;
                let mut at = 0;
                while at < out.len() {
                    let r = Record::parse(&out, at).unwrap();
                    at += r.len();
                    self.records[i].push((
                        r.record_type,
                        r.sequence,
                        r.envelope.to_vec(),
                        r.body.to_vec(),
                    ));
                }
                self.bus.transmit(i);
            }
            self.bus.advance(100_000, 100_000);
        }
        Ok(())
    }

    fn all(&mut self, steps: usize) {
        self.run(steps, &|_| true).unwrap();
    }

    /// Every message the sequencer published, in order.
    fn stream(&self) -> Vec<(u64, Vec<u8>)> {
        let mut store = self.bus.log(1).clone();
        let mut v = Vec::new();
        let next = store.next_seq();
        store
            .read(1, next as usize, &mut |s, m| {
                v.push((s, m.to_vec()));
                true
            })
            .unwrap();
        v
    }
}

fn body(schema: u16, template: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8];
    b[0..2].copy_from_slice(&(payload.len().min(8) as u16).to_le_bytes());
    b[2..4].copy_from_slice(&template.to_le_bytes());
    b[4..6].copy_from_slice(&schema.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

#[test]
fn a_node_is_handed_what_the_delivery_rules_say_of_the_stream() {
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |_| {});
    let f = net.add("F", Start::From(1), |o| o.topics = Some(vec![(9, 1)]));
    net.all(5);
    // wanted, unwanted, admin commands for F and for someone else, over several ms
    for i in 0..40u8 {
        let b = match i % 4 {
            0 => body(9, 1, &[i]),
            1 => body(9, 2, &[i]),
            2 => body(BUS_SCHEMA_ID, ADMIN_COMMAND_TEMPLATE_ID, b"F\0\0\0\0\0\0\0"),
            _ => body(BUS_SCHEMA_ID, ADMIN_COMMAND_TEMPLATE_ID, b"OTHER\0\0\0"),
        };
        net.node(s).send(&b).unwrap();
        net.all(3);
    }
    net.all(5);
    // the oracle: the rules written out once more, over the stream as published
    let mut expected = Vec::new();
    let mut last_slot = None;
    for (seq, m) in net.stream() {
        let env = Envelope::parse(&m).unwrap();
        let slot = env.timestamp_ns / TIME_GRID_NS;
        let new_slot = last_slot.is_none_or(|l| slot > l);
        last_slot = Some(last_slot.map_or(slot, |l: u64| l.max(slot)));
        let b = &m[32..];
        let app = env.kind == KIND_APPLICATION;
        let (schema, template) = (b[4..6] == [9, 0], b[2..4] == [1, 0]);
        let admin_for_f = b[4..6] == [1, 0] && b[2..4] == [4, 0] && b[8..16] == *b"F\0\0\0\0\0\0\0";
        let wanted = app && (schema && template || admin_for_f);
        if wanted {
            expected.push((RECORD_MESSAGE, seq));
        } else if new_slot {
            expected.push((RECORD_TIME, seq));
        }
    }
    let got: Vec<(u16, u64)> = net.records[f]
        .iter()
        .filter(|r| r.0 != RECORD_CAUGHT_UP)
        .map(|r| (r.0, r.1))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got.iter().filter(|r| r.0 == RECORD_MESSAGE).count(), 20);
    assert!(
        got.iter().any(|r| r.0 == RECORD_TIME),
        "time moved over filtered messages"
    );
    let fs = net.node(f).stats();
    assert_eq!(
        fs.time_records as usize,
        got.iter().filter(|r| r.0 == RECORD_TIME).count()
    );
}

#[test]
fn large_messages_are_fragmented_and_reassembled() {
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |o| o.window = 32);
    let r = net.add("R", Start::From(1), |_| {});
    net.all(5);
    let big: Vec<u8> = body(
        9,
        1,
        &(0..5000u32)
            .flat_map(|i| i.to_le_bytes())
            .collect::<Vec<_>>(),
    );
    let last = net.node(s).send(&big).unwrap();
    assert_eq!(last, 15, "20008 bytes in 15 fragments of at most 1418");
    net.all(10);
    let msgs: Vec<_> = net.records[r]
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
        net.node(s).send(&huge),
        Err(SendError::TooLarge { .. })
    ));
}

#[test]
fn window_back_pressure_then_drains() {
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |_| {});
    net.all(5);
    for i in 0..8u8 {
        net.node(s).send(&body(9, 1, &[i])).unwrap();
    }
    assert!(matches!(
        net.node(s).send(&body(9, 1, b"x")),
        Err(SendError::WindowFull {
            in_flight: 8,
            window: 8
        })
    ));
    net.all(4);
    assert_eq!(net.node(s).stats().in_flight, 0);
    net.node(s).send(&body(9, 1, b"x")).unwrap();
}

#[test]
fn live_node_learns_its_command_sequence_from_sender_state() {
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |_| {});
    net.all(5);
    for i in 0..3u8 {
        net.node(s).send(&body(9, 1, &[i])).unwrap();
    }
    net.all(5);
    // a restarted instance of S that does not rewind
    let s2 = net.add("S", Start::Live, |_| {});
    assert!(matches!(
        net.node(s2).send(b"early"),
        Err(SendError::NotReady)
    ));
    net.all(5);
    assert!(net.node(s2).is_ready());
    assert_eq!(net.node(s2).send(&body(9, 1, b"next")).unwrap(), 4);
    net.all(5);
    assert!(
        !net.records[s2].iter().any(|r| r.0 == RECORD_CAUGHT_UP),
        "live nodes do not rewind"
    );
    let last = net.records[s]
        .iter()
        .rfind(|r| r.0 == RECORD_MESSAGE)
        .unwrap();
    assert_eq!(last.3, body(9, 1, b"next"));
}

#[test]
fn a_gap_without_replayer_is_an_error() {
    let mut net = Net::new();
    // live starts: a rewinding node without replayers has a gap before its first packet
    let s = net.add("S", Start::Live, |o| o.replayers = Some(0));
    let r = net.add("R", Start::Live, |o| o.replayers = Some(0));
    net.all(5);
    net.node(s).send(&body(9, 1, b"lost for R")).unwrap();
    net.run(3, &|i| i != r).unwrap_or(());
    net.node(s).send(&body(9, 1, b"seen")).unwrap();
    let e = net.run(5, &|_| true).unwrap_err();
    assert!(matches!(e, NodeError::Gap { .. }), "{e}");
}

#[test]
fn rewind_from_a_given_sequence() {
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |_| {});
    net.all(5);
    for i in 0..20u8 {
        net.node(s).send(&body(9, 1, &[i])).unwrap();
        if i % 5 == 4 {
            net.all(4);
        }
    }
    net.all(4);
    let late = net.add("L", Start::From(10), |_| {});
    assert!(net.node(late).is_rewinding());
    net.all(8);
    assert!(!net.node(late).is_rewinding());
    let seqs: Vec<u64> = net.records[late]
        .iter()
        .filter(|r| r.0 == RECORD_MESSAGE)
        .map(|r| r.1)
        .collect();
    assert_eq!(seqs.first(), Some(&10));
    assert_eq!(
        seqs.last(),
        net.records[s]
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
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |_| {});
    net.all(5);
    for i in 0..20u8 {
        net.node(s).send(&body(9, 1, &[i])).unwrap();
        net.all(1);
    }
    net.all(4);
    let late = net.add("L", Start::From(1), |_| {});
    net.all(8);
    assert!(!net.node(late).is_rewinding());
    assert!(net.node(late).stats().requests > 0);
    net.all(200); // 20 ms: every request deadline has long passed
    let now = net.bus.now();
    let due = net.node(late).next_timeout();
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
    use seqbus_core::{Node, NodeParams, Replayer, Source};
    let mut net = Net::new();
    let twin = net.add("E", Start::From(1), |_| {});
    net.all(5);
    for i in 0..20u8 {
        net.node(twin).send(&body(9, 1, &[i])).unwrap();
        net.all(3);
    }
    net.all(4);
    let session = net.bus.params().session;
    let head = net.bus.next_seq();
    let mut store = net.bus.log(1).clone();
    let mut backup = Node::new(
        NodeParams {
            session,
            account: seqbus_wire::account("E").unwrap(),
            instance: 2,
            start: Start::From(1),
            topics: None,
            window: 8,
            max_packet: 1472,
            retry_ns: 1_000_000,
            request_timeout_ns: 1_000_000,
            request_backoff_max_ns: 8_000_000,
            failover_after: 2,
            replayers: 1,
            max_request: 1000,
            reorder_limit: 10_000,
        },
        net.bus.now(),
    );
    assert!(backup.is_rewinding());
    let request = seqbus_wire::mold::Request {
        session,
        sequence: 1,
        count: 1000,
    };
    let mut replayer = Replayer::new(session, 60_000, 1000);
    replayer
        .handle_request(&request.encode(), &mut store)
        .unwrap();
    let answers: Vec<Vec<u8>> =
        std::iter::from_fn(|| replayer.poll_transmit().map(<[u8]>::to_vec)).collect();
    for a in &answers {
        backup.handle_datagram(net.bus.now(), Source::Replayer(0), a);
    }
    let hb = seqbus_wire::mold::heartbeat(session, head);
    backup.handle_datagram(net.bus.now(), Source::Live, &hb);
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
        let r = Record::parse(&out, at).unwrap();
        at += r.len();
        if r.record_type == RECORD_MESSAGE && r.account() == b"E\0\0\0\0\0\0\0" {
            replayed.push(backup.send(&body(9, 1, &[r.body[8]])).unwrap());
        }
    }
    assert_eq!(replayed, (1..=20).collect::<Vec<u64>>());
    out.clear();
    assert_eq!(backup.deliver(&mut out, usize::MAX).unwrap(), 1);
    assert_eq!(u16::from_le_bytes([out[4], out[5]]), RECORD_CAUGHT_UP);
    assert!(!backup.is_rewinding());
    // its next command is the twin's next one, not beyond it
    assert_eq!(backup.send(&body(9, 1, &[99])).unwrap(), 21);
}

/// A body of `n` bytes (IDL header, schema 9 template 1) whose bytes tell `tag` apart.
fn big(tag: u8, n: usize) -> Vec<u8> {
    body(
        9,
        1,
        &(0..n).map(|i| tag ^ (i % 251) as u8).collect::<Vec<_>>(),
    )
}

fn sizes(bodies: &[Vec<u8>]) -> Vec<usize> {
    bodies.iter().map(Vec::len).collect()
}

/// The application messages a node was handed: (sequence, body).
fn delivered(recs: &[Rec]) -> Vec<(u64, Vec<u8>)> {
    recs.iter()
        .filter(|r| r.0 == RECORD_MESSAGE)
        .map(|r| (r.1, r.3.clone()))
        .collect()
}

/// S's first process dies after 3 of the 5 fragments of a body were sequenced; a new process
/// of S (hello → SenderState) then sends the next messages: `then_whole` first a small whole
/// message, else the next large body at once (its first fragment, flag 5, is what ends the
/// abandoned chain). Returns the bus, S's abandoned sequences, the sequences of the second
/// body's fragments, and R (a node that saw everything live).
fn sender_dies_between_fragments(then_whole: bool) -> (Net, Vec<u64>, Vec<u64>, usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut net = Net::new();
    let s = net.add("S", Start::From(1), |o| o.window = 32);
    let r = net.add("R", Start::From(1), |_| {});
    net.all(5);
    let first = big(1, 5 * 1400);
    // S's upstream datagrams carrying its commands 4 and later are lost until it dies
    let cut = Arc::new(AtomicBool::new(true));
    let c = cut.clone();
    net.bus.set_drop(Some(Box::new(move |link, data| {
        c.load(Ordering::Relaxed)
            && link == seqbus_sim::Link::Upstream { node: s }
            && seqbus_wire::UpstreamPacket::parse(data)
                .is_ok_and(|p| p.commands().any(|c| c.command_seq > 3))
    })));
    assert_eq!(net.node(s).send(&first).unwrap(), 5, "5 fragments");
    net.all(10);
    net.bus.remove_node(s);
    cut.store(false, Ordering::Relaxed);
    let stream = net.stream();
    let of_s = |stream: &[(u64, Vec<u8>)], flags: &[u8]| -> Vec<u64> {
        stream
            .iter()
            .filter(|(_, m)| {
                &m[16..17] == b"S" && m[26] == KIND_APPLICATION && flags.contains(&m[27])
            })
            .map(|(q, _)| *q)
            .collect()
    };
    let abandoned = of_s(&stream, &[1, 5]);
    assert_eq!(abandoned.len(), 3, "3 fragments of S sequenced, no last");
    assert_eq!(
        stream.iter().find(|(q, _)| *q == abandoned[0]).unwrap().1[27],
        5
    );
    // S again: a new process, no rewind
    let s2 = net.add("S", Start::Live, |o| o.window = 32);
    net.all(5);
    assert!(net.node(s2).is_ready());
    if then_whole {
        assert_eq!(net.node(s2).send(&body(9, 1, b"back")).unwrap(), 4);
        net.all(3);
    }
    let second = big(2, 4 * 1400);
    net.node(s2).send(&second).unwrap();
    net.node(s2).send(&body(9, 1, b"end")).unwrap();
    net.all(10);
    let stream = net.stream();
    let chain: Vec<u64> = of_s(&stream, &[1, 2, 5])
        .into_iter()
        .filter(|q| !abandoned.contains(q))
        .collect();
    assert_eq!(chain.len(), 4, "the second body: 4 fragments");
    (net, abandoned, chain, r)
}

#[test]
fn a_sender_that_dies_between_fragments_loses_only_that_message() {
    for then_whole in [false, true] {
        let (mut net, abandoned, chain, r) = sender_dies_between_fragments(then_whole);
        let second = big(2, 4 * 1400);
        let last = *chain.last().unwrap();
        let mut want = Vec::new();
        if then_whole {
            want.push(body(9, 1, b"back"));
        }
        want.extend([second.clone(), body(9, 1, b"end")]);
        // every node that read the whole stream: R live, L rewinding it all, M from the
        // middle of the abandoned chain
        let l = net.add("L", Start::From(1), |_| {});
        let m = net.add("M", Start::From(abandoned[1]), |_| {});
        net.all(10);
        for (node, fragments) in [(r, 3), (l, 3), (m, 2)] {
            let got = delivered(&net.records[node]);
            let bodies: Vec<Vec<u8>> = got.iter().map(|g| g.1.clone()).collect();
            assert!(
                bodies == want,
                "node {node} (then_whole {then_whole}) was handed bodies of {:?} bytes, not {:?}",
                sizes(&bodies),
                sizes(&want)
            );
            assert!(
                got.iter().any(|g| g.0 == last),
                "the body at its last fragment"
            );
            let st = net.node(node).stats();
            assert_eq!(
                (st.abandoned, st.abandoned_fragments, st.malformed),
                (1, fragments, 0),
                "node {node}"
            );
        }
        // a node that starts between the second body's fragments never hands out part of it
        let n = net.add("N", Start::From(chain[2]), |_| {});
        net.all(10);
        assert_eq!(
            delivered(&net.records[n]),
            vec![(last + 1, body(9, 1, b"end"))]
        );
        let st = net.node(n).stats();
        assert_eq!((st.malformed, st.abandoned), (1, 0));
    }
}

#[test]
fn an_archive_of_the_stream_agrees_with_the_nodes() {
    use seqbus_archive::reader::Mode;
    use seqbus_archive::verify::verify_archive;
    use seqbus_archive::{ArchiveReader, ArchiveWriter};
    let (net, abandoned, chain, r) = sender_dies_between_fragments(false);
    let t = tempfile::tempdir().unwrap();
    let mut w = ArchiveWriter::create(t.path(), "S1", 4096, &[]).unwrap();
    let stream = net.stream();
    for (q, m) in &stream {
        w.append(*q, m).unwrap();
    }
    w.seal().unwrap();
    let a = ArchiveReader::open(t.path()).unwrap();
    let hi = stream.last().unwrap().0;
    let mut problems = Vec::new();
    let mut got = Vec::new();
    a.read(1, hi, Mode::Messages, &mut problems, &mut |m| {
        if m.envelope[26] == KIND_APPLICATION {
            got.push((m.sequence, m.body.to_vec()));
        }
    });
    assert!(problems.is_empty(), "{problems:?}");
    let handed = delivered(&net.records[r]);
    assert!(
        got == handed,
        "archive cat: {:?}, R was handed {:?} (sequence, bytes)",
        got.iter().map(|g| (g.0, g.1.len())).collect::<Vec<_>>(),
        handed.iter().map(|g| (g.0, g.1.len())).collect::<Vec<_>>()
    );
    assert_eq!(got.len(), 2, "the second body and 'end'");
    // a read from the middle of the second body still hands it out whole, and nothing of
    // the abandoned one
    let mut tail = Vec::new();
    a.read(chain[2], hi, Mode::Messages, &mut problems, &mut |m| {
        if m.envelope[26] == KIND_APPLICATION {
            tail.push(m.body.to_vec());
        }
    });
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        tail == vec![big(2, 4 * 1400), body(9, 1, b"end")],
        "a read from the second body's middle: bodies of {:?} bytes",
        sizes(&tail)
    );
    // verify: sound, one message abandoned, its sequences named
    let rep = verify_archive(&a, &mut |_| {});
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert_eq!((rep.abandoned_messages, rep.fragmented_messages), (1, 1));
    assert_eq!(rep.warnings.len(), 1);
    let w = &rep.warnings[0];
    assert_eq!(w.sequence, abandoned[0]);
    let named = format!(
        "sequences {}-{}, 3 fragments",
        abandoned[0],
        abandoned.last().unwrap()
    );
    assert!(w.message.contains(&named), "{}", w.message);
    assert!(
        w.message
            .contains(&format!("sequence {} begins anew", chain[0])),
        "{}",
        w.message
    );
}

#[test]
fn a_hot_hot_twin_dying_between_fragments_loses_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mut net = Net::new();
    let e1 = net.add("E", Start::From(1), |o| o.window = 32);
    let e2 = net.add("E", Start::From(1), |o| {
        o.window = 32;
        o.instance = 2;
    });
    let r = net.add("R", Start::From(1), |_| {});
    net.all(5);
    // E#1's commands after its third never leave it; E#2's are lost until E#1 has died
    let e1_alive = Arc::new(AtomicBool::new(true));
    let alive = e1_alive.clone();
    net.bus.set_drop(Some(Box::new(move |link, data| {
        let commands = |d: &[u8]| {
            seqbus_wire::UpstreamPacket::parse(d).is_ok_and(|p| p.commands().next().is_some())
        };
        match link {
            seqbus_sim::Link::Upstream { node } if node == e1 => {
                seqbus_wire::UpstreamPacket::parse(data)
                    .is_ok_and(|p| p.commands().any(|c| c.command_seq > 3))
            }
            seqbus_sim::Link::Upstream { node } if node == e2 => {
                alive.load(Ordering::Relaxed) && commands(data)
            }
            _ => false,
        }
    })));
    let first = big(1, 5 * 1400);
    assert_eq!(net.node(e1).send(&first).unwrap(), 5);
    assert_eq!(net.node(e2).send(&first).unwrap(), 5);
    net.all(10);
    let seen = |net: &Net| {
        net.stream()
            .iter()
            .filter(|(_, m)| &m[16..17] == b"E" && m[26] == KIND_APPLICATION)
            .map(|(_, m)| (u16::from_le_bytes([m[24], m[25]]), m[27]))
            .collect::<Vec<_>>()
    };
    assert_eq!(seen(&net), [(1, 5), (1, 1), (1, 1)], "3 fragments from E#1");
    net.bus.remove_node(e1);
    e1_alive.store(false, Ordering::Relaxed);
    // E#2 resends what the stream has not shown; then both bodies go on from it alone
    net.all(40);
    let second = big(2, 4 * 1400);
    net.node(e2).send(&second).unwrap();
    net.all(10);
    assert_eq!(
        seen(&net),
        [
            (1, 5),
            (1, 1),
            (1, 1),
            (2, 1),
            (2, 2),
            (2, 5),
            (2, 1),
            (2, 1),
            (2, 2)
        ],
        "E#2 sent the rest of the first body, then the second"
    );
    for node in [r, e2] {
        let bodies: Vec<Vec<u8>> = delivered(&net.records[node])
            .into_iter()
            .map(|g| g.1)
            .collect();
        assert!(
            bodies == [first.clone(), second.clone()],
            "node {node} was handed bodies of {:?} bytes",
            sizes(&bodies)
        );
        let st = net.node(node).stats();
        assert_eq!((st.abandoned, st.malformed), (0, 0), "node {node}");
    }
}

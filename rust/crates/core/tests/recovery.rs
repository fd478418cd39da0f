//! Loss costs round trips, not timer periods (virtual time, one-way delay 50 µs): a lost
//! command is asked for by the sequencer's NAK, a lost last packet of a burst is announced by
//! the early heartbeat that follows it, and a lost replay answer is asked for again after a
//! timeout learned from the replayer's round trip — each recovered within a few round trips
//! while the fixed timers (command retry 50 ms, heartbeat 1 s, request timeout 10 ms) are far
//! longer.

use std::collections::VecDeque;

use seqbus_core::node::RECORD_MESSAGE;
use seqbus_core::{
    Dest, MemoryStore, Node, NodeParams, Recovered, Replayer, Sequencer, SequencerParams, Source,
    Start,
};
use seqbus_wire::mold::MoldPacket;
use seqbus_wire::Session;

const DELAY: u64 = 50_000;
const RTT: u64 = 2 * DELAY;

fn session() -> Session {
    Session::new("REC").unwrap()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Sequencer,
    Replayer,
    Node(bool),
}

/// A sequencer, its replayer and one node, with every datagram delayed by `DELAY`; `drop`
/// decides which are lost.
struct Net {
    now: u64,
    seq: Sequencer,
    store: MemoryStore,
    replayer: Replayer,
    node: Node,
    queue: VecDeque<(u64, To, Vec<u8>)>,
    out: Vec<u8>,
    /// (sequence, virtual time) of every message record the node handed out.
    handed: Vec<(u64, u64)>,
}

impl Net {
    fn new(start: Start) -> Net {
        let now = 1_000_000_000;
        let seq = Sequencer::new(
            SequencerParams {
                session: session(),
                max_packet: 1472,
                heartbeat_ns: 1_000_000_000,
                clock_tick_ns: 0,
                term: 0,
                leader: 0,
            },
            Recovered::new_session(),
            now,
        );
        let node = Node::new(
            NodeParams {
                session: session(),
                account: seqbus_wire::account("N").unwrap(),
                instance: 1,
                start,
                topics: None,
                window: 64,
                max_packet: 1472,
                retry_ns: 50_000_000,
                request_timeout_ns: 10_000_000,
                request_backoff_max_ns: 100_000_000,
                failover_after: 4,
                replayers: 1,
                max_request: 100,
                reorder_limit: 1 << 16,
            },
            now,
        );
        Net {
            now,
            seq,
            store: MemoryStore::default(),
            replayer: Replayer::new(session(), 60_000, 100),
            node,
            queue: VecDeque::new(),
            out: Vec::new(),
            handed: Vec::new(),
        }
    }

    /// One step of 10 µs; `drop(to, datagram)` loses a datagram.
    fn step(&mut self, drop: &mut dyn FnMut(To, &[u8]) -> bool) {
        self.now += 10_000;
        let now = self.now;
        while self.queue.front().is_some_and(|e| e.0 <= now) {
            let (_, to, d) = self.queue.pop_front().unwrap();
            match to {
                To::Sequencer => {
                    self.seq.handle_upstream(now, &d);
                    if let Some(nak) = self.seq.take_nak() {
                        self.push(To::Node(false), &nak, drop);
                    }
                }
                To::Replayer => {
                    let mut answers = Vec::new();
                    self.replayer
                        .handle_request(&d, &mut self.store, &mut |p| answers.push(p.to_vec()))
                        .unwrap();
                    for a in answers {
                        self.push(To::Node(false), &a, drop);
                    }
                }
                To::Node(true) => self.node.handle_datagram(now, Source::Live, &d),
                To::Node(false) => {
                    if seqbus_wire::upstream::Nak::is_nak(&d) {
                        self.node.handle_nak(now, &d);
                    } else {
                        self.node.handle_datagram(now, Source::Replayer(0), &d);
                    }
                }
            }
        }
        if self.seq.has_pending() {
            self.seq.mark_written();
            for (_, m) in self.seq.pending() {
                self.store.push(m);
            }
            let mut packets = Vec::new();
            self.seq.packets(|p| packets.push(p.to_vec()));
            self.seq.published(now);
            for p in packets {
                self.push(To::Node(true), &p, drop);
            }
        } else if let Some(hb) = self.seq.poll_heartbeat(now) {
            self.push(To::Node(true), &hb, drop);
        }
        self.out.clear();
        self.node.deliver(&mut self.out, usize::MAX).unwrap();
        let mut at = 0;
        while at < self.out.len() {
            let len = u32::from_le_bytes(self.out[at..at + 4].try_into().unwrap()) as usize;
            let ty = u16::from_le_bytes(self.out[at + 4..at + 6].try_into().unwrap());
            let s = u64::from_le_bytes(self.out[at + 8..at + 16].try_into().unwrap());
            if ty == RECORD_MESSAGE {
                self.handed.push((s, now));
            }
            at += len;
        }
        let mut sends = Vec::new();
        self.node
            .poll_transmit(now, &mut |d, data| sends.push((d, data.to_vec())));
        for (d, data) in sends {
            let to = match d {
                Dest::Sequencer | Dest::AllSequencers => To::Sequencer,
                Dest::Replayer(_) => To::Replayer,
            };
            self.push(to, &data, drop);
        }
    }

    fn push(&mut self, to: To, data: &[u8], drop: &mut dyn FnMut(To, &[u8]) -> bool) {
        if !drop(to, data) {
            self.queue.push_back((self.now + DELAY, to, data.to_vec()));
        }
    }

    fn run_until(
        &mut self,
        limit_ns: u64,
        done: &dyn Fn(&Net) -> bool,
        drop: &mut dyn FnMut(To, &[u8]) -> bool,
    ) -> u64 {
        let start = self.now;
        while !done(self) {
            assert!(
                self.now - start < limit_ns,
                "not within {limit_ns} ns of virtual time"
            );
            self.step(drop);
        }
        self.now - start
    }
}

fn body(i: u64) -> Vec<u8> {
    let mut b = vec![16, 0, 1, 0, 9, 0, 1, 0];
    b.extend_from_slice(&i.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b
}

/// Loses the first datagram carrying messages that goes `to` (a live packet, or an answer).
fn lose_first(to: To) -> impl FnMut(To, &[u8]) -> bool {
    let mut lost = false;
    move |t: To, d: &[u8]| {
        if t == to && !lost && MoldPacket::parse(d).is_ok_and(|p| p.message_count() > 0) {
            lost = true;
            return true;
        }
        false
    }
}

/// Sends `n` commands, one datagram each, letting the node learn its round trip first.
fn warm_up(net: &mut Net) {
    let mut keep = |_: To, _: &[u8]| false;
    net.run_until(10_000_000, &|n| n.node.is_ready(), &mut keep);
    for i in 0..20 {
        net.node.send(&body(i)).unwrap();
        let want = net.handed.len() + 1;
        net.run_until(10_000_000, &|n| n.handed.len() >= want, &mut keep);
    }
    assert!(net.node.stats().srtt_ns > 0, "{:?}", net.node.stats());
}

#[test]
fn a_lost_command_is_asked_for_by_the_sequencer() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // three commands in three datagrams; the second is lost on its way to the sequencer
    let mut upstream = 0;
    let mut lose_second = |to: To, _: &[u8]| {
        if to == To::Sequencer {
            upstream += 1;
            return upstream == 2;
        }
        false
    };
    let before = net.handed.len();
    for i in 100..103 {
        net.node.send(&body(i)).unwrap();
        net.step(&mut lose_second);
    }
    let took = net.run_until(
        50_000_000,
        &|n| n.handed.len() >= before + 3,
        &mut |_, _| false,
    );
    let st = net.node.stats();
    assert_eq!(st.naks, 1, "{st:?}");
    assert_eq!(net.seq.stats().naks, 1);
    // a NAK's round trip and the resent command's: a few round trips, not 50 ms
    assert!(took <= 6 * RTT, "recovered in {took} ns, {st:?}");
}

#[test]
fn a_lost_last_packet_is_announced_by_the_early_heartbeat() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // the packet carrying the next message (the last of its burst) is lost on its way down
    let mut lose_data = lose_first(To::Node(true));
    let before = net.handed.len();
    net.node.send(&body(200)).unwrap();
    let took = net.run_until(50_000_000, &|n| n.handed.len() > before, &mut lose_data);
    // the heartbeat 250 µs after the data, then a replay round trip: not a 1 s heartbeat
    assert!(
        took <= 250_000 + 8 * RTT,
        "recovered in {took} ns, {:?}",
        net.node.stats()
    );
    assert!(net.node.stats().retransmits >= 1);
}

#[test]
fn a_lost_replay_answer_is_asked_for_again_after_a_learned_timeout() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // time a few replay round trips: a live packet lost each time, filled from the replayer
    for k in 0..5 {
        let mut lose_data = lose_first(To::Node(true));
        let before = net.handed.len();
        net.node.send(&body(300 + k)).unwrap();
        net.run_until(50_000_000, &|n| n.handed.len() > before, &mut lose_data);
    }
    // now the data packet is lost and so is the replayer's first answer
    let (mut lost_data, mut lost_answer) = (false, false);
    let mut lose_both = |to: To, d: &[u8]| {
        let Ok(p) = MoldPacket::parse(d) else {
            return false;
        };
        if p.message_count() == 0 {
            return false;
        }
        if to == To::Node(true) && !lost_data {
            lost_data = true;
            return true;
        }
        if to == To::Node(false) && !lost_answer {
            lost_answer = true;
            return true;
        }
        false
    };
    let before = net.handed.len();
    net.node.send(&body(400)).unwrap();
    let took = net.run_until(50_000_000, &|n| n.handed.len() > before, &mut lose_both);
    let st = net.node.stats();
    assert!(st.requests >= 7, "{st:?}");
    // tail heartbeat, a lost round trip, the learned timeout (well under the 10 ms request
    // timeout), one more round trip
    assert!(
        took <= 250_000 + 12 * RTT + 1_000_000,
        "recovered in {took} ns, {st:?}"
    );
}

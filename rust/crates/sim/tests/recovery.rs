//! Loss costs round trips, not timer periods (the simulated bus, one-way delay 50 µs): a lost
//! command is asked for by the sequencer's NAK, a lost last packet of a burst is announced by
//! the early heartbeat that follows it, and a lost replay answer is asked for again after a
//! timeout learned from the replayer's round trip — each recovered within a few round trips
//! (also when the replayer asked first lost the same packet) while the fixed timers (command retry 50 ms, heartbeat 1 s, request timeout 10 ms) are far
//! longer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use seqbus_core::delivery::{Record, RECORD_MESSAGE};
use seqbus_core::sequencer::MAX_HELD;
use seqbus_core::{Node, NodeParams, SequencerStats, Start};
use seqbus_sim::{Bus, Faults, Link, NodeOptions, SimParams};
use seqbus_wire::mold::MoldPacket;

const DELAY: u64 = 50_000;
const RTT: u64 = 2 * DELAY;

/// Where a datagram goes, as these tests pick what is lost.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Sequencer,
    /// A node: live (true), or a replayer's answer or a NAK (false).
    Node(bool),
    Other,
}

fn to(link: Link) -> To {
    match link {
        Link::Upstream { .. } => To::Sequencer,
        Link::Live { .. } => To::Node(true),
        Link::Answer { .. } | Link::Nak { .. } => To::Node(false),
        Link::Other => To::Other,
    }
}

/// Which datagrams are lost: true loses it.
type Lose = Box<dyn FnMut(To, &[u8]) -> bool + Send + Sync>;

/// One sequencer, its replayer and one node on the simulated bus, every datagram delayed by
/// `DELAY`; the test's filter decides which are lost.
struct Net {
    bus: Bus,
    lose: Arc<Mutex<Lose>>,
    out: Vec<u8>,
    /// (sequence, virtual time) of every message record the node handed out.
    handed: Vec<(u64, u64)>,
}

fn keep() -> Lose {
    Box::new(|_, _| false)
}

impl Net {
    fn new(start: Start) -> Net {
        Net::with_replayers(start, false, None)
    }

    /// With `following`, a replayer that follows the live stream is the node's first replayer
    /// (the sequencer's own second), or its only one with `replayers` = Some(1).
    fn with_replayers(start: Start, following: bool, replayers: Option<usize>) -> Net {
        Net::build(start, following, replayers, 64, MAX_HELD)
    }

    /// The node's window, and what the sequencer holds per account after a gap.
    fn build(
        start: Start,
        following: bool,
        replayers: Option<usize>,
        window: usize,
        max_held: usize,
    ) -> Net {
        let mut p = SimParams::new(1, 1, Faults::clean(DELAY));
        p.max_held = max_held;
        p.following_replayer = following;
        p.follower_first = following;
        p.heartbeat_ns = 1_000_000_000;
        p.clock_tick_ns = 0;
        let mut bus = Bus::new(p);
        let params = NodeParams {
            window,
            retry_ns: 50_000_000,
            request_timeout_ns: 10_000_000,
            request_backoff_max_ns: 100_000_000,
            failover_after: 4,
            max_request: 100,
            reorder_limit: 1 << 16,
            ..bus.node_params(&NodeOptions {
                replayers,
                ..NodeOptions::new("N", start)
            })
        };
        bus.add_node_with(params);
        let lose = Arc::new(Mutex::new(keep()));
        let l = lose.clone();
        bus.set_drop(Some(Box::new(move |link, d| {
            (l.lock().unwrap())(to(link), d)
        })));
        Net {
            bus,
            lose,
            out: Vec::new(),
            handed: Vec::new(),
        }
    }

    /// From now on, `lose` picks the datagrams the network loses.
    fn losing(&mut self, lose: Lose) {
        *self.lose.lock().unwrap() = lose;
    }

    fn node(&mut self) -> &mut Node {
        &mut self.bus.node(0).expect("on the bus").node
    }

    fn now(&self) -> u64 {
        self.bus.now()
    }

    fn sequencer_stats(&self) -> SequencerStats {
        self.bus
            .member(1)
            .and_then(|m| m.sequencer())
            .expect("the sequencer leads")
            .stats()
    }

    /// One step of 10 µs.
    fn step(&mut self) {
        self.bus.advance(10_000, 10_000);
        self.bus.process();
        self.out.clear();
        self.bus.deliver(0, &mut self.out, usize::MAX).unwrap();
        let mut at = 0;
        while at < self.out.len() {
            let r = Record::parse(&self.out, at).unwrap();
            at += r.len();
            if r.record_type == RECORD_MESSAGE {
                self.handed.push((r.sequence, self.bus.now()));
            }
        }
        self.bus.transmit(0);
    }

    fn run_until(&mut self, limit_ns: u64, done: &dyn Fn(&Net) -> bool) -> u64 {
        let start = self.now();
        while !done(self) {
            assert!(
                self.now() - start < limit_ns,
                "not within {limit_ns} ns of virtual time"
            );
            self.step();
        }
        self.now() - start
    }
}

fn body(i: u64) -> Vec<u8> {
    let mut b = vec![16, 0, 1, 0, 9, 0, 1, 0];
    b.extend_from_slice(&i.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b
}

/// A body of 600 bytes: two fill an upstream packet, so a few in flight no longer fit one.
fn big_body(i: u64) -> Vec<u8> {
    let mut b = body(i);
    b.resize(600, 0);
    b
}

/// Loses the first datagram carrying messages that goes `to` (a live packet, or an answer).
fn lose_first(to: To) -> Lose {
    let mut lost = false;
    Box::new(move |t: To, d: &[u8]| {
        if t == to && !lost && MoldPacket::parse(d).is_ok_and(|p| p.message_count() > 0) {
            lost = true;
            return true;
        }
        false
    })
}

/// Sends `n` commands, one datagram each, letting the node learn its round trip first.
fn warm_up(net: &mut Net) {
    net.losing(keep());
    net.run_until(10_000_000, &|n| {
        n.bus.node_ref(0).is_some_and(|s| s.node.is_ready())
    });
    for i in 0..20 {
        net.node().send(&body(i)).unwrap();
        let want = net.handed.len() + 1;
        net.run_until(10_000_000, &|n| n.handed.len() >= want);
    }
    assert!(net.node().stats().srtt_ns > 0, "{:?}", net.node().stats());
}

#[test]
fn a_lost_command_is_asked_for_by_the_sequencer() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // three commands in three datagrams; the second is lost on its way to the sequencer
    net.losing(lose_upstream(&[2]));
    let before = net.handed.len();
    for i in 100..103 {
        net.node().send(&body(i)).unwrap();
        net.step();
    }
    net.losing(keep());
    let took = net.run_until(50_000_000, &|n| n.handed.len() >= before + 3);
    let st = net.node().stats();
    assert_eq!(st.naks, 1, "{st:?}");
    assert_eq!(net.sequencer_stats().naks, 1);
    // a NAK's round trip and the resent command's: a few round trips, not 50 ms
    assert!(took <= 6 * RTT, "recovered in {took} ns, {st:?}");
}

/// A window of 1,000 commands sent at once, the first upstream datagram of them lost: the
/// sequencer NAKs the commands it carried, holding up to `max_held` of those after them.
/// Returns the virtual time until all were in the stream and the node's stats.
fn a_full_window_after_a_loss(max_held: usize) -> (u64, seqbus_core::NodeStats) {
    let mut net = Net::build(Start::Live, false, None, 1_000, max_held);
    warm_up(&mut net);
    net.losing(lose_upstream(&[1]));
    let before = net.handed.len();
    let sent_at = net.now();
    for i in 0..1_000 {
        net.node().send(&body(700 + i)).unwrap();
    }
    net.run_until(200_000_000, &|n| n.handed.len() >= before + 1_000);
    let took = net.now() - sent_at;
    let want: Vec<u64> = (0..1_000).map(|k| net.handed[before].0 + k).collect();
    let got: Vec<u64> = net.handed[before..].iter().map(|h| h.0).collect();
    assert_eq!(got, want, "each once, in order");
    (took, net.node().stats())
}

#[test]
fn a_sequencer_that_holds_the_window_repairs_a_loss_with_one_nak() {
    // `sequencer.max_held` at the window (its default is `node.window`): one NAK, the lost
    // datagram's commands alone sent again, a few round trips
    let (took, st) = a_full_window_after_a_loss(1_000);
    assert_eq!((st.naks, st.probes), (1, 0), "{st:?}");
    assert!(st.resent > 0 && st.resent < 100, "{st:?}");
    assert!(took <= 6 * RTT, "recovered in {took} ns, {st:?}");
    // holding fewer than the window: what it dropped after the gap waits for the node's
    // retransmission timeout, which sends all of it again
    let (short_took, short) = a_full_window_after_a_loss(MAX_HELD);
    assert!(short.resent >= (1_000 - MAX_HELD) as u64, "{short:?}");
    assert!(
        short_took > took + short.rto_ns / 2,
        "{short_took} ns, {short:?}"
    );
}

/// Loses the upstream datagrams numbered (from 1, counted from now) in `lost`.
fn lose_upstream(lost: &'static [u32]) -> Lose {
    let mut upstream = 0;
    Box::new(move |to: To, _: &[u8]| {
        if to == To::Sequencer {
            upstream += 1;
            return lost.contains(&upstream);
        }
        false
    })
}

#[test]
fn a_lost_tail_of_commands_is_found_by_one_probe() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    let rto = net.node().stats().rto_ns;
    // ten commands in ten datagrams; the last three are lost: nothing after them shows the
    // sequencer a gap
    net.losing(lose_upstream(&[8, 9, 10]));
    let before = net.handed.len();
    let sent_at = net.now();
    for i in 300..310 {
        net.node().send(&big_body(i)).unwrap();
        net.step();
    }
    net.losing(keep());
    net.run_until(50_000_000, &|n| n.handed.len() >= before + 10);
    let took = net.now() - sent_at;
    let st = net.node().stats();
    // the timeout sends the oldest command and the last as a probe; the sequencer takes the
    // first, holds the last and NAKs the one between, which alone is sent again
    assert_eq!((st.probes, st.naks, st.resent), (1, 1, 3), "{st:?}");
    assert_eq!(net.sequencer_stats().naks, 1);
    // one timeout (learned from the round trip: not the 50 ms ceiling), then the probe's
    // round trip and the resend's
    assert!(rto < 1_000_000, "{st:?}");
    assert!(
        took <= 100_000 + rto + 6 * RTT,
        "recovered in {took} ns, {st:?}"
    );
}

#[test]
fn confirmations_that_are_only_late_cost_one_probe_not_the_window() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // the sequencer is descheduled (SIGSTOP) with twenty commands on their way to it, for
    // longer than the node's retransmission timeout
    net.bus.pause_member(1);
    let before = net.handed.len();
    for i in 400..420 {
        net.node().send(&big_body(i)).unwrap();
    }
    net.step();
    net.run_until(50_000_000, &|n| {
        n.bus
            .node_ref(0)
            .is_some_and(|s| s.node.stats().probes == 1)
    });
    net.bus.resume_member(1, false);
    net.run_until(50_000_000, &|n| n.handed.len() >= before + 20);
    let st = net.node().stats();
    // two commands sent again (the probe), not the twenty in flight; the sequencer drops
    // them as duplicates
    assert_eq!((st.probes, st.resent, st.naks), (1, 2, 0), "{st:?}");
    assert_eq!(net.sequencer_stats().duplicates, 2);
    let want: Vec<u64> = (0..20).map(|k| net.handed[before].0 + k).collect();
    let got: Vec<u64> = net.handed[before..].iter().map(|h| h.0).collect();
    assert_eq!(got, want, "each once, in order");
}

/// `n` big commands in `n` datagrams to a sequencer with NAKs off
/// (`sequencer.nak_holdoff_us = 0`, or commands over TCP, where none are sent), the upstream
/// datagrams numbered in `lost` lost (the one after the commands is the probe): all must be in
/// the stream after one probe, `resent` commands sent again, within a timeout, another after
/// the probe and a round trip — far from the 50 ms ceiling.
fn without_naks(n: u64, lost: &'static [u32], resent: u64) {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    net.bus.member_mut(1).expect("running").set_nak_holdoff(0);
    let rto = net.node().stats().rto_ns;
    net.losing(lose_upstream(lost));
    let before = net.handed.len();
    let sent_at = net.now();
    for i in 0..n {
        net.node().send(&big_body(500 + i)).unwrap();
        net.step();
    }
    net.run_until(50_000_000, &|net| net.handed.len() >= before + n as usize);
    let took = net.now() - sent_at;
    let st = net.node().stats();
    assert_eq!((st.probes, st.naks, st.resent), (1, 0, resent), "{st:?}");
    assert!(
        took <= 100_000 + 2 * rto + 4 * RTT,
        "recovered in {took} ns, {st:?}"
    );
}

#[test]
fn without_naks_the_timeout_after_a_probe_sends_everything_again() {
    // the second of four commands is lost, and so is the probe: nothing answers, so the
    // node's wait for the probe ends in sending everything from the oldest again — the probe
    // (the second command and the fourth), then the three unconfirmed
    without_naks(4, &[2, 5], 2 + 3);
}

#[test]
fn without_naks_a_probe_that_fills_only_the_first_gap_is_followed_by_everything() {
    // the second and third of five commands are lost; the probe (the second and the fifth)
    // fills the first gap, so the second is confirmed, but no NAK asks for the third: the
    // next timeout sends the third, fourth and fifth, not one probe per timeout (which would
    // bring one command per timeout)
    without_naks(5, &[2, 3], 2 + 3);
}

#[test]
fn what_fits_one_packet_is_sent_again_whole_without_a_probe() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // the last two of five small commands are lost: both fit one datagram, which goes out
    // again at the timeout (no probe, no NAK's round trip to wait for)
    net.losing(lose_upstream(&[4, 5]));
    let before = net.handed.len();
    for i in 600..605 {
        net.node().send(&body(i)).unwrap();
        net.step();
    }
    net.losing(keep());
    net.run_until(50_000_000, &|n| n.handed.len() >= before + 5);
    let st = net.node().stats();
    assert_eq!((st.probes, st.naks, st.resent), (0, 0, 2), "{st:?}");
}

#[test]
fn a_lost_last_packet_is_announced_by_the_early_heartbeat() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // the packet carrying the next message (the last of its burst) is lost on its way down
    net.losing(lose_first(To::Node(true)));
    let before = net.handed.len();
    net.node().send(&body(200)).unwrap();
    let took = net.run_until(50_000_000, &|n| n.handed.len() > before);
    // the heartbeat 250 µs after the data, then a replay round trip: not a 1 s heartbeat
    assert!(
        took <= 250_000 + 8 * RTT,
        "recovered in {took} ns, {:?}",
        net.node().stats()
    );
    assert!(net.node().stats().retransmits >= 1);
}

#[test]
fn a_lost_replay_answer_is_asked_for_again_after_a_learned_timeout() {
    let mut net = Net::new(Start::Live);
    warm_up(&mut net);
    // time a few replay round trips: a live packet lost each time, filled from the replayer
    for k in 0..5 {
        net.losing(lose_first(To::Node(true)));
        let before = net.handed.len();
        net.node().send(&body(300 + k)).unwrap();
        net.run_until(50_000_000, &|n| n.handed.len() > before);
    }
    // now the data packet is lost and so is the replayer's first answer
    let (mut lost_data, mut lost_answer) = (false, false);
    net.losing(Box::new(move |to: To, d: &[u8]| {
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
    }));
    let before = net.handed.len();
    net.node().send(&body(400)).unwrap();
    let took = net.run_until(50_000_000, &|n| n.handed.len() > before);
    let st = net.node().stats();
    assert!(st.requests >= 7, "{st:?}");
    // tail heartbeat, a lost round trip, the learned timeout (well under the 10 ms request
    // timeout), one more round trip
    assert!(
        took <= 250_000 + 12 * RTT + 1_000_000,
        "recovered in {took} ns, {st:?}"
    );
}

/// Loses the first live packet of messages to the node and every packet of messages to the
/// following replayer (live or answers to its own requests) while `starve` says so: the
/// follower holds nothing from the node's gap on until it is let through.
fn lose_to_node_and_follower(starve: Arc<AtomicBool>) -> Lose {
    let mut lost_live = false;
    Box::new(move |to: To, d: &[u8]| {
        if !MoldPacket::parse(d).is_ok_and(|p| p.message_count() > 0) {
            return false;
        }
        match to {
            To::Node(true) if !lost_live => {
                lost_live = true;
                true
            }
            To::Other => starve.load(Ordering::Relaxed),
            _ => false,
        }
    })
}

#[test]
fn a_replayer_that_lost_the_same_packet_sends_the_node_to_the_next_one() {
    // the node asks the following replayer first; it lost the same packet (a multicast drop
    // every receiver sees) and cannot fill it: it answers that it holds nothing from the gap
    // on, and the node asks the sequencer's replayer at once
    let mut net = Net::with_replayers(Start::Live, true, None);
    warm_up(&mut net);
    let starve = Arc::new(AtomicBool::new(true));
    net.losing(lose_to_node_and_follower(starve.clone()));
    let before = net.handed.len();
    let (asked, gaps) = (net.node().stats().requests, net.node().stats().gaps);
    net.node().send(&body(500)).unwrap();
    let took = net.run_until(50_000_000, &|n| n.handed.len() > before);
    let st = net.node().stats();
    // the early heartbeat, a round trip to the follower, one to the sequencer's replayer
    assert!(took <= 250_000 + 6 * RTT, "recovered in {took} ns, {st:?}");
    assert!(st.requests - asked <= 3, "{st:?}");
    assert_eq!(st.gaps, gaps + 1, "one gap, asked twice: {st:?}");
    starve.store(false, Ordering::Relaxed);
}

#[test]
fn a_node_whose_only_replayer_is_behind_waits_before_asking_again() {
    // the only replayer lost the packet too and cannot fill it for 5 ms: the node asks it
    // again after a learned timeout each time it says it is behind, not once per round trip
    let mut net = Net::with_replayers(Start::Live, true, Some(1));
    warm_up(&mut net);
    let starve = Arc::new(AtomicBool::new(true));
    net.losing(lose_to_node_and_follower(starve.clone()));
    let before = net.handed.len();
    let asked = net.node().stats().requests;
    net.node().send(&body(600)).unwrap();
    let start = net.now();
    net.run_until(5_000_000, &|n| n.now() - start >= 4_900_000);
    assert_eq!(net.handed.len(), before, "the follower cannot fill it yet");
    let st = net.node().stats();
    let during = st.requests - asked;
    // asking once a round trip would be ~45 requests in 4.9 ms; a timeout of at least 2 round
    // trips between "behind" and the next request keeps it under 20
    assert!(
        (1..20).contains(&during),
        "{during} requests while behind: {st:?}"
    );
    starve.store(false, Ordering::Relaxed);
    let took = net.run_until(50_000_000, &|n| n.handed.len() > before);
    assert!(
        took <= 10_000_000,
        "filled {took} ns after the follower could, {st:?}"
    );
}

//! The walking skeleton over real sockets: sequencer, journal, MoldUDP64 downstream, nodes.

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::*;
use seqbus_net::{NodeClient, NodeOptions, Start, RECORD_CAUGHT_UP};

fn skeleton(transport: &str, b: &Bus) {
    let seq = start_sequencer(&b.cfg);
    let subs = b.cfg.downstream.subscribers.clone();
    let opts = |acct: &str, i: usize, start| {
        let mut o = NodeOptions::new(acct, 1, start);
        if transport == "udp-unicast" {
            o.listen = Some(subs[i]);
        }
        o
    };
    let mut a = NodeClient::connect(&b.cfg, opts("A", 0, Start::From(1))).unwrap();
    let mut c = NodeClient::connect(&b.cfg, opts("C", 1, Start::From(1))).unwrap();
    let (mut ga, mut gc) = (Vec::new(), Vec::new());
    assert!(poll_until(&mut a, &mut ga, Duration::from_secs(5), |r| r
        .iter()
        .any(|x| x.0 == RECORD_CAUGHT_UP)));
    assert!(poll_until(&mut c, &mut gc, Duration::from_secs(5), |r| r
        .iter()
        .any(|x| x.0 == RECORD_CAUGHT_UP)));
    if b.cfg.sequencer.pipeline == seqbus_net::config::Pipeline::On {
        // (other tests of this process may run sequencers too: only presence is telling; a
        // node may be caught up by the replayer before the loop started its receive thread)
        let end = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let names: Vec<String> = std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|n| n.trim().to_string())
                .collect();
            let missing: Vec<_> = ["seqbus-receive", "seqbus-publish"]
                .into_iter()
                .filter(|stage| !names.iter().any(|n| n == stage))
                .collect();
            if missing.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < end,
                "no {missing:?} thread: {names:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // malformed datagrams to the sequencer and to a node are counted and dropped
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    junk.send_to(b"not a packet", b.cfg.sequencer.upstream)
        .unwrap();
    let node_addr = match transport {
        "udp-unicast" => subs[0],
        _ => b.cfg.downstream.group.unwrap(),
    };
    junk.send_to(b"also not a packet", node_addr).unwrap();
    for i in 0..200u32 {
        loop {
            match a.send(&body(&i.to_le_bytes())) {
                Ok(_) => break,
                Err(seqbus_net::SendError::WindowFull { .. }) => {
                    poll_until(&mut a, &mut ga, Duration::from_millis(5), |_| false);
                }
                Err(e) => panic!("{e}"),
            }
        }
        c.send(&body(&(1000 + i).to_le_bytes())).unwrap();
    }
    // sends are queued and go out with the next poll or flush
    c.flush().unwrap();
    let done = |r: &[Rec]| messages(r).len() >= 400;
    assert!(
        poll_until(&mut a, &mut ga, Duration::from_secs(10), done),
        "A got {}",
        messages(&ga).len()
    );
    assert!(
        poll_until(&mut c, &mut gc, Duration::from_secs(10), done),
        "C got {}",
        messages(&gc).len()
    );
    let ma: Vec<_> = messages(&ga).into_iter().cloned().collect();
    let mc: Vec<_> = messages(&gc).into_iter().cloned().collect();
    assert_eq!(ma, mc, "both nodes see the same stream");
    assert!(ma.windows(2).all(|w| w[0].1 < w[1].1));
    // per sender, in send order, each exactly once
    let from_a: Vec<u64> = ma
        .iter()
        .filter(|r| r.2.starts_with(b"A\0"))
        .map(|r| r.3)
        .collect();
    assert_eq!(from_a, (1..=200).collect::<Vec<_>>());
    assert_eq!(a.stats().malformed, 1);
    // a late joiner rewinds the same stream from the journal through the replayer
    let mut late = NodeClient::connect(&b.cfg, opts("L", 2, Start::From(1))).unwrap();
    let mut gl = Vec::new();
    assert!(poll_until(
        &mut late,
        &mut gl,
        Duration::from_secs(10),
        |r| r.iter().any(|x| x.0 == RECORD_CAUGHT_UP)
    ));
    let ml: Vec<_> = messages(&gl).into_iter().cloned().collect();
    assert_eq!(ml[..400], ma[..400]);
    assert!(late.stats().retransmits > 0);
    seq.shutdown();
}

#[test]
fn skeleton_unicast() {
    let b = bus("udp-unicast", "");
    skeleton("udp-unicast", &b);
}

#[test]
fn skeleton_multicast() {
    if !in_netns("skeleton_multicast") {
        return;
    }
    let b = bus("udp-multicast", "");
    skeleton("udp-multicast", &b);
}

/// `b` with `[sequencer]` keys added.
fn with_sequencer_keys(mut b: Bus, keys: &str) -> Bus {
    let text = std::fs::read_to_string(b.dir.path().join("bus.toml"))
        .unwrap()
        .replace("[sequencer]\n", &format!("[sequencer]\n{keys}"));
    b.cfg = write_config(b.dir.path(), &text);
    b
}

#[test]
fn skeleton_unicast_pipelined() {
    // receiving, the loop and publishing on three threads (sequencer.pipeline = "on"),
    // whatever the CPUs: the same stream, the same counts, the same rewind
    for idle in ["block", "hybrid", "busy-spin"] {
        let b = bus("udp-unicast", "");
        let b = with_sequencer_keys(b, &format!("pipeline = \"on\"\nidle = \"{idle}\"\n"));
        skeleton("udp-unicast", &b);
    }
}

#[test]
fn skeleton_multicast_pipelined() {
    if !in_netns("skeleton_multicast_pipelined") {
        return;
    }
    let b = with_sequencer_keys(bus("udp-multicast", ""), "pipeline = \"on\"\n");
    skeleton("udp-multicast", &b);
}

#[test]
fn end_of_session_stops_nodes_after_everything_was_delivered() {
    for keys in ["", "pipeline = \"on\"\n"] {
        end_of_session(keys);
    }
}

fn end_of_session(keys: &str) {
    let b = bus("udp-unicast", "");
    let b = with_sequencer_keys(b, &format!("end_session_on_stop = true\n{keys}"));
    let cfg = b.cfg.clone();
    let seq = start_sequencer(&cfg);
    let mut o = NodeOptions::new("A", 1, Start::From(1));
    o.listen = Some(cfg.downstream.subscribers[0]);
    let mut a = NodeClient::connect(&cfg, o).unwrap();
    let mut got = Vec::new();
    assert!(poll_until(&mut a, &mut got, Duration::from_secs(5), |r| r
        .iter()
        .any(|x| x.0 == RECORD_CAUGHT_UP)));
    a.send(&body(b"last words")).unwrap();
    assert!(poll_until(
        &mut a,
        &mut got,
        Duration::from_secs(5),
        |r| messages(r).len() == 1
    ));
    seq.shutdown();
    let mut out = Vec::new();
    let end = std::time::Instant::now() + Duration::from_secs(5);
    let e = loop {
        match a.poll(&mut out, 100, Duration::from_millis(20)) {
            Err(e) => break e,
            Ok(_) => assert!(std::time::Instant::now() < end, "no end of session"),
        }
    };
    assert!(matches!(e, seqbus_net::Error::SessionEnded(_)), "{e}");
}

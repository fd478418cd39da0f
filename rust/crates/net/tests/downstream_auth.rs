//! Downstream authentication over real sockets (docs/sites.md, "Downstream authentication"):
//! with `downstream.key`, a forged or altered MoldUDP64 packet sent to a node is dropped and
//! counted, and the real message of that sequence number is still delivered; the stream and
//! the replayer's answers carry the MAC; without the key the datagrams are those of plain
//! MoldUDP64, byte for byte.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use common::*;
use seqbus_net::{Config, NodeClient, NodeOptions, Start, RECORD_CAUGHT_UP};
use seqbus_wire::auth::{open_downstream, seal_downstream, Key};
use seqbus_wire::envelope::KIND_APPLICATION;
use seqbus_wire::mold::{self, MoldPacket, MoldWriter, PacketKind};
use seqbus_wire::{Envelope, Request, Session};

const HEX: &str = "00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210";

/// A udp-unicast bus without clock ticks (the sequence advances only with commands), with
/// the downstream key when `keyed`; `pipeline`: `sequencer.pipeline`.
fn quiet_bus(keyed: bool, pipeline: &str) -> (Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (up, rep) = (free_port(), free_port());
    let subs: Vec<String> = (0..3)
        .map(|_| format!("\"127.0.0.1:{}\"", free_port()))
        .collect();
    let key = if keyed {
        format!("key = \"{HEX}\"\n")
    } else {
        String::new()
    };
    let cfg = write_config(
        dir.path(),
        &format!(
            "[bus]\nsession = \"TEST\"\n[sequencer]\nupstream = \"127.0.0.1:{up}\"\n\
             clock_tick_ms = 0\nheartbeat_ms = 50\npipeline = \"{pipeline}\"\n[downstream]\ntransport = \"udp-unicast\"\n\
             subscribers = [{}]\n{key}[replayer]\nlisten = \"127.0.0.1:{rep}\"\n\
             [node]\nreplayers = [\"127.0.0.1:{rep}\"]\n",
            subs.join(", ")
        ),
    );
    (cfg, dir)
}

fn key() -> Key {
    Key::from_hex(HEX).unwrap()
}

/// A socket standing where the third subscriber is: it sees the stream as a node would.
fn tap(cfg: &Config) -> UdpSocket {
    let s = UdpSocket::bind(cfg.downstream.subscribers[2]).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    s
}

/// The next datagram `s` receives within 5 s.
fn next_datagram(s: &UdpSocket) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = vec![0u8; 65_536];
    loop {
        assert!(Instant::now() < deadline, "no datagram in 5 s");
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            return buf[..n].to_vec();
        }
    }
}

/// A packet of one application message of account `account`, sequence `seq`.
fn packet(seq: u64, account: &str, body: &[u8]) -> Vec<u8> {
    let env = Envelope {
        timestamp_ns: 1,
        command_seq: 1,
        account: seqbus_wire::account(account).unwrap(),
        instance: 1,
        kind: KIND_APPLICATION,
        flags: 0,
        body_length: body.len() as u32,
    };
    let mut w = MoldWriter::new(1472);
    w.begin(Session::new("TEST").unwrap(), seq);
    assert!(w.push2(&env.encode(), body));
    w.bytes().to_vec()
}

fn node(cfg: &Config, account: &str, listen: SocketAddr) -> NodeClient {
    let mut o = NodeOptions::new(account, 1, Start::From(1));
    o.listen = Some(listen);
    let mut n = NodeClient::connect(cfg, o).unwrap();
    let mut got = Vec::new();
    assert!(
        poll_until(&mut n, &mut got, Duration::from_secs(10), |r| r
            .iter()
            .any(|x| x.0 == RECORD_CAUGHT_UP)),
        "{account} did not catch up"
    );
    n
}

#[test]
fn a_keyed_node_drops_and_counts_forged_and_altered_packets_and_delivers_the_real_one() {
    forged_and_altered("off");
}

#[test]
fn a_pipelined_sequencer_seals_on_its_publish_thread() {
    // the MAC is added by the seqbus-publish thread: the same checks hold
    forged_and_altered("on");
}

fn forged_and_altered(pipeline: &str) {
    let (cfg, _dir) = quiet_bus(true, pipeline);
    let seq = start_sequencer(&cfg);
    let tap = tap(&cfg);
    let subs = cfg.downstream.subscribers.clone();
    let mut victim = node(&cfg, "VICTIM", subs[0]);
    let mut sender = node(&cfg, "SENDER", subs[1]);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(victim.is_ready() && sender.is_ready()) {
        assert!(Instant::now() < deadline, "the nodes did not become ready");
        poll_until(&mut victim, &mut got, Duration::from_millis(10), |_| false);
        poll_until(&mut sender, &mut got, Duration::from_millis(10), |_| false);
    }
    // the stream is quiet now: the heartbeats name the sequence the next command will get,
    // and they carry the MAC (not plain MoldUDP64)
    let deadline = Instant::now() + Duration::from_secs(10);
    let next = loop {
        assert!(Instant::now() < deadline, "no two heartbeats alike in 10 s");
        let d = next_datagram(&tap);
        assert!(MoldPacket::parse(&d).is_err(), "a keyed datagram has a MAC");
        let p = open_downstream(&key(), &d).expect("the sequencer seals with the key");
        let p = MoldPacket::parse(p).unwrap();
        if p.kind() == PacketKind::Heartbeat {
            let again = next_datagram(&tap);
            let q = MoldPacket::parse(open_downstream(&key(), &again).unwrap()).unwrap();
            if q.kind() == PacketKind::Heartbeat && q.sequence() == p.sequence() {
                break p.sequence();
            }
        }
    };
    // an attacker sends the victim what would be message `next`: without a MAC, under
    // another key, and a keyed packet altered on the way
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    let forged = packet(next, "SENDER", b"forged");
    attacker.send_to(&forged, subs[0]).unwrap();
    let mut other = Vec::new();
    seal_downstream(&Key::new([0x55; 32]), &forged, &mut other);
    attacker.send_to(&other, subs[0]).unwrap();
    let mut altered = Vec::new();
    seal_downstream(&key(), &packet(next, "SENDER", b"genuine"), &mut altered);
    let at = altered.len() - 16 - 1; // the last byte of the body
    altered[at] = b'!';
    attacker.send_to(&altered, subs[0]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while victim.downstream_forged() < 3 {
        assert!(
            Instant::now() < deadline,
            "forged packets counted: {}",
            victim.downstream_forged()
        );
        poll_until(&mut victim, &mut got, Duration::from_millis(10), |_| false);
    }
    // the real message of that sequence number comes after them and is delivered
    sender.send(&body(b"real")).unwrap();
    sender.flush().unwrap();
    let real = body(b"real");
    assert!(
        poll_until(&mut victim, &mut got, Duration::from_secs(10), |r| r
            .iter()
            .any(|x| x.4 == real)),
        "the real message was not delivered: {:?}",
        messages(&got)
    );
    let m: Vec<_> = messages(&got)
        .into_iter()
        .filter(|r| r.2.starts_with(b"SENDER"))
        .collect();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        m[0].1, next,
        "the real message has the sequence the forgeries claimed"
    );
    assert_eq!(victim.downstream_forged(), 3);
    assert_eq!(sender.downstream_forged(), 0, "genuine datagrams all pass");
    assert_eq!(
        victim.stats().malformed,
        0,
        "dropped before the protocol saw them"
    );
    seq.shutdown();
}

#[test]
fn replayer_answers_carry_the_mac_and_without_the_key_the_wire_is_plain_moldudp64() {
    for keyed in [false, true] {
        let (cfg, _dir) = quiet_bus(keyed, "auto");
        let seq = start_sequencer(&cfg);
        let tap = tap(&cfg);
        let mut sender = node(&cfg, "SENDER", cfg.downstream.subscribers[1]);
        sender.send(&body(b"kept")).unwrap();
        sender.flush().unwrap();
        let mut got = Vec::new();
        assert!(poll_until(
            &mut sender,
            &mut got,
            Duration::from_secs(10),
            |r| r.iter().any(|x| x.4 == body(b"kept"))
        ));
        let open = |d: &[u8]| -> Vec<u8> {
            if keyed {
                assert!(MoldPacket::parse(d).is_err(), "a keyed datagram has a MAC");
                open_downstream(&key(), d)
                    .expect("sealed with the key")
                    .to_vec()
            } else {
                d.to_vec()
            }
        };
        // a heartbeat is the 20 bytes of MoldUDP64 (and, keyed, its MAC)
        let hb = loop {
            let d = next_datagram(&tap);
            let p = open(&d);
            if MoldPacket::parse(&p).unwrap().kind() == PacketKind::Heartbeat {
                break (d, p);
            }
        };
        let n = MoldPacket::parse(&hb.1).unwrap().sequence();
        let session = Session::new("TEST").unwrap();
        assert_eq!(hb.1, mold::heartbeat(session, n).to_vec());
        assert_eq!(hb.0.len(), 20 + if keyed { 16 } else { 0 });
        // the replayer's answer to a request
        let asker = UdpSocket::bind("127.0.0.1:0").unwrap();
        asker
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let req = Request {
            session,
            sequence: 1,
            count: 100,
        };
        asker.send_to(&req.encode(), cfg.replayer.listen).unwrap();
        let answer = open(&next_datagram(&asker));
        let p = MoldPacket::parse(&answer).unwrap();
        assert_eq!(p.sequence(), 1);
        assert!(
            p.messages().any(|(_, m)| m.ends_with(&body(b"kept"))),
            "keyed {keyed}: the answer holds the message"
        );
        seq.shutdown();
    }
}

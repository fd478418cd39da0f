//! A node that only receives (a following replayer) sends nothing upstream, not even at
//! connect: a restarted following replayer used to send a hello as account REPLAYER before it
//! was set raw, which a bus with keys counted as forged and a bus without sequenced as a stray
//! SenderState.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use seqbus_net::{NodeClient, NodeOptions, Start};
use seqbus_wire::upstream::UpstreamPacket;

#[test]
fn a_receive_only_node_sends_no_hello_when_it_connects() {
    let b = bus("udp-unicast", "");
    // the test stands where the sequencer's upstream is, and sees what the nodes send
    let upstream = UdpSocket::bind(b.cfg.sequencer.upstream).unwrap();
    upstream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let subs = b.cfg.downstream.subscribers.clone();
    // the replayer's options: a start past 1 (where its journal ends) makes a sending node
    // ask for its next command sequence
    let mut quiet = NodeOptions::new("REPLAYER", 0, Start::From(500));
    quiet.receive_only = true;
    quiet.listen = Some(subs[0]);
    let _quiet = NodeClient::connect(&b.cfg, quiet).unwrap();
    // a node that sends, connected after it: its hello comes after anything the first sent
    let mut loud = NodeOptions::new("LOUD", 1, Start::From(500));
    loud.listen = Some(subs[1]);
    let _loud = NodeClient::connect(&b.cfg, loud).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 2048];
    let mut accounts = Vec::new();
    while !accounts.iter().any(|a: &Vec<u8>| a.starts_with(b"LOUD")) {
        assert!(
            Instant::now() < deadline,
            "no hello from the sending node: {accounts:?}"
        );
        let Ok((n, _)) = upstream.recv_from(&mut buf) else {
            continue;
        };
        let p = UpstreamPacket::parse(&buf[..n]).expect("a valid upstream packet");
        accounts.push(p.account().to_vec());
    }
    assert!(
        !accounts.iter().any(|a| a.starts_with(b"REPLAYER")),
        "the receive-only node sent upstream: {accounts:?}"
    );
}

//! The sequencer's HTTP status endpoint over real sockets: counters as JSON and Prometheus
//! text, a token when one is configured, and configuration errors naming the key.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use seqbus_net::{Config, NodeClient, NodeOptions, Start, RECORD_CAUGHT_UP};

/// `GET path` (with an optional bearer token): (status code, body).
fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut s = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("status endpoint {addr}: {e}"),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (code, body)
}

fn with_status(extra: &str) -> (Bus, Config, SocketAddr) {
    let b = bus("udp-unicast", "");
    let port = free_port();
    let text = std::fs::read_to_string(b.dir.path().join("bus.toml"))
        .unwrap()
        .replace(
            "[sequencer]\n",
            &format!("[sequencer]\nstatus = \"127.0.0.1:{port}\"\n{extra}"),
        );
    let cfg = write_config(b.dir.path(), &text);
    (b, cfg, SocketAddr::from(([127, 0, 0, 1], port)))
}

#[test]
fn status_and_metrics_count_what_the_sequencer_did() {
    let (_b, cfg, addr) = with_status("");
    let seq = start_sequencer(&cfg);
    let mut o = NodeOptions::new("A", 1, Start::From(1));
    o.listen = Some(cfg.downstream.subscribers[0]);
    let mut a = NodeClient::connect(&cfg, o).unwrap();
    let mut got = Vec::new();
    assert!(poll_until(&mut a, &mut got, Duration::from_secs(5), |r| r
        .iter()
        .any(|x| x.0 == RECORD_CAUGHT_UP)));
    for i in 0..50u32 {
        a.send(&body(&i.to_le_bytes())).unwrap();
    }
    assert!(poll_until(
        &mut a,
        &mut got,
        Duration::from_secs(5),
        |r| messages(r).len() == 50
    ));
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(b"junk", cfg.sequencer.upstream)
        .unwrap();
    // the loop publishes its counters each time round: wait for the junk to be counted
    let deadline = Instant::now() + Duration::from_secs(5);
    let json = loop {
        let (code, text) = get(addr, "/status", None);
        assert_eq!(code, 200, "{text}");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        if json["counters"]["upstream_malformed"] == 1 || Instant::now() > deadline {
            break json;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(json["role"], "sequencer");
    assert_eq!(json["session"], "TEST");
    let c = &json["counters"];
    assert_eq!(c["upstream_malformed"], 1);
    // SessionStart and the node's 50 commands (and maybe clock ticks)
    let sequenced = c["messages_sequenced"].as_u64().unwrap();
    assert!(sequenced >= 51, "{json}");
    assert_eq!(c["next_sequence"].as_u64().unwrap(), sequenced + 1);
    let (code, text) = get(addr, "/metrics", None);
    assert_eq!(code, 200);
    let line = text
        .lines()
        .find(|l| l.starts_with("seqbus_sequencer_upstream_malformed{"))
        .unwrap();
    assert_eq!(
        line,
        "seqbus_sequencer_upstream_malformed{session=\"TEST\"} 1"
    );
    assert!(text.contains("# TYPE seqbus_sequencer_messages_sequenced counter"));
    assert_eq!(get(addr, "/nope", None).0, 404);
    seq.shutdown();
}

#[test]
fn a_token_is_required_when_configured() {
    let token = "0123456789abcdef-token";
    let (_b, cfg, addr) = with_status(&format!("status_token = \"{token}\"\n"));
    let seq = start_sequencer(&cfg);
    assert_eq!(get(addr, "/status", None).0, 401);
    assert_eq!(get(addr, "/status", Some("0123456789abcdef-wrong")).0, 401);
    assert_eq!(get(addr, "/metrics", Some(token)).0, 200);
    seq.shutdown();
}

#[test]
fn status_configuration_errors_name_the_key() {
    let b = bus("udp-unicast", "");
    let base = std::fs::read_to_string(b.dir.path().join("bus.toml")).unwrap();
    let with = |extra: &str| {
        let text = base.replace("[sequencer]\n", &format!("[sequencer]\n{extra}"));
        Config::from_str(&text).unwrap_err().to_string()
    };
    let e = with("status = \"0.0.0.0:9\"\n");
    assert!(
        e.contains("sequencer.status_token") && e.contains("loopback"),
        "{e}"
    );
    let e = with("status = \"127.0.0.1:9\"\nstatus_token = \"short\"\n");
    assert!(e.contains("sequencer.status_token"), "{e}");
    let e = with("status = \"not an address\"\n");
    assert!(e.contains("status"), "{e}");
    // a busy address fails the start, naming the key
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let cfg = write_config(
        b.dir.path(),
        &base.replace(
            "[sequencer]\n",
            &format!("[sequencer]\nstatus = \"127.0.0.1:{port}\"\n"),
        ),
    );
    let e = seqbus_net::run_sequencer(&cfg, Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("sequencer.status"), "{e}");
}

//! Rust-only ping-pong over a running bus: the baseline the Python SDK's round trip is compared
//! with (benchmarks/sdk.py). Same messages as `schemas/pingpong.idl`, same NodeClient the SDK
//! wraps, no Python anywhere.
//!
//!     rust_round_trip CONFIG pong [LISTEN]          answer every Ping with a Pong until killed
//!     rust_round_trip CONFIG ping COUNT [LISTEN]    COUNT round trips, one in flight; prints
//!                                                   {"round_trips": N, "rtt_ns": [...]}
//!     rust_round_trip CONFIG self COUNT [LISTEN]    COUNT round trips of one node with itself
//!                                                   (its Ping back from the sequencer); the
//!                                                   same output

use std::path::Path;
use std::time::{Duration, Instant};

use seqbus_net::{Config, NodeClient, NodeOptions, Start, RECORD_HEADER_LEN, RECORD_MESSAGE};

const SCHEMA: u16 = 2;
const PING: u16 = 1;
const PONG: u16 = 2;

fn message(template: u16, id: u64, at: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    for v in [16u16, template, SCHEMA, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&at.to_le_bytes());
    b
}

/// (template, id) of every message record of a batch.
fn messages(batch: &[u8]) -> Vec<(u16, u64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < batch.len() {
        let len = u32::from_le_bytes(batch[at..at + 4].try_into().unwrap()) as usize;
        let ty = u16::from_le_bytes(batch[at + 4..at + 6].try_into().unwrap());
        if ty == RECORD_MESSAGE {
            let body = &batch[at + RECORD_HEADER_LEN..at + len];
            let template = u16::from_le_bytes(body[2..4].try_into().unwrap());
            out.push((
                template,
                u64::from_le_bytes(body[8..16].try_into().unwrap()),
            ));
        }
        at += len;
    }
    out
}

fn connect(cfg: &Config, account: &str, topic: u16, listen: Option<&String>) -> NodeClient {
    let mut opts = NodeOptions::new(account, 1, Start::Live);
    opts.topics = Some(vec![(SCHEMA, topic)]);
    opts.listen = listen.map(|a| a.parse().expect("LISTEN is host:port"));
    let mut client = NodeClient::connect(cfg, opts).expect("connect");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client.is_ready() {
        assert!(Instant::now() < deadline, "no answer from the sequencer");
        client
            .poll(&mut out, 1024, Duration::from_millis(10))
            .expect("poll");
    }
    client
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: rust_round_trip CONFIG pong [LISTEN] | CONFIG ping COUNT [LISTEN]");
        std::process::exit(2);
    }
    let cfg = Config::from_path(Path::new(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let mut out = Vec::with_capacity(1 << 16);
    match args[2].as_str() {
        "pong" => {
            let mut client = connect(&cfg, "RPONGER", PING, args.get(3));
            println!("ready");
            std::io::Write::flush(&mut std::io::stdout()).expect("stdout");
            loop {
                out.clear();
                client
                    .poll(&mut out, 4096, Duration::from_millis(50))
                    .expect("poll");
                for (_, id) in messages(&out) {
                    while client.send(&message(PONG, id, 0)).is_err() {
                        client.flush().expect("flush");
                    }
                }
            }
        }
        role @ ("ping" | "self") => {
            let count: u64 = args[3].parse().expect("COUNT");
            let answer = if role == "self" { PING } else { PONG };
            let mut client = connect(&cfg, "RPINGER", answer, args.get(4));
            let mut rtts = Vec::with_capacity(count as usize);
            let deadline = Instant::now() + Duration::from_secs(120);
            for id in 0..count {
                let t0 = Instant::now();
                client.send(&message(PING, id, 0)).expect("send");
                'wait: loop {
                    assert!(Instant::now() < deadline, "round trip {id} never came back");
                    out.clear();
                    client
                        .poll(&mut out, 4096, Duration::from_millis(50))
                        .expect("poll");
                    for (t, got) in messages(&out) {
                        if t == answer && got == id {
                            break 'wait;
                        }
                    }
                }
                rtts.push(t0.elapsed().as_nanos() as u64);
            }
            let list: Vec<String> = rtts.iter().map(u64::to_string).collect();
            println!(
                "{{\"round_trips\": {count}, \"rtt_ns\": [{}]}}",
                list.join(",")
            );
        }
        other => {
            eprintln!("unknown role {other:?}");
            std::process::exit(2);
        }
    }
}

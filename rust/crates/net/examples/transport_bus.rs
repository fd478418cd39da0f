//! The bus's roles as one small program, for the transport tests (`tests/transports/`): the
//! same sequencer, replayer, dispatcher and node code on whichever transport the
//! configuration names.
//!
//!     transport_bus sequencer CONFIG
//!     transport_bus replayer CONFIG
//!     transport_bus dispatcher CONFIG
//!     transport_bus node CONFIG ACCOUNT SENDERS INDEX SHARE OUT.json
//!     transport_bus inproc CONFIG SHARE OUT_DIR      (memory: everything in this process)
//!
//! A node with INDEX >= 0 sends SHARE commands whose body is `index u32 | i u64`; every node
//! reads the stream from sequence 1 until it has seen SENDERS × SHARE of them, checking that
//! sequence numbers only grow and each sender's commands come exactly once and in order, and
//! writes `{"hash", "messages", "first", "last", "rewinding_at_end", "stats"}` to OUT.json. The
//! hash (FNV-1a 64) covers sequence, envelope and body of every application message, so equal
//! hashes mean equal streams. Roles run until SIGTERM or SIGINT.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_net::{Config, NodeClient, NodeOptions, SendError, Start, RECORD_MESSAGE};

fn stop_on_signals() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).expect("signal handler");
    }
    stop
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// Body of a test command: the schema-style 8-byte header, then index and counter.
fn body(index: u32, i: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(20);
    b.extend_from_slice(&12u16.to_le_bytes()); // block length
    b.extend_from_slice(&1u16.to_le_bytes()); // template
    b.extend_from_slice(&99u16.to_le_bytes()); // schema
    b.extend_from_slice(&1u16.to_le_bytes()); // version
    b.extend_from_slice(&index.to_le_bytes());
    b.extend_from_slice(&i.to_le_bytes());
    b
}

struct Report {
    hash: u64,
    messages: u64,
    first: u64,
    last: u64,
    rewinding: bool,
    stats: String,
}

fn run_node(
    cfg: &Config,
    account: &str,
    senders: u32,
    index: i64,
    share: u64,
    stop: &AtomicBool,
) -> Result<Report, String> {
    let mut c = NodeClient::connect(cfg, NodeOptions::new(account, 1, Start::From(1)))
        .map_err(|e| e.to_string())?;
    let total = senders as u64 * share;
    let mut next_i = vec![0u64; senders as usize];
    let (mut hash, mut messages, mut first, mut last) =
        (0xcbf2_9ce4_8422_2325u64, 0u64, 0u64, 0u64);
    let mut sent = 0u64;
    let mut out = Vec::with_capacity(1 << 20);
    let deadline = Instant::now() + Duration::from_secs(600);
    while messages < total {
        if stop.load(Ordering::Relaxed) {
            return Err(format!("stopped after {messages} of {total} messages"));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "timed out after {messages} of {total} messages: {:?}",
                c.stats()
            ));
        }
        if index >= 0 {
            while sent < share {
                match c.send(&body(index as u32, sent)) {
                    Ok(_) => sent += 1,
                    Err(SendError::WindowFull { .. }) | Err(SendError::NotReady) => break,
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        out.clear();
        c.poll(&mut out, 4096, Duration::from_millis(10))
            .map_err(|e| e.to_string())?;
        let mut at = 0;
        while at + 48 <= out.len() {
            let len = u32::from_le_bytes(out[at..at + 4].try_into().unwrap()) as usize;
            let kind = u16::from_le_bytes([out[at + 4], out[at + 5]]);
            let seq = u64::from_le_bytes(out[at + 8..at + 16].try_into().unwrap());
            let rec = &out[at..at + len];
            at += len;
            if kind != RECORD_MESSAGE {
                continue;
            }
            let b = &rec[48..];
            if b.len() != 20 || u16::from_le_bytes([b[4], b[5]]) != 99 {
                continue;
            }
            if seq <= last {
                return Err(format!(
                    "sequence {seq} after {last}: duplicate or out of order"
                ));
            }
            let sender = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
            let i = u64::from_le_bytes(b[12..20].try_into().unwrap());
            if sender >= next_i.len() || i != next_i[sender] {
                return Err(format!(
                    "sender {sender}: command {i} where {:?} was expected",
                    next_i.get(sender)
                ));
            }
            next_i[sender] += 1;
            if first == 0 {
                first = seq;
            }
            last = seq;
            messages += 1;
            fnv(&mut hash, &seq.to_le_bytes());
            fnv(&mut hash, &rec[16..]);
        }
    }
    Ok(Report {
        hash,
        messages,
        first,
        last,
        rewinding: c.is_rewinding(),
        stats: format!("{:?}", c.stats()),
    })
}

fn write_report(path: &Path, r: &Result<Report, String>) {
    let text = match r {
        Ok(r) => format!(
            "{{\"hash\": \"{:016x}\", \"messages\": {}, \"first\": {}, \"last\": {}, \"rewinding_at_end\": {}, \"stats\": {:?}}}\n",
            r.hash, r.messages, r.first, r.last, r.rewinding, r.stats
        ),
        Err(e) => format!("{{\"error\": {e:?}}}\n"),
    };
    std::fs::write(path, text).expect("write the report");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: transport_bus sequencer|replayer|dispatcher|node|inproc CONFIG ...";
    // the roles' records (logins refused, links closed, ...) on stderr, as the binaries do
    seqbus_net::log_to_stderr("transport_bus", log::LevelFilter::Info);
    if args.len() < 3 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let cfg = match Config::from_path(Path::new(&args[2])) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let stop = stop_on_signals();
    let result: Result<(), String> = match args[1].as_str() {
        "sequencer" => seqbus_net::run_sequencer(&cfg, stop).map_err(|e| e.to_string()),
        "replayer" => seqbus_net::run_replayer(&cfg, stop).map_err(|e| e.to_string()),
        "dispatcher" => seqbus_net::run_dispatcher(&cfg, stop).map_err(|e| e.to_string()),
        "node" if args.len() == 8 => {
            let r = run_node(
                &cfg,
                &args[3],
                args[4].parse().expect("SENDERS"),
                args[5].parse().expect("INDEX"),
                args[6].parse().expect("SHARE"),
                &stop,
            );
            write_report(Path::new(&args[7]), &r);
            r.map(|_| ())
        }
        "inproc" if args.len() == 5 => {
            let share: u64 = args[3].parse().expect("SHARE");
            let dir = Path::new(&args[4]).to_path_buf();
            let seq_stop = Arc::new(AtomicBool::new(false));
            let c2 = cfg.clone();
            let s2 = seq_stop.clone();
            let sequencer = std::thread::spawn(move || seqbus_net::run_sequencer(&c2, s2));
            // The sequencer creates the in-process bus; give it a moment to bind.
            std::thread::sleep(Duration::from_millis(300));
            let nodes: Vec<_> = [("LISTEN", -1i64), ("SEND0", 0), ("SEND1", 1)]
                .into_iter()
                .map(|(account, index)| {
                    let c = cfg.clone();
                    let st = stop.clone();
                    let out = dir.join(format!("{account}.json"));
                    std::thread::spawn(move || {
                        let r = run_node(&c, account, 2, index, share, &st);
                        write_report(&out, &r);
                        r.map(|_| ())
                    })
                })
                .collect();
            let mut res = Ok(());
            for n in nodes {
                if let Err(e) = n.join().expect("node thread") {
                    res = Err(e);
                }
            }
            seq_stop.store(true, Ordering::SeqCst);
            match sequencer.join().expect("sequencer thread") {
                Ok(()) => res,
                Err(e) => Err(e.to_string()),
            }
        }
        _ => Err(usage.into()),
    };
    if let Err(e) = result {
        eprintln!("transport_bus {}: {e}", args[1]);
        std::process::exit(1);
    }
}

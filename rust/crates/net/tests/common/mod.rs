//! Helpers of the real-socket tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use seqbus_net::{Config, NodeClient, RECORD_HEADER_LEN, RECORD_MESSAGE};

/// A free UDP port on 127.0.0.1, never one this process was given before and never one
/// the kernel could hand another socket meanwhile (`seqbus_net::ports`).
pub fn free_port() -> u16 {
    seqbus_net::ports::free_port(seqbus_net::ports::Protocol::Udp)
}

/// Whether a UDP socket of this network namespace is bound to `port`: read from
/// `/proc/net/udp`, not probed with a bind that would take the port for a moment itself.
pub fn udp_bound(port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/udp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&suffix))
        })
    })
}

/// Runs the calling test inside a private network namespace (where multicast on `lo`
/// works): returns true in the namespace (run the body), false in the parent after the
/// child passed. Skips with a printed reason where no namespace can be made.
pub fn in_netns(test: &str) -> bool {
    if std::env::var("SEQBUS_IN_NETNS").as_deref() == Ok("1") {
        return true;
    }
    let ok = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIPPED {test}: cannot create a network namespace (unshare -n) here");
        return false;
    }
    let exe = std::env::current_exe().unwrap();
    let status = Command::new("unshare")
        .args([
            "-n",
            "--",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
        ])
        .arg(exe)
        .args([
            "--exact",
            test,
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env("SEQBUS_IN_NETNS", "1")
        .status()
        .unwrap();
    assert!(
        status.success(),
        "{test} failed inside its network namespace"
    );
    false
}

pub struct Bus {
    pub cfg: Config,
    pub dir: tempfile::TempDir,
}

/// A configuration with fresh ports; `extra` is appended to the TOML.
pub fn bus(transport: &str, extra: &str) -> Bus {
    let dir = tempfile::tempdir().unwrap();
    let (up, rep) = (free_port(), free_port());
    let down = match transport {
        "udp-multicast" => format!(
            "transport = \"udp-multicast\"\ngroup = \"239.10.0.1:{}\"\n",
            free_port()
        ),
        _ => format!(
            "transport = \"udp-unicast\"\nsubscribers = [\"127.0.0.1:{}\", \"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n",
            free_port(),
            free_port(),
            free_port()
        ),
    };
    let text = format!(
        "[bus]\nsession = \"TEST\"\n[sequencer]\nupstream = \"127.0.0.1:{up}\"\nclock_tick_ms = 20\nheartbeat_ms = 50\n[downstream]\n{down}[replayer]\nlisten = \"127.0.0.1:{rep}\"\n[node]\nreplayers = [\"127.0.0.1:{rep}\"]\n{extra}"
    );
    let path = dir.path().join("bus.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = Config::from_path(&path).unwrap();
    Bus { cfg, dir }
}

pub fn write_config(dir: &Path, text: &str) -> Config {
    let path = dir.join("bus.toml");
    std::fs::write(&path, text).unwrap();
    Config::from_path(&path).unwrap()
}

/// A sequencer on a thread.
pub struct Running {
    pub stop: Arc<AtomicBool>,
    pub handle: Option<JoinHandle<Result<(), seqbus_net::Error>>>,
}

/// Waits until the sequencer of `cfg` has bound its upstream (and in-process replayer)
/// sockets, so that no node's ephemeral socket can take their ports first; false as soon as
/// `gone` says the sequencer stopped first.
pub fn wait_bound(cfg: &Config, mut gone: impl FnMut() -> bool) -> bool {
    let mut ports = vec![cfg.sequencer.upstream.port()];
    if cfg.sequencer.replayer_in_process {
        ports.push(cfg.replayer.listen.port());
    }
    let end = Instant::now() + Duration::from_secs(20);
    while !ports.iter().all(|&p| udp_bound(p)) {
        if gone() {
            return false;
        }
        assert!(
            Instant::now() < end,
            "the sequencer did not bind {ports:?} in 20 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Starts a sequencer on a thread and returns once it is bound ([`wait_bound`]). A sequencer
/// that stops before that (it could not bind, say) fails the test with its error.
pub fn start_sequencer(cfg: &Config) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (cfg.clone(), stop.clone());
    let handle = std::thread::spawn(move || seqbus_net::run_sequencer(&c, s));
    if !wait_bound(cfg, || handle.is_finished()) {
        let r = handle.join().expect("the sequencer thread panicked");
        panic!("the sequencer stopped before it was bound: {r:?}");
    }
    Running {
        stop,
        handle: Some(handle),
    }
}

impl Running {
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.take().unwrap().join().unwrap().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A delivered record: (record type, sequence, account, command seq, body).
pub type Rec = (u16, u64, [u8; 8], u64, Vec<u8>);

pub fn parse_records(buf: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        let ty = u16::from_le_bytes(buf[at + 4..at + 6].try_into().unwrap());
        let seq = u64::from_le_bytes(buf[at + 8..at + 16].try_into().unwrap());
        let env = &buf[at + 16..at + 48];
        let account: [u8; 8] = env[16..24].try_into().unwrap();
        let cmd = u64::from_le_bytes(env[8..16].try_into().unwrap());
        out.push((
            ty,
            seq,
            account,
            cmd,
            buf[at + RECORD_HEADER_LEN..at + len].to_vec(),
        ));
        at += len;
    }
    out
}

/// Polls until `pred` holds on everything delivered so far, or `limit` passes.
pub fn poll_until(
    c: &mut NodeClient,
    got: &mut Vec<Rec>,
    limit: Duration,
    mut pred: impl FnMut(&[Rec]) -> bool,
) -> bool {
    let end = Instant::now() + limit;
    let mut buf = Vec::new();
    while Instant::now() < end {
        buf.clear();
        c.poll(&mut buf, 4096, Duration::from_millis(20)).unwrap();
        got.extend(parse_records(&buf));
        if pred(got) {
            return true;
        }
    }
    false
}

/// An application body: the 8-byte IDL header (schema 9, template 1) then `payload`.
pub fn body(payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 8];
    b[0..2].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    b[2..4].copy_from_slice(&1u16.to_le_bytes());
    b[4..6].copy_from_slice(&9u16.to_le_bytes());
    b[6..8].copy_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

pub fn messages(recs: &[Rec]) -> Vec<&Rec> {
    recs.iter().filter(|r| r.0 == RECORD_MESSAGE).collect()
}

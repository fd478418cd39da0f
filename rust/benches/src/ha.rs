//! `seqbus-bench --ha`: the cluster of sequencers (docs/ha.md), each number beside its
//! baseline from the same run:
//!
//! 1. what gating replication costs: round trip and throughput through a cluster of three
//!    sequencers (a message is published once two of them hold it) beside one sequencer
//!    alone, both with the `block` idle strategy;
//! 2. takeover: the leader, a process of its own, killed with SIGKILL under load again and
//!    again; the time from the kill to the new leader's first message handed to a node, on
//!    the host as it is and again with four busy loops competing for the CPU;
//! 3. planned switchover: the longest pause of a steady stream while the leadership moves,
//!    beside the stream's usual gap.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use seqbus_net::ports::{free_port, Protocol};
use seqbus_net::{Config, NodeClient, NodeOptions, SendError, Start};

use crate::{body, percentile, records, round_trip, throughput, wait_caught_up};

fn port() -> u16 {
    free_port(Protocol::Udp)
}

fn tcp_port() -> u16 {
    free_port(Protocol::Tcp)
}

/// A bus configuration: one sequencer, or a `[cluster]` of `members`.
pub fn config_text(dir: &Path, idle: &str, members: usize, extra: &str) -> (String, Vec<u16>) {
    let mut status = Vec::new();
    let replayer = port();
    // one sequencer: its in-process replayer; a cluster: the members' (named in [cluster])
    let replayers = if members > 1 {
        String::new()
    } else {
        format!("replayers = [\"127.0.0.1:{replayer}\"]\n")
    };
    let pipeline = pipeline_setting();
    let mut text = format!(
        "[bus]\nsession = \"BENCHHA\"\n[sequencer]\nupstream = \"127.0.0.1:{}\"\nidle = \"{idle}\"\n\
         fsync = \"none\"\npipeline = \"{pipeline}\"\njournal_dir = \"{}\"\n{extra}\n[downstream]\ntransport = \"udp-multicast\"\n\
         group = \"239.30.0.2:{}\"\n[replayer]\nlisten = \"127.0.0.1:{replayer}\"\n\
         [node]\nwindow = 4096\nidle = \"{idle}\"\nretry_ms = 20\n{replayers}",
        port(),
        dir.join("journal").display(),
        port(),
    );
    if members > 1 {
        text.push_str("[cluster]\nmembers = [\n");
        for id in 1..=members {
            let s = tcp_port();
            status.push(s);
            text.push_str(&format!(
                "  {{ id = {id}, upstream = \"127.0.0.1:{}\", peer = \"127.0.0.1:{}\", \
                 publish = \"127.0.0.1:{}\", replayer = \"127.0.0.1:{}\", \
                 status = \"127.0.0.1:{s}\" }},\n",
                port(),
                port(),
                port(),
                port()
            ));
        }
        text.push_str("]\n");
    }
    (text, status)
}

/// `sequencer.pipeline` of every bus the benchmark starts: `BENCH_PIPELINE` (auto, on or
/// off; default auto, as a configuration without the key).
pub fn pipeline_setting() -> String {
    let v = std::env::var("BENCH_PIPELINE").unwrap_or("auto".into());
    assert!(
        ["auto", "on", "off"].contains(&v.as_str()),
        "BENCH_PIPELINE={v}: auto, on or off"
    );
    v
}

/// Sequencers on threads of this process (stopped and joined on drop).
pub(crate) struct Threads {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) handles: Vec<thread::JoinHandle<()>>,
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

pub(crate) fn start_threads(cfg: &Config, members: usize) -> Threads {
    let stop = Arc::new(AtomicBool::new(false));
    let ids: Vec<Option<u16>> = if members > 1 {
        (1..=members as u16).map(Some).collect()
    } else {
        vec![None]
    };
    let handles = ids
        .into_iter()
        .map(|id| {
            let c = cfg.for_member(id).unwrap();
            let s = stop.clone();
            thread::Builder::new()
                .name(format!("sequencer{}", id.unwrap_or(1)))
                .spawn(move || seqbus_net::run_sequencer(&c, s).unwrap())
                .unwrap()
        })
        .collect();
    Threads { stop, handles }
}

pub(crate) fn load(dir: &Path, idle: &str, members: usize, extra: &str) -> (Config, Vec<u16>) {
    let (text, status) = config_text(dir, idle, members, extra);
    let path = dir.join("bus.toml");
    std::fs::write(&path, text).unwrap();
    (Config::from_path(&path).unwrap(), status)
}

/// Part 1: round trip and throughput, one sequencer vs a cluster of three, same idle
/// strategy.
fn gating_cost(samples: usize, messages: u64) {
    let idle = "block";
    let mut rows = Vec::new();
    for members in [1usize, 3] {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, _) = load(dir.path(), idle, members, "");
        let threads = start_threads(&cfg, members);
        let rtt = round_trip(&cfg, samples);
        drop(threads);
        let dir = tempfile::tempdir().unwrap();
        let (cfg, _) = load(dir.path(), idle, members, "clock_tick_ms = 0");
        let threads = start_threads(&cfg, members);
        let (tput, _) = throughput(&cfg, messages, false);
        drop(threads);
        rows.push((rtt, tput));
    }
    let raw = crate::raw_blocking_ping_pong(samples);
    let (one, three) = (rows[0], rows[1]);
    println!("| gating replication ({idle}) | one sequencer (same run) | cluster of 3 | cost |");
    println!("|---|---|---|---|");
    println!(
        "| round trip p50 | {:.1} µs | {:.1} µs | +{:.1} µs (one blocking loopback UDP round trip, same run: {:.1} µs) |",
        one.0 .0,
        three.0 .0,
        three.0 .0 - one.0 .0,
        raw.0
    );
    println!(
        "| round trip p99 | {:.1} µs | {:.1} µs | +{:.1} µs |",
        one.0 .1,
        three.0 .1,
        three.0 .1 - one.0 .1
    );
    println!(
        "| throughput, 32-byte bodies → 2 nodes | {:.2} M msg/s | {:.2} M msg/s | {:.0}% (target ≥ 80%) |",
        one.1 / 1e6,
        three.1 / 1e6,
        100.0 * three.1 / one.1
    );
}

/// A sequencer process: this benchmark binary run as `--run-sequencer CONFIG ID`.
fn spawn(config: &Path, id: u16) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--run-sequencer",
            &config.display().to_string(),
            &id.to_string(),
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The entry point of a sequencer process (`--run-sequencer CONFIG ID`).
pub fn run_sequencer_process(config: &str, id: u16) {
    let cfg = Config::from_path(Path::new(config))
        .unwrap()
        .for_member(Some(id))
        .unwrap();
    seqbus_net::run_sequencer(&cfg, Arc::new(AtomicBool::new(false))).unwrap();
}

fn http(port: u16, request: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

pub(crate) fn role(port: u16) -> Option<String> {
    let r = http(port, "GET /status HTTP/1.0\r\n\r\n")?;
    let body = r.split("\r\n\r\n").nth(1)?;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    Some(v["cluster"]["role"].as_str()?.to_string())
}

/// A node polled by the benchmark, receiving a steady stream it sends itself.
struct Probe {
    node: NodeClient,
    out: Vec<u8>,
    sent: u64,
    next_send: Instant,
    interval: Duration,
}

impl Probe {
    fn new(cfg: &Config, account: &str, interval: Duration) -> Probe {
        let mut node =
            NodeClient::connect(cfg, NodeOptions::new(account, 1, Start::From(1))).unwrap();
        wait_caught_up(&mut node);
        Probe {
            node,
            out: Vec::new(),
            sent: 0,
            next_send: Instant::now(),
            interval,
        }
    }

    /// One turn: sends on schedule, polls; returns the number of records handed out.
    fn turn(&mut self) -> usize {
        if Instant::now() >= self.next_send {
            match self.node.send(&body(self.sent)) {
                Ok(_) => self.sent += 1,
                Err(SendError::WindowFull { .. } | SendError::NotReady) => {}
                Err(e) => panic!("{e}"),
            }
            self.next_send += self.interval;
        }
        self.out.clear();
        self.node
            .poll(&mut self.out, 4096, Duration::from_micros(200))
            .unwrap();
        records(&self.out).count()
    }
}

/// Busy loops (`sh -c 'while :; do :; done'`) competing for the CPU until dropped.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start(n: usize) -> BusyLoops {
        BusyLoops(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Part 2: kill the leader process `kills` times under load, with `busy` busy loops
/// competing for the CPU.
fn takeover(kills: usize, busy: usize) -> Vec<f64> {
    let _busy = BusyLoops::start(busy);
    let dir = tempfile::tempdir().unwrap();
    let (cfg, status) = load(dir.path(), "block", 3, "clock_tick_ms = 10");
    let path: PathBuf = dir.path().join("bus.toml");
    let mut children: Vec<Option<Child>> = (1..=3).map(|id| Some(spawn(&path, id))).collect();
    let mut probe = Probe::new(&cfg, "P", Duration::from_micros(200));
    let mut times = Vec::new();
    for k in 0..kills {
        // steady load, a known leader, every member running
        let settle = Instant::now();
        while probe.node.leader().is_none() || settle.elapsed() < Duration::from_millis(300) {
            probe.turn();
            assert!(settle.elapsed() < Duration::from_secs(30), "no leader");
        }
        let leader = probe.node.leader().unwrap();
        let epoch = probe.node.epoch();
        let mut child = children[leader as usize - 1].take().unwrap();
        child.kill().unwrap();
        let killed = Instant::now();
        child.wait().unwrap();
        while probe.node.epoch() == epoch {
            probe.turn();
            assert!(
                killed.elapsed() < Duration::from_secs(30),
                "kill {k}: no takeover"
            );
        }
        times.push(killed.elapsed().as_secs_f64() * 1e3);
        children[leader as usize - 1] = Some(spawn(&path, leader));
        // back as a standby before the next kill
        let back = Instant::now();
        while role(status[leader as usize - 1]).as_deref() != Some("follower") {
            probe.turn();
            assert!(
                back.elapsed() < Duration::from_secs(30),
                "member {leader} not back"
            );
        }
    }
    for c in children.iter_mut().flatten() {
        let _ = c.kill();
        let _ = c.wait();
    }
    times
}

/// Part 3: planned switchovers under a steady stream; (pause, usual gap) in ms.
fn switchover(times: usize) -> (Vec<f64>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, status) = load(dir.path(), "block", 3, "clock_tick_ms = 10");
    let threads = start_threads(&cfg, 3);
    let interval = Duration::from_micros(100);
    let mut probe = Probe::new(&cfg, "P", interval);
    let mut gaps = Vec::new();
    let mut pauses = Vec::new();
    for _ in 0..times {
        let settle = Instant::now();
        let mut last = Instant::now();
        while probe.node.leader().is_none() || settle.elapsed() < Duration::from_millis(200) {
            if probe.turn() > 0 {
                gaps.push(last.elapsed().as_secs_f64() * 1e3);
                last = Instant::now();
            }
        }
        let leader = probe.node.leader().unwrap();
        let epoch = probe.node.epoch();
        let reply = http(
            status[leader as usize - 1],
            "POST /switchover HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        )
        .unwrap_or_default();
        assert!(reply.contains("\"ok\":true"), "switchover refused: {reply}");
        // the longest silence of the stream until the new leader's messages flow
        let mut longest: f64 = 0.0;
        let mut last = Instant::now();
        let start = Instant::now();
        let mut after = 0;
        while after < 20 {
            if probe.turn() > 0 {
                longest = longest.max(last.elapsed().as_secs_f64() * 1e3);
                last = Instant::now();
                if probe.node.epoch() > epoch {
                    after += 1;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no new leader");
        }
        pauses.push(longest);
    }
    drop(threads);
    let usual = percentile(&mut gaps, 0.5);
    (pauses, usual)
}

/// Throughput through a cluster of `members` only (for profiling).
pub fn throughput_only(members: usize, messages: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _) = load(dir.path(), "block", members, "clock_tick_ms = 0");
    let threads = start_threads(&cfg, members);
    let (tput, _) = throughput(&cfg, messages, false);
    drop(threads);
    tput
}

/// Busy loops of the loaded takeover: two per core of the project's 2-core machine.
const BUSY_LOOPS: usize = 4;

pub fn run(kills: usize, samples: usize, messages: u64) {
    gating_cost(samples, messages);
    println!();
    let mut t = takeover(kills, 0);
    let mut loaded = takeover(kills, BUSY_LOOPS);
    println!("| takeover ({kills} SIGKILLs of the leader process, block idle) | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| kill → the new leader's first message handed to a node | {:.1} ms | {:.1} ms | {:.1} ms | p99 ≤ 100 ms |",
        percentile(&mut t, 0.5),
        percentile(&mut t, 0.99),
        percentile(&mut t, 1.0)
    );
    println!(
        "| the same with {BUSY_LOOPS} busy loops competing for the CPU | {:.1} ms | {:.1} ms | {:.1} ms | (none: the detector waits longer on a busy host) |",
        percentile(&mut loaded, 0.5),
        percentile(&mut loaded, 0.99),
        percentile(&mut loaded, 1.0)
    );
    let (mut p, usual) = switchover(20);
    println!(
        "| planned switchover (20): longest pause of a stream of one message / 100 µs | {:.2} ms | {:.2} ms | {:.2} ms | ≤ 5 ms (the stream's usual gap, same run: {:.3} ms) |",
        percentile(&mut p, 0.5),
        percentile(&mut p, 0.99),
        percentile(&mut p, 1.0),
        usual
    );
}

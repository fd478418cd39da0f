//! Benchmarks of the Rust core, each against a raw-UDP floor measured in the same run:
//!
//! 1. round trip node → sequencer → node (spinning) vs. a plain UDP ping-pong;
//! 2. sequencer throughput, 32-byte bodies multicast to 2 nodes with the journal on, vs. a
//!    packed UDP multicast blast to 2 receivers;
//! 3. catch-up rate of a late joiner rewinding the journal through the replayer.
//!
//! `--mac`: the upstream MAC's cost instead (docs/upstream.md, "Authentication"): round trip and
//! throughput on a bus with `[auth]` beside the same bus without keys, interleaved in one run.
//!
//! `--shape` (also printed after the default run): every thread's CPU per message and the
//! throughput with one sequencer and with a cluster of three, beside the floor's sender, and
//! the round trip of both beside raw UDP (`shape.rs`).
//!
//! `cargo run --release -p seqbus-bench -- [--messages N] [--samples N] [--rounds N]`. Runs
//! itself in a private network namespace (`unshare -n`; multicast on `lo`, brought up by the
//! binary itself).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

mod ha;
mod shape;
mod sys;

use seqbus_net::{Config, NodeClient, NodeOptions, SendError, Start, RECORD_CAUGHT_UP};
use seqbus_transport::udp::{self, Outbox};
use seqbus_wire::auth::Key;
use socket2::SockAddr;

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--run-sequencer") {
        // a sequencer process of the --ha benchmark
        ha::run_sequencer_process(&argv[2], argv[3].parse().expect("a member id"));
        return;
    }
    if std::env::var("SEQBUS_IN_NETNS").as_deref() != Ok("1") {
        // again, in a network namespace of its own (a user namespace too when not root)
        let exe = std::env::current_exe().unwrap();
        // SAFETY: geteuid cannot fail
        let root = unsafe { libc::geteuid() } == 0;
        let status = std::process::Command::new("unshare")
            .args(if root { &["-n"][..] } else { &["-r", "-n"][..] })
            .arg("--")
            .arg(exe)
            .args(std::env::args().skip(1))
            .env("SEQBUS_IN_NETNS", "1")
            .status()
            .unwrap_or_else(|e| {
                eprintln!("seqbus-bench: cannot run `unshare` for a network namespace: {e}");
                std::process::exit(1)
            });
        std::process::exit(status.code().unwrap_or(1));
    }
    // a fresh namespace's loopback is down (no `ip` command needed to bring it up)
    if let Err(e) = sys::loopback_up() {
        eprintln!("seqbus-bench: cannot bring the loopback interface `lo` up: {e}");
        std::process::exit(1);
    }
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse().expect("a number"))
            .unwrap_or(default)
    };
    let messages = arg("--messages", 2_000_000);
    let samples = arg("--samples", 20_000) as usize;

    if args.iter().any(|a| a == "--ha-throughput") {
        let members = arg("--members", 3) as usize;
        let t = ha::throughput_only(members, messages);
        println!("throughput, {members} sequencer(s): {:.2} M msg/s", t / 1e6);
        return;
    }
    let rounds = arg("--rounds", 3) as usize;
    if args.iter().any(|a| a == "--replayer-source") {
        let idle = std::env::var("BENCH_IDLE").unwrap_or("block".into());
        shape::replayer_sources(messages, rounds, &idle);
        return;
    }
    if args.iter().any(|a| a == "--shape") {
        shape::run(samples, messages, rounds);
        return;
    }
    if args.iter().any(|a| a == "--ha") {
        ha::run(arg("--kills", 20) as usize, samples, messages);
        return;
    }
    if args.iter().any(|a| a == "--mac") {
        mac(samples, messages, rounds);
        return;
    }
    if args.iter().any(|a| a == "--throughput-only") {
        let (t, c, cpu) = bus_throughput(messages);
        println!(
            "throughput {:.2} M msg/s, catch-up {:.2} M msg/s; CPU per message: {cpu}",
            t / 1e6,
            c / 1e6
        );
        return;
    }
    if args.iter().any(|a| a == "--rtt-only") {
        let raw = raw_ping_pong(samples);
        let mc = raw_multicast_ping_pong(samples);
        let bus = bus_round_trip(samples);
        println!(
            "rtt p50 raw with a multicast return leg {:.1} ({:.2}x raw), p99 {:.1} µs",
            mc.0,
            mc.0 / raw.0,
            mc.1
        );
        println!(
            "rtt p50 raw {:.1} bus {:.1} ({:.2}x), p99 raw {:.1} bus {:.1} ({:.2}x) µs",
            raw.0,
            bus.0,
            bus.0 / raw.0,
            raw.1,
            bus.1,
            bus.1 / raw.1
        );
        return;
    }
    println!("| benchmark | raw UDP floor (same run) | seqbus | ratio | target |");
    println!("|---|---|---|---|---|");
    let raw = raw_ping_pong(samples);
    let mc = raw_multicast_ping_pong(samples);
    let bus = bus_round_trip(samples);
    println!(
        "| round trip p50, raw floor with a multicast return leg | {:.1} µs | {:.1} µs | {:.2}× | — |",
        raw.0,
        mc.0,
        mc.0 / raw.0
    );
    println!(
        "| round trip p50 | {:.1} µs | {:.1} µs | {:.2}× | ≤ 1.3× |",
        raw.0,
        bus.0,
        bus.0 / raw.0
    );
    println!(
        "| round trip p99 | {:.1} µs | {:.1} µs | {:.2}× | ≤ 3× |",
        raw.1,
        bus.1,
        bus.1 / raw.1
    );
    let raw32 = raw_blast(messages, 32);
    let (raw64, raw_cpu) = raw_blast_cpu(messages, 64);
    let (tput, catchup, bus_cpu) = bus_throughput(messages);
    println!(
        "| throughput, 32-byte bodies → 2 nodes, journal on | {:.2} M msg/s (32-byte blocks); {:.2} M msg/s (64-byte blocks = envelope + body) | {:.2} M msg/s | {:.0}% / {:.0}% | ≥ 75% |",
        raw32 / 1e6,
        raw64 / 1e6,
        tput / 1e6,
        100.0 * tput / raw32,
        100.0 * tput / raw64
    );
    println!(
        "| late-joiner catch-up ({messages} messages) | — | {:.2} M msg/s | — | ≥ 10 M msg/s |",
        catchup / 1e6
    );
    println!(
        "| CPU time per message, by thread (thread CPU clocks) | {raw_cpu} (64-byte blast) | {bus_cpu} | {:.2}× | — |",
        bus_cpu.total() / raw_cpu.total()
    );
    println!();
    shape::run(samples, messages, rounds);
}

pub(crate) fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p) as usize]
}

/// p50/p99 round trip of a 64-byte UDP ping-pong between two spinning threads whose return
/// leg is multicast (the bus's own shape: unicast up, multicast down), µs.
pub(crate) fn raw_multicast_ping_pong(samples: usize) -> (f64, f64) {
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 30, 0, 9), port());
    let iface = Ipv4Addr::LOCALHOST;
    let a = udp::multicast_receiver(group, iface, 1 << 20).unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    b.set_nonblocking(true).unwrap();
    let ba: SockAddr = b.local_addr().unwrap().into();
    let down = udp::multicast_sender(iface, 1).unwrap();
    // connected to the group, as the sequencer's publisher is
    down.connect(&SocketAddr::V4(group).into()).unwrap();
    echo_ping_pong(
        samples,
        b,
        move |d| {
            down.send(d).unwrap();
        },
        |msg, buf| {
            a.send_to(msg, &ba).unwrap();
            while udp::try_recv(&a, buf).unwrap().is_none() {
                std::hint::spin_loop();
            }
        },
    )
}

/// p50/p99 round trip of a 64-byte UDP ping-pong between two spinning threads, µs.
pub(crate) fn raw_ping_pong(samples: usize) -> (f64, f64) {
    ping_pong(samples, false)
}

/// The same between two threads that block in `recv` (what one extra hop costs processes
/// with the `block` idle strategy), µs.
pub(crate) fn raw_blocking_ping_pong(samples: usize) -> (f64, f64) {
    ping_pong(samples, true)
}

fn ping_pong(samples: usize, blocking: bool) -> (f64, f64) {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    if blocking {
        b.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
    } else {
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
    }
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let reply = b.try_clone().unwrap();
    echo_ping_pong(
        samples,
        b,
        move |d| {
            reply.send_to(d, aa).unwrap();
        },
        |msg, buf| {
            a.send_to(msg, ba).unwrap();
            while a.recv(buf).is_err() {
                std::hint::spin_loop();
            }
        },
    )
}

/// p50/p99 of `samples` round trips (after 1,000 unmeasured), µs: `ping` sends 64 bytes and
/// waits for the answer, while a thread hands each datagram `b` receives to `answer`.
fn echo_ping_pong(
    samples: usize,
    b: UdpSocket,
    mut answer: impl FnMut(&[u8]) + Send + 'static,
    mut ping: impl FnMut(&[u8], &mut [u8]),
) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let echo = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !s2.load(Ordering::Relaxed) {
            if let Ok(n) = b.recv(&mut buf) {
                answer(&buf[..n]);
            }
        }
    });
    let mut buf = [0u8; 2048];
    let msg = [7u8; 64];
    let mut rtts = Vec::with_capacity(samples);
    for i in 0..samples + 1000 {
        let t = Instant::now();
        ping(&msg, &mut buf);
        if i >= 1000 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().unwrap();
    (percentile(&mut rtts, 0.5), percentile(&mut rtts, 0.99))
}

struct Bench {
    cfg: Config,
    _dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    seq: Option<thread::JoinHandle<()>>,
}

impl Drop for Bench {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.seq.take() {
            h.join().unwrap();
        }
    }
}

fn port() -> u16 {
    seqbus_net::ports::free_port(seqbus_net::ports::Protocol::Udp)
}

fn start_bus(idle: &str, extra: &str) -> Bench {
    start_bus_with(idle, extra, "")
}

/// [`start_bus`] with `down` added to `[downstream]` (a `key`).
fn start_bus_with(idle: &str, extra: &str, down: &str) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[bus]\nsession = \"BENCH\"\n[sequencer]\nupstream = \"127.0.0.1:{}\"\nidle = \"{idle}\"\nfsync = \"none\"\n{extra}\n[downstream]\ntransport = \"udp-multicast\"\ngroup = \"239.30.0.1:{}\"\n{down}[replayer]\nlisten = \"127.0.0.1:{}\"\n",
        port(),
        port(),
        port()
    );
    let rep = text
        .split("listen = ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let text = format!("{text}[node]\nreplayers = [{rep}]\nwindow = 4096\nidle = \"{idle}\"\n");
    let path = dir.path().join("bus.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = Config::from_path(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (c, s) = (cfg.clone(), stop.clone());
    let seq = thread::Builder::new()
        .name("sequencer".into())
        .spawn(move || seqbus_net::run_sequencer(&c, s).unwrap())
        .unwrap();
    Bench {
        cfg,
        _dir: dir,
        stop,
        seq: Some(seq),
    }
}

pub(crate) fn body(i: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[2..4].copy_from_slice(&1u16.to_le_bytes());
    b[4..6].copy_from_slice(&9u16.to_le_bytes());
    b[8..16].copy_from_slice(&i.to_le_bytes());
    b
}

pub(crate) fn wait_caught_up(c: &mut NodeClient) {
    let mut out = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        out.clear();
        c.poll(&mut out, 4096, Duration::from_millis(10)).unwrap();
        if records(&out).any(|r| r.0 == RECORD_CAUGHT_UP) {
            return;
        }
        assert!(Instant::now() < end, "never caught up");
    }
}

/// (type, sequence, command_seq, account[0]) of each record.
pub(crate) fn records(buf: &[u8]) -> impl Iterator<Item = (u16, u64, u64, u8)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= buf.len() {
            return None;
        }
        let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        let ty = u16::from_le_bytes(buf[at + 4..at + 6].try_into().unwrap());
        let seq = u64::from_le_bytes(buf[at + 8..at + 16].try_into().unwrap());
        let cmd = u64::from_le_bytes(buf[at + 24..at + 32].try_into().unwrap());
        let acct = buf[at + 32];
        at += len;
        Some((ty, seq, cmd, acct))
    })
}

/// p50/p99 of send → own message delivered, sequencer and node busy-spinning, µs.
fn bus_round_trip(samples: usize) -> (f64, f64) {
    let b = start_bus("busy-spin", "");
    round_trip(&b.cfg, samples)
}

/// p50/p99 of send → own message delivered on the bus of `cfg` (its idle strategy), µs.
pub(crate) fn round_trip(cfg: &Config, samples: usize) -> (f64, f64) {
    let mut c = NodeClient::connect(cfg, NodeOptions::new("P", 1, Start::From(1))).unwrap();
    wait_caught_up(&mut c);
    let mut out = Vec::new();
    let mut rtts = Vec::with_capacity(samples);
    for i in 0..samples + 1000 {
        let t = Instant::now();
        let cmd = c.send(&body(i as u64)).unwrap();
        c.flush().unwrap();
        'wait: loop {
            out.clear();
            c.poll(&mut out, 64, Duration::ZERO).unwrap();
            for r in records(&out) {
                if r.0 == 1 && r.2 == cmd && r.3 == b'P' {
                    break 'wait;
                }
            }
        }
        if i >= 1000 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    (percentile(&mut rtts, 0.5), percentile(&mut rtts, 0.99))
}

/// Messages per second received by each of 2 receivers of a packed multicast blast of
/// `size`-byte blocks (the slower receiver counts).
fn raw_blast(messages: u64, size: usize) -> f64 {
    raw_blast_cpu(messages, size).0
}

/// [`raw_blast`] and the CPU time per message of its sender and each receiver.
pub(crate) fn raw_blast_cpu(messages: u64, size: usize) -> (f64, CpuPerMessage) {
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 31, 0, 1), port());
    let receivers: Vec<_> = (0..2)
        .map(|_| udp::multicast_receiver(group, Ipv4Addr::LOCALHOST, 64 << 20).unwrap())
        .collect();
    let per_packet = (1472 - 20) / (2 + size);
    let packets = messages.div_ceil(per_packet as u64);
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = receivers
        .into_iter()
        .map(|s| {
            let bar = barrier.clone();
            thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut got = 0u64;
                bar.wait();
                let cpu0 = thread_cpu_ns();
                let mut first: Option<Instant> = None;
                let mut last = Instant::now();
                let mut idle_since = Instant::now();
                while got < packets {
                    match udp::try_recv(&s, &mut buf).unwrap() {
                        Some(_) => {
                            first.get_or_insert_with(Instant::now);
                            got += 1;
                            last = Instant::now();
                            idle_since = last;
                        }
                        None => {
                            if first.is_some() && idle_since.elapsed() > Duration::from_millis(300)
                            {
                                break; // the rest was dropped
                            }
                            thread::yield_now();
                        }
                    }
                }
                let secs = (last - first.unwrap()).as_secs_f64();
                let cpu = (thread_cpu_ns() - cpu0) as f64 / messages as f64;
                ((got * per_packet as u64) as f64 / secs, cpu)
            })
        })
        .collect();
    let sender = udp::multicast_sender(Ipv4Addr::LOCALHOST, 1).unwrap();
    let dest: SockAddr = SocketAddr::V4(group).into();
    let mut packet = vec![0u8; 20];
    for _ in 0..per_packet {
        packet.extend_from_slice(&(size as u16).to_be_bytes());
        packet.extend_from_slice(&vec![1u8; size]);
    }
    barrier.wait();
    let cpu0 = thread_cpu_ns();
    let mut outbox = Outbox::default();
    let mut sent = 0;
    while sent < packets {
        for _ in 0..64.min(packets - sent) {
            outbox.push(&packet);
            sent += 1;
        }
        outbox.send_to(&sender, &dest).unwrap();
    }
    let mut cpu = CpuPerMessage(vec![(
        "sender".into(),
        (thread_cpu_ns() - cpu0) as f64 / messages as f64,
    )]);
    let mut rate = f64::MAX;
    for (i, h) in handles.into_iter().enumerate() {
        let (r, c) = h.join().unwrap();
        rate = rate.min(r);
        cpu.0.push((format!("receiver{i}"), c));
    }
    (rate, cpu)
}

/// (throughput to 2 nodes, catch-up rate of a late joiner), messages per second.
/// Every account the round-trip and throughput benchmarks use, each with a key.
const AUTH: &str = "[auth]\naccounts = [\n\
    { account = \"P\", key = \"0101010101010101010101010101010101010101010101010101010101010101\" },\n\
    { account = \"S\", key = \"0202020202020202020202020202020202020202020202020202020202020202\" },\n\
    { account = \"R0\", key = \"0303030303030303030303030303030303030303030303030303030303030303\" },\n\
    { account = \"R1\", key = \"0404040404040404040404040404040404040404040404040404040404040404\" },\n\
]\n";

/// The downstream key of the third bus of [`mac`].
const DOWNSTREAM_KEY: &str =
    "key = \"0505050505050505050505050505050505050505050505050505050505050505\"\n";

/// The MACs' cost: `rounds` times, keys off, upstream keys on (`[auth]`), then the downstream
/// key on (`downstream.key`), each on a fresh bus: the round trip (sequencer and node
/// busy-spinning) and the throughput to 2 nodes (`BENCH_IDLE`, default `block`), of one
/// sender; medians over the rounds.
fn mac(samples: usize, messages: u64, rounds: usize) {
    let idle = std::env::var("BENCH_IDLE").unwrap_or("block".into());
    let mut p50 = [Vec::new(), Vec::new(), Vec::new()];
    let mut p99 = [Vec::new(), Vec::new(), Vec::new()];
    let mut tput = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, (auth, down)) in [("", ""), (AUTH, ""), ("", DOWNSTREAM_KEY)]
            .into_iter()
            .enumerate()
        {
            let b = start_bus_with("busy-spin", auth, down);
            let (a, z) = round_trip(&b.cfg, samples);
            drop(b);
            p50[i].push(a);
            p99[i].push(z);
            let b = start_bus_with(&idle, &format!("clock_tick_ms = 0\n{auth}"), down);
            tput[i].push(throughput(&b.cfg, messages, false).0);
        }
    }
    // the MAC alone: sealing and checking a packet of one 32-byte command, in this thread's
    // CPU time (the machine's other load left out)
    let key = Key::new([7; 32]);
    let packet = [0x5au8; 28 + 16 + 32 + 16];
    let n = 1_000_000u32;
    let cpu0 = thread_cpu_ns();
    let mut ok = 0u32;
    for i in 0..n {
        let mut p = packet;
        p[..4].copy_from_slice(&i.to_le_bytes());
        let mac = key.mac(&p);
        ok += u32::from(key.verify(std::hint::black_box(&p), &mac));
    }
    assert_eq!(ok, n);
    let mac_ns = (thread_cpu_ns() - cpu0) as f64 / f64::from(n);
    // the downstream MAC alone: sealing and opening a full MoldUDP64 packet
    let full = [0x5au8; 1472 - 16];
    let n_down = 200_000u32;
    let mut sealed = Vec::with_capacity(1472);
    let cpu0 = thread_cpu_ns();
    let mut ok = 0u32;
    for i in 0..n_down {
        let mut p = full;
        p[..4].copy_from_slice(&i.to_le_bytes());
        sealed.clear();
        seqbus_wire::auth::seal_downstream(&key, &p, &mut sealed);
        ok += u32::from(
            seqbus_wire::auth::open_downstream(&key, std::hint::black_box(&sealed)).is_some(),
        );
    }
    assert_eq!(ok, n_down);
    let down_ns = (thread_cpu_ns() - cpu0) as f64 / f64::from(n_down);
    // median (least–greatest) of the rounds
    let med = |v: &mut Vec<f64>| {
        let m = percentile(v, 0.5);
        (m, v[0], v[v.len() - 1])
    };
    let cell = |(m, lo, hi): (f64, f64, f64), scale: f64, unit: &str| {
        format!(
            "{:.2} {unit} ({:.2}–{:.2})",
            m / scale,
            lo / scale,
            hi / scale
        )
    };
    let [off50, on50, down50] = p50.each_mut().map(med);
    let [off99, on99, down99] = p99.each_mut().map(med);
    let [offt, ont, downt] = tput.each_mut().map(med);
    println!("| MAC (BLAKE3 keyed), median (least–greatest) of {rounds} rounds | keys off (same run) | upstream keys on (`[auth]`) | ratio | downstream key on (`downstream.key`) | ratio |");
    println!("|---|---|---|---|---|---|");
    let tput_row = format!("throughput, one sender → 2 nodes, idle {idle}");
    for (what, off, on, down, scale, unit) in [
        ("round trip p50, busy-spin", off50, on50, down50, 1.0, "µs"),
        ("round trip p99, busy-spin", off99, on99, down99, 1.0, "µs"),
        (tput_row.as_str(), offt, ont, downt, 1e6, "M msg/s"),
    ] {
        println!(
            "| {what} | {} | {} | {:.2}× | {} | {:.2}× |",
            cell(off, scale, unit),
            cell(on, scale, unit),
            on.0 / off.0,
            cell(down, scale, unit),
            down.0 / off.0
        );
    }
    println!(
        "| the MAC alone, CPU time | — | seal + verify a 92-byte command packet: {mac_ns:.0} ns | — | seal + open a 1,472-byte packet: {down_ns:.0} ns | — |"
    );
}

/// CPU nanoseconds per message of each thread of a throughput run, and their sum.
#[derive(Debug, Default, Clone)]
pub(crate) struct CpuPerMessage(pub Vec<(String, f64)>);

impl CpuPerMessage {
    fn total(&self) -> f64 {
        self.0.iter().map(|(_, v)| v).sum()
    }
}

impl std::fmt::Display for CpuPerMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, ns) in &self.0 {
            write!(f, "{name} {ns:.0}, ")?;
        }
        write!(f, "total {:.0} ns/msg", self.total())
    }
}

/// This thread's CPU time so far, ns (the first field of `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat")
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("a number of ns")
}

fn bus_throughput(messages: u64) -> (f64, f64, CpuPerMessage) {
    let idle = std::env::var("BENCH_IDLE").unwrap_or("block".into());
    let b = start_bus(&idle, "clock_tick_ms = 0");
    throughput_cpu(&b.cfg, messages, true)
}

/// Throughput to 2 nodes on the bus of `cfg`, and (with `catch_up`) the catch-up rate of a
/// late joiner, messages per second.
pub(crate) fn throughput(cfg: &Config, messages: u64, catch_up: bool) -> (f64, f64) {
    let (t, c, _) = throughput_cpu(cfg, messages, catch_up);
    (t, c)
}

/// [`throughput`], and the CPU time per message of each thread while the 2 nodes received:
/// the sender, every thread of the bus in this process (summed by name: the sequencer, the
/// in-process replayer), each receiving node.
pub(crate) fn throughput_cpu(
    cfg: &Config,
    messages: u64,
    catch_up: bool,
) -> (f64, f64, CpuPerMessage) {
    let run = throughput_threads(cfg, messages, catch_up);
    let per = |ns: u64| ns as f64 / messages as f64;
    let mut cpu = CpuPerMessage(vec![("sender".into(), run.sender)]);
    for t in &run.others {
        match cpu.0.iter_mut().find(|(n, _)| *n == t.comm) {
            Some(slot) => slot.1 += per(t.cpu_ns),
            None => cpu.0.push((t.comm.clone(), per(t.cpu_ns))),
        }
    }
    for (i, r) in run.receivers.iter().enumerate() {
        cpu.0.push((format!("receiver{i}"), *r));
    }
    (run.rate, run.catch_up, cpu)
}

/// What one throughput run measured.
pub(crate) struct ThroughputRun {
    /// Messages per second received by the slower of the 2 receiving nodes.
    pub rate: f64,
    /// A late joiner's catch-up rate, messages per second (0 when not measured).
    pub catch_up: f64,
    /// CPU time of the sending node's thread per message, ns.
    pub sender: f64,
    /// CPU time of each receiving node's thread per message, ns.
    pub receivers: Vec<f64>,
    /// The CPU time every other thread of this process spent over the measured part, ns in
    /// all (not per message): the bus's threads.
    pub others: Vec<sys::Task>,
}

/// Throughput to 2 receiving nodes (threads `receiver0`, `receiver1`) of one sending node
/// (this thread), with every thread's CPU clock read at the start and the end of the measured
/// part (after every node caught up, until both receivers had every message).
pub(crate) fn throughput_threads(cfg: &Config, messages: u64, catch_up: bool) -> ThroughputRun {
    let done = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(3));
    let receivers: Vec<_> = (0..2)
        .map(|i| {
            let mut c =
                NodeClient::connect(cfg, NodeOptions::new(&format!("R{i}"), 1, Start::From(1)))
                    .unwrap();
            wait_caught_up(&mut c);
            let bar = barrier.clone();
            let done = done.clone();
            thread::Builder::new()
                .name(format!("receiver{i}"))
                .spawn(move || {
                    let mut out = Vec::with_capacity(1 << 20);
                    let mut got = 0u64;
                    bar.wait();
                    let cpu0 = thread_cpu_ns();
                    let mut first = None;
                    let end = Instant::now() + Duration::from_secs(300);
                    while got < messages {
                        out.clear();
                        c.poll(&mut out, 8192, Duration::from_millis(10)).unwrap();
                        let n = records(&out).filter(|r| r.0 == 1 && r.3 == b'S').count() as u64;
                        if n > 0 {
                            first.get_or_insert_with(Instant::now);
                        }
                        got += n;
                        assert!(Instant::now() < end, "receiver stalled at {got}");
                    }
                    let rate = got as f64 / first.unwrap().elapsed().as_secs_f64();
                    let cpu = (thread_cpu_ns() - cpu0) as f64 / messages as f64;
                    done.fetch_add(1, Ordering::SeqCst);
                    eprintln!("receiver: {:?}", c.stats());
                    (rate, cpu)
                })
                .unwrap()
        })
        .collect();
    let mut s = NodeClient::connect(cfg, NodeOptions::new("S", 1, Start::From(1))).unwrap();
    wait_caught_up(&mut s);
    barrier.wait();
    let me = sys::gettid();
    let bus0 = sys::tasks();
    let cpu0 = thread_cpu_ns();
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages {
        match s.send(&body(i)) {
            Ok(_) => i += 1,
            Err(SendError::WindowFull { window, .. }) => {
                // refill in large batches: wait until half the window is free
                while s.stats().in_flight as usize > window / 2 {
                    out.clear();
                    s.poll(&mut out, 8192, Duration::from_millis(1)).unwrap();
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    while done.load(Ordering::SeqCst) < 2 {
        out.clear();
        s.poll(&mut out, 8192, Duration::from_millis(1)).unwrap();
    }
    let sender = (thread_cpu_ns() - cpu0) as f64 / messages as f64;
    let others: Vec<sys::Task> = sys::spent(&bus0, &sys::tasks())
        .into_iter()
        .filter(|t| t.tid != me && !t.comm.starts_with("receiver"))
        .collect();
    eprintln!("sender: {:?}", s.stats());
    let mut rate = f64::MAX;
    let mut cpu = Vec::new();
    for h in receivers {
        let (r, c) = h.join().unwrap();
        rate = rate.min(r);
        cpu.push(c);
    }
    let mut run = ThroughputRun {
        rate,
        catch_up: 0.0,
        sender,
        receivers: cpu,
        others,
    };
    if !catch_up {
        return run;
    }
    // a late joiner rewinds everything through the in-process replayer
    let mut late = NodeClient::connect(cfg, NodeOptions::new("L", 1, Start::From(1))).unwrap();
    let t = Instant::now();
    let mut out = Vec::with_capacity(1 << 20);
    let mut got = 0u64;
    loop {
        out.clear();
        late.poll(&mut out, 8192, Duration::from_millis(100))
            .unwrap();
        got += records(&out).filter(|r| r.0 == 1).count() as u64;
        if records(&out).any(|r| r.0 == RECORD_CAUGHT_UP) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "late joiner stalled at {got}"
        );
    }
    run.catch_up = got as f64 / t.elapsed().as_secs_f64();
    eprintln!("late joiner: {:?}", late.stats());
    run
}

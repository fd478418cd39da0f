//! Benchmarks of the shared-memory ring and of SoupBinTCP, each beside a raw baseline written
//! here and measured in the same run. Not a test: the numbers depend on the machine; what
//! matters is the ratio to the baseline.
//!
//!     cargo bench -p seqbus-transport --bench transports [-- --quick] [-- --json]
//!
//! * shm round trip: process A writes a 32-byte message into a ring, process B reads it and
//!   writes it back into a second ring, A reads it (busy-spinning readers), vs a raw
//!   two-process ping-pong over one shared cache line per direction.
//! * shm throughput: A streams 32-byte records through the ring to B, vs a raw single-producer
//!   single-consumer ring of fixed 32-byte slots. Both writers stay within the ring's capacity
//!   of their reader (the raw ring must; ours would lap the reader otherwise).
//! * TCP round trip: a SoupBinTCP client sends unsequenced data, the server publishes it back
//!   as sequenced data, vs a raw TCP echo of the same 32 bytes (both TCP_NODELAY, loopback).
//! * TCP rewind: a client logs in at sequence 1 and receives 10M 32-byte messages from the
//!   server's store.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::replayer::{Store, StoreError};
use seqbus_transport::ring::{Read as RingRead, Reader, Ring, Writer};
use seqbus_transport::soupbin::Timing;
use seqbus_transport::tcp::{ClientConfig, Credential, ServerConfig, TcpClient, TcpServer};
use seqbus_wire::{MoldPacket, Session};

const MSG: usize = 32;

struct Opts {
    quick: bool,
    json: bool,
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn report(opts: &Opts, name: &str, ours: f64, base: f64, unit: &str, target: &str) {
    if opts.json {
        println!(
            "{{\"bench\":\"{name}\",\"seqbus\":{ours:.1},\"baseline\":{base:.1},\"unit\":\"{unit}\",\"ratio\":{:.3},\"target\":\"{target}\"}}",
            ours / base
        );
    } else {
        println!(
            "{name:<28} seqbus {ours:>14.1} {unit:<6} baseline {base:>14.1} {unit:<6} ratio {:>6.3}  (target {target})",
            ours / base
        );
    }
}

// ---------- raw shared memory baseline ----------

/// A mapped file of `len` bytes.
fn map(path: &Path, len: usize, create: bool) -> *mut u8 {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
        .unwrap();
    if create {
        f.set_len(len as u64).unwrap();
    }
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p.cast()
}

fn atomic(base: *mut u8, off: usize) -> &'static AtomicU64 {
    unsafe { &*(base.add(off) as *const AtomicU64) }
}

const RAW_SLOTS: usize = 1 << 16;
const RAW_LEN: usize = 256 + RAW_SLOTS * MSG;

/// Raw ping-pong: word at 0 = ping counter, word at 128 = pong counter, payload at 64/192.
fn raw_pong(path: &Path, n: u64) {
    let b = map(path, RAW_LEN, false);
    let (ping, pong) = (atomic(b, 0), atomic(b, 128));
    for i in 1..=n {
        while ping.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        unsafe { std::ptr::copy_nonoverlapping(b.add(64), b.add(192), MSG) };
        pong.store(i, Ordering::Release);
    }
}

fn raw_ping(b: *mut u8, n: u64) -> Vec<u64> {
    let (ping, pong) = (atomic(b, 0), atomic(b, 128));
    let mut lat = Vec::with_capacity(n as usize);
    let msg = [7u8; MSG];
    for i in 1..=n {
        let t = Instant::now();
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), b.add(64), MSG) };
        ping.store(i, Ordering::Release);
        while pong.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        lat.push(t.elapsed().as_nanos() as u64);
    }
    lat
}

/// Raw SPSC stream: head at 0 (written by producer), tail at 128 (consumer), slots from 256.
fn raw_consume(path: &Path, n: u64) {
    let b = map(path, RAW_LEN, false);
    let (head, tail) = (atomic(b, 0), atomic(b, 128));
    let mut got = 0u64;
    let mut sum = 0u64;
    let mut buf = [0u8; MSG];
    while got < n {
        let h = head.load(Ordering::Acquire);
        while got < h {
            let slot = (got as usize) & (RAW_SLOTS - 1);
            unsafe {
                std::ptr::copy_nonoverlapping(b.add(256 + slot * MSG), buf.as_mut_ptr(), MSG)
            };
            sum = sum.wrapping_add(buf[0] as u64);
            got += 1;
        }
        tail.store(got, Ordering::Release);
    }
    std::hint::black_box(sum);
}

fn raw_produce(b: *mut u8, n: u64) -> f64 {
    let (head, tail) = (atomic(b, 0), atomic(b, 128));
    let msg = [3u8; MSG];
    let t = Instant::now();
    let mut i = 0u64;
    while i < n {
        let limit = tail.load(Ordering::Acquire) + RAW_SLOTS as u64 / 2;
        let end = limit.min(n);
        while i < end {
            let slot = (i as usize) & (RAW_SLOTS - 1);
            unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), b.add(256 + slot * MSG), MSG) };
            i += 1;
            if i & 63 == 0 || i == end {
                head.store(i, Ordering::Release);
            }
        }
        if i < n {
            std::hint::spin_loop();
        }
    }
    while tail.load(Ordering::Acquire) < n {
        std::hint::spin_loop();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

// ---------- the seqbus ring ----------

fn ring_pong(dir: &Path, n: u64) {
    let a = Arc::new(Ring::open(&dir.join("ping.ring")).unwrap());
    let b = Arc::new(Ring::open(&dir.join("pong.ring")).unwrap());
    let mut r = Reader::new(a);
    let mut w = Writer::new(b);
    // Tell the parent we are reading.
    w.write(b"ready").unwrap();
    let mut buf = Vec::new();
    let mut i = 0;
    while i < n {
        match r.read(&mut buf) {
            RingRead::Record(_) => {
                w.write(&buf).unwrap();
                i += 1;
            }
            RingRead::Empty => std::hint::spin_loop(),
            RingRead::Lapped { .. } => panic!("lapped in ping-pong"),
        }
    }
}

fn ring_consume(dir: &Path, n: u64) {
    let a = Arc::new(Ring::open(&dir.join("stream.ring")).unwrap());
    let progress = map(&dir.join("progress"), 4096, false);
    let done = atomic(progress, 0);
    let mut r = Reader::new(a);
    atomic(progress, 128).store(1, Ordering::Release);
    let mut buf = Vec::new();
    let mut got = 0u64;
    let mut sum = 0u64;
    while got < n {
        // A record is either one message or a MoldUDP64 packet of messages.
        let k = r
            .read_batch(&mut buf, 64 * 1024, &mut |rec| {
                if rec.len() == MSG {
                    sum = sum.wrapping_add(rec[0] as u64);
                    got += 1;
                } else {
                    let p = MoldPacket::parse(rec).expect("a MoldUDP64 packet");
                    for (_, m) in p.messages() {
                        sum = sum.wrapping_add(m[0] as u64);
                        got += 1;
                    }
                }
            })
            .expect("the bench writer never laps its reader");
        if k > 0 {
            done.store(got, Ordering::Release);
        } else {
            std::hint::spin_loop();
        }
    }
    std::hint::black_box(sum);
}

fn child(kind: &str, dir: &Path, n: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--child", kind, dir.to_str().unwrap(), &n.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn bench_shm(opts: &Opts, dir: &Path) {
    let n_rt: u64 = if opts.quick { 20_000 } else { 200_000 };
    let n_tp: u64 = if opts.quick { 2_000_000 } else { 20_000_000 };

    // Raw ping-pong.
    let raw = dir.join("raw");
    let b = map(&raw, RAW_LEN, true);
    let mut c = child("raw-pong", dir, n_rt);
    let mut raw_lat = raw_ping(b, n_rt);
    assert!(c.wait().unwrap().success());
    raw_lat.sort_unstable();

    // Ring ping-pong.
    let ping = Arc::new(Ring::create(&dir.join("ping.ring"), 1 << 20).unwrap());
    let pong = Arc::new(Ring::create(&dir.join("pong.ring"), 1 << 20).unwrap());
    let mut w = Writer::new(ping);
    let mut r = Reader::new(pong);
    let mut c = child("ring-pong", dir, n_rt);
    let mut buf = Vec::new();
    while r.read(&mut buf) != RingRead::Record(5) {
        std::hint::spin_loop();
    }
    let msg = [7u8; MSG];
    let mut lat = Vec::with_capacity(n_rt as usize);
    for _ in 0..n_rt {
        let t = Instant::now();
        w.write(&msg).unwrap();
        loop {
            match r.read(&mut buf) {
                RingRead::Record(_) => break,
                RingRead::Empty => std::hint::spin_loop(),
                RingRead::Lapped { .. } => panic!("lapped"),
            }
        }
        lat.push(t.elapsed().as_nanos() as u64);
    }
    assert!(c.wait().unwrap().success());
    lat.sort_unstable();
    report(
        opts,
        "shm round trip p50",
        pct(&lat, 0.5) as f64,
        pct(&raw_lat, 0.5) as f64,
        "ns",
        "<= 2.0x",
    );
    report(
        opts,
        "shm round trip p99",
        pct(&lat, 0.99) as f64,
        pct(&raw_lat, 0.99) as f64,
        "ns",
        "-",
    );

    // Raw stream.
    unsafe { libc::munmap(b.cast(), RAW_LEN) };
    let b = map(&raw, RAW_LEN, true);
    atomic(b, 0).store(0, Ordering::Release);
    atomic(b, 128).store(0, Ordering::Release);
    let mut c = child("raw-consume", dir, n_tp);
    let raw_rate = raw_produce(b, n_tp);
    assert!(c.wait().unwrap().success());

    for packed in [false, true] {
        let rate = ring_stream(dir, n_tp, packed);
        let name = if packed {
            "shm throughput (packets)"
        } else {
            "shm throughput (1 msg/rec)"
        };
        report(opts, name, rate, raw_rate, "msg/s", ">= 0.5x");
    }
}

/// Streams `n` 32-byte messages through a ring to a child process, one per record or in
/// MoldUDP64 packets of 1472 bytes (as the dispatcher writes them); flow-controlled to half
/// the ring so the reader is never lapped.
fn ring_stream(dir: &Path, n_tp: u64, packed: bool) -> f64 {
    let msg = [7u8; MSG];
    let _ = std::fs::remove_file(dir.join("stream.ring"));
    let cap = 1usize << 24;
    let ring = Arc::new(Ring::create(&dir.join("stream.ring"), cap).unwrap());
    let progress = map(&dir.join("progress"), 4096, true);
    let (done, ready) = (atomic(progress, 0), atomic(progress, 128));
    let mut w = Writer::new(ring);
    let mut c = child("ring-consume", dir, n_tp);
    while ready.load(Ordering::Acquire) == 0 {
        std::hint::spin_loop();
    }
    let in_flight = (cap / 2 / 48) as u64; // a 32-byte record takes 40 bytes, 48 with slack
    let mut mw = seqbus_wire::MoldWriter::new(1472);
    let session = Session::new("BENCH").unwrap();
    let t = Instant::now();
    let mut i = 0u64;
    while i < n_tp {
        let limit = (done.load(Ordering::Acquire) + in_flight).min(n_tp);
        while i < limit {
            if packed {
                mw.begin(session, i + 1);
                while i < limit && mw.push(&msg) {
                    i += 1;
                }
                w.write(mw.bytes()).unwrap();
            } else {
                w.write(&msg).unwrap();
                i += 1;
            }
        }
        std::hint::spin_loop();
    }
    while done.load(Ordering::Acquire) < n_tp {
        std::hint::spin_loop();
    }
    let rate = n_tp as f64 / t.elapsed().as_secs_f64();
    assert!(c.wait().unwrap().success());
    done.store(0, Ordering::Release);
    ready.store(0, Ordering::Release);
    rate
}

// ---------- TCP ----------

fn server(next: u64) -> TcpServer {
    let mut s = TcpServer::bind(
        ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            session: Session::new("BENCH").unwrap(),
            credentials: vec![Credential {
                username: "b".into(),
                password: "b".into(),
            }],
            timing: Timing::default(),
            client_buffer: 256 << 20,
            max_packet: 65_535,
            max_clients: 8,
            tls: None,
        },
        next,
    )
    .unwrap();
    s.set_log(Box::new(|_| {}));
    s
}

fn client(addr: std::net::SocketAddr, start: u64) -> TcpClient {
    let mut c = TcpClient::new(
        ClientConfig {
            server: addr,
            username: "b".into(),
            password: "b".into(),
            session: String::new(),
            timing: Timing::default(),
            reconnect_min_ns: 1_000_000,
            reconnect_max_ns: 10_000_000,
            max_packet: 65_535,
            tls: None,
        },
        start,
    )
    .unwrap();
    c.set_log(Box::new(|_| {}));
    c
}

/// Fixed-size messages back to back: the store of the rewind benchmark.
struct FlatStore {
    data: Vec<u8>,
    n: u64,
}

impl Store for FlatStore {
    fn next_seq(&mut self) -> u64 {
        self.n + 1
    }
    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        let mut k = 0;
        let mut s = from;
        while s <= self.n && k < max {
            let at = (s as usize - 1) * MSG;
            k += 1;
            if !f(s, &self.data[at..at + MSG]) {
                break;
            }
            s += 1;
        }
        Ok(k)
    }
}

/// `read_exact` on a non-blocking socket, spinning while nothing has arrived; an error at the
/// peer's end of stream.
fn spin_read_exact(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn bench_tcp(opts: &Opts) {
    let n_rt: u64 = if opts.quick { 5_000 } else { 50_000 };
    // Raw echo, both sides busy-polling non-blocking sockets like the SoupBinTCP run below
    // (a blocking read would pay the scheduler's wake-up and flatter our side).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; MSG];
        while spin_read_exact(&mut s, &mut b).is_ok() {
            if s.write_all(&b).is_err() {
                break;
            }
        }
    });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_nonblocking(true).unwrap();
    let msg = [9u8; MSG];
    let mut b = [0u8; MSG];
    let mut raw = Vec::with_capacity(n_rt as usize);
    for _ in 0..n_rt {
        let t = Instant::now();
        s.write_all(&msg).unwrap();
        spin_read_exact(&mut s, &mut b).unwrap();
        raw.push(t.elapsed().as_nanos() as u64);
    }
    drop(s);
    echo.join().unwrap();
    raw.sort_unstable();

    // SoupBinTCP: unsequenced up, sequenced back down, both sides busy-polling.
    let mut srv = server(1);
    let addr = srv.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let t0 = Instant::now();
    let srv_thread = std::thread::spawn(move || {
        let mut store = FlatStore {
            data: Vec::new(),
            n: 0,
        };
        let mut up: Vec<Vec<u8>> = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            let now = t0.elapsed().as_nanos() as u64;
            srv.poll(now, &mut store, &mut |d| up.push(d.to_vec()));
            for d in up.drain(..) {
                let seq = srv.next_seq();
                store.data.extend_from_slice(&d);
                store.n += 1;
                srv.publish(now, seq, &d);
            }
            srv.flush();
        }
    });
    let mut c = client(addr, 0);
    while !c.is_connected() {
        c.poll(t0.elapsed().as_nanos() as u64, &mut |_| {}).unwrap();
    }
    let mut lat = Vec::with_capacity(n_rt as usize);
    for _ in 0..n_rt {
        let t = Instant::now();
        assert!(c.send_upstream(t0.elapsed().as_nanos() as u64, &msg));
        let mut got = 0;
        while got == 0 {
            got = c.poll(t0.elapsed().as_nanos() as u64, &mut |_| {}).unwrap();
        }
        lat.push(t.elapsed().as_nanos() as u64);
    }
    stop.store(true, Ordering::Relaxed);
    srv_thread.join().unwrap();
    lat.sort_unstable();
    report(
        opts,
        "tcp round trip p50",
        pct(&lat, 0.5) as f64,
        pct(&raw, 0.5) as f64,
        "ns",
        "<= 1.5x",
    );
    report(
        opts,
        "tcp round trip p99",
        pct(&lat, 0.99) as f64,
        pct(&raw, 0.99) as f64,
        "ns",
        "-",
    );
}

fn bench_rewind(opts: &Opts) {
    let t0 = Instant::now();
    // Rewind of 10M 32-byte messages.
    let n: u64 = if opts.quick { 1_000_000 } else { 10_000_000 };
    let mut data = vec![0u8; n as usize * MSG];
    for (i, m) in data.chunks_mut(MSG).enumerate() {
        m[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
    }
    let mut srv = server(n + 1);
    let addr = srv.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let srv_thread = std::thread::spawn(move || {
        let mut store = FlatStore { data, n };
        let cpu0 = thread_cpu_ns();
        while !stop2.load(Ordering::Relaxed) {
            srv.poll(t0.elapsed().as_nanos() as u64, &mut store, &mut |_| {});
        }
        thread_cpu_ns() - cpu0
    });
    let mut c = client(addr, 1);
    let t = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut got = 0u64;
    let mut last = 0u64;
    while got < n {
        got += c
            .poll(t0.elapsed().as_nanos() as u64, &mut |p| {
                // The header says it all: first sequence and count.
                let first = u64::from_be_bytes(p[10..18].try_into().unwrap());
                let count = u16::from_be_bytes([p[18], p[19]]) as u64;
                last = first + count - 1;
            })
            .unwrap() as u64;
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "rewind stalled at {got}"
        );
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let client_cpu = thread_cpu_ns() - cpu0;
    stop.store(true, Ordering::Relaxed);
    let server_cpu = srv_thread.join().unwrap();
    assert_eq!(last, n);
    report(
        opts,
        "tcp rewind (32-byte msgs)",
        rate,
        10_000_000.0,
        "msg/s",
        ">= 1.0x of 10M/s",
    );
    // On a shared machine the wall-clock rate is what the scheduler allowed; this is the
    // rate each side could sustain on a core of its own (messages per CPU-second of the
    // busier side; the server side busy-polls, so its figure is a lower bound).
    let per_core = n as f64 / (client_cpu.max(1) as f64 / 1e9);
    report(
        opts,
        "tcp rewind per client core",
        per_core,
        10_000_000.0,
        "msg/s",
        "-",
    );
    let _ = server_cpu;
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() >= 5 && args[1] == "--child" {
        let dir = PathBuf::from(&args[3]);
        let n: u64 = args[4].parse().unwrap();
        match args[2].as_str() {
            "raw-pong" => raw_pong(&dir.join("raw"), n),
            "raw-consume" => raw_consume(&dir.join("raw"), n),
            "ring-pong" => ring_pong(&dir, n),
            "ring-consume" => ring_consume(&dir, n),
            k => panic!("unknown child {k}"),
        }
        return;
    }
    let opts = Opts {
        quick: args.iter().any(|a| a == "--quick"),
        json: args.iter().any(|a| a == "--json"),
    };
    let dir = tempfile::Builder::new()
        .prefix("seqbus-bench-")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .unwrap();
    let only: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if only.is_empty() || only.iter().any(|a| *a == "shm") {
        bench_shm(&opts, dir.path());
    }
    if only.is_empty() || only.iter().any(|a| *a == "tcp") {
        bench_tcp(&opts);
    }
    if only.is_empty() || only.iter().any(|a| *a == "tcp" || *a == "rewind") {
        bench_rewind(&opts);
    }
}

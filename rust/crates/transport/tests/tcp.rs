//! SoupBinTCP over real loopback sockets: rewind, reconnect without gap, slow clients cut off,
//! logins refused. Every loop is bounded in iterations and time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seqbus_core::replayer::MemoryStore;
use seqbus_transport::soupbin::frame::{self, LoginRequest, Packet};
use seqbus_transport::soupbin::Timing;
use seqbus_transport::tcp::{
    ClientConfig, ClientError, Credential, ServerConfig, TcpClient, TcpServer,
};
use seqbus_transport::Feed;
use seqbus_wire::{MoldPacket, Session};

fn now(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// The test server's configuration: session TCPTEST, one login node / s3cret.
fn server_config(
    client_buffer: usize,
    max_clients: usize,
    tls: Option<seqbus_transport::tls::ServerTls>,
) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        session: Session::new("TCPTEST").unwrap(),
        credentials: vec![Credential {
            username: "node".into(),
            password: "s3cret".into(),
        }],
        timing: Timing::default(),
        client_buffer,
        max_packet: 65535,
        max_clients,
        tls,
    }
}

fn server(store_next: u64, client_buffer: usize) -> (TcpServer, Arc<Mutex<Vec<String>>>) {
    let cfg = server_config(client_buffer, 64, None);
    let mut s = TcpServer::bind(cfg, store_next).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    s.set_log(Box::new(move |line| {
        l2.lock().unwrap().push(line.to_string())
    }));
    (s, log)
}

fn client(addr: SocketAddr, password: &str, start: u64) -> TcpClient {
    let mut c = TcpClient::new(
        ClientConfig {
            server: addr,
            username: "node".into(),
            password: password.into(),
            session: String::new(),
            timing: Timing::default(),
            reconnect_min_ns: 1_000_000,
            reconnect_max_ns: 100_000_000,
            max_packet: 65535,
            tls: None,
        },
        start,
    )
    .unwrap();
    c.set_log(Box::new(|_| {}));
    c
}

fn msg(seq: u64) -> Vec<u8> {
    let mut m = seq.to_le_bytes().to_vec();
    m.extend_from_slice(&[seq as u8; 24]);
    m
}

/// Collects (sequence, message) pairs from the MoldUDP64 packets a client delivers.
fn collect(got: &mut Vec<u64>, p: &[u8]) {
    let p = MoldPacket::parse(p).expect("a valid MoldUDP64 packet");
    for (seq, m) in p.messages() {
        assert_eq!(m, &msg(seq)[..], "payload of {seq}");
        got.push(seq);
    }
}

#[test]
fn rewind_from_the_start_and_reconnect_mid_stream_without_gap_or_duplicate() {
    const N: u64 = 100_000;
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    // 20,000 messages exist before anyone connects: the clients rewind them.
    for s in 1..=20_000 {
        store.push(&msg(s));
    }
    let (mut srv, _log) = server(20_001, 4 << 20);
    let addr = srv.local_addr().unwrap();
    let mut a = client(addr, "s3cret", 1);
    let mut b = client(addr, "s3cret", 15_000);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let mut next = 20_001u64;
    let mut killed = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (got_a.len() as u64) < N || (got_b.len() as u64) < N - 14_999 {
        assert!(
            Instant::now() < deadline,
            "timed out: a {} b {}",
            got_a.len(),
            got_b.len()
        );
        for _ in 0..200 {
            if next <= N {
                store.push(&msg(next));
                srv.publish(now(t0), next, &msg(next));
                next += 1;
            }
        }
        srv.poll(now(t0), &mut store, &mut |_| {});
        a.poll(now(t0), &mut |p| collect(&mut got_a, p)).unwrap();
        b.poll(now(t0), &mut |p| collect(&mut got_b, p)).unwrap();
        if !killed && got_a.len() > 50_000 {
            // Kill A's connection under it, as a network failure would.
            let fd = a.raw_fd().expect("connected");
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            killed = true;
        }
    }
    assert!(killed);
    assert_eq!(a.stats().connects, 2, "A reconnected once");
    // each login counts: a node sends its commands in flight again after each (what it sent
    // while logged out was dropped)
    assert_eq!(a.stats().logins, 2);
    assert_eq!(Feed::upstream_logins(&a), 2);
    assert_eq!(Feed::upstream_logins(&b), 1);
    assert_eq!(
        got_a,
        (1..=N).collect::<Vec<_>>(),
        "A: no gap, no duplicate"
    );
    assert_eq!(got_b, (15_000..=N).collect::<Vec<_>>());
    assert!(srv.stats().rewound_messages >= 20_000);
}

/// The lines a client logs when its link drops say where it really logs in again: from where
/// its owner moved it (`resume_from`, a following replayer whose journal is ahead of the
/// link), not from where the link stood.
#[test]
fn a_lost_link_logs_where_the_next_login_asks_from() {
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    for s in 1..=500 {
        store.push(&msg(s));
    }
    let (mut srv, _log) = server(501, 4 << 20);
    let mut a = client(srv.local_addr().unwrap(), "s3cret", 1);
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let l2 = lines.clone();
    a.set_log(Box::new(move |line| {
        l2.lock().unwrap().push(line.to_string())
    }));
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < 100 {
        assert!(Instant::now() < deadline, "got {}", got.len());
        srv.poll(now(t0), &mut store, &mut |_| {});
        a.poll(now(t0), &mut |p| collect(&mut got, p)).unwrap();
    }
    a.disconnect("test");
    a.resume_from(400);
    while a.stats().logins < 2 {
        assert!(
            Instant::now() < deadline,
            "no second login: {:?}",
            lines.lock().unwrap()
        );
        srv.poll(now(t0), &mut store, &mut |_| {});
        a.poll(now(t0), &mut |p| collect(&mut got, p)).unwrap();
    }
    let lines = lines.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("connection lost (test); logging in again")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("connected again; logging in from sequence 400")),
        "{lines:?}"
    );
}

#[test]
fn a_client_that_reads_nothing_is_cut_off_while_the_others_keep_up() {
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    let (mut srv, log) = server(1, 1 << 20);
    let addr = srv.local_addr().unwrap();
    // The slow client: logs in at live and never reads.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut login = Vec::new();
    frame::write(
        &mut login,
        &Packet::LoginRequest(LoginRequest::new("node", "s3cret", "", 0).unwrap()),
    );
    slow.write_all(&login).unwrap();
    let mut fast = client(addr, "s3cret", 0);
    let mut got = Vec::new();
    let big = vec![7u8; 200];
    let deadline = Instant::now() + Duration::from_secs(60);
    while srv.clients() < 2 || !fast.is_connected() {
        assert!(Instant::now() < deadline);
        srv.poll(now(t0), &mut store, &mut |_| {});
        fast.poll(now(t0), &mut |_| {}).unwrap();
    }
    let n = 200_000u64; // 40 MB: far past the slow client's bound and its socket buffers
    let mut seq = 1;
    let mut publish_ns_max = 0u64;
    while got.len() < n as usize {
        assert!(Instant::now() < deadline, "timed out at {}", got.len());
        let t = Instant::now();
        for _ in 0..500 {
            if seq <= n {
                store.push(&big);
                srv.publish(now(t0), seq, &big);
                seq += 1;
            }
        }
        publish_ns_max = publish_ns_max.max(t.elapsed().as_nanos() as u64);
        srv.poll(now(t0), &mut store, &mut |_| {});
        fast.poll(now(t0), &mut |p| {
            let p = MoldPacket::parse(p).unwrap();
            got.extend(p.messages().map(|(s, _)| s));
        })
        .unwrap();
    }
    assert_eq!(got, (1..=n).collect::<Vec<_>>());
    assert_eq!(srv.stats().slow_disconnects, 1);
    assert_eq!(srv.clients(), 1, "only the fast client is left");
    let log = log.lock().unwrap().join("\n");
    assert!(
        log.contains("closed: slow consumer: more than 1048576 bytes unsent"),
        "{log}"
    );
    // The slow client finds its link closed after the bytes that made it.
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        match slow.read(&mut sink) {
            Ok(0) => break,
            Ok(k) => total += k,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the slow client's link was not closed: {e}"),
        }
        assert!(total < 64 << 20);
    }
    assert!(
        total < 40_000_000,
        "the slow client did not get the whole stream"
    );
}

/// One publish of more than a client's bound (a burst of large messages) does not cut off a
/// client that reads: what its socket takes as the burst is queued is not unsent.
#[test]
fn a_burst_larger_than_the_bound_reaches_a_client_that_reads() {
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    let (mut srv, log) = server(1, 65_536);
    let addr = srv.local_addr().unwrap();
    let (bursts, per_burst, size) = (20u64, 150u64, 1_000usize); // 150 KB a burst
    let total = bursts * per_burst;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (finished, connected) = (
        done.clone(),
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let ready = connected.clone();
    let reader = std::thread::spawn(move || {
        let mut c = client(addr, "s3cret", 0);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while (got.len() as u64) < total && Instant::now() < deadline {
            if finished.load(std::sync::atomic::Ordering::SeqCst) && !c.is_connected() {
                break; // cut off
            }
            c.poll(now(t0), &mut |p| {
                let p = MoldPacket::parse(p).unwrap();
                got.extend(p.messages().map(|(s, m)| {
                    assert_eq!(m.len(), size);
                    s
                }));
            })
            .unwrap();
            ready.store(c.is_connected(), std::sync::atomic::Ordering::SeqCst);
        }
        got
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while srv.clients() < 1 || !connected.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the client did not log in");
        srv.poll(now(t0), &mut store, &mut |_| {});
    }
    let body = vec![5u8; size];
    let mut seq = 1;
    for _ in 0..bursts {
        for _ in 0..per_burst {
            store.push(&body);
            srv.publish(now(t0), seq, &body); // no poll or flush in between
            seq += 1;
        }
        srv.flush();
        for _ in 0..50 {
            srv.poll(now(t0), &mut store, &mut |_| {});
        }
    }
    while srv.has_pending_output() && Instant::now() < deadline {
        srv.poll(now(t0), &mut store, &mut |_| {});
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let got = reader.join().unwrap();
    let log = log.lock().unwrap().join("\n");
    assert_eq!(srv.stats().slow_disconnects, 0, "{log}");
    assert_eq!(got, (1..=total).collect::<Vec<_>>());
}

#[test]
fn wrong_credentials_and_wrong_session_are_rejected_without_saying_which_part() {
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    let (mut srv, log) = server(1, 1 << 20);
    let addr = srv.local_addr().unwrap();
    for (user, pw, session, want) in [
        ("node", "wrong", "", "not authorized"),
        ("nobody", "s3cret", "", "not authorized"),
        ("node", "s3cret", "OTHER", "session not available"),
    ] {
        let mut c = TcpClient::new(
            ClientConfig {
                server: addr,
                username: user.into(),
                password: pw.into(),
                session: session.into(),
                timing: Timing::default(),
                reconnect_min_ns: 1_000_000,
                reconnect_max_ns: 1_000_000,
                max_packet: 65535,
                tls: None,
            },
            1,
        )
        .unwrap();
        c.set_log(Box::new(|_| {}));
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            assert!(Instant::now() < deadline);
            srv.poll(now(t0), &mut store, &mut |_| {});
            match c.poll(now(t0), &mut |_| panic!("no data after a rejected login")) {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        match err {
            ClientError::Rejected { reason, .. } => assert_eq!(reason, want),
            e => panic!("{e}"),
        }
    }
    assert_eq!(srv.stats().rejected_logins, 3);
    let log = log.lock().unwrap().join("\n");
    assert!(!log.contains("password"), "{log}");
    assert_eq!(
        log.matches("login rejected: not authorized (username")
            .count(),
        2,
        "{log}"
    );
}

fn raw_exchange(addr: SocketAddr, srv: &mut TcpServer, bytes: &[u8]) -> Vec<u8> {
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nonblocking(true).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        srv.poll(now(t0), &mut store, &mut |_| {});
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(_) => return out,
        }
    }
    panic!("the server neither answered nor closed: {out:?}");
}

#[test]
fn malformed_logins_close_the_link_with_a_reason() {
    let (mut srv, log) = server(1, 1 << 20);
    let addr = srv.local_addr().unwrap();
    let mut bad_number = Vec::new();
    frame::write(
        &mut bad_number,
        &Packet::LoginRequest(LoginRequest::new("node", "s3cret", "", 1).unwrap()),
    );
    bad_number[40] = b'x';
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0, 0], "packet length 0"),
        (vec![0, 5, b'L', 1, 2, 3, 4], "needs a 46-byte payload"),
        (vec![0, 3, b'Q', 0, 0], "unknown packet type 0x51"),
        (vec![0, 1, b'U'], "before login"),
        (bad_number, "not a right- or left-justified decimal"),
        (vec![0xff, 0xff, b'L'], "needs a 46-byte payload"),
    ];
    for (bytes, want) in &cases {
        let before = srv.stats().protocol_errors;
        let answer = raw_exchange(addr, &mut srv, bytes);
        assert!(answer.is_empty(), "{answer:?}");
        assert_eq!(srv.stats().protocol_errors, before + 1, "{want}");
        let l = log.lock().unwrap().last().cloned().unwrap();
        assert!(l.contains(want), "{l} vs {want}");
    }
    assert_eq!(srv.clients(), 0);
}

#[test]
fn left_justified_login_is_accepted_and_answered_right_justified() {
    let (mut srv, _log) = server(43, 1 << 20);
    let addr = srv.local_addr().unwrap();
    let mut login = vec![0, 47, b'L'];
    login.extend_from_slice(b"node  s3cret    TCPTEST   42                  ");
    login.extend_from_slice(&[0, 1, b'O']);
    let answer = raw_exchange(addr, &mut srv, &login);
    let mut want = vec![0, 31, b'A'];
    want.extend_from_slice(b"TCPTEST   ");
    want.extend_from_slice(&[b' '; 18]);
    want.extend_from_slice(b"42");
    assert_eq!(&answer[..], &want[..]);
}

#[test]
fn client_fd_is_a_socket() {
    let (srv, _log) = server(1, 1 << 20);
    let mut c = client(srv.local_addr().unwrap(), "s3cret", 0);
    assert!(c.raw_fd().is_none());
    c.poll(0, &mut |_| {}).unwrap();
    assert!(c.raw_fd().unwrap().as_raw_fd() > 0);
}

/// A server certificate for 127.0.0.1, self-signed (its own trust anchor), as PEM files.
fn tls_files(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    (cert, key)
}

#[test]
fn over_tls_rewind_live_and_commands_and_an_untrusted_server_is_refused() {
    use seqbus_transport::tls;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = tls_files(dir.path());
    let t0 = Instant::now();
    let mut store = MemoryStore::default();
    for s in 1..=5_000 {
        store.push(&msg(s));
    }
    let cfg = server_config(4 << 20, 8, Some(tls::server_config(&cert, &key).unwrap()));
    let mut srv = TcpServer::bind(cfg, 5_001).unwrap();
    srv.set_log(Box::new(|_| {}));
    let addr = srv.local_addr().unwrap();
    let trusted = tls::client_config(&cert, None, addr.ip()).unwrap();
    let mut c_cfg = ClientConfig {
        server: addr,
        username: "node".into(),
        password: "s3cret".into(),
        session: String::new(),
        timing: Timing::default(),
        reconnect_min_ns: 1_000_000,
        reconnect_max_ns: 100_000_000,
        max_packet: 65535,
        tls: Some(trusted),
    };
    let mut c = TcpClient::new(c_cfg.clone(), 1).unwrap();
    c.set_log(Box::new(|_| {}));
    // a client trusting another certificate, and a plain-TCP client: never logged in
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other = tls_files(&other_dir);
    c_cfg.tls = Some(tls::client_config(&other.0, None, addr.ip()).unwrap());
    let mut untrusted = TcpClient::new(c_cfg, 1).unwrap();
    untrusted.set_log(Box::new(|_| {}));
    let mut plain = client(addr, "s3cret", 1);
    let (mut got, mut bad) = (Vec::new(), Vec::new());
    let mut commands = Vec::new();
    let mut next = 5_001u64;
    let mut sent_command = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < 20_000 || commands.is_empty() {
        assert!(
            Instant::now() < deadline,
            "timed out: {} messages",
            got.len()
        );
        if next <= 20_000 {
            store.push(&msg(next));
            srv.publish(now(t0), next, &msg(next));
            next += 1;
        }
        srv.flush();
        srv.poll(now(t0), &mut store, &mut |d| commands.push(d.to_vec()));
        c.poll(now(t0), &mut |p| collect(&mut got, p)).unwrap();
        let _ = untrusted.poll(now(t0), &mut |p| collect(&mut bad, p));
        let _ = plain.poll(now(t0), &mut |p| collect(&mut bad, p));
        if c.is_connected() && !sent_command {
            sent_command = c.send_upstream(now(t0), b"a command over TLS");
        }
    }
    assert_eq!(got, (1..=20_000).collect::<Vec<_>>());
    assert_eq!(commands, vec![b"a command over TLS".to_vec()]);
    assert!(bad.is_empty() && !untrusted.is_connected() && !plain.is_connected());
    assert_eq!(
        srv.stats().logins,
        1,
        "only the trusting TLS client logged in"
    );
}

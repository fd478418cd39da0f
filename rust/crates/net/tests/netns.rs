//! Real-socket tests in a private network namespace: packet loss injected by nftables, and
//! kill -9 of the sequencer process mid-stream followed by a restart.

mod common;

use std::collections::HashMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::*;
use seqbus_net::{Config, NodeClient, NodeOptions, SendError, Start, RECORD_CAUGHT_UP};

/// Starts the sequencer's binary and returns once it has bound its sockets.
fn spawn_sequencer(cfg_path: &std::path::Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_seqbus-sequencer"))
        .arg(cfg_path)
        .spawn()
        .unwrap();
    let cfg = Config::from_path(cfg_path).unwrap();
    let bound = wait_bound(&cfg, || child.try_wait().unwrap().is_some());
    assert!(
        bound,
        "the sequencer exited before it was bound: {:?}",
        child.try_wait()
    );
    child
}

/// Sends `n` bodies from `c`, polling (into `got`) whenever the window is full.
fn send_all(c: &mut NodeClient, got: &mut Vec<Rec>, tag: u8, from: u32, n: u32) {
    for i in from..from + n {
        let mut payload = vec![tag];
        payload.extend_from_slice(&i.to_le_bytes());
        let b = body(&payload);
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            match c.send(&b) {
                Ok(_) => break,
                Err(SendError::WindowFull { .. }) => {
                    assert!(Instant::now() < end, "window never drained");
                    poll_until(c, got, Duration::from_millis(1), |_| false);
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    c.flush().unwrap();
}

fn app_from(recs: &[Rec], tag: u8) -> Vec<u32> {
    messages(recs)
        .iter()
        .filter(|r| r.4.len() == 13 && r.4[8] == tag)
        .map(|r| u32::from_le_bytes(r.4[9..13].try_into().unwrap()))
        .collect()
}

fn wait_caught_up(c: &mut NodeClient, got: &mut Vec<Rec>) {
    let caught_up = |r: &[Rec]| r.iter().any(|x| x.0 == RECORD_CAUGHT_UP);
    assert!(
        poll_until(c, got, Duration::from_secs(20), caught_up),
        "not caught up in 20 s, {} records: {:?}",
        got.len(),
        c.stats()
    );
}

fn config_text(dir: &std::path::Path, fsync: &str) -> String {
    let (up, rep, grp) = (free_port(), free_port(), free_port());
    format!(
        "[bus]\nsession = \"NETNS\"\n[sequencer]\nupstream = \"127.0.0.1:{up}\"\njournal_dir = \"{}\"\nfsync = \"{fsync}\"\nclock_tick_ms = 10\nheartbeat_ms = 20\n[downstream]\ntransport = \"udp-multicast\"\ngroup = \"239.20.0.1:{grp}\"\n[replayer]\nlisten = \"127.0.0.1:{rep}\"\n[node]\nreplayers = [\"127.0.0.1:{rep}\"]\nretry_ms = 20\nwindow = 128\n",
        dir.join("journal").display()
    )
}

#[test]
fn sequencer_kill9_and_restart_loses_nothing() {
    if !in_netns("sequencer_kill9_and_restart_loses_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus.toml");
    std::fs::write(&path, config_text(dir.path(), "none")).unwrap();
    let cfg = Config::from_path(&path).unwrap();
    let mut seq = spawn_sequencer(&path);
    let mut a = NodeClient::connect(&cfg, NodeOptions::new("A", 1, Start::From(1))).unwrap();
    let mut c = NodeClient::connect(&cfg, NodeOptions::new("C", 1, Start::From(1))).unwrap();
    let (mut ga, mut gc) = (Vec::new(), Vec::new());
    wait_caught_up(&mut a, &mut ga);
    wait_caught_up(&mut c, &mut gc);
    const N: u32 = 20_000;
    send_all(&mut a, &mut ga, b'a', 0, N / 2);
    // mid-stream: kill -9 while commands are in flight
    let in_flight = a.stats().in_flight;
    seq.kill().unwrap();
    seq.wait().unwrap();
    eprintln!("killed with {in_flight} commands in flight");
    poll_until(&mut c, &mut gc, Duration::from_millis(100), |_| false);
    let before: HashMap<u64, Vec<u8>> = messages(&gc).iter().map(|r| (r.1, r.4.clone())).collect();
    let mut seq = spawn_sequencer(&path);
    send_all(&mut a, &mut ga, b'a', N / 2, N / 2);
    let all = |r: &[Rec]| app_from(r, b'a').len() >= N as usize;
    assert!(
        poll_until(&mut c, &mut gc, Duration::from_secs(60), all),
        "C got {}",
        app_from(&gc, b'a').len()
    );
    assert!(poll_until(&mut a, &mut ga, Duration::from_secs(60), all));
    assert_eq!(
        app_from(&gc, b'a'),
        (0..N).collect::<Vec<_>>(),
        "every command once, in order"
    );
    let seqs: Vec<u64> = messages(&gc).iter().map(|r| r.1).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    // what was published before the kill keeps its number; a late joiner rewinding the
    // restarted sequencer's journal sees the same stream
    let mut late = NodeClient::connect(&cfg, NodeOptions::new("L", 1, Start::From(1))).unwrap();
    let mut gl = Vec::new();
    assert!(poll_until(&mut late, &mut gl, Duration::from_secs(60), all));
    let lm: HashMap<u64, Vec<u8>> = messages(&gl).iter().map(|r| (r.1, r.4.clone())).collect();
    for (s, m) in &before {
        assert_eq!(lm.get(s), Some(m), "message {s} renumbered or lost");
    }
    assert_eq!(
        messages(&gl)
            .iter()
            .map(|r| (r.1, &r.4))
            .take(N as usize)
            .collect::<Vec<_>>(),
        messages(&gc)
            .iter()
            .map(|r| (r.1, &r.4))
            .take(N as usize)
            .collect::<Vec<_>>()
    );
    let st = c.stats();
    eprintln!("C stats after restart: {st:?}");
    seq.kill().unwrap();
    seq.wait().unwrap();
}

fn nft(args: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("nft {args}")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn five_percent_loss_injected_by_nftables() {
    if !in_netns("five_percent_loss_injected_by_nftables") {
        return;
    }
    if !nft("add table inet t") {
        eprintln!("SKIPPED five_percent_loss_injected_by_nftables: nft not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus.toml");
    std::fs::write(&path, config_text(dir.path(), "interval")).unwrap();
    let cfg = Config::from_path(&path).unwrap();
    assert!(nft(
        "add chain inet t in '{ type filter hook input priority 0; }'"
    ));
    // 5% loss on the downstream group, upstream commands and replayer traffic alike
    for port in [
        cfg.downstream.group.unwrap().port(),
        cfg.sequencer.upstream.port(),
        cfg.replayer.listen.port(),
    ] {
        assert!(nft(&format!(
            "add rule inet t in udp dport {port} numgen random mod 100 \\< 5 drop"
        )));
    }
    let seq = start_sequencer(&cfg);
    let mut senders: Vec<NodeClient> = ["S1", "S2"]
        .iter()
        .map(|a| NodeClient::connect(&cfg, NodeOptions::new(a, 1, Start::From(1))).unwrap())
        .collect();
    let mut readers: Vec<NodeClient> = (0..3)
        .map(|i| {
            NodeClient::connect(&cfg, NodeOptions::new(&format!("R{i}"), 1, Start::From(1)))
                .unwrap()
        })
        .collect();
    let mut got: Vec<Vec<Rec>> = vec![Vec::new(); 5];
    for (i, c) in senders.iter_mut().chain(readers.iter_mut()).enumerate() {
        wait_caught_up(c, &mut got[i]);
    }
    const N: u32 = 10_000;
    for (i, c) in senders.iter_mut().enumerate() {
        send_all(c, &mut got[i], b'a' + i as u8, 0, N);
    }
    let all = |r: &[Rec]| app_from(r, b'a').len() + app_from(r, b'b').len() >= 2 * N as usize;
    // every node is polled in turn, as an application keeps polling: a sender retries its
    // dropped commands only while it is polled (polling one node at a time could wait forever
    // for another sender's dropped tail)
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let mut done = true;
        for (i, c) in senders.iter_mut().chain(readers.iter_mut()).enumerate() {
            if !all(&got[i]) {
                done &= poll_until(c, &mut got[i], Duration::from_millis(5), all);
            }
        }
        if done {
            break;
        }
        assert!(Instant::now() < end, "not every node got every message");
    }
    let streams: Vec<Vec<(u64, Vec<u8>)>> = got
        .iter()
        .map(|g| messages(g).iter().map(|r| (r.1, r.4.clone())).collect())
        .collect();
    for s in &streams[1..] {
        assert_eq!(s[..2 * N as usize], streams[0][..2 * N as usize]);
    }
    assert_eq!(app_from(&got[2], b'a'), (0..N).collect::<Vec<_>>());
    assert_eq!(app_from(&got[2], b'b'), (0..N).collect::<Vec<_>>());
    let st = readers[0].stats();
    eprintln!("reader stats under 5% loss: {st:?}");
    assert!(
        st.gaps > 0 && st.retransmits > 0,
        "loss was injected: {st:?}"
    );
    seq.shutdown();
}

#[test]
fn start_fails_cleanly_naming_the_problem() {
    let b = bus("udp-unicast", "");
    // upstream port already taken
    let taken = std::net::UdpSocket::bind(b.cfg.sequencer.upstream).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let e = seqbus_net::run_sequencer(&b.cfg, stop.clone())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "sequencer.upstream {}: bind",
            b.cfg.sequencer.upstream
        )),
        "{e}"
    );
    drop(taken);
    // replayer port taken: nothing else stays bound
    let taken = std::net::UdpSocket::bind(b.cfg.replayer.listen).unwrap();
    let e = seqbus_net::run_sequencer(&b.cfg, stop.clone())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("replayer.listen"), "{e}");
    std::net::UdpSocket::bind(b.cfg.sequencer.upstream).expect("upstream released");
    drop(taken);
    // a journal of another session
    let other = b.cfg.clone();
    let mut other_text = std::fs::read_to_string(b.dir.path().join("bus.toml")).unwrap();
    other_text = other_text.replace("session = \"TEST\"", "session = \"OTHER\"");
    let other_cfg = write_config(b.dir.path(), &other_text);
    seqbus_journal::Journal::open(&other.journal_dir(), *b"TEST      ", 1 << 20).unwrap();
    let e = seqbus_net::run_sequencer(&other_cfg, stop)
        .unwrap_err()
        .to_string();
    assert!(e.contains("belongs to session \"TEST\""), "{e}");
}

#[test]
fn following_replayer_serves_after_failover() {
    if !in_netns("following_replayer_serves_after_failover") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (up, grp, r1, r2, dead) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let text = format!(
        "[bus]\nsession = \"FOLLOW\"\n[sequencer]\nupstream = \"127.0.0.1:{up}\"\nclock_tick_ms = 10\nheartbeat_ms = 20\n[downstream]\ntransport = \"udp-multicast\"\ngroup = \"239.21.0.1:{grp}\"\n[replayer]\nlisten = \"127.0.0.1:{r1}\"\n[node]\nreplayers = [\"127.0.0.1:{r1}\"]\nretry_ms = 20\n"
    );
    let cfg = write_config(dir.path(), &text);
    // the follower: its own journal, gaps filled from the in-process replayer
    let follower_text = text.replace(
        &format!("[replayer]\nlisten = \"127.0.0.1:{r1}\"\n"),
        &format!("[replayer]\nlisten = \"127.0.0.1:{r2}\"\nfollow = true\njournal_dir = \"copy\"\nsources = [\"127.0.0.1:{r1}\"]\n"),
    );
    let fdir = tempfile::tempdir().unwrap();
    let fcfg = write_config(fdir.path(), &follower_text);
    // a node whose first replayer is dead and whose second is the follower
    let ndir = tempfile::tempdir().unwrap();
    let ncfg = write_config(
        ndir.path(),
        &text.replace(
            &format!("replayers = [\"127.0.0.1:{r1}\"]"),
            &format!("replayers = [\"127.0.0.1:{dead}\", \"127.0.0.1:{r2}\"]"),
        ),
    );
    let seq = start_sequencer(&cfg);
    let fstop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = {
        let (c, s) = (fcfg.clone(), fstop.clone());
        std::thread::spawn(move || seqbus_net::run_replayer(&c, s))
    };
    let mut s = NodeClient::connect(&cfg, NodeOptions::new("S", 1, Start::From(1))).unwrap();
    let mut gs = Vec::new();
    wait_caught_up(&mut s, &mut gs);
    const N: u32 = 5_000;
    send_all(&mut s, &mut gs, b'a', 0, N);
    let all = |r: &[Rec]| app_from(r, b'a').len() >= N as usize;
    assert!(poll_until(&mut s, &mut gs, Duration::from_secs(30), all));
    // let the follower write the tail
    std::thread::sleep(Duration::from_millis(200));
    let mut l = NodeClient::connect(&ncfg, NodeOptions::new("L", 1, Start::From(1))).unwrap();
    let mut gl = Vec::new();
    assert!(
        poll_until(&mut l, &mut gl, Duration::from_secs(30), all),
        "L got {}",
        app_from(&gl, b'a').len()
    );
    let st = l.stats();
    eprintln!("late node after failover: {st:?}");
    assert!(
        st.requests >= 5,
        "the dead replayer was asked first: {st:?}"
    );
    let ms: Vec<_> = messages(&gs).iter().map(|r| (r.1, r.4.clone())).collect();
    let ml: Vec<_> = messages(&gl).iter().map(|r| (r.1, r.4.clone())).collect();
    assert_eq!(ml[..N as usize], ms[..N as usize]);
    fstop.store(true, std::sync::atomic::Ordering::SeqCst);
    follower.join().unwrap().unwrap();
    // the follower's journal holds the whole stream
    let copy =
        seqbus_journal::Journal::open(&fdir.path().join("copy"), *b"FOLLOW    ", 1 << 20).unwrap();
    assert!(copy.next_seq() > N as u64);
    seq.shutdown();
}

//! `seqbus-bench --shape` (issue 32): where the bus spends its CPU, thread by thread, with one
//! sequencer and with a cluster of three, each beside its floor measured in the same run:
//!
//! 1. throughput of 32-byte bodies to 2 receiving nodes, and the CPU time per message of every
//!    thread of the bus (thread CPU clocks over the measured part only): the sending node, the
//!    receiving nodes, and each sequencer's threads (its loop, its in-process replayer, its
//!    status server), beside a packed 64-byte multicast blast's sender and receivers;
//! 2. the two ratios of the "Done when": the busiest bus thread's CPU per message ÷ the
//!    floor sender's (target ≤ 1.3×), and the cluster's throughput ÷ one sequencer's (target
//!    ≥ 80%);
//! 3. round trip p50/p99 with one and with three sequencers beside a raw UDP ping-pong of the
//!    same idle kind (spinning or blocking).
//!
//! Every part runs `--rounds` times, interleaved; a figure is the median (least–greatest) of
//! its rounds, a ratio is taken within each round first. The header names the CPUs the process
//! may run on (`sched_getaffinity`) and the idle strategy of each figure.
//!
//! A sequencer's threads are told apart by starting the sequencers one at a time: its loop is
//! the thread this benchmark starts and names `sequencerN`; the threads that appear from then
//! until its in-process replayer's thread is up are its own; a thread created without a name
//! (a library's: the status server's HTTP threads) inherits its creator's, `sequencerN`, and
//! counts as member N's. A thread that was there before the bus started (the HTTP threads an
//! earlier bus of the run left, idle) is listed as "left by an earlier bus"; any other thread
//! as "unattributed" under its own name. A thread that ends during the measured part is missed
//! (its clock is gone).

use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use seqbus_net::Config;

use crate::ha::{self, Threads};
use crate::sys::{self, Task};
use crate::{raw_blast_cpu, raw_blocking_ping_pong, raw_ping_pong, round_trip, throughput_threads};

/// The name of a sequencer's loop thread here: `sequencer` and the member's id.
const LOOP_PREFIX: &str = "sequencer";

/// The in-process replayer's thread (named by the bus).
const REPLAYER: &str = "seqbus-replayer";

/// The standalone following replayer [`replayer_sources`] starts.
const FOLLOWER: &str = "follower";

/// The pipelined loop's receive thread (named by the bus; `sequencer.pipeline`).
const RECEIVE: &str = "seqbus-receive";

/// The pipelined cluster member's replication sender (named by the bus).
const REPLICATE: &str = "seqbus-peers";

/// The label of the one sequencer's threads and of the cluster leader's: one row each.
const LEADER: &str = "sequencer or leader";

/// The threads of the sequencers of a bus, by member.
struct Owners {
    /// Each member's loop: (tid, id).
    loops: Vec<(i64, u16)>,
    /// Every thread a member started before its in-process replayer was up: (tid, id).
    started: Vec<(i64, u16)>,
}

impl Owners {
    /// The member a thread belongs to, and what it is. A thread created without a name (by a
    /// library, such as the status server's HTTP threads) carries the name of the thread that
    /// created it, `sequencerN`: member N's.
    fn of(&self, t: &Task) -> Option<(u16, String)> {
        if let Some((_, id)) = self.loops.iter().find(|(tid, _)| *tid == t.tid) {
            return Some((*id, "loop".into()));
        }
        let by_name = t
            .comm
            .strip_prefix(LOOP_PREFIX)
            .and_then(|n| n.parse::<u16>().ok());
        if let Some(id) = by_name {
            return Some((id, "unnamed threads (named after its loop)".into()));
        }
        let (_, id) = self.started.iter().find(|(tid, _)| *tid == t.tid)?;
        Some((*id, t.comm.clone()))
    }
}

/// The sequencers of a bus of `members`, started one after another, and which threads are
/// whose.
fn start_attributed(cfg: &Config, members: usize) -> (Threads, Owners) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Threads {
        stop: stop.clone(),
        handles: Vec::new(),
    };
    let mut owners = Owners {
        loops: Vec::new(),
        started: Vec::new(),
    };
    let pipelined = seqbus_net::pipelined(cfg.sequencer.pipeline);
    for id in 1..=members as u16 {
        let before: Vec<i64> = sys::tasks().iter().map(|t| t.tid).collect();
        let c = cfg.for_member((members > 1).then_some(id)).unwrap();
        let s = stop.clone();
        let (tx, rx) = mpsc::channel();
        threads.handles.push(
            thread::Builder::new()
                .name(format!("{LOOP_PREFIX}{id}"))
                .spawn(move || {
                    tx.send(sys::gettid()).unwrap();
                    seqbus_net::run_sequencer(&c, s).unwrap()
                })
                .unwrap(),
        );
        owners.loops.push((rx.recv().unwrap(), id));
        let end = Instant::now() + Duration::from_secs(10);
        let new = loop {
            let new: Vec<Task> = sys::tasks()
                .into_iter()
                .filter(|t| !before.contains(&t.tid))
                .collect();
            // pipelined, the loop starts its receive (and in a cluster its replicate) thread
            // after the replayer's
            let has = |name: &str| new.iter().any(|t| t.comm == name);
            if has(REPLAYER)
                && (!pipelined || has(RECEIVE))
                && (!pipelined || members == 1 || has(REPLICATE))
            {
                break new;
            }
            if Instant::now() > end {
                eprintln!(
                    "shape: sequencer {id}: no `{REPLAYER}` (or, pipelined, `{RECEIVE}` or \
                     `{REPLICATE}`) thread within 10 s; the threads it starts after this count as unattributed"
                );
                break new;
            }
            thread::sleep(Duration::from_millis(1));
        };
        owners.started.extend(new.iter().map(|t| (t.tid, id)));
    }
    (threads, owners)
}

/// One throughput run: the rate and each thread's CPU per message, by row label.
struct Run {
    rate: f64,
    cpu: Vec<(String, f64)>,
}

/// Throughput through a bus of `members` sequencers (threads of this process, started one at a
/// time), every thread's CPU per message labelled by its member's role.
fn bus_run(members: usize, idle: &str, messages: u64) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, status) = ha::load(dir.path(), idle, members, "clock_tick_ms = 0");
    // threads already here: this thread, and what earlier buses of the run left behind
    let earlier: Vec<i64> = sys::tasks().iter().map(|t| t.tid).collect();
    let (threads, owners) = start_attributed(&cfg, members);
    let run = throughput_threads(&cfg, messages, false);
    // roles as they are at the end of the measured part
    let roles: Vec<Option<String>> = (0..members)
        .map(|i| {
            if members > 1 {
                ha::role(status[i])
            } else {
                None
            }
        })
        .collect();
    drop(threads);
    let mut member_label = vec![String::new(); members];
    let mut standbys = 0;
    for (i, role) in roles.iter().enumerate() {
        member_label[i] = match role.as_deref() {
            None if members == 1 => LEADER.to_string(),
            Some("leader") => LEADER.to_string(),
            Some("follower") => {
                standbys += 1;
                format!("standby {}", ["A", "B", "C", "D"][(standbys - 1).min(3)])
            }
            Some(other) => format!("member {} ({other})", i + 1),
            None => format!("member {} (role unknown)", i + 1),
        };
    }
    let per = |ns: u64| ns as f64 / messages as f64;
    let mut cpu = vec![("sending node".to_string(), run.sender)];
    for (i, r) in run.receivers.iter().enumerate() {
        cpu.push((format!("receiving node {i}"), *r));
    }
    for t in &run.others {
        let label = match owners.of(t) {
            _ if earlier.contains(&t.tid) => "unattributed: left by an earlier bus".to_string(),
            Some((id, kind)) if (id as usize) <= members => {
                format!("{}: {kind}", member_label[id as usize - 1])
            }
            _ => format!("unattributed: {}", t.comm),
        };
        match cpu.iter_mut().find(|(l, _)| *l == label) {
            Some(slot) => slot.1 += per(t.cpu_ns),
            None => cpu.push((label, per(t.cpu_ns))),
        }
    }
    Run {
        rate: run.rate,
        cpu,
    }
}

/// The CPU time per message the threads `pick` chooses spent since `before` (each thread's
/// clock then; a thread started since counts whole), taken once they have been idle for
/// 200 ms (they handled everything; at most 60 s).
fn settled_cpu(before: &[Task], pick: impl Fn(&Task) -> bool, messages: u64) -> f64 {
    let total = || -> u64 {
        sys::tasks()
            .iter()
            .filter(|t| pick(t))
            .map(|t| {
                let then = before
                    .iter()
                    .find(|b| b.tid == t.tid)
                    .map_or(0, |b| b.cpu_ns);
                t.cpu_ns.saturating_sub(then)
            })
            .sum()
    };
    let end = Instant::now() + Duration::from_secs(60);
    let mut last = total();
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = total();
        if now == last || Instant::now() > end {
            return now as f64 / messages as f64;
        }
        last = now;
    }
}

/// What the in-process replayer saves by reading the journal (issue 32, item 3): one
/// sequencer, whose in-process replayer follows the journal file, and beside it a standalone
/// replayer following the multicast group into a journal of its own (`replayer.follow`, as a
/// replayer on another host runs), both serving no one but each other (a follower that lost a
/// datagram asks the in-process replayer). Each one's CPU per message from just before the
/// nodes connect until it has handled everything, median (least–greatest) of `rounds`.
pub fn replayer_sources(messages: u64, rounds: usize, idle: &str) {
    let (mut journal, mut group) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let (cfg, _) = ha::load(dir.path(), idle, 1, "clock_tick_ms = 0");
        let (mut threads, owners) = start_attributed(&cfg, 1);
        let mut fc = cfg.clone();
        fc.replayer.follow = true;
        fc.replayer.journal_dir = Some(dir.path().join("follower"));
        fc.replayer.listen = std::net::SocketAddr::from((
            [127, 0, 0, 1],
            seqbus_net::ports::free_port(seqbus_net::ports::Protocol::Udp),
        ));
        let stop = threads.stop.clone();
        threads.handles.push(
            thread::Builder::new()
                .name(FOLLOWER.into())
                .spawn(move || seqbus_net::run_replayer(&fc, stop).unwrap())
                .unwrap(),
        );
        let before = sys::tasks();
        throughput_threads(&cfg, messages, false);
        let in_process =
            |t: &Task| t.comm == REPLAYER && owners.started.iter().any(|(tid, _)| *tid == t.tid);
        journal.push(settled_cpu(&before, in_process, messages));
        group.push(settled_cpu(
            &before,
            |t: &Task| t.comm == FOLLOWER,
            messages,
        ));
        drop(threads);
    }
    let ratio: Vec<f64> = group.iter().zip(&journal).map(|(g, j)| g / j).collect();
    println!(
        "| a replayer's source, CPU ns per message (its threads' clocks, from the nodes' start \
         until it handled everything; \
         {messages} messages; idle `{idle}`) | in-process: follows the journal file | \
         standalone: follows the multicast group into its own journal | ratio |"
    );
    println!("|---|---|---|---|");
    println!(
        "| one sequencer, 2 receiving nodes | {} | {} | {} |",
        cell(&journal, 1.0, 0),
        cell(&group, 1.0, 0),
        cell_unit(&ratio, 1.0, 2, "×")
    );
    println!();
}

/// The floor: a packed multicast blast of 64-byte blocks (envelope + body) to 2 receivers.
fn floor_run(messages: u64) -> Run {
    let (rate, cpu) = raw_blast_cpu(messages, 64);
    let cpu = cpu
        .0
        .into_iter()
        .map(|(name, ns)| {
            let label = match name.as_str() {
                "sender" => "sending node".to_string(),
                r => format!("receiving node {}", r.trim_start_matches("receiver")),
            };
            (label, ns)
        })
        .collect();
    Run { rate, cpu }
}

/// Round trip p50/p99 through a bus of `members` sequencers with `idle`, µs.
fn bus_round_trip(members: usize, idle: &str, samples: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, _) = ha::load(dir.path(), idle, members, "");
    let threads = ha::start_threads(&cfg, members);
    let rtt = round_trip(&cfg, samples);
    drop(threads);
    rtt
}

/// Where a row goes in the table: sending, receiving, the leader's, the standbys', the rest.
fn row_order(label: &str) -> (u8, String, bool, String) {
    let group = if label == "sending node" {
        0
    } else if label.starts_with("receiving node") {
        1
    } else if label.starts_with(LEADER) {
        2
    } else if label.starts_with("standby") || label.starts_with("member") {
        3
    } else {
        4
    };
    let (owner, kind) = label.split_once(": ").unwrap_or((label, ""));
    (group, owner.to_string(), kind != "loop", kind.to_string())
}

/// `median (least–greatest)` of `v` (or the one value), with `digits` decimals.
fn cell(v: &[f64], scale: f64, digits: usize) -> String {
    cell_unit(v, scale, digits, "")
}

/// [`cell`] with `unit` after the median: `3.10× (2.20–4.70)`.
fn cell_unit(v: &[f64], scale: f64, digits: usize, unit: &str) -> String {
    if v.is_empty() {
        return "—".into();
    }
    let mut v: Vec<f64> = v.iter().map(|x| x / scale).collect();
    let m = median(&v);
    v.sort_by(f64::total_cmp);
    if v.len() == 1 {
        format!("{m:.digits$}{unit}")
    } else {
        format!(
            "{m:.digits$}{unit} ({:.digits$}–{:.digits$})",
            v[0],
            v[v.len() - 1]
        )
    }
}

/// The median of `v` (the mean of the middle two when their number is even).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The whole `--shape` run.
pub fn run(samples: usize, messages: u64, rounds: usize) {
    let rounds = rounds.max(1);
    let cpus = sys::allowed_cpus();
    // SAFETY: sysconf has no memory arguments
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let idle = std::env::var("BENCH_IDLE").unwrap_or("block".into());
    // spinning needs a core per spinning thread (three loops and a node with a cluster)
    let rtt_idle = std::env::var("BENCH_RTT_IDLE").unwrap_or(if cpus.len() >= 8 {
        "busy-spin".into()
    } else {
        "block".into()
    });
    let pipeline = ha::pipeline_setting();
    let setting = match pipeline.as_str() {
        "on" => seqbus_net::config::Pipeline::On,
        "off" => seqbus_net::config::Pipeline::Off,
        _ => seqbus_net::config::Pipeline::Auto,
    };
    println!(
        "seqbus-bench --shape: {} CPUs allowed (sched_getaffinity: {}) of {online} online; load \
         average {} at the start; {rounds} round(s), interleaved; each figure the median \
         (least–greatest) of its rounds, each ratio taken within a round; sequencer.pipeline = \
         \"{pipeline}\" (BENCH_PIPELINE): {}",
        cpus.len(),
        sys::cpu_list(&cpus),
        sys::load_average(),
        if seqbus_net::pipelined(setting) {
            "receiving, the loop and publishing on three threads"
        } else {
            "one thread receives, sequences and publishes"
        }
    );
    println!();

    // throughput and CPU per message: floor, one sequencer, cluster of 3, in turn
    let mut runs: [Vec<Run>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for r in 0..rounds {
        runs[0].push(floor_run(messages));
        // alternate which bus goes first, so that drift in the host's load falls on both
        let order: [usize; 2] = if r % 2 == 0 { [1, 3] } else { [3, 1] };
        for members in order {
            let run = bus_run(members, &idle, messages);
            runs[if members == 1 { 1 } else { 2 }].push(run);
        }
    }
    let mut labels: Vec<String> = Vec::new();
    for run in runs.iter().flatten() {
        for (l, _) in &run.cpu {
            if !labels.contains(l) {
                labels.push(l.clone());
            }
        }
    }
    labels.sort_by_key(|l| row_order(l));
    println!(
        "| CPU time per message, ns (thread CPU clocks, measured part only); {messages} messages \
         per run, idle `{idle}` | floor: packed 64-byte multicast blast → 2 receivers \
         (`sendmmsg`; receivers spin with `sched_yield`) | one sequencer | cluster of 3 |"
    );
    println!("|---|---|---|---|");
    println!(
        "| **throughput to 2 receiving nodes, M msg/s** | {} | {} | {} |",
        cell(&runs[0].iter().map(|r| r.rate).collect::<Vec<_>>(), 1e6, 2),
        cell(&runs[1].iter().map(|r| r.rate).collect::<Vec<_>>(), 1e6, 2),
        cell(&runs[2].iter().map(|r| r.rate).collect::<Vec<_>>(), 1e6, 2),
    );
    for label in &labels {
        let col = |i: usize| {
            let v: Vec<f64> = runs[i]
                .iter()
                .filter_map(|r| r.cpu.iter().find(|(l, _)| l == label).map(|(_, v)| *v))
                .collect();
            cell(&v, 1.0, 0)
        };
        println!("| {label} | {} | {} | {} |", col(0), col(1), col(2));
    }
    let totals = |i: usize| -> Vec<f64> {
        runs[i]
            .iter()
            .map(|r| r.cpu.iter().map(|(_, v)| v).sum())
            .collect()
    };
    println!(
        "| all threads | {} | {} | {} |",
        cell(&totals(0), 1.0, 0),
        cell(&totals(1), 1.0, 0),
        cell(&totals(2), 1.0, 0)
    );
    // (a) the busiest bus thread ÷ the floor's sender, within each round
    // `nodes`: the nodes' threads count too (the sending node's send and its own stream)
    let busiest = |i: usize, nodes: bool| {
        let mut ratios = Vec::new();
        let mut names: Vec<(String, usize)> = Vec::new();
        for (bus, floor) in runs[i].iter().zip(&runs[0]) {
            let sender = floor
                .cpu
                .iter()
                .find(|(l, _)| l == "sending node")
                .map_or(f64::NAN, |(_, v)| *v);
            let (name, top) = bus
                .cpu
                .iter()
                .filter(|(l, _)| nodes || !l.ends_with("node") && !l.starts_with("receiving node"))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .cloned()
                .unwrap();
            ratios.push(top / sender);
            match names.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 += 1,
                None => names.push((name, 1)),
            }
        }
        let names: Vec<String> = names
            .into_iter()
            .map(|(n, c)| format!("{n} {c}/{rounds}"))
            .collect();
        format!(
            "{}; busiest: {}",
            cell_unit(&ratios, 1.0, 2, "×"),
            names.join(", ")
        )
    };
    println!(
        "| **(a) busiest bus thread ÷ the floor's sender** (target ≤ 1.3×) | — | {} | {} |",
        busiest(1, true),
        busiest(2, true)
    );
    println!(
        "| the same, the sequencers' threads only (the nodes left out) | — | {} | {} |",
        busiest(1, false),
        busiest(2, false)
    );
    let ratio = |a: usize, b: usize| -> Vec<f64> {
        runs[a]
            .iter()
            .zip(&runs[b])
            .map(|(x, y)| 100.0 * x.rate / y.rate)
            .collect()
    };
    println!(
        "| throughput ÷ the floor's (target ≥ 75% on ≥ 8 cores) | — | {} | {} |",
        cell_unit(&ratio(1, 0), 1.0, 0, "%"),
        cell_unit(&ratio(2, 0), 1.0, 0, "%")
    );
    println!(
        "| **(b) cluster of 3 ÷ one sequencer, throughput** (target ≥ 80%) | — | — | {} |",
        cell_unit(&ratio(2, 1), 1.0, 0, "%")
    );
    println!();

    // round trip: raw UDP of the same idle kind, one sequencer, cluster of 3, in turn
    let spin = rtt_idle == "busy-spin";
    let mut rtt: [Vec<(f64, f64)>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for r in 0..rounds {
        rtt[0].push(if spin {
            raw_ping_pong(samples)
        } else {
            raw_blocking_ping_pong(samples)
        });
        let order: [usize; 2] = if r % 2 == 0 { [1, 3] } else { [3, 1] };
        for members in order {
            let x = bus_round_trip(members, &rtt_idle, samples);
            rtt[if members == 1 { 1 } else { 2 }].push(x);
        }
    }
    let floor_kind = if spin {
        "two spinning threads"
    } else {
        "two threads blocking in `recv`"
    };
    println!(
        "| round trip, µs ({samples} samples per run), idle `{rtt_idle}` | floor: 64-byte UDP \
         ping-pong, {floor_kind} | one sequencer | ratio | cluster of 3 | ratio | target |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, pick, target) in [
        ("p50", 0usize, "≤ 1.3× (≥ 8 cores, spinning)"),
        ("p99", 1, "≤ 3×"),
    ] {
        let get = |i: usize| -> Vec<f64> {
            rtt[i]
                .iter()
                .map(|x| if pick == 0 { x.0 } else { x.1 })
                .collect()
        };
        let over =
            |i: usize| -> Vec<f64> { get(i).iter().zip(get(0)).map(|(a, b)| a / b).collect() };
        println!(
            "| {name} | {} | {} | {} | {} | {} | {target} |",
            cell(&get(0), 1.0, 1),
            cell(&get(1), 1.0, 1),
            cell_unit(&over(1), 1.0, 2, "×"),
            cell(&get(2), 1.0, 1),
            cell_unit(&over(2), 1.0, 2, "×"),
        );
    }
    println!();
    replayer_sources(messages, rounds, &idle);
    let (a1, a3) = (median_busiest(&runs, 1), median_busiest(&runs, 2));
    let b = median(&ratio(2, 1));
    println!(
        "targets on {} CPUs: (a) busiest bus thread ≤ 1.3× the floor's sender: one sequencer \
         {a1:.2}× {}, cluster of 3 {a3:.2}× {}; (b) cluster of 3 ≥ 80% of one sequencer: \
         {b:.0}% {}",
        cpus.len(),
        verdict(a1 <= 1.3),
        verdict(a3 <= 1.3),
        verdict(b >= 80.0)
    );
}

/// The median over rounds of the busiest bus thread's CPU per message ÷ the floor sender's.
fn median_busiest(runs: &[Vec<Run>; 3], i: usize) -> f64 {
    let v: Vec<f64> = runs[i]
        .iter()
        .zip(&runs[0])
        .map(|(bus, floor)| {
            let top = bus.cpu.iter().map(|(_, v)| *v).fold(0.0, f64::max);
            let sender = floor
                .cpu
                .iter()
                .find(|(l, _)| l == "sending node")
                .map_or(f64::NAN, |(_, v)| *v);
            top / sender
        })
        .collect();
    median(&v)
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "MISSED"
    }
}

//! The C ABI over a real bus: a sequencer on a thread and nodes on `udp-unicast` (no
//! multicast, so no network namespace), driven only through the `extern "C"` functions.
//! Events in stream order with the clock at each message, the `mine` flag and the sender,
//! deterministic timers at the same sequence in a live node and a late joiner, posts through
//! a small window, the configuration's skip list, and errors as codes with a message.

use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_ffi::*;

fn last_error() -> String {
    // SAFETY: a NUL-terminated string valid until the next failing call of this thread
    unsafe { CStr::from_ptr(seqbus_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn port() -> u16 {
    seqbus_net::ports::free_port(seqbus_net::ports::Protocol::Udp)
}

/// A message body: the IDL header (schema 9, template `template`) and `payload`.
fn body(template: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    b.extend_from_slice(&template.to_le_bytes());
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

struct Bus {
    dir: tempfile::TempDir,
    /// The configuration's text, for variants (another account's settings) of one bus.
    text: String,
    path: CString,
    subscribers: Vec<String>,
    stop: Arc<AtomicBool>,
    sequencer: Option<std::thread::JoinHandle<Result<(), seqbus_net::Error>>>,
}

impl Bus {
    fn start(extra: &str) -> Bus {
        let dir = tempfile::tempdir().unwrap();
        let (up, rep) = (port(), port());
        let subscribers: Vec<String> = (0..3).map(|_| format!("127.0.0.1:{}", port())).collect();
        let subs = subscribers
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "[bus]\nsession = \"FFITEST\"\n[sequencer]\nupstream = \"127.0.0.1:{up}\"\n\
             journal_dir = \"{}\"\nclock_tick_ms = 5\nheartbeat_ms = 50\n[downstream]\n\
             transport = \"udp-unicast\"\nsubscribers = [{subs}]\n[replayer]\n\
             listen = \"127.0.0.1:{rep}\"\n[node]\nreplayers = [\"127.0.0.1:{rep}\"]\n{extra}",
            dir.path().join("journal").display()
        );
        let file = dir.path().join("bus.toml");
        std::fs::write(&file, &text).unwrap();
        let cfg = seqbus_net::Config::from_path(&file).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (cfg.clone(), stop.clone());
        let sequencer = Some(std::thread::spawn(move || seqbus_net::run_sequencer(&c, s)));
        // the upstream socket bound: a node's hello then reaches it
        let deadline = Instant::now() + Duration::from_secs(20);
        let suffix = format!(":{up:04X}");
        while !std::fs::read_to_string("/proc/net/udp")
            .unwrap()
            .lines()
            .any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| a.ends_with(&suffix))
            })
        {
            assert!(Instant::now() < deadline, "the sequencer did not bind");
            std::thread::sleep(Duration::from_millis(5));
        }
        Bus {
            path: CString::new(file.to_str().unwrap()).unwrap(),
            text,
            dir,
            subscribers,
            stop,
            sequencer,
        }
    }

    /// The same bus's configuration with `extra` appended, in a file of its own.
    fn variant(&self, name: &str, extra: &str) -> CString {
        let file = self.dir.path().join(name);
        std::fs::write(&file, format!("{}{extra}", self.text)).unwrap();
        CString::new(file.to_str().unwrap()).unwrap()
    }

    fn open(&self, account: &str, instance: u16, start: u64, slot: usize) -> Node {
        self.open_with(&self.path, account, instance, start, slot)
    }

    fn open_with(
        &self,
        config: &CStr,
        account: &str,
        instance: u16,
        start: u64,
        slot: usize,
    ) -> Node {
        let account = CString::new(account).unwrap();
        let listen = CString::new(self.subscribers[slot].as_str()).unwrap();
        let mut n = ptr::null_mut();
        // SAFETY: valid strings, no topics (every application message), out is writable
        let rc = unsafe {
            seqbus_node_open(
                config.as_ptr(),
                account.as_ptr(),
                instance,
                start,
                ptr::null(),
                0,
                listen.as_ptr(),
                &mut n,
            )
        };
        assert_eq!(rc, SEQBUS_OK, "{}", last_error());
        // SAFETY: an open node
        let rc = unsafe { seqbus_node_wait_ready(n, 10_000_000_000) };
        assert_eq!(rc, SEQBUS_OK, "{}", last_error());
        Node(n)
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.sequencer.take() {
            let _ = h.join();
        }
        let _ = &self.dir;
    }
}

/// An event as the test keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Message {
        seq: u64,
        time: u64,
        mine: bool,
        sender: [u8; 8],
        command_seq: u64,
        template: u16,
        body: Vec<u8>,
    },
    Timer {
        seq: u64,
        time: u64,
        at: u64,
    },
    Rewound,
}

/// A message as every node must see it: sequence, sequencer time, sender, command sequence,
/// body.
type Seen = (u64, u64, [u8; 8], u64, Vec<u8>);

struct Node(*mut SeqbusNode);

impl Node {
    /// Polls and walks batches until `done` holds on what came, at most `limit`; `on_event`
    /// runs for each (it may set timers, send, post) and its result is kept.
    fn run(
        &mut self,
        got: &mut Vec<Ev>,
        limit: Duration,
        mut on_event: impl FnMut(&mut Node, &Ev),
        mut done: impl FnMut(&[Ev]) -> bool,
    ) -> bool {
        let deadline = Instant::now() + limit;
        while !done(got) {
            if Instant::now() > deadline {
                return false;
            }
            let mut records = 0u32;
            // SAFETY: an open node; records is writable
            let rc = unsafe { seqbus_node_poll(self.0, 1024, 20_000_000, &mut records) };
            assert_eq!(rc, SEQBUS_OK, "{}", last_error());
            loop {
                let mut e = std::mem::MaybeUninit::<SeqbusEvent>::uninit();
                // SAFETY: an open node; e is writable
                let rc = unsafe { seqbus_node_next(self.0, e.as_mut_ptr()) };
                if rc == SEQBUS_END {
                    break;
                }
                assert_eq!(rc, SEQBUS_OK, "{}", last_error());
                // SAFETY: written by seqbus_node_next
                let e = unsafe { e.assume_init() };
                let ev = match e.kind {
                    SEQBUS_EVENT_MESSAGE => Ev::Message {
                        seq: e.sequence,
                        time: e.time_ns,
                        mine: e.flags & SEQBUS_FLAG_MINE != 0,
                        sender: e.sender,
                        command_seq: e.command_seq,
                        template: e.template_id,
                        // SAFETY: the body lies in the batch until the next poll
                        body: unsafe { std::slice::from_raw_parts(e.body, e.body_len) }.to_vec(),
                    },
                    SEQBUS_EVENT_TIMER => {
                        assert_eq!(e.sequence, unsafe { seqbus_node_sequence(self.0) });
                        Ev::Timer {
                            seq: e.sequence,
                            time: e.time_ns,
                            at: e.timer_at_ns,
                        }
                    }
                    SEQBUS_EVENT_REWOUND => Ev::Rewound,
                    k => panic!("unknown event kind {k}"),
                };
                if let Ev::Message { seq, time, .. } = &ev {
                    // the clock stands at the message while it is handled
                    // SAFETY: an open node
                    assert_eq!(unsafe { seqbus_node_sequence(self.0) }, *seq);
                    assert_eq!(unsafe { seqbus_node_time_ns(self.0) }, *time);
                }
                on_event(self, &ev);
                got.push(ev);
            }
        }
        true
    }

    fn send(&mut self, b: &[u8]) -> i32 {
        let mut cs = 0u64;
        // SAFETY: an open node; b is readable
        unsafe { seqbus_node_send(self.0, b.as_ptr(), b.len(), &mut cs) }
    }

    fn post(&mut self, b: &[u8]) {
        // SAFETY: an open node; b is readable
        let rc = unsafe { seqbus_node_post(self.0, b.as_ptr(), b.len()) };
        assert_eq!(rc, SEQBUS_OK, "{}", last_error());
    }

    fn stats(&self) -> SeqbusStats {
        let mut s = SeqbusStats::default();
        // SAFETY: an open node
        assert_eq!(unsafe { seqbus_node_stats(self.0, &mut s) }, SEQBUS_OK);
        s
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: open, closed once
        unsafe { seqbus_node_close(self.0) };
    }
}

fn messages(evs: &[Ev]) -> Vec<&Ev> {
    evs.iter()
        .filter(|e| matches!(e, Ev::Message { .. }))
        .collect()
}

fn of_template(evs: &[Ev], t: u16) -> usize {
    evs.iter()
        .filter(|e| matches!(e, Ev::Message { template, .. } if *template == t))
        .count()
}

/// The rule every node shares: at the first message of template 1, a timer 20 ms of stream
/// time later; when it fires, another 20 ms on, five in all.
fn timers(n: &mut Node, ev: &Ev, set: &mut u32) {
    let again = match ev {
        Ev::Message { template: 1, .. } if *set == 0 => true,
        Ev::Timer { .. } => *set < 5,
        _ => false,
    };
    if again {
        *set += 1;
        // SAFETY: an open node
        let now = unsafe { seqbus_node_time_ns(n.0) };
        unsafe { seqbus_node_set_timer(n.0, now + 20_000_000) };
    }
}

#[test]
fn nodes_over_the_c_abi_share_the_stream_timers_and_rewind() {
    // a window of 4 commands: B's 60 posts wait in its outbox and leave in order
    let bus = Bus::start("window = 4\n");
    let mut a = bus.open("A", 1, SEQBUS_START_REWIND, 0);
    let mut b = bus.open("B", 1, SEQBUS_START_REWIND, 1);
    let (mut ga, mut gb) = (Vec::new(), Vec::new());
    let (mut ta, mut tb) = (0u32, 0u32);
    // A's first send; every later one at each message of its own, 40 in all, over stream time
    assert_eq!(
        a.send(&body(1, &0u32.to_le_bytes())),
        SEQBUS_OK,
        "{}",
        last_error()
    );
    let mut sent = 1u32;
    for i in 0..60u32 {
        b.post(&body(2, &i.to_le_bytes()));
    }
    // every message, and the five timers (100 ms of stream time: the sequencer's clock ticks
    // are time records for the nodes)
    let want = |e: &[Ev]| {
        of_template(e, 1) == 40
            && of_template(e, 2) == 60
            && e.iter().filter(|e| matches!(e, Ev::Timer { .. })).count() == 5
    };
    // both nodes polled in turn (B's posts leave as it polls), for at most 30 s
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(want(&ga) && want(&gb)) {
        assert!(
            Instant::now() < deadline,
            "A saw {} of 40 and {} of 60, B {} and {}",
            of_template(&ga, 1),
            of_template(&ga, 2),
            of_template(&gb, 1),
            of_template(&gb, 2)
        );
        a.run(
            &mut ga,
            Duration::from_millis(20),
            |n, ev| {
                timers(n, ev, &mut ta);
                if matches!(ev, Ev::Message { mine: true, .. }) && sent < 40 {
                    let rc = n.send(&body(1, &sent.to_le_bytes()));
                    assert_eq!(rc, SEQBUS_OK, "{}", last_error());
                    sent += 1;
                }
            },
            want,
        );
        b.run(
            &mut gb,
            Duration::from_millis(20),
            |n, ev| timers(n, ev, &mut tb),
            want,
        );
    }
    // the same messages in the same order, with the same clock
    let strip = |evs: &[Ev]| -> Vec<Seen> {
        messages(evs)
            .into_iter()
            .map(|e| match e {
                Ev::Message {
                    seq,
                    time,
                    sender,
                    command_seq,
                    body,
                    ..
                } => (*seq, *time, *sender, *command_seq, body.clone()),
                _ => unreachable!(),
            })
            .collect()
    };
    assert_eq!(strip(&ga), strip(&gb));
    // each sender's commands once, in order; mine for one's own only
    for e in messages(&ga) {
        if let Ev::Message {
            mine,
            sender,
            template,
            body,
            command_seq,
            ..
        } = e
        {
            assert_eq!(*mine, sender.starts_with(b"A\0"));
            let i = u32::from_le_bytes(body[8..12].try_into().unwrap()) as u64;
            assert_eq!(*command_seq, i + 1, "{e:?}");
            assert_eq!(*template, if sender.starts_with(b"A\0") { 1 } else { 2 });
        }
    }
    // timers: five each, every one at the first record at or past its deadline, the same
    // records in A and B
    let fired = |evs: &[Ev]| -> Vec<(u64, u64)> {
        evs.iter()
            .filter_map(|e| match e {
                Ev::Timer { seq, at, time } => {
                    assert!(time >= at, "{e:?}");
                    Some((*seq, *at))
                }
                _ => None,
            })
            .collect()
    };
    let fa = fired(&ga);
    assert_eq!(fa.len(), 5);
    assert_eq!(fa, fired(&gb));
    // both rewound from 1: the caught-up event came to each
    assert!(ga.contains(&Ev::Rewound) && gb.contains(&Ev::Rewound));
    assert_eq!(b.stats().commands_sent, 60);
    assert_eq!(a.stats().timers_fired, 5);

    // a late joiner whose account's skip list names one of B's messages rewinds: the same
    // stream but that one, and the same timers (the skipped message still moves the clock)
    let skipped = messages(&ga)
        .into_iter()
        .find_map(|e| match e {
            Ev::Message {
                seq, template: 2, ..
            } => Some(*seq),
            _ => None,
        })
        .unwrap();
    let config = bus.variant(
        "skipper.toml",
        &format!("[node.accounts.SKIPPER]\nskip = [{skipped}]\n"),
    );
    let mut late = bus.open_with(&config, "SKIPPER", 1, SEQBUS_START_REWIND, 2);
    let mut gl = Vec::new();
    let mut tl = 0u32;
    assert!(late.run(
        &mut gl,
        Duration::from_secs(30),
        |n, ev| timers(n, ev, &mut tl),
        |e| e.contains(&Ev::Rewound)
            && of_template(e, 1) + of_template(e, 2) >= 99
            && e.iter().filter(|e| matches!(e, Ev::Timer { .. })).count() >= 5
    ));
    let mut expected = strip(&ga);
    expected.retain(|m| m.0 != skipped);
    let last = expected.last().unwrap().0;
    let got: Vec<_> = strip(&gl).into_iter().filter(|m| m.0 <= last).collect();
    assert_eq!(got, expected);
    assert_eq!(late.stats().skipped, 1);
    assert_eq!(fired(&gl), fa);
}

#[test]
fn errors_are_codes_with_a_message() {
    let mut n = ptr::null_mut();
    let account = CString::new("A").unwrap();
    // SAFETY: a NULL config is refused before anything is read
    let rc = unsafe {
        seqbus_node_open(
            ptr::null(),
            account.as_ptr(),
            1,
            0,
            ptr::null(),
            0,
            ptr::null(),
            &mut n,
        )
    };
    assert_eq!(rc, SEQBUS_ERR_ARGUMENT);
    assert_eq!(last_error(), "config is NULL");
    assert!(n.is_null());

    let missing = CString::new("/nonexistent/bus.toml").unwrap();
    // SAFETY: valid strings, writable out
    let rc = unsafe {
        seqbus_node_open(
            missing.as_ptr(),
            account.as_ptr(),
            1,
            0,
            ptr::null(),
            0,
            ptr::null(),
            &mut n,
        )
    };
    assert_eq!(rc, SEQBUS_ERR_CONFIG);
    assert!(
        last_error().contains("/nonexistent/bus.toml"),
        "{}",
        last_error()
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bus.toml");
    std::fs::write(
        &file,
        "[bus]\nsession = \"X\"\n[sequencer]\nupstrem = \"1\"\n",
    )
    .unwrap();
    let bad = CString::new(file.to_str().unwrap()).unwrap();
    // SAFETY: as above
    let rc = unsafe {
        seqbus_node_open(
            bad.as_ptr(),
            account.as_ptr(),
            1,
            0,
            ptr::null(),
            0,
            ptr::null(),
            &mut n,
        )
    };
    assert_eq!(rc, SEQBUS_ERR_CONFIG);
    assert!(
        last_error().contains("upstrem"),
        "the key is named: {}",
        last_error()
    );

    let bus = Bus::start("");
    let long = CString::new("TOOLONGNAME").unwrap();
    // SAFETY: as above
    let rc = unsafe {
        seqbus_node_open(
            bus.path.as_ptr(),
            long.as_ptr(),
            1,
            0,
            ptr::null(),
            0,
            ptr::null(),
            &mut n,
        )
    };
    assert_eq!(rc, SEQBUS_ERR_ARGUMENT);
    assert!(last_error().contains("TOOLONGNAME"), "{}", last_error());

    // a NULL node is an argument error, never a crash; closing NULL is a no-op
    let mut e = std::mem::MaybeUninit::<SeqbusEvent>::uninit();
    // SAFETY: NULL node, writable event
    assert_eq!(
        unsafe { seqbus_node_next(ptr::null_mut(), e.as_mut_ptr()) },
        SEQBUS_ERR_ARGUMENT
    );
    assert_eq!(last_error(), "node is NULL");
    // SAFETY: NULL is allowed
    assert_eq!(unsafe { seqbus_node_close(ptr::null_mut()) }, SEQBUS_OK);

    // a body without the IDL message header is refused by nobody here: the window takes it,
    // but a send before the node is ready is back-pressure
    let name = |c| {
        unsafe { CStr::from_ptr(seqbus_status_name(c)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(name(SEQBUS_ERR_BACKPRESSURE), "SEQBUS_ERR_BACKPRESSURE");
    assert_eq!(name(12345), "SEQBUS_UNKNOWN_STATUS");
}

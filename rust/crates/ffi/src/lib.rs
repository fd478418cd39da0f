//! seqbus-ffi: nodes in C, C++ and Java on the same bus, over the same Rust node client.
//!
//! This crate is a C ABI over `seqbus_net::NodeClient` (the core's one delivery model: gaps,
//! rewinds, fencing, fragments, topics, time records) plus the node-side rules of
//! `runtime/seqbus/node.py` that every language must share: the walk over a batch with the
//! node's deterministic clock (`seqbus_core::delivery::Walk`, so timers fire at the same
//! records in C++, Java and Python), the configuration's skip list, and the outbox of posted
//! commands. It is not a second implementation of the protocol.
//!
//! The header, `generated/c/seqbus.h`, is generated from this file by cbindgen
//! (`tests/header.rs` checks the committed one is current; `SEQBUS_UPDATE_HEADER=1` rewrites
//! it). The C++ node (`runtime/cpp/include/seqbus/node.hpp`) is a thin RAII layer over it; the
//! Java node (`runtime/java/node`) calls the JNI functions of [`java`], which share
//! [`node::Node`] with the C functions.
//!
//! The call sequence: `seqbus_node_open`, `seqbus_node_wait_ready` (the node may send once
//! the sequencer told it its next command sequence), then in a loop `seqbus_node_poll` (fetch
//! a batch) and `seqbus_node_next` until it returns `SEQBUS_END` (each message, timer and
//! caught-up event in stream order); `seqbus_node_send` / `seqbus_node_post` from the
//! handlers; `seqbus_node_close`. A node is used by one thread at a time.
//!
//! Errors are status codes (`SEQBUS_ERR_*`, negative) with a message the same thread fetches
//! with `seqbus_last_error`. No panic crosses the boundary: every function catches them and
//! returns `SEQBUS_ERR_PANIC`.

pub mod java;
pub mod node;

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use seqbus_core::delivery::Record;

use crate::node::{Event, Node, OpenArgs};

/// Success.
pub const SEQBUS_OK: i32 = 0;
/// `seqbus_node_next`: the batch is walked to its end (what its handlers sent is flushed).
pub const SEQBUS_END: i32 = 1;
/// A bad argument: a NULL pointer, text that is not UTF-8, a bad account, start or listen.
pub const SEQBUS_ERR_ARGUMENT: i32 = -1;
/// The configuration file cannot be read or is invalid (the message names the key).
pub const SEQBUS_ERR_CONFIG: i32 = -2;
/// A socket could not be opened, bound, read or written.
pub const SEQBUS_ERR_IO: i32 = -3;
/// Back-pressure: the window of commands in flight is full, posted commands wait, or the
/// node is not ready to send yet. Poll, then try again (or `post`).
pub const SEQBUS_ERR_BACKPRESSURE: i32 = -4;
/// The command is larger than the window allows.
pub const SEQBUS_ERR_TOO_LARGE: i32 = -5;
/// Messages are missing and no replayer is configured to fill the gap.
pub const SEQBUS_ERR_GAP: i32 = -6;
/// The sequencer ended the session.
pub const SEQBUS_ERR_SESSION_ENDED: i32 = -7;
/// A batch record does not hold what it claims (a bug: the core wrote it).
pub const SEQBUS_ERR_DECODE: i32 = -8;
/// `seqbus_node_wait_ready`: no answer from the sequencer in time.
pub const SEQBUS_ERR_TIMEOUT: i32 = -9;
/// A panic inside the library, caught at the boundary.
pub const SEQBUS_ERR_PANIC: i32 = -10;

/// `start` of `seqbus_node_open`: from the live stream (a larger value is the first sequence
/// to deliver).
pub const SEQBUS_START_LIVE: u64 = 0;
/// `start` of `seqbus_node_open`: rewind the session from its first message.
pub const SEQBUS_START_REWIND: u64 = 1;

/// Event kind: a message for the node (`body`, `schema_id`, `template_id`, sender fields).
pub const SEQBUS_EVENT_MESSAGE: u32 = 1;
/// Event kind: a deterministic timer is due (`timer_id`, `timer_at_ns`).
pub const SEQBUS_EVENT_TIMER: u32 = 2;
/// Event kind: a rewinding node caught up with the live stream (`on_rewound`).
pub const SEQBUS_EVENT_REWOUND: u32 = 3;

/// Event flag: the message was sent under this node's account (by any of its instances).
pub const SEQBUS_FLAG_MINE: u32 = 1;

/// `seqbus_node_on_error`: the configuration names no `on_error` for the account.
pub const SEQBUS_ON_ERROR_UNSET: i32 = -1;
/// `seqbus_node_on_error`: fail-stop.
pub const SEQBUS_ON_ERROR_STOP: i32 = 0;
/// `seqbus_node_on_error`: a handler that fails is recorded and the node goes on.
pub const SEQBUS_ON_ERROR_SKIP: i32 = 1;

/// Log levels (`seqbus_log`, `seqbus_log_to_stderr`).
pub const SEQBUS_LOG_ERROR: i32 = 1;
pub const SEQBUS_LOG_WARN: i32 = 2;
pub const SEQBUS_LOG_INFO: i32 = 3;
pub const SEQBUS_LOG_DEBUG: i32 = 4;
pub const SEQBUS_LOG_TRACE: i32 = 5;

/// A message type the node subscribes to.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SeqbusTopic {
    pub schema_id: u16,
    pub template_id: u16,
}

/// One event of a batch, in stream order (`seqbus_node_next`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SeqbusEvent {
    /// `SEQBUS_EVENT_*`.
    pub kind: u32,
    /// `SEQBUS_FLAG_*`.
    pub flags: u32,
    /// Where the node's deterministic clock stands: the sequence and the sequencer's
    /// timestamp (ns since the epoch) of the message, or of the record that made a timer due.
    pub sequence: u64,
    pub time_ns: u64,
    /// A message's body, the IDL message header included, read in place in the batch: valid
    /// until the next `seqbus_node_poll` or `seqbus_node_close`. NULL for other kinds.
    pub body: *const u8,
    pub body_len: usize,
    /// The body's offset in the batch buffer.
    pub body_offset: usize,
    /// The body's IDL message header.
    pub block_length: u16,
    pub template_id: u16,
    pub schema_id: u16,
    pub version: u16,
    /// The sender's account (NUL-padded, not NUL-terminated) and instance.
    pub sender: [u8; 8],
    pub sender_instance: u16,
    /// The envelope's kind (1 application) and flags (0 for a reassembled message).
    pub envelope_kind: u8,
    pub envelope_flags: u8,
    /// The sender's command sequence of the message.
    pub command_seq: u64,
    /// A timer event's id (from `seqbus_node_set_timer`) and deadline.
    pub timer_id: u64,
    pub timer_at_ns: u64,
}

impl SeqbusEvent {
    const EMPTY: SeqbusEvent = SeqbusEvent {
        kind: 0,
        flags: 0,
        sequence: 0,
        time_ns: 0,
        body: std::ptr::null(),
        body_len: 0,
        body_offset: 0,
        block_length: 0,
        template_id: 0,
        schema_id: 0,
        version: 0,
        sender: [0; 8],
        sender_instance: 0,
        envelope_kind: 0,
        envelope_flags: 0,
        command_seq: 0,
        timer_id: 0,
        timer_at_ns: 0,
    };

    /// The event as C sees it; the clock's position is the node's.
    pub fn of(ev: &Event<'_>, sequence: u64, time_ns: u64) -> SeqbusEvent {
        let mut e = SeqbusEvent {
            sequence,
            time_ns,
            ..SeqbusEvent::EMPTY
        };
        match ev {
            Event::Message { record, mine } => {
                e.kind = SEQBUS_EVENT_MESSAGE;
                e.flags = if *mine { SEQBUS_FLAG_MINE } else { 0 };
                fill_message(&mut e, record);
            }
            Event::Timer { id, at_ns } => {
                e.kind = SEQBUS_EVENT_TIMER;
                e.timer_id = *id;
                e.timer_at_ns = *at_ns;
            }
            Event::Rewound { .. } => e.kind = SEQBUS_EVENT_REWOUND,
        }
        e
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn fill_message(e: &mut SeqbusEvent, r: &Record<'_>) {
    let (offset, len) = node::body_span(r);
    e.body = r.body.as_ptr();
    e.body_len = len;
    e.body_offset = offset;
    // a message record's body holds a whole message header (the core checked it)
    e.block_length = le16(r.body, 0);
    e.template_id = le16(r.body, 2);
    e.schema_id = le16(r.body, 4);
    e.version = le16(r.body, 6);
    let env = r.envelope;
    e.command_seq = le64(env, 8);
    e.sender.copy_from_slice(&env[16..24]);
    e.sender_instance = le16(env, 24);
    e.envelope_kind = env[26];
    e.envelope_flags = env[27];
}

/// A node's counters: the protocol's (`seqbus_net::NodeClient::stats`, as Python's
/// `NodeClient.stats()` names them) and what crossed to the application.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqbusStats {
    pub received: u64,
    pub delivered: u64,
    pub filtered: u64,
    pub time_records: u64,
    pub malformed: u64,
    pub abandoned: u64,
    pub abandoned_fragments: u64,
    pub wrong_session: u64,
    pub duplicates: u64,
    pub gaps: u64,
    pub requests: u64,
    pub retransmits: u64,
    pub reorder_dropped: u64,
    pub in_flight: u64,
    pub resent: u64,
    pub sent: u64,
    pub fenced: u64,
    pub leader_changes: u64,
    pub naks: u64,
    pub stale_naks: u64,
    pub probes: u64,
    pub srtt_ns: u64,
    pub rto_ns: u64,
    pub downstream_forged: u64,
    pub epoch: u64,
    pub leader: u64,
    /// Message events handed out.
    pub messages: u64,
    /// Non-empty batches polled.
    pub batches: u64,
    /// Timer events handed out.
    pub timers_fired: u64,
    /// Messages the configuration's `skip` kept from the application.
    pub skipped: u64,
    /// Commands handed to the protocol by `send` and `post`.
    pub commands_sent: u64,
    /// Posted commands waiting for the window.
    pub posted: u64,
}

impl SeqbusStats {
    pub fn of(n: &Node) -> SeqbusStats {
        let c = n.client();
        let s = c.stats();
        SeqbusStats {
            received: s.received,
            delivered: s.delivered,
            filtered: s.filtered,
            time_records: s.time_records,
            malformed: s.malformed,
            abandoned: s.abandoned,
            abandoned_fragments: s.abandoned_fragments,
            wrong_session: s.wrong_session,
            duplicates: s.duplicates,
            gaps: s.gaps,
            requests: s.requests,
            retransmits: s.retransmits,
            reorder_dropped: s.reorder_dropped,
            in_flight: s.in_flight,
            resent: s.resent,
            sent: s.sent,
            fenced: s.fenced,
            leader_changes: s.leader_changes,
            naks: s.naks,
            stale_naks: s.stale_naks,
            probes: s.probes,
            srtt_ns: s.srtt_ns,
            rto_ns: s.rto_ns,
            downstream_forged: c.downstream_forged(),
            epoch: c.epoch(),
            leader: c.leader().map_or(0, u64::from),
            messages: n.counters.messages,
            batches: n.counters.batches,
            timers_fired: n.counters.timers_fired,
            skipped: n.counters.skipped,
            commands_sent: n.counters.sent,
            posted: n.posted() as u64,
        }
    }

    /// The counters as (name, value) pairs, in the struct's order (the JVM's `stats()`).
    pub fn named(&self) -> [(&'static str, u64); 32] {
        [
            ("received", self.received),
            ("delivered", self.delivered),
            ("filtered", self.filtered),
            ("time_records", self.time_records),
            ("malformed", self.malformed),
            ("abandoned", self.abandoned),
            ("abandoned_fragments", self.abandoned_fragments),
            ("wrong_session", self.wrong_session),
            ("duplicates", self.duplicates),
            ("gaps", self.gaps),
            ("requests", self.requests),
            ("retransmits", self.retransmits),
            ("reorder_dropped", self.reorder_dropped),
            ("in_flight", self.in_flight),
            ("resent", self.resent),
            ("sent", self.sent),
            ("fenced", self.fenced),
            ("leader_changes", self.leader_changes),
            ("naks", self.naks),
            ("stale_naks", self.stale_naks),
            ("probes", self.probes),
            ("srtt_ns", self.srtt_ns),
            ("rto_ns", self.rto_ns),
            ("downstream_forged", self.downstream_forged),
            ("epoch", self.epoch),
            ("leader", self.leader),
            ("messages", self.messages),
            ("batches", self.batches),
            ("timers_fired", self.timers_fired),
            ("skipped", self.skipped),
            ("commands_sent", self.commands_sent),
            ("posted", self.posted),
        ]
    }
}

/// A node connected to a bus (opaque to C).
pub struct SeqbusNode(Node);

// -- errors ---------------------------------------------------------------------------------

/// An error to hand across the boundary: a status code and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Records the message for `seqbus_last_error` and returns the code.
    fn set(self) -> i32 {
        set_last_error(&self.message);
        self.code
    }
}

pub type Res<T> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// The text of a caught panic.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    let what = p
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| p.downcast_ref::<&str>().copied())
        .unwrap_or("?");
    format!("panic in seqbus-ffi: {what}")
}

/// Runs `f`, turning an error into its code (its message kept for `seqbus_last_error`) and a
/// panic into `SEQBUS_ERR_PANIC`.
fn guard(f: impl FnOnce() -> Res<i32>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(failure)) => failure.set(),
        Err(p) => Failure::new(SEQBUS_ERR_PANIC, panic_text(p.as_ref())).set(),
    }
}

/// [`guard`] for a function that returns a value: `fallback` on an error or a panic.
fn guard_value<T>(fallback: T, f: impl FnOnce() -> Res<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(failure)) => {
            failure.set();
            fallback
        }
        Err(p) => {
            Failure::new(SEQBUS_ERR_PANIC, panic_text(p.as_ref())).set();
            fallback
        }
    }
}

/// # Safety
/// `p` is NULL or a node from `seqbus_node_open` not closed yet.
unsafe fn node<'a>(p: *mut SeqbusNode) -> Res<&'a mut Node> {
    // SAFETY: the caller's promise
    unsafe { p.as_mut() }
        .map(|n| &mut n.0)
        .ok_or_else(|| Failure::new(SEQBUS_ERR_ARGUMENT, "node is NULL"))
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Res<&'a str> {
    if p.is_null() {
        return Err(Failure::new(SEQBUS_ERR_ARGUMENT, format!("{what} is NULL")));
    }
    // SAFETY: the caller's promise
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Failure::new(SEQBUS_ERR_ARGUMENT, format!("{what} is not UTF-8")))
}

/// # Safety
/// `p` is NULL (then `len` is 0) or points to `len` readable bytes.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Res<&'a [u8]> {
    if p.is_null() {
        if len == 0 {
            return Ok(&[]);
        }
        return Err(Failure::new(SEQBUS_ERR_ARGUMENT, "body is NULL"));
    }
    // SAFETY: the caller's promise
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The message `seqbus_last_error` hands out when no call of this thread failed.
const NO_ERROR: &CStr = c"";

/// The message of the last error of a call on this thread: valid until the next failing call
/// of this thread; "" if none failed.
#[no_mangle]
pub extern "C" fn seqbus_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(NO_ERROR.as_ptr())
}

/// The name of a status code (`"SEQBUS_ERR_CONFIG"`, ...), static.
#[no_mangle]
pub extern "C" fn seqbus_status_name(code: i32) -> *const c_char {
    let name: &'static CStr = match code {
        SEQBUS_OK => c"SEQBUS_OK",
        SEQBUS_END => c"SEQBUS_END",
        SEQBUS_ERR_ARGUMENT => c"SEQBUS_ERR_ARGUMENT",
        SEQBUS_ERR_CONFIG => c"SEQBUS_ERR_CONFIG",
        SEQBUS_ERR_IO => c"SEQBUS_ERR_IO",
        SEQBUS_ERR_BACKPRESSURE => c"SEQBUS_ERR_BACKPRESSURE",
        SEQBUS_ERR_TOO_LARGE => c"SEQBUS_ERR_TOO_LARGE",
        SEQBUS_ERR_GAP => c"SEQBUS_ERR_GAP",
        SEQBUS_ERR_SESSION_ENDED => c"SEQBUS_ERR_SESSION_ENDED",
        SEQBUS_ERR_DECODE => c"SEQBUS_ERR_DECODE",
        SEQBUS_ERR_TIMEOUT => c"SEQBUS_ERR_TIMEOUT",
        SEQBUS_ERR_PANIC => c"SEQBUS_ERR_PANIC",
        _ => c"SEQBUS_UNKNOWN_STATUS",
    };
    name.as_ptr()
}

/// The version of this library (the workspace's), static.
#[no_mangle]
pub extern "C" fn seqbus_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => panic!("the crate version holds a NUL"),
        };
    VERSION.as_ptr()
}

// -- logging --------------------------------------------------------------------------------

pub(crate) fn level_filter(level: i32) -> log::LevelFilter {
    match level {
        i32::MIN..=0 => log::LevelFilter::Off,
        SEQBUS_LOG_ERROR => log::LevelFilter::Error,
        SEQBUS_LOG_WARN => log::LevelFilter::Warn,
        SEQBUS_LOG_INFO => log::LevelFilter::Info,
        SEQBUS_LOG_DEBUG => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    }
}

/// The level `SEQBUS_LOG` names (error, warn, info, debug, trace, off); info by default.
pub(crate) fn env_level() -> log::LevelFilter {
    std::env::var("SEQBUS_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(log::LevelFilter::Info)
}

/// Installs the stderr logger (one line per record, `PROGRAM: LEVEL: text`) unless one is
/// installed already; the first call's program name holds for the process.
pub fn log_to_stderr(program: &str, level: log::LevelFilter) {
    use std::sync::OnceLock;
    static PROGRAM: OnceLock<&'static str> = OnceLock::new();
    let name = *PROGRAM.get_or_init(|| Box::leak(program.to_string().into_boxed_str()));
    seqbus_net::log_to_stderr(name, level);
}

/// Writes the library's log records (the node client says what it does: connected, caught up,
/// silence, ...) and `seqbus_log`'s to stderr, one line each: `PROGRAM: LEVEL: text`, records
/// of `level` (`SEQBUS_LOG_*`) and above; `level` <= 0: `SEQBUS_LOG` (error, warn, info,
/// debug, trace; info when unset). `seqbus_node_open` installs it with "seqbus-node" and the
/// environment's level when no call came first. Returns `SEQBUS_OK`.
///
/// # Safety
/// `program` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn seqbus_log_to_stderr(program: *const c_char, level: i32) -> i32 {
    guard(|| {
        // SAFETY: the caller's promise
        let name = if program.is_null() {
            "seqbus-node"
        } else {
            unsafe { text(program, "program") }?
        };
        let filter = if level <= 0 {
            env_level()
        } else {
            level_filter(level)
        };
        log_to_stderr(name, filter);
        Ok(SEQBUS_OK)
    })
}

/// Logs `message` at `level` (`SEQBUS_LOG_*`) under target `seqbus::app`: an application's
/// own lines among the library's.
///
/// # Safety
/// `message` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn seqbus_log(level: i32, message: *const c_char) -> i32 {
    guard(|| {
        // SAFETY: the caller's promise
        let m = unsafe { text(message, "message") }?;
        log_message(level, m);
        Ok(SEQBUS_OK)
    })
}

pub fn log_message(level: i32, m: &str) {
    let level = level_filter(level).to_level().unwrap_or(log::Level::Error);
    log::log!(target: "seqbus::app", level, "{m}");
}

// -- the node -------------------------------------------------------------------------------

/// Connects a node to the bus of the configuration file `config` as `account` (1 to 8
/// printable ASCII characters; hot-hot instances share it) instance `instance`, and starts
/// joining the bus. `start`: `SEQBUS_START_LIVE` (0), `SEQBUS_START_REWIND` (1, the whole
/// session), or the first sequence to deliver. `topics`: the message types to deliver
/// (`topics_len` of them); NULL for every application message. `listen`: the address a node
/// of a `udp-unicast` bus receives on; NULL for the configuration's. On success `*out` is the
/// node (free it with `seqbus_node_close`). The configuration's error policy for the account
/// (`node.on_error`, `[node.accounts.NAME] skip`) applies: `seqbus_node_on_error`.
///
/// # Safety
/// The strings are NULL or NUL-terminated; `topics` is NULL or points to `topics_len`
/// topics; `out` points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_open(
    config: *const c_char,
    account: *const c_char,
    instance: u16,
    start: u64,
    topics: *const SeqbusTopic,
    topics_len: usize,
    listen: *const c_char,
    out: *mut *mut SeqbusNode,
) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(Failure::new(SEQBUS_ERR_ARGUMENT, "out is NULL"));
        }
        // SAFETY: the caller's promises (each helper checks NULL)
        let config = unsafe { text(config, "config") }?;
        let account = unsafe { text(account, "account") }?;
        let listen = if listen.is_null() {
            None
        } else {
            Some(unsafe { text(listen, "listen") }?)
        };
        let topics = if topics.is_null() {
            None
        } else {
            let t = unsafe { std::slice::from_raw_parts(topics, topics_len) };
            Some(t.iter().map(|t| (t.schema_id, t.template_id)).collect())
        };
        let n = Node::open(OpenArgs {
            config,
            account,
            instance,
            start,
            topics,
            listen,
        })?;
        // SAFETY: checked not NULL above
        unsafe { *out = Box::into_raw(Box::new(SeqbusNode(n))) };
        Ok(SEQBUS_OK)
    })
}

/// Polls until the sequencer has told the node its next command sequence (the node may send
/// from then on), at most `timeout_ns`; what arrives meanwhile is kept for `seqbus_node_next`.
/// `SEQBUS_ERR_TIMEOUT` when no answer came.
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_wait_ready(node: *mut SeqbusNode, timeout_ns: u64) -> i32 {
    guard(|| {
        // SAFETY: the caller's promise
        let n = unsafe { self::node(node) }?;
        n.wait_ready(Duration::from_nanos(timeout_ns))?;
        Ok(SEQBUS_OK)
    })
}

/// Fetches the next batch once the previous one is walked to its end, waiting at most
/// `timeout_ns` for its first record; `*records` (if not NULL) is how many came (0: none in
/// time, or the previous batch still has records to walk). Posted commands the window now
/// takes are sent first. The bodies of the previous batch are invalid from here on.
///
/// # Safety
/// `node` is NULL or an open node; `records` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_poll(
    node: *mut SeqbusNode,
    max_records: u32,
    timeout_ns: u64,
    records: *mut u32,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's promise
        let n = unsafe { self::node(node) }?;
        let got = n.poll(max_records as usize, Duration::from_nanos(timeout_ns))?;
        if !records.is_null() {
            // SAFETY: the caller's promise
            unsafe { *records = got as u32 };
        }
        Ok(SEQBUS_OK)
    })
}

/// The next event of the batch into `*event`: `SEQBUS_OK` with an event, `SEQBUS_END` at the
/// end of the batch (what the handlers sent during it is flushed then), or an error. Events
/// come in stream order: timers due before a record first, the clock standing at it.
///
/// # Safety
/// `node` is NULL or an open node; `event` points to writable storage for an event.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_next(node: *mut SeqbusNode, event: *mut SeqbusEvent) -> i32 {
    guard(|| {
        if event.is_null() {
            return Err(Failure::new(SEQBUS_ERR_ARGUMENT, "event is NULL"));
        }
        // SAFETY: the caller's promise
        let n = unsafe { self::node(node) }?;
        let ev = match n.next_event()? {
            None => return Ok(SEQBUS_END),
            Some(ev) => ev,
        };
        let (sequence, time_ns) = match &ev {
            Event::Message { record, .. } => (record.sequence, record.time_ns()),
            Event::Rewound { sequence } => (*sequence, 0),
            Event::Timer { .. } => (0, 0),
        };
        let mut e = SeqbusEvent::of(&ev, sequence, time_ns);
        if e.kind != SEQBUS_EVENT_MESSAGE {
            (e.sequence, e.time_ns) = (n.sequence(), n.time_ns());
        }
        // SAFETY: checked not NULL above
        unsafe { *event = e };
        Ok(SEQBUS_OK)
    })
}

/// Queues a command of `len` bytes (a whole IDL message, header included); `*command_seq` (if
/// not NULL) is its command sequence. Sent by the next poll, or when the batch's walk ends.
/// `SEQBUS_ERR_BACKPRESSURE` when the window is full or posted commands wait (poll, then try
/// again), `SEQBUS_ERR_TOO_LARGE`.
///
/// # Safety
/// `node` is NULL or an open node; `body` points to `len` readable bytes; `command_seq` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_send(
    node: *mut SeqbusNode,
    body: *const u8,
    len: usize,
    command_seq: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's promises
        let n = unsafe { self::node(node) }?;
        let b = unsafe { bytes(body, len) }?;
        let seq = n.send(b)?;
        if !command_seq.is_null() {
            // SAFETY: the caller's promise
            unsafe { *command_seq = seq };
        }
        Ok(SEQBUS_OK)
    })
}

/// Sends a command, or queues a copy when the window is full; queued commands go out in
/// order as the window drains. A deterministic node posts: what it sends then depends only on
/// the stream, so hot-hot instances and replays send the same commands.
///
/// # Safety
/// `node` is NULL or an open node; `body` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_post(
    node: *mut SeqbusNode,
    body: *const u8,
    len: usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's promises
        let n = unsafe { self::node(node) }?;
        let b = unsafe { bytes(body, len) }?;
        n.post(b)?;
        Ok(SEQBUS_OK)
    })
}

/// Sends what is queued now (posted commands the window takes, then the protocol's).
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_flush(node: *mut SeqbusNode) -> i32 {
    guard(|| {
        // SAFETY: the caller's promise
        unsafe { self::node(node) }?.flush()?;
        Ok(SEQBUS_OK)
    })
}

/// Posted commands waiting for the window (0 for NULL).
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_posted(node: *mut SeqbusNode) -> usize {
    // SAFETY: the caller's promise
    guard_value(0, || Ok(unsafe { self::node(node) }?.posted()))
}

/// Command fragments sent and not yet seen in the stream (0 for NULL).
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_in_flight(node: *mut SeqbusNode) -> usize {
    // SAFETY: the caller's promise
    guard_value(0, || Ok(unsafe { self::node(node) }?.in_flight()))
}

/// Sets a deterministic timer at `at_ns` of stream time (the sequencer's clock, ns since the
/// epoch): a `SEQBUS_EVENT_TIMER` with its id comes before the first record at or past it,
/// the same record in every instance and replay. Returns its id (0 for NULL).
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_set_timer(node: *mut SeqbusNode, at_ns: u64) -> u64 {
    // SAFETY: the caller's promise
    guard_value(0, || Ok(unsafe { self::node(node) }?.set_timer(at_ns)))
}

/// Cancels a deterministic timer: 1 if it was pending, 0 if it fired or was cancelled.
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_cancel_timer(node: *mut SeqbusNode, timer_id: u64) -> i32 {
    // SAFETY: the caller's promise
    guard_value(0, || {
        Ok(i32::from(
            unsafe { self::node(node) }?.cancel_timer(timer_id),
        ))
    })
}

/// The sequence the node's clock stands at (the message being handled; 0 before the first).
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_sequence(node: *mut SeqbusNode) -> u64 {
    // SAFETY: the caller's promise
    guard_value(0, || Ok(unsafe { self::node(node) }?.sequence()))
}

/// The sequencer's timestamp (ns since the epoch) of the record the clock stands at: a
/// deterministic node's only clock.
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_time_ns(node: *mut SeqbusNode) -> u64 {
    // SAFETY: the caller's promise
    guard_value(0, || Ok(unsafe { self::node(node) }?.time_ns()))
}

/// 1 while the node replays history, until its `SEQBUS_EVENT_REWOUND`.
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_is_rewinding(node: *mut SeqbusNode) -> i32 {
    // SAFETY: the caller's promise
    guard_value(0, || {
        Ok(i32::from(unsafe { self::node(node) }?.is_rewinding()))
    })
}

/// 1 once the node may send.
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_is_ready(node: *mut SeqbusNode) -> i32 {
    // SAFETY: the caller's promise
    guard_value(0, || Ok(i32::from(unsafe { self::node(node) }?.is_ready())))
}

/// The configuration's `on_error` for the node's account: `SEQBUS_ON_ERROR_STOP`,
/// `SEQBUS_ON_ERROR_SKIP`, or `SEQBUS_ON_ERROR_UNSET` (the node's own default holds).
///
/// # Safety
/// `node` is NULL or an open node.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_on_error(node: *mut SeqbusNode) -> i32 {
    // SAFETY: the caller's promise
    guard_value(SEQBUS_ON_ERROR_UNSET, || {
        Ok(match unsafe { self::node(node) }?.on_error_skip() {
            None => SEQBUS_ON_ERROR_UNSET,
            Some(false) => SEQBUS_ON_ERROR_STOP,
            Some(true) => SEQBUS_ON_ERROR_SKIP,
        })
    })
}

/// The node's counters into `*stats`.
///
/// # Safety
/// `node` is NULL or an open node; `stats` points to writable storage for them.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_stats(node: *mut SeqbusNode, stats: *mut SeqbusStats) -> i32 {
    guard(|| {
        if stats.is_null() {
            return Err(Failure::new(SEQBUS_ERR_ARGUMENT, "stats is NULL"));
        }
        // SAFETY: the caller's promises
        let n = unsafe { self::node(node) }?;
        unsafe { *stats = SeqbusStats::of(n) };
        Ok(SEQBUS_OK)
    })
}

/// Flushes what is queued, closes the node's sockets and frees it (NULL: nothing). The node
/// is freed even when the flush fails (its error is returned).
///
/// # Safety
/// `node` is NULL or an open node, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn seqbus_node_close(node: *mut SeqbusNode) -> i32 {
    guard(|| {
        if node.is_null() {
            return Ok(SEQBUS_OK);
        }
        // SAFETY: the caller's promise: made by Box::into_raw in seqbus_node_open
        let n = unsafe { Box::from_raw(node) };
        n.0.close()?;
        Ok(SEQBUS_OK)
    })
}

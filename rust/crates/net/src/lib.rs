//! seqbus-net: the roles' processes — the sequencer (a cluster member), the replayer (serving
//! a journal, or following the stream into one of its own), the per-host dispatcher, and the
//! node client the Python SDK wraps — each a loop that moves datagrams between the
//! transports of `seqbus-transport` and the state machines of `seqbus-core`, built from a
//! `seqbus-config` [`Config`]; plus replayer discovery and the status endpoint.
//!
//! Public API (stable; `rust/crates/py` builds on it):
//!
//! * [`Config`] (from `seqbus-config`): `Config::from_path(&Path)` / `Config::from_str(&str)`;
//!   every error is a [`ConfigError`] naming the file and the key.
//! * [`run_sequencer`]`(&cfg, stop)`: blocking; binds every socket and opens the journal
//!   before it starts (so a bad port or journal fails at once, nothing half started), then
//!   sequences until `stop` is set. Runs the replayer on a thread of its own when
//!   `sequencer.replayer_in_process` is true.
//! * [`run_replayer`]`(&cfg, stop)`: a standalone replayer serving `[replayer]` from its
//!   journal directory until `stop`.
//! * [`NodeClient`]: `connect(&cfg, NodeOptions)`, `poll(&mut out, max_records, timeout)`
//!   (records in the "Batches from Rust to Python" layout of `docs/architecture.md`),
//!   `send(body)` (queues; sent by the next `poll` or `flush`), `is_rewinding`, `stats`. It is
//!   `Send`.
//! * [`LoopNode`]: a `NodeClient` polled on a thread of its own for an event loop on another
//!   (asyncio): batches handed over, an eventfd readable while there is something to take.
//!
//! Each role says what it does through the `log` crate, one record per event (targets
//! `seqbus::sequencer`, `seqbus::replayer`, `seqbus::dispatcher`, `seqbus::bridge`,
//! `seqbus::tcp`, and `seqbus::node` for node clients: [`watch`]). The Python SDK hands them
//! to Python's `logging` (the `seqbus` logger hierarchy); the standalone binaries write them
//! to stderr ([`log_to_stderr`]).
//!
//! The protocol itself lives in `seqbus-core` (no I/O) and the sockets in `seqbus-transport`;
//! this crate only joins them, as the configuration says.

pub mod discovery;
mod downstream_auth;
pub mod idle;
mod node;
pub mod notify;
mod pipeline;
pub use pipeline::pipelined;
pub mod ports;
mod replayer;
mod sequencer;
mod sites;
pub mod status;
mod transports;
pub mod watch;

use std::io;

pub use idle::IdleStrategy;
pub use node::{NodeClient, NodeOptions};
pub use notify::{LoopNode, LoopStats};
pub use replayer::run_replayer;
/// The configuration (the `seqbus-config` crate), under the name the roles' API uses.
pub use seqbus_config as config;
pub use seqbus_config::{Config, ConfigError};
pub use seqbus_core::node::{RECORD_CAUGHT_UP, RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME};
pub use seqbus_core::{NodeStats, SendError, Start};
pub use sequencer::{member_journal_dir, run_sequencer};
pub use sites::{run_bridge, ChannelStats};
pub use transports::run_dispatcher;

/// Why a sequencer, replayer or node stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The journal cannot be opened, read or written.
    #[error(transparent)]
    Journal(#[from] seqbus_journal::JournalError),
    /// A socket operation failed; `what` says which socket and address (e.g.
    /// `sequencer.upstream 127.0.0.1:31000: bind`).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// A node option is invalid.
    #[error("node option {name}: {message}")]
    Option { name: &'static str, message: String },
    /// Messages `from..to` are missing and no replayer is configured to fill the gap.
    #[error("gap: messages {from}..{to} are missing and no replayer is configured to fill it")]
    Gap { from: u64, to: u64 },
    /// The sequencer ended the session; every message up to `.0` was delivered.
    #[error("the session ended at sequence {0}")]
    SessionEnded(u64),
    /// A replayer could not read its journal.
    #[error("replayer: {0}")]
    Store(#[from] seqbus_core::StoreError),
    /// The sequencer's journal cannot be read or written (a full disk, an I/O error): the
    /// sequencer stops, and a standby of `[cluster]` takes over.
    #[error("{0}: this sequencer stops (a standby of [cluster] takes over)")]
    Persist(seqbus_core::StoreError),
}

impl From<seqbus_core::NodeError> for Error {
    fn from(e: seqbus_core::NodeError) -> Error {
        match e {
            seqbus_core::NodeError::Gap { from, to } => Error::Gap { from, to },
            seqbus_core::NodeError::SessionEnded(s) => Error::SessionEnded(s),
        }
    }
}

pub(crate) fn io_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A `log` logger writing one line per record to stderr: `PROGRAM: LEVEL: text`.
struct StderrLog {
    program: &'static str,
}

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("{}: {}: {}", self.program, r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

/// Logs the roles' records of `level` and above to stderr, for a program of its own (the
/// `seqbus-sequencer` binary, ...). Does nothing when a logger is installed already.
pub fn log_to_stderr(program: &'static str, level: log::LevelFilter) {
    if log::set_boxed_logger(Box::new(StderrLog { program })).is_ok() {
        log::set_max_level(level);
    }
}

/// Wall-clock time in ns since the Unix epoch (the sequencer's timestamps).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

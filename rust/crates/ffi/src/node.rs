//! The node as the C ABI and the JNI functions drive it: a [`NodeClient`], the batch it was
//! last handed, walked record by record with the node's deterministic [`Clock`] (the core's
//! [`Walk`]: timers come due at the same records as in Python), the sequences the
//! configuration says to skip, and the outbox of posted commands.
//!
//! The semantics are `runtime/seqbus/node.py`'s: a message record is handed to the
//! application with the clock standing at it (sequence and sequencer time); deterministic
//! timers are handed out, earliest first, before the first record at or past their deadline;
//! the caught-up record ends a rewind; time records only move the clock; a posted command waits
//! in order for the window; what the handlers of a batch sent is flushed when the batch ends.

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use seqbus_core::delivery::{
    Clock, Record, Step, Walk, RECORD_CAUGHT_UP, RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME,
};
use seqbus_net::{Config, NodeClient, NodeOptions, SendError, Start};

use crate::{
    Failure, Res, SEQBUS_ERR_ARGUMENT, SEQBUS_ERR_BACKPRESSURE, SEQBUS_ERR_CONFIG,
    SEQBUS_ERR_DECODE, SEQBUS_ERR_GAP, SEQBUS_ERR_IO, SEQBUS_ERR_SESSION_ENDED, SEQBUS_ERR_TIMEOUT,
    SEQBUS_ERR_TOO_LARGE,
};

/// The latest stream time a deterministic timer can be set to (ns), as in Python.
const LAST_NS: u64 = u64::MAX - 1;

/// How a node joins the bus (the arguments of `seqbus_node_open`).
#[derive(Debug, Clone)]
pub struct OpenArgs<'a> {
    pub config: &'a str,
    pub account: &'a str,
    pub instance: u16,
    /// 0: live; 1: rewind from the first message; n: from sequence n.
    pub start: u64,
    /// `(schema_id, template_id)` of the messages to deliver; None: every application message.
    pub topics: Option<Vec<(u16, u16)>>,
    /// The address a `udp-unicast` node receives on (`node.listen`).
    pub listen: Option<&'a str>,
}

/// What [`Node::next_event`] hands out.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A message for the node; the clock stands at it. `mine`: sent under the node's account
    /// (by any of its instances).
    Message { record: Record<'a>, mine: bool },
    /// A deterministic timer is due: `(id, deadline)`; the clock stands at the record that
    /// made it due.
    Timer { id: u64, at_ns: u64 },
    /// A rewinding node has caught up with the live stream (`on_rewound`).
    Rewound { sequence: u64 },
}

/// Counters of what crossed to the application (Python's `NodeStats`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Message records handed out.
    pub messages: u64,
    /// Batches polled (non-empty).
    pub batches: u64,
    pub timers_fired: u64,
    /// Messages not handed out because the configuration names their sequence in `skip`.
    pub skipped: u64,
    /// Commands handed to the protocol (`send`, and posted ones as they leave the outbox).
    pub sent: u64,
}

/// A node connected to a bus.
pub struct Node {
    client: NodeClient,
    /// The batch the last poll was handed, and where the walk over it stands.
    batch: Vec<u8>,
    at: usize,
    /// Deterministic timers are due before the record at `at`: hand them out first.
    timers_due: bool,
    clock: Clock,
    /// The node's account as the envelope carries it (NUL-padded).
    account: [u8; 8],
    /// Sequences the configuration says not to hand out (`[node.accounts.NAME] skip`).
    skips: Vec<u64>,
    skip_at: usize,
    /// The configuration's `on_error` for the account: true for "skip".
    on_error_skip: Option<bool>,
    /// Posted commands waiting for the window, in order.
    outbox: VecDeque<Vec<u8>>,
    rewinding: bool,
    /// Commands were handed to the protocol since the last flush.
    unflushed: bool,
    pub counters: Counters,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("client", &self.client)
            .field("sequence", &self.clock.sequence())
            .finish_non_exhaustive()
    }
}

fn net_failure(e: seqbus_net::Error) -> Failure {
    let code = match &e {
        seqbus_net::Error::Config(_) => SEQBUS_ERR_CONFIG,
        seqbus_net::Error::Option { .. } => SEQBUS_ERR_ARGUMENT,
        seqbus_net::Error::Gap { .. } => SEQBUS_ERR_GAP,
        seqbus_net::Error::SessionEnded(_) => SEQBUS_ERR_SESSION_ENDED,
        _ => SEQBUS_ERR_IO,
    };
    Failure::new(code, e.to_string())
}

fn send_failure(e: SendError) -> Failure {
    let code = match e {
        SendError::WindowFull { .. } | SendError::NotReady => SEQBUS_ERR_BACKPRESSURE,
        SendError::TooLarge { .. } => SEQBUS_ERR_TOO_LARGE,
    };
    Failure::new(code, e.to_string())
}

impl Node {
    /// Reads the configuration, connects the client and starts joining the bus.
    pub fn open(args: OpenArgs<'_>) -> Res<Node> {
        // what the client says it does goes somewhere unless the application chose
        crate::log_to_stderr("seqbus-node", crate::env_level());
        let cfg = Config::from_path(Path::new(args.config))
            .map_err(|e| Failure::new(SEQBUS_ERR_CONFIG, e.to_string()))?;
        let account = seqbus_wire::account(args.account)
            .map_err(|m| Failure::new(SEQBUS_ERR_ARGUMENT, format!("account: {m}")))?;
        let start = match args.start {
            0 => Start::Live,
            n => Start::From(n),
        };
        let listen = match args.listen {
            Some(a) => Some(
                a.parse::<std::net::SocketAddr>()
                    .map_err(|e| Failure::new(SEQBUS_ERR_ARGUMENT, format!("listen {a:?}: {e}")))?,
            ),
            None => None,
        };
        let (on_error, mut skips) = cfg.node.error_policy(args.account);
        skips.sort_unstable();
        skips.dedup();
        let mut opts = NodeOptions::new(args.account, args.instance, start);
        opts.topics = args.topics;
        opts.listen = listen;
        let client = NodeClient::connect(&cfg, opts).map_err(net_failure)?;
        Ok(Node {
            rewinding: client.is_rewinding(),
            client,
            batch: Vec::with_capacity(1 << 16),
            at: 0,
            timers_due: false,
            clock: Clock::new(),
            account,
            skips,
            skip_at: 0,
            on_error_skip: on_error.map(|o| o.as_str() == "skip"),
            outbox: VecDeque::new(),
            unflushed: false,
            counters: Counters::default(),
        })
    }

    pub fn client(&self) -> &NodeClient {
        &self.client
    }

    /// The configuration's `on_error` for the node's account: Some(true) "skip", Some(false)
    /// "stop", None when it names none (the node's own default holds).
    pub fn on_error_skip(&self) -> Option<bool> {
        self.on_error_skip
    }

    /// Polls until the sequencer has told the client its next command sequence (the node may
    /// send then), at most `timeout`; what arrives meanwhile is kept for [`Node::next_event`].
    pub fn wait_ready(&mut self, timeout: Duration) -> Res<()> {
        let deadline = Instant::now() + timeout;
        while !self.client.is_ready() {
            let now = Instant::now();
            if now >= deadline {
                return Err(Failure::new(
                    SEQBUS_ERR_TIMEOUT,
                    format!(
                        "no answer from the sequencer within {:.1} s (is it running? see \
                         [sequencer] upstream in the configuration)",
                        timeout.as_secs_f64()
                    ),
                ));
            }
            // appended after what is not walked yet: nothing is lost
            let left = (deadline - now).min(Duration::from_millis(50));
            self.client
                .poll(&mut self.batch, 4096, left)
                .map_err(net_failure)?;
        }
        Ok(())
    }

    /// Fetches the next batch (at most `max_records`, waiting at most `timeout` for the
    /// first) once the previous one is walked to its end; returns how many records came (0
    /// when it timed out, or when records of the previous batch are still to be walked).
    /// Posted commands the window now takes are sent first.
    pub fn poll(&mut self, max_records: usize, timeout: Duration) -> Res<usize> {
        if self.at < self.batch.len() {
            return Ok(0);
        }
        self.flush_outbox()?;
        self.batch.clear();
        self.at = 0;
        self.timers_due = false;
        let n = self
            .client
            .poll(&mut self.batch, max_records.max(1), timeout)
            .map_err(net_failure)?;
        if n > 0 {
            self.counters.batches += 1;
        }
        Ok(n)
    }

    /// Whether the walk has records of the last batch left.
    pub fn pending(&self) -> bool {
        self.at < self.batch.len() || self.timers_due
    }

    /// The batch buffer (the records of the last poll) and its capacity, for a consumer that
    /// reads bodies in place (the JVM's direct buffer).
    pub fn batch(&self) -> &Vec<u8> {
        &self.batch
    }

    /// The next event of the batch; None at its end (what its handlers sent is flushed then).
    pub fn next_event(&mut self) -> Res<Option<Event<'_>>> {
        loop {
            if self.timers_due {
                if let Some((id, at_ns)) = self.clock.pop_due() {
                    self.counters.timers_fired += 1;
                    return Ok(Some(Event::Timer { id, at_ns }));
                }
                self.timers_due = false;
            }
            let mut walk = Walk::new(&self.batch, self.at, &self.clock);
            // what the step says, copied: the walk borrows the batch and the clock
            let step = match walk.next() {
                None => None,
                Some(Err(e)) => Some(Err(e)),
                Some(Ok(Step::TimersDue)) => Some(Ok(None)),
                Some(Ok(Step::Record(r))) => Some(Ok(Some((r.record_type, r.sequence, r.offset)))),
            };
            let offset = walk.offset();
            match step {
                None => {
                    self.end_of_batch()?;
                    return Ok(None);
                }
                Some(Err(e)) => {
                    self.at = self.batch.len();
                    return Err(Failure::new(SEQBUS_ERR_DECODE, e.to_string()));
                }
                Some(Ok(None)) => self.timers_due = true,
                Some(Ok(Some((record_type, sequence, at)))) => {
                    self.at = offset;
                    match record_type {
                        RECORD_MESSAGE => {
                            if self.skip(sequence) {
                                continue;
                            }
                            self.counters.messages += 1;
                            let record = Record::parse(&self.batch, at)
                                .map_err(|e| Failure::new(SEQBUS_ERR_DECODE, e.to_string()))?;
                            let mine = record.account() == self.account;
                            return Ok(Some(Event::Message { record, mine }));
                        }
                        RECORD_CAUGHT_UP => {
                            self.rewinding = false;
                            return Ok(Some(Event::Rewound { sequence }));
                        }
                        // the clock stands at it; timers due before it were handed out
                        RECORD_TIME => {}
                        other => {
                            return Err(Failure::new(
                                SEQBUS_ERR_DECODE,
                                format!(
                                    "record record_type at offset {}: unknown type {other}",
                                    at + 4
                                ),
                            ))
                        }
                    }
                }
            }
        }
    }

    /// Whether message `seq` is one the configuration says to skip (counted then).
    fn skip(&mut self, seq: u64) -> bool {
        while self.skip_at < self.skips.len() && self.skips[self.skip_at] < seq {
            self.skip_at += 1;
        }
        if self.skips.get(self.skip_at) == Some(&seq) {
            self.skip_at += 1;
            self.counters.skipped += 1;
            log::warn!(
                target: "seqbus::node",
                "node {}: message #{seq} skipped (the configuration's skip)",
                self.who()
            );
            return true;
        }
        false
    }

    fn who(&self) -> String {
        let end = self.account.iter().position(|&b| b == 0).unwrap_or(8);
        String::from_utf8_lossy(&self.account[..end]).into_owned()
    }

    fn end_of_batch(&mut self) -> Res<()> {
        self.flush_outbox()?;
        if self.unflushed {
            self.unflushed = false;
            self.client.flush().map_err(net_failure)?;
        }
        Ok(())
    }

    /// Sends what `post` queued as far as the window allows; true when all went.
    pub fn flush_outbox(&mut self) -> Res<bool> {
        while let Some(body) = self.outbox.front() {
            match self.client.send(body) {
                Ok(_) => {
                    self.outbox.pop_front();
                    self.counters.sent += 1;
                    self.unflushed = true;
                }
                Err(SendError::WindowFull { .. } | SendError::NotReady) => return Ok(false),
                Err(e) => {
                    // it would block every command after it for ever
                    self.outbox.pop_front();
                    return Err(send_failure(e));
                }
            }
        }
        Ok(true)
    }

    /// Queues a command (sent by the next poll, or when a batch's walk ends); its command
    /// sequence. Back-pressure when the window is full, or posted commands still wait (which
    /// keeps the node's commands in order).
    pub fn send(&mut self, body: &[u8]) -> Res<u64> {
        if !self.outbox.is_empty() && !self.flush_outbox()? {
            return Err(Failure::new(
                SEQBUS_ERR_BACKPRESSURE,
                format!("{} posted commands wait for the window", self.outbox.len()),
            ));
        }
        let seq = self.client.send(body).map_err(send_failure)?;
        self.counters.sent += 1;
        self.unflushed = true;
        Ok(seq)
    }

    /// Sends a command, or queues it (a copy) when the window is full; queued commands go out
    /// in order as the window drains. What hot-hot instances and replays send then depends
    /// only on the stream.
    pub fn post(&mut self, body: &[u8]) -> Res<()> {
        self.outbox.push_back(body.to_vec());
        self.flush_outbox().map(|_| ())
    }

    /// Posted commands waiting for the window.
    pub fn posted(&self) -> usize {
        self.outbox.len()
    }

    /// Sends queued commands now (posted ones the window takes, then the protocol's).
    pub fn flush(&mut self) -> Res<()> {
        self.flush_outbox()?;
        self.unflushed = false;
        self.client.flush().map_err(net_failure)
    }

    /// Sets a deterministic timer at `at_ns` of stream time; its id.
    pub fn set_timer(&self, at_ns: u64) -> u64 {
        self.clock.set_timer(at_ns.min(LAST_NS))
    }

    /// Cancels a deterministic timer; false if it fired or was cancelled already.
    pub fn cancel_timer(&self, id: u64) -> bool {
        self.clock.cancel(id)
    }

    /// The sequence of the record the clock stands at (0 before the first).
    pub fn sequence(&self) -> u64 {
        self.clock.sequence()
    }

    /// The sequencer's timestamp of the record the clock stands at (ns since the epoch).
    pub fn time_ns(&self) -> u64 {
        self.clock.time_ns()
    }

    /// True while the node replays history, until the caught-up event.
    pub fn is_rewinding(&self) -> bool {
        self.rewinding
    }

    pub fn is_ready(&self) -> bool {
        self.client.is_ready()
    }

    /// Command fragments sent and not yet seen in the stream.
    pub fn in_flight(&self) -> usize {
        self.client.in_flight()
    }

    /// Flushes what is queued (posted commands the window takes, then the protocol's).
    pub fn close(mut self) -> Res<()> {
        self.flush()?;
        if !self.outbox.is_empty() || self.client.in_flight() > 0 {
            log::warn!(
                target: "seqbus::node",
                "node {} closes with {} commands in flight and {} posted, not confirmed by \
                 the stream",
                self.who(),
                self.client.in_flight(),
                self.outbox.len()
            );
        }
        Ok(())
    }
}

/// The body of a message record: its offset in the batch and its length.
pub fn body_span(record: &Record<'_>) -> (usize, usize) {
    (record.offset + RECORD_HEADER_LEN, record.body.len())
}

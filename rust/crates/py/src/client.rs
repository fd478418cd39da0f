//! `NodeClient`, `Sequencer`, `Replayer` and `check_config`: conversions around `seqbus-net`,
//! with the GIL released around everything that waits.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use seqbus_net::{Config, NodeOptions, Start};

use crate::batch::{walk_batch, PyClock};
use crate::errors::{config_error, net_error, send_error, seqbus_error};

fn load(py: Python<'_>, path: &str) -> PyResult<Config> {
    Config::from_path(Path::new(path)).map_err(|e| config_error(py, &e))
}

/// `start=`: "live", "rewind" or a sequence number.
pub(crate) fn start_of(start: &Bound<'_, PyAny>) -> PyResult<Start> {
    if let Ok(s) = start.extract::<String>() {
        return match s.as_str() {
            "live" => Ok(Start::Live),
            "rewind" => Ok(Start::From(1)),
            other => Err(PyValueError::new_err(format!(
                "start must be 'live', 'rewind' or a sequence number, not {other:?}"
            ))),
        };
    }
    match start.extract::<u64>() {
        Ok(seq) if seq >= 1 => Ok(Start::From(seq)),
        _ => Err(PyValueError::new_err(format!(
            "start must be 'live', 'rewind' or a sequence number >= 1, not {start}"
        ))),
    }
}

fn timeout_of(seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| PyValueError::new_err(format!("timeout must be >= 0 s, not {seconds}")))
}

/// Connects a node client (the arguments of `NodeClient()` and `LoopClient()`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn connect(
    py: Python<'_>,
    config: &str,
    account: &str,
    instance: u16,
    start: Option<&Bound<'_, PyAny>>,
    topics: Option<Vec<(u16, u16)>>,
    window: Option<usize>,
    listen: Option<&str>,
) -> PyResult<seqbus_net::NodeClient> {
    let cfg = load(py, config)?;
    let listen = match listen {
        Some(a) => Some(
            a.parse::<std::net::SocketAddr>()
                .map_err(|e| seqbus_error(py, "ConfigError", (format!("listen {a:?}: {e}"),)))?,
        ),
        None => None,
    };
    let start = match start {
        Some(s) => start_of(s)?,
        None => Start::Live,
    };
    let mut opts = NodeOptions::new(account, instance, start);
    // what crosses into Python is decided in the core (seqbus_core::delivery)
    opts.topics = topics;
    opts.window = window;
    opts.listen = listen;
    py.allow_threads(|| seqbus_net::NodeClient::connect(&cfg, opts))
        .map_err(|e| net_error(py, e))
}

pub(crate) fn timeout_of_secs(seconds: f64) -> PyResult<Duration> {
    timeout_of(seconds)
}

/// What `NodeClient.poll_walk` hands back for a batch: `(batch, offset, stop, dispatched,
/// error)`, as `walk_batch` after the batch.
type PollWalked<'py> = (Bound<'py, PyBytes>, usize, u8, u64, Option<PyObject>);

/// A node's connection to the bus.
#[pyclass(module = "seqbus._core")]
pub struct NodeClient {
    // a Mutex only to make the class Sync as pyo3 requires (the net client holds a `Send`
    // but not `Sync` log callback); every method has `&mut self`, so it is never locked
    inner: Mutex<Option<seqbus_net::NodeClient>>,
    out: Vec<u8>,
    /// What the flush at the end of a `poll_walk` raised, raised by the next poll instead:
    /// the batch that call walked reaches the node first (the protocol retries the send).
    flush_error: Option<PyErr>,
}

impl NodeClient {
    fn client(&mut self) -> PyResult<&mut seqbus_net::NodeClient> {
        self.inner
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("the node client is closed"))
    }
}

#[pymethods]
impl NodeClient {
    #[new]
    #[pyo3(signature = (config, account, instance = 1, *, start = None, topics = None, window = None, listen = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        config: &str,
        account: &str,
        instance: u16,
        start: Option<&Bound<'_, PyAny>>,
        topics: Option<Vec<(u16, u16)>>,
        window: Option<usize>,
        listen: Option<&str>,
    ) -> PyResult<Self> {
        let client = connect(py, config, account, instance, start, topics, window, listen)?;
        Ok(NodeClient {
            inner: Mutex::new(Some(client)),
            out: Vec::with_capacity(1 << 16),
            flush_error: None,
        })
    }

    /// Wait at most `timeout` s (GIL released) and return one batch of records; b"" if none.
    fn poll<'py>(
        &mut self,
        py: Python<'py>,
        max_records: usize,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let timeout = timeout_of(timeout)?;
        if let Some(e) = self.flush_error.take() {
            return Err(e);
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let client = self.client()?;
        let polled = py.allow_threads(|| client.poll(&mut out, max_records.max(1), timeout));
        let batch = PyBytes::new(py, &out);
        self.out = out;
        polled.map_err(|e| net_error(py, e))?;
        Ok(batch)
    }

    /// `poll`, then the batch walked into the node's handlers (`walk_batch`, the same
    /// arguments after the first two), then what the handlers sent flushed at once: None when
    /// nothing came, else `(batch, offset, stop, dispatched, error)`. One call per wake instead
    /// of three, and the answers a batch's handlers sent leave before the node's own
    /// bookkeeping runs (docs/benchmarks.md, the round trip).
    #[pyo3(signature = (max_records, timeout, node, dispatchers, account, clock, skip_from = u64::MAX))]
    #[allow(clippy::too_many_arguments)]
    fn poll_walk<'py>(
        slf: &Bound<'py, Self>,
        max_records: usize,
        timeout: f64,
        node: &Bound<'py, PyAny>,
        dispatchers: &Bound<'py, PyDict>,
        account: &[u8],
        clock: &Bound<'py, PyClock>,
        skip_from: u64,
    ) -> PyResult<Option<PollWalked<'py>>> {
        let py = slf.py();
        let batch = slf.borrow_mut().poll(py, max_records, timeout)?;
        if batch.as_bytes().is_empty() {
            return Ok(None);
        }
        // no borrow of this client is held while handlers run: they send through it
        let (offset, stop, dispatched, error) =
            walk_batch(py, &batch, 0, node, dispatchers, account, clock, skip_from)?;
        if dispatched > 0 {
            let mut me = slf.borrow_mut();
            // a handler may have closed the client; close flushed it then
            if me.client().is_ok() {
                if let Err(e) = me.flush(py) {
                    me.flush_error = Some(e);
                }
            }
        }
        Ok(Some((batch, offset, stop, dispatched, error)))
    }

    /// Queue a command; its command sequence. BackPressureError when the window is full.
    fn send(&mut self, py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<u64> {
        let client = self.client()?;
        let sent = if let Ok(bytes) = body.downcast::<PyBytes>() {
            client.send(bytes.as_bytes())
        } else {
            let buffer = PyBuffer::<u8>::get(body)?;
            client.send(&buffer.to_vec(py)?)
        };
        sent.map_err(|e| send_error(py, e))
    }

    fn is_rewinding(&mut self) -> PyResult<bool> {
        Ok(self.client()?.is_rewinding())
    }

    fn is_ready(&mut self) -> PyResult<bool> {
        Ok(self.client()?.is_ready())
    }

    /// Send queued commands now (poll does this too).
    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        let client = self.client()?;
        py.allow_threads(|| client.flush())
            .map_err(|e| net_error(py, e))
    }

    fn stats<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, self.client()?)
    }

    /// Flush what is queued and close the sockets.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        let inner = self
            .inner
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mut client) = inner.take() {
            py.allow_threads(|| client.flush())
                .map_err(|e| net_error(py, e))?;
        }
        Ok(())
    }
}

/// A node client's counters as a dict (`NodeClient.stats()`, `LoopClient.stats()`).
pub(crate) fn stats_dict<'py>(
    py: Python<'py>,
    client: &seqbus_net::NodeClient,
) -> PyResult<Bound<'py, PyDict>> {
    let s = client.stats();
    let (epoch, leader) = (client.epoch(), client.leader());
    let d = PyDict::new(py);
    d.set_item("epoch", epoch)?;
    d.set_item("leader", leader.unwrap_or(0))?;
    for (k, v) in [
        ("received", s.received),
        ("delivered", s.delivered),
        ("filtered", s.filtered),
        ("time_records", s.time_records),
        ("malformed", s.malformed),
        ("abandoned", s.abandoned),
        ("abandoned_fragments", s.abandoned_fragments),
        ("wrong_session", s.wrong_session),
        ("duplicates", s.duplicates),
        ("gaps", s.gaps),
        ("requests", s.requests),
        ("retransmits", s.retransmits),
        ("reorder_dropped", s.reorder_dropped),
        ("in_flight", s.in_flight),
        ("resent", s.resent),
        ("sent", s.sent),
        ("fenced", s.fenced),
        ("leader_changes", s.leader_changes),
        ("naks", s.naks),
        ("stale_naks", s.stale_naks),
        ("probes", s.probes),
        ("srtt_ns", s.srtt_ns),
        ("rto_ns", s.rto_ns),
        ("downstream_forged", client.downstream_forged()),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}

type Service = JoinHandle<Result<(), seqbus_net::Error>>;

/// A process loop of seqbus-net on a thread of its own, stopped through a flag.
struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<Service>,
}

impl Background {
    fn spawn(
        name: &str,
        cfg: Config,
        run: fn(&Config, Arc<AtomicBool>) -> Result<(), seqbus_net::Error>,
    ) -> PyResult<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(&cfg, flag))
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the {name} thread: {e}")))?;
        Ok(Background {
            stop,
            thread: Some(thread),
        })
    }

    fn join(&mut self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let deadline = Instant::now() + timeout_of(timeout)?;
        let Some(thread) = self.thread.as_ref() else {
            return Ok(true);
        };
        let finished = py.allow_threads(|| loop {
            if thread.is_finished() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(5)));
        });
        if !finished {
            return Ok(false);
        }
        let thread = self.thread.take().expect("checked above");
        match thread.join() {
            Ok(Ok(())) => Ok(true),
            Ok(Err(e)) => Err(net_error(py, e)),
            Err(_) => Err(PyRuntimeError::new_err("the service thread panicked")),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // dropped by Python, holding the GIL, which the thread's last log records (to
            // Python `logging`) need: let it go while waiting
            Python::with_gil(|py| {
                py.allow_threads(|| {
                    let _ = thread.join();
                })
            });
        }
    }
}

/// A Python class running one service loop of seqbus-net on a Rust thread: `stop()`, and
/// `join(timeout)`, True once stopped, raising the error the service stopped with.
macro_rules! service {
    ($(#[$doc:meta])* $name:ident, $thread:literal, $run:path, $prepare:expr) => {
        $(#[$doc])*
        #[pyclass(module = "seqbus._core")]
        pub struct $name(Background);

        #[pymethods]
        impl $name {
            #[new]
            #[pyo3(signature = (config, id = None))]
            fn new(py: Python<'_>, config: &str, id: Option<u16>) -> PyResult<Self> {
                let prepare: fn(Config, Option<u16>) -> Result<Config, seqbus_net::ConfigError> =
                    $prepare;
                let cfg = prepare(load(py, config)?, id).map_err(|e| config_error(py, &e))?;
                Ok($name(Background::spawn($thread, cfg, $run)?))
            }

            fn stop(&self) {
                self.0.stop.store(true, Ordering::Relaxed);
            }

            /// True once stopped; raises the error the service stopped with.
            fn join(&mut self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
                self.0.join(py, timeout)
            }
        }
    };
}

service!(
    /// The sequencer (and, when configured, its in-process replayer) on a Rust thread; `id`
    /// names which member of `[cluster]` it is (docs/ha.md).
    Sequencer,
    "seqbus-sequencer",
    seqbus_net::run_sequencer,
    |cfg, id| cfg.for_member(id)
);
service!(
    /// A standalone replayer on a Rust thread.
    Replayer,
    "seqbus-replayer",
    seqbus_net::run_replayer,
    |cfg, id| match id {
        None => Ok(cfg),
        Some(_) => cfg.for_member(id),
    }
);
service!(
    /// This host's dispatcher (the one downstream reader, writing the shared-memory ring that
    /// local nodes read; docs/transports.md) on a Rust thread.
    Dispatcher,
    "seqbus-dispatcher",
    seqbus_net::run_dispatcher,
    |cfg, _id| Ok(cfg)
);

service!(
    /// This site's end of a bridge to a bus at another site (`[bridge]`, docs/sites.md) on a
    /// Rust thread.
    Bridge,
    "seqbus-bridge",
    seqbus_net::run_bridge,
    |cfg, _id| Ok(cfg)
);

/// A sequencer's status endpoint: (member id, "host:port" or None, token or None).
type StatusEndpoint = (u16, Option<String>, Option<String>);

/// The sequencers of the bus of `config` and their status endpoints (one entry, id 1,
/// without `[cluster]`).
#[pyfunction]
pub fn status_endpoints(py: Python<'_>, config: &str) -> PyResult<Vec<StatusEndpoint>> {
    let cfg = load(py, config)?;
    let token = cfg.sequencer.status_token.clone();
    Ok(cfg
        .members()
        .into_iter()
        .map(|m| (m.id, m.status.map(|a| a.to_string()), token.clone()))
        .collect())
}

/// The error policy `config` gives the nodes of `account`: (`on_error` if configured:
/// "stop" or "skip"; the sequences they skip) — `node.on_error`, `[node.accounts.NAME]`.
#[pyfunction]
pub fn error_policy(
    py: Python<'_>,
    config: &str,
    account: &str,
) -> PyResult<(Option<&'static str>, Vec<u64>)> {
    let (on_error, skip) = load(py, config)?.node.error_policy(account);
    Ok((on_error.map(|o| o.as_str()), skip))
}

/// Parse and validate a configuration file; ConfigError naming the key when invalid.
#[pyfunction]
pub fn check_config(py: Python<'_>, config: &str) -> PyResult<()> {
    load(py, config).map(|_| ())
}

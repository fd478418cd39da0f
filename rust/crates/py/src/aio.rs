//! `LoopClient`: a node client for an asyncio loop (`seqbus.aio`) over
//! `seqbus_net::LoopNode`: the client polls on a Rust thread, the loop watches `fileno()`.

use std::sync::Mutex;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use seqbus_net::LoopNode;

use crate::client::{connect, stats_dict, timeout_of_secs};
use crate::errors::{net_error, send_error};

/// Records in one batch handed to the loop.
const MAX_RECORDS: usize = 4096;
/// Batches waiting for the loop before the client stops reading.
const MAX_QUEUED: usize = 64;

/// A node's connection to the bus for an event loop: `fileno()` is readable while `take()`
/// has something (a batch, room in the window, the client ready, or its error).
#[pyclass(module = "seqbus._core")]
pub struct LoopClient {
    // a Mutex only for `close(&mut self)` next to the `&self` methods (never contended: the
    // GIL is held around each)
    inner: Mutex<Option<LoopNode>>,
    fd: i32,
    out: Mutex<Vec<u8>>,
}

impl LoopClient {
    fn with<R>(&self, f: impl FnOnce(&LoopNode) -> PyResult<R>) -> PyResult<R> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match inner.as_ref() {
            Some(node) => f(node),
            None => Err(PyRuntimeError::new_err("the node client is closed")),
        }
    }
}

impl Drop for LoopClient {
    fn drop(&mut self) {
        let node = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(node) = node {
            // dropped by Python, holding the GIL, which the client's thread needs for its log
            // records (to Python `logging`) while it stops
            Python::with_gil(|py| py.allow_threads(move || drop(node)));
        }
    }
}

#[pymethods]
impl LoopClient {
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
        let name = format!("seqbus-{account}-{instance}");
        let node = LoopNode::start(client, &name, MAX_RECORDS, MAX_QUEUED)
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the node's thread: {e}")))?;
        Ok(LoopClient {
            fd: node.ready_fd(),
            inner: Mutex::new(Some(node)),
            out: Mutex::new(Vec::new()),
        })
    }

    /// The eventfd to watch (`loop.add_reader`).
    fn fileno(&self) -> i32 {
        self.fd
    }

    /// The next batch, b"" when none; raises the error the client stopped with.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.with(|node| {
            let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
            let taken = node.take(&mut out);
            let batch = PyBytes::new(py, &out);
            taken.map_err(|e| net_error(py, e))?;
            Ok(batch)
        })
    }

    /// Waits at most `timeout` s (GIL released) for a batch and returns it (b"" if none);
    /// batches hold at most 4096 records whatever `max_records` says.
    fn poll<'py>(
        &self,
        py: Python<'py>,
        max_records: usize,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let _ = max_records;
        let timeout = timeout_of_secs(timeout)?;
        self.with(|node| {
            py.allow_threads(|| node.wait(timeout));
            Ok(())
        })?;
        self.take(py)
    }

    /// Queue a command (sent at once by the client's thread); its command sequence.
    /// BackPressureError when the window is full.
    fn send(&self, py: Python<'_>, body: &Bound<'_, PyAny>) -> PyResult<u64> {
        let owned;
        let bytes: &[u8] = if let Ok(b) = body.downcast::<PyBytes>() {
            b.as_bytes()
        } else {
            owned = PyBuffer::<u8>::get(body)?.to_vec(py)?;
            &owned
        };
        self.with(|node| {
            node.with_client(|c| c.send(bytes))
                .map_err(|e| send_error(py, e))
        })
    }

    /// Batches waiting to be taken.
    fn queued(&self) -> PyResult<usize> {
        self.with(|node| Ok(node.queued()))
    }

    fn is_ready(&self) -> PyResult<bool> {
        self.with(|node| Ok(node.is_ready()))
    }

    fn is_rewinding(&self) -> PyResult<bool> {
        self.with(|node| Ok(node.is_rewinding()))
    }

    /// The client's counters, plus `loop_signals` (wake-ups given to the loop) and
    /// `loop_batches` (batches handed over).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.with(|node| {
            let d = node.with_client(|c| stats_dict(py, c))?;
            let s = node.stats();
            d.set_item("loop_signals", s.signals)?;
            d.set_item("loop_batches", s.batches)?;
            Ok(d)
        })
    }

    /// Stop the client's thread, send what is queued and close the sockets.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        let node = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match node {
            Some(mut node) => py
                .allow_threads(move || node.close())
                .map_err(|e| net_error(py, e)),
            None => Ok(()),
        }
    }
}

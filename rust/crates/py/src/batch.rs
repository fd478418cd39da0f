//! The hot loop over a batch's message records, calling the generated dispatch per message.
//!
//! `seqbus.Node.handle_batch` owns the semantics; this walks the batch with the core's
//! [`Walk`] and the node's [`Clock`] (seqbus_core::delivery: the record layout and the rule of
//! when deterministic timers fire) and dispatches the plain message records — the
//! overwhelming majority — without returning to Python between them. It stops at the first
//! record that needs the Python side: timers due, a record other than a message, or a message
//! no dispatch knows, a message whose sequence the node was told to skip, or a dispatch that
//! raised (the node's error policy decides, in Python).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use seqbus_core::delivery::{Step, Walk, RECORD_HEADER_LEN, RECORD_MESSAGE};

use crate::errors::decode_error;

/// Why `walk_batch` returned.
pub const STOP_END: u8 = 0;
pub const STOP_RECORD: u8 = 1;
pub const STOP_TIMER: u8 = 2;
pub const STOP_UNKNOWN: u8 = 3;
pub const STOP_SKIP: u8 = 4;
pub const STOP_ERROR: u8 = 5;

/// A node's deterministic clock and timers (`seqbus_core::Clock`), shared with Python:
/// `Node.sequencer_time()` reads it, `Node.set_timer` sets timers on it, and Python runs the
/// callbacks of the ids [`PyClock::pop_due`] hands out.
#[pyclass(frozen, module = "seqbus._core", name = "Clock")]
#[derive(Default)]
pub struct PyClock(pub seqbus_core::Clock);

#[pymethods]
impl PyClock {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    #[getter]
    fn sequence(&self) -> u64 {
        self.0.sequence()
    }

    #[getter]
    fn time_ns(&self) -> u64 {
        self.0.time_ns()
    }

    /// Move to a record; True when timers are due before it is handled.
    fn enter(&self, sequence: u64, time_ns: u64) -> bool {
        self.0.enter(sequence, time_ns)
    }

    /// Set a timer at `at_ns` of stream time; its id.
    fn set_timer(&self, at_ns: u64) -> u64 {
        self.0.set_timer(at_ns)
    }

    /// Cancel timer `id`; False if it fired or was cancelled already.
    fn cancel(&self, id: u64) -> bool {
        self.0.cancel(id)
    }

    /// `(id, deadline)` of the next timer due now, earliest first; None when none is.
    fn pop_due(&self) -> Option<(u64, u64)> {
        self.0.pop_due()
    }

    #[getter]
    fn deadline_ns(&self) -> Option<u64> {
        self.0.deadline_ns()
    }

    #[getter]
    fn pending(&self) -> usize {
        self.0.pending()
    }
}

/// Walk the records of `batch` from `offset`, dispatching each message. Returns
/// `(offset, stop, dispatched, error)`: where it stopped (the start of the record it stopped
/// at), why (`STOP_*`), how many messages it handed to handlers and, on `STOP_ERROR`, what the
/// dispatch raised (None otherwise). On `STOP_TIMER` the clock already stands at the record
/// and timers are due before it; on `STOP_RECORD` the clock stands at the record (a time
/// record) or was not moved (any other); on `STOP_UNKNOWN` the message was offered to the
/// dispatch, which did not know it; on `STOP_SKIP` the clock stands at a message whose
/// sequence is `skip_from` or later, not dispatched; on `STOP_ERROR` the clock stands at the
/// message whose dispatch raised.
#[pyfunction]
#[pyo3(signature = (batch, offset, node, dispatchers, account, clock, skip_from = u64::MAX))]
#[allow(clippy::too_many_arguments)]
pub fn walk_batch<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyBytes>,
    offset: usize,
    node: &Bound<'py, PyAny>,
    dispatchers: &Bound<'py, PyDict>,
    account: &[u8],
    clock: &Bound<'py, PyClock>,
    skip_from: u64,
) -> PyResult<(usize, u8, u64, Option<PyObject>)> {
    let data = batch.as_bytes();
    let mut walk = Walk::new(data, offset, &clock.get().0);
    let mut dispatched = 0u64;
    let mut cached: Option<(u16, Bound<'py, PyAny>)> = None;
    loop {
        let at = walk.offset();
        let r = match walk.next() {
            None => return Ok((at, STOP_END, dispatched, None)),
            Some(Err(e)) => return Err(decode_error(py, "Record", e.field, e.offset, e.message)),
            Some(Ok(Step::TimersDue)) => return Ok((at, STOP_TIMER, dispatched, None)),
            Some(Ok(Step::Record(r))) => r,
        };
        if r.record_type != RECORD_MESSAGE {
            return Ok((at, STOP_RECORD, dispatched, None));
        }
        if r.sequence >= skip_from {
            return Ok((at, STOP_SKIP, dispatched, None));
        }
        let (schema_id, template_id) = r.message_type();
        let dispatch = match &cached {
            Some((id, d)) if *id == schema_id => d.clone(),
            _ => match dispatchers.get_item(schema_id)? {
                Some(d) => {
                    cached = Some((schema_id, d.clone()));
                    d
                }
                None => return Ok((at, STOP_UNKNOWN, dispatched, None)),
            },
        };
        let mine = account.len() == 8 && r.account() == account;
        let body = at + RECORD_HEADER_LEN;
        let known = match dispatch.call1((node, template_id, batch, body, r.body.len(), mine)) {
            Ok(known) => known,
            Err(e) => return Ok((at, STOP_ERROR, dispatched, Some(e.into_value(py).into_any()))),
        };
        if !known.is_truthy()? {
            return Ok((at, STOP_UNKNOWN, dispatched, None));
        }
        dispatched += 1;
    }
}

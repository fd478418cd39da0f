//! The hot loop over a batch's message records, calling the generated dispatch per message.
//!
//! `seqbus.Node.handle_batch` owns the semantics; this walks the batch with the core's
//! [`Walk`] and the node's [`Clock`] (seqbus_core::delivery: the record layout and the rule of
//! when deterministic timers fire) and dispatches the plain message records — the
//! overwhelming majority — without returning to Python between them. It stops at the first
//! record that needs the Python side: timers due, a record other than a message, or a message
//! no dispatch knows, a message whose sequence the node was told to skip, or a dispatch that
//! raised (the node's error policy decides, in Python).

use std::ffi::{c_int, c_void, CStr};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict};
use seqbus_core::delivery::{Step, Walk, RECORD_HEADER_LEN, RECORD_MESSAGE};

use crate::errors::decode_error;

/// Why `walk_batch` returned.
pub const STOP_END: u8 = 0;
pub const STOP_RECORD: u8 = 1;
pub const STOP_TIMER: u8 = 2;
pub const STOP_UNKNOWN: u8 = 3;
pub const STOP_SKIP: u8 = 4;
pub const STOP_ERROR: u8 = 5;

/// The name of the capsule a generated module exports its dispatch in (`_seqbus_dispatch_c_`):
/// the version of [`CDispatch`]'s signature.
const DISPATCH_CAPSULE: &CStr = c"seqbus.dispatch.v1";

/// A generated module's dispatch as a C function: `(node, template id, batch, body offset,
/// body length, mine)`; 1 when a handler ran, 0 for a template id it does not know, -1 with a
/// Python exception set when the view or the handler raised. Called with no argument tuple
/// and no integer objects built per message (what `call1` costs: docs/benchmarks.md).
type CDispatch = unsafe extern "C" fn(
    *mut ffi::PyObject,
    c_int,
    *mut ffi::PyObject,
    ffi::Py_ssize_t,
    ffi::Py_ssize_t,
    c_int,
) -> c_int;

/// A schema's dispatch: the generated C function, or any Python callable with the same
/// arguments returning a bool (the bus schema's admin routing, older generated modules).
#[derive(Clone)]
enum Dispatch<'py> {
    C(CDispatch),
    Py(Bound<'py, PyAny>),
}

impl<'py> Dispatch<'py> {
    fn of(d: Bound<'py, PyAny>) -> PyResult<Self> {
        let Ok(capsule) = d.downcast::<PyCapsule>() else {
            return Ok(Dispatch::Py(d));
        };
        if capsule.name()? != Some(DISPATCH_CAPSULE) {
            return Err(PyTypeError::new_err(format!(
                "a dispatch capsule named {:?}, not {DISPATCH_CAPSULE:?}: regenerate the \
                 module with this seqbus's seqc",
                capsule.name()?
            )));
        }
        let f = capsule.pointer();
        if f.is_null() {
            return Err(PyTypeError::new_err("an empty dispatch capsule"));
        }
        // SAFETY: a capsule of this name holds a function of this signature (the generated
        // `_seqbus_dispatch_c`), which lives as long as its module, which stays imported.
        Ok(Dispatch::C(unsafe {
            std::mem::transmute::<*mut c_void, CDispatch>(f)
        }))
    }

    /// Ok(true) handled, Ok(false) unknown template id, Err what it raised.
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'py>,
        node: &Bound<'py, PyAny>,
        template_id: u16,
        batch: &Bound<'py, PyBytes>,
        body: usize,
        length: usize,
        mine: bool,
    ) -> PyResult<bool> {
        match self {
            Dispatch::C(f) => {
                // SAFETY: the GIL is held; node and batch are live objects, borrowed for the
                // call; body..body+length lies inside batch (the walk checked the record).
                let rc = unsafe {
                    f(
                        node.as_ptr(),
                        c_int::from(template_id),
                        batch.as_ptr(),
                        body as ffi::Py_ssize_t,
                        length as ffi::Py_ssize_t,
                        c_int::from(mine),
                    )
                };
                match rc {
                    1 => Ok(true),
                    0 => Ok(false),
                    _ => Err(PyErr::fetch(py)),
                }
            }
            Dispatch::Py(d) => d
                .call1((node, template_id, batch, body, length, mine))?
                .is_truthy(),
        }
    }
}

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

/// What a walk returns: `(offset, stop, dispatched, error)` ([`walk_batch`]).
pub type Walked = (usize, u8, u64, Option<PyObject>);

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
) -> PyResult<Walked> {
    let data = batch.as_bytes();
    let mut walk = Walk::new(data, offset, &clock.get().0);
    let mut dispatched = 0u64;
    let mut cached: Option<(u16, Dispatch<'py>)> = None;
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
                    let d = Dispatch::of(d)?;
                    cached = Some((schema_id, d.clone()));
                    d
                }
                None => return Ok((at, STOP_UNKNOWN, dispatched, None)),
            },
        };
        let mine = account.len() == 8 && r.account() == account;
        let body = at + RECORD_HEADER_LEN;
        let known = match dispatch.call(py, node, template_id, batch, body, r.body.len(), mine) {
            Ok(known) => known,
            Err(e) => {
                return Ok((
                    at,
                    STOP_ERROR,
                    dispatched,
                    Some(e.into_value(py).into_any()),
                ))
            }
        };
        if !known {
            return Ok((at, STOP_UNKNOWN, dispatched, None));
        }
        dispatched += 1;
    }
}

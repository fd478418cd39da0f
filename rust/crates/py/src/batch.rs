//! The hot loop over a batch's message records, calling the generated dispatch per message.
//!
//! `seqbus.Node.handle_batch` owns the semantics; this walks the plain message records (the
//! overwhelming majority) without returning to Python between them, and stops at the first record
//! that needs the Python side: a non-message record, a message whose time reaches the earliest
//! deadline of the node's deterministic timers, or a message no dispatch knows.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::decode_error;

pub const RECORD_HEADER: usize = 48;
const MESSAGE_HEADER: usize = 8;
const RECORD_MESSAGE: u16 = 1;

/// Why `walk_batch` returned.
pub const STOP_END: u8 = 0;
pub const STOP_RECORD: u8 = 1;
pub const STOP_TIMER: u8 = 2;
pub const STOP_UNKNOWN: u8 = 3;

/// The node's position in the stream: the sequence and sequencer time of the message being
/// handled. Shared with Python (`Node.sequencer_time()` reads it) while handlers run, hence
/// atomics rather than `&mut`.
#[pyclass(frozen, module = "seqbus._core")]
pub struct Cursor {
    sequence: AtomicU64,
    time_ns: AtomicU64,
    /// Earliest deterministic timer of the node (u64::MAX: none). Read for every record, so
    /// a timer a handler sets stops the walk at the very next record that reaches it.
    deadline_ns: AtomicU64,
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor {
            sequence: AtomicU64::new(0),
            time_ns: AtomicU64::new(0),
            deadline_ns: AtomicU64::new(u64::MAX),
        }
    }
}

#[pymethods]
impl Cursor {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    #[getter]
    fn sequence(&self) -> u64 {
        self.sequence.load(Ordering::Relaxed)
    }

    #[getter]
    fn time_ns(&self) -> u64 {
        self.time_ns.load(Ordering::Relaxed)
    }

    fn set(&self, sequence: u64, time_ns: u64) {
        self.sequence.store(sequence, Ordering::Relaxed);
        self.time_ns.store(time_ns, Ordering::Relaxed);
    }

    #[getter]
    fn deadline_ns(&self) -> Option<u64> {
        match self.deadline_ns.load(Ordering::Relaxed) {
            u64::MAX => None,
            d => Some(d),
        }
    }

    #[setter]
    fn set_deadline_ns(&self, deadline_ns: Option<u64>) {
        self.deadline_ns
            .store(deadline_ns.unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Check the record at `offset` and return its length.
pub fn record_length(py: Python<'_>, data: &[u8], offset: usize) -> PyResult<usize> {
    let left = data.len() - offset;
    if left < RECORD_HEADER {
        return Err(decode_error(
            py,
            "Record",
            "record_length",
            offset,
            format!("truncated record header ({left} bytes)"),
        ));
    }
    let length = u32_at(data, offset) as usize;
    if length < RECORD_HEADER || length > left {
        return Err(decode_error(
            py,
            "Record",
            "record_length",
            offset,
            format!("length {length} outside the batch"),
        ));
    }
    Ok(length)
}

/// Walk message records of `batch` from `offset`, dispatching each. Returns
/// `(offset, stop, dispatched)`: where it stopped, why (`STOP_*`) and how many messages it handed
/// to handlers. The timer deadline is the cursor's, read afresh for every record. On
/// `STOP_TIMER` the cursor already holds the record's sequence and time and the
/// record is not yet dispatched; on `STOP_UNKNOWN` it was offered to the dispatch, which did not
/// know it.
#[pyfunction]
#[pyo3(signature = (batch, offset, node, dispatchers, account, cursor))]
#[allow(clippy::too_many_arguments)]
pub fn walk_batch<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyBytes>,
    mut offset: usize,
    node: &Bound<'py, PyAny>,
    dispatchers: &Bound<'py, PyDict>,
    account: &[u8],
    cursor: &Bound<'py, Cursor>,
) -> PyResult<(usize, u8, u64)> {
    let data = batch.as_bytes();
    let cursor = cursor.get();
    let mut dispatched = 0u64;
    let mut cached: Option<(u16, Bound<'py, PyAny>)> = None;
    while offset < data.len() {
        let length = record_length(py, data, offset)?;
        if u16_at(data, offset + 4) != RECORD_MESSAGE {
            return Ok((offset, STOP_RECORD, dispatched));
        }
        let sequence = u64_at(data, offset + 8);
        let time_ns = u64_at(data, offset + 16);
        cursor.set(sequence, time_ns);
        if time_ns >= cursor.deadline_ns.load(Ordering::Relaxed) {
            return Ok((offset, STOP_TIMER, dispatched));
        }
        let body_length = u32_at(data, offset + 44) as usize;
        if body_length != length - RECORD_HEADER || body_length < MESSAGE_HEADER {
            return Err(decode_error(
                py,
                "Record",
                "body_length",
                offset + 44,
                format!("{body_length} in a {length}-byte record"),
            ));
        }
        let body = offset + RECORD_HEADER;
        let template_id = u16_at(data, body + 2);
        let schema_id = u16_at(data, body + 4);
        let dispatch = match &cached {
            Some((id, d)) if *id == schema_id => d.clone(),
            _ => match dispatchers.get_item(schema_id)? {
                Some(d) => {
                    cached = Some((schema_id, d.clone()));
                    d
                }
                None => return Ok((offset, STOP_UNKNOWN, dispatched)),
            },
        };
        let mine = account.len() == 8 && data[offset + 32..offset + 40] == *account;
        let known = dispatch.call1((node, template_id, batch, body, body_length, mine))?;
        if !known.is_truthy()? {
            return Ok((offset, STOP_UNKNOWN, dispatched));
        }
        dispatched += 1;
        offset += length;
    }
    Ok((offset, STOP_END, dispatched))
}

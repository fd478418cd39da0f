//! `verify_journal` and `repair_journal` for `seqbus journal` (docs/ha.md, "Damaged
//! journals"): conversions around `seqbus-journal`.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use seqbus_journal::{repair, JournalError, JournalReader};

use crate::errors::seqbus_error;

fn journal_error(py: Python<'_>, e: JournalError) -> PyErr {
    seqbus_error(py, "JournalError", (e.to_string(),))
}

/// The session name in the header of a journal's first segment.
fn session_of(py: Python<'_>, dir: &Path) -> PyResult<[u8; 10]> {
    seqbus_archive::journal::journal_session(dir)
        .map_err(|e| seqbus_error(py, "JournalError", (e.to_string(),)))
}

/// The session and every message of the journal in `dir`, from its first (a damaged record
/// raises JournalError naming the file and offset).
pub fn read_stream(py: Python<'_>, dir: &Path) -> PyResult<([u8; 10], Vec<Vec<u8>>)> {
    let session = session_of(py, dir)?;
    let reader = py
        .allow_threads(|| JournalReader::open_at_rest(dir, session))
        .map_err(|e| journal_error(py, e))?;
    let mut messages = Vec::new();
    let read = py.allow_threads(|| {
        reader.read(reader.first_seq(), usize::MAX, &mut |_, m| {
            messages.push(m.to_vec());
            true
        })
    });
    read.map_err(|e| journal_error(py, e))?;
    if reader.first_seq() != 1 {
        // a journal cut at its start cannot stand for a session from its first message
        return Err(journal_error(py, JournalError::Missing(1)));
    }
    Ok((session, messages))
}

/// Reads every record of the journal in `dir` and checks it: a dict with `session`,
/// `first_sequence`, `next_sequence`, `messages`, `segments`; a damaged record raises
/// JournalError naming the file and offset (a torn tail at the very end is reported as
/// `torn_tail`, since the sequencer cuts it when it starts).
#[pyfunction]
pub fn verify_journal<'py>(py: Python<'py>, dir: &str) -> PyResult<Bound<'py, PyDict>> {
    let dir = Path::new(dir);
    let session = session_of(py, dir)?;
    let reader = py
        .allow_threads(|| JournalReader::open_at_rest(dir, session))
        .map_err(|e| journal_error(py, e))?;
    let mut messages = 0u64;
    let first = reader.first_seq();
    let mut expect = first;
    let read = py.allow_threads(|| {
        reader.read(first, usize::MAX, &mut |q, _| {
            debug_assert_eq!(q, expect);
            expect = q + 1;
            messages += 1;
            true
        })
    });
    read.map_err(|e| journal_error(py, e))?;
    let d = PyDict::new(py);
    d.set_item(
        "session",
        String::from_utf8_lossy(&session).trim_end().to_string(),
    )?;
    d.set_item("first_sequence", first)?;
    d.set_item("next_sequence", reader.next_seq())?;
    d.set_item("messages", messages)?;
    d.set_item("segments", reader.segments())?;
    d.set_item(
        "torn_tail",
        reader
            .torn_tail()
            .map(|(p, o)| (p.display().to_string(), o)),
    )?;
    Ok(d)
}

/// Repairs the journal in `dir` from a peer's copy in `peer` (`seqbus_journal::repair`):
/// a dict with `rewritten` [(file, first damaged offset)], `kept` [files] and `messages`.
#[pyfunction]
pub fn repair_journal<'py>(py: Python<'py>, dir: &str, peer: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = Path::new(dir);
    // a journal whose every header is damaged names no session: the peer's is the one to
    // restore (repair still refuses a peer whose intact records differ from this journal's)
    let session = match seqbus_journal::journal_session(d) {
        Ok(session) => session,
        Err(JournalError::Corrupt { .. }) => session_of(py, Path::new(peer))?,
        Err(e) => return Err(journal_error(py, e)),
    };
    let report = py
        .allow_threads(|| repair(d, session, Path::new(peer)))
        .map_err(|e| journal_error(py, e))?;
    let out = PyDict::new(py);
    out.set_item(
        "rewritten",
        report
            .rewritten
            .iter()
            .map(|(p, o)| (p.display().to_string(), *o))
            .collect::<Vec<_>>(),
    )?;
    out.set_item(
        "kept",
        report
            .kept
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>(),
    )?;
    out.set_item("messages", report.messages)?;
    Ok(out)
}

//! `Delivery`: the core's delivery model (`seqbus_core::delivery`) over the records of a
//! session archive, for the offline replay (`seqbus.archive.replay`). The archive's records,
//! fragments included, go into the same component a live node's stream goes through, so a
//! replayed node is handed exactly the records a live node of the same account and topics is.
//! A replay that begins between a message's fragments still hands it out whole (every reader
//! of an archive does): the archive gives the start of its body ([`Stored`]).

use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use seqbus_archive::reader::Mode;
use seqbus_archive::{ArchiveError, ArchiveReader, Problem};
use seqbus_core::delivery::EarlierFragments;
use seqbus_wire::Account;

/// A problem of the archive: (file, offset, sequence, message).
type PyProblem = (String, u64, u64, String);

#[pyclass(module = "seqbus._core", name = "Delivery")]
pub struct PyDelivery {
    delivery: seqbus_core::Delivery,
    archive: Option<(PathBuf, ArchiveReader)>,
    scratch: Vec<u8>,
}

/// The earlier fragments of a message, as the archive reassembles them at its last one.
struct Stored<'a> {
    reader: &'a ArchiveReader,
    problems: Vec<Problem>,
}

impl EarlierFragments for Stored<'_> {
    fn earlier(&mut self, seq: u64, _account: &Account, missing: usize) -> Option<Vec<u8>> {
        let mut whole = None;
        self.reader
            .read(seq, seq, Mode::Messages, &mut self.problems, &mut |m| {
                whole = Some(m.body.to_vec());
            });
        let mut body = whole?;
        (body.len() >= missing).then(|| {
            body.truncate(missing);
            body
        })
    }
}

fn archive_error(e: ArchiveError) -> PyErr {
    match e {
        ArchiveError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

#[pymethods]
impl PyDelivery {
    /// The delivery rules of a node of `account` handling `topics` (None: every message).
    #[new]
    #[pyo3(signature = (account, topics))]
    fn new(account: &str, topics: Option<Vec<(u16, u16)>>) -> PyResult<Self> {
        let account = seqbus_wire::account(account).map_err(PyValueError::new_err)?;
        Ok(PyDelivery {
            delivery: seqbus_core::Delivery::new(&account, topics.as_deref()),
            archive: None,
            scratch: Vec::new(),
        })
    }

    /// What the node is handed of the archive at `path`'s records with sequence in
    /// `[lo, hi]`, read in order (fragments included): one batch, and the archive's problems
    /// met on the way (file, offset, sequence, message).
    fn archive<'py>(
        &mut self,
        py: Python<'py>,
        path: &str,
        lo: u64,
        hi: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<PyProblem>)> {
        let path = Path::new(path);
        if self.archive.as_ref().is_none_or(|(p, _)| p != path) {
            let reader = py
                .allow_threads(|| ArchiveReader::open(path))
                .map_err(archive_error)?;
            self.archive = Some((path.to_path_buf(), reader));
        }
        let (_, reader) = self.archive.as_ref().expect("opened above");
        let delivery = &mut self.delivery;
        let scratch = &mut self.scratch;
        let (out, problems) = py.allow_threads(|| {
            let mut out = Vec::new();
            let mut problems = Vec::new();
            let mut stored = Stored {
                reader,
                problems: Vec::new(),
            };
            reader.read(lo, hi, Mode::Raw, &mut problems, &mut |m| {
                scratch.clear();
                scratch.extend_from_slice(m.envelope);
                scratch.extend_from_slice(&m.body);
                delivery.stored(m.sequence, scratch, &mut out, &mut stored);
            });
            problems.append(&mut stored.problems);
            (out, problems)
        });
        let problems = problems
            .into_iter()
            .map(|p| (p.file, p.offset, p.sequence, p.message))
            .collect();
        Ok((PyBytes::new(py, &out), problems))
    }

    /// The record of caught-up-with-live after `sequence`.
    fn caught_up<'py>(&mut self, py: Python<'py>, sequence: u64) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        self.delivery.caught_up(sequence, &mut out);
        PyBytes::new(py, &out)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.delivery.stats();
        let d = PyDict::new(py);
        d.set_item("delivered", s.delivered)?;
        d.set_item("filtered", s.filtered)?;
        d.set_item("time_records", s.time_records)?;
        d.set_item("malformed", s.malformed)?;
        d.set_item("abandoned", s.abandoned)?;
        d.set_item("abandoned_fragments", s.abandoned_fragments)?;
        Ok(d)
    }
}

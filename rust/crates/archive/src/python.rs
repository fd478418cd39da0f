//! The pyo3 functions behind `seqbus.archive` (registered into `seqbus._core` by
//! rust/crates/py). They convert and release the GIL; the work is in the modules above.
//! Column buffers cross as `bytes` (one copy of each finished buffer) that pyarrow wraps
//! without copying again.

use std::collections::HashMap;
use std::path::Path;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::columns::{pack_bits, Column, Data, EnvelopeColumns};
use crate::segment::{Problem, Segment};
use crate::typed::{TypedColumns, TypedDecoder};
use crate::{ir, verify, ArchiveError};

fn err(e: ArchiveError) -> PyErr {
    match e {
        ArchiveError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain integer values; the host is little-endian (checked at import in Python).
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

type PyProblem = (String, u64, u64, String);
/// (sequence, offset in the segment, message)
type PyRecord<'py> = (u64, u64, Bound<'py, PyBytes>);

fn problems(ps: Vec<Problem>) -> Vec<PyProblem> {
    ps.into_iter()
        .map(|p| (p.file, p.offset, p.sequence, p.message))
        .collect()
}

fn open(seg: &str, idx: &str) -> PyResult<Segment> {
    Segment::open(Path::new(seg), Path::new(idx)).map_err(err)
}

#[pyclass(module = "seqbus._core", name = "ArchiveWriter")]
pub struct PyArchiveWriter {
    inner: Option<crate::ArchiveWriter>,
}

impl PyArchiveWriter {
    fn w(&mut self) -> PyResult<&mut crate::ArchiveWriter> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the archive writer is closed"))
    }
}

#[pymethods]
impl PyArchiveWriter {
    #[new]
    fn new(
        dir: &str,
        session: &str,
        segment_bytes: u64,
        schemas: Vec<(u16, String, String)>,
    ) -> PyResult<Self> {
        let w = crate::ArchiveWriter::create(Path::new(dir), session, segment_bytes, &schemas)
            .map_err(err)?;
        Ok(PyArchiveWriter { inner: Some(w) })
    }

    fn append(&mut self, sequence: u64, message: &[u8]) -> PyResult<()> {
        self.w()?.append(sequence, message).map_err(err)
    }

    /// Appends `count` messages laid back to back in `buf`, each as `length u32 | message`,
    /// with sequences `first_sequence`, `first_sequence + 1`, …
    fn append_many(&mut self, py: Python<'_>, first_sequence: u64, buf: &[u8]) -> PyResult<u64> {
        let w = self.w()?;
        py.allow_threads(|| {
            let mut at = 0usize;
            let mut seq = first_sequence;
            while at < buf.len() {
                if buf.len() - at < 4 {
                    return Err(ArchiveError::Usage(format!(
                        "truncated length at byte {at}"
                    )));
                }
                let n = u32::from_le_bytes(buf[at..at + 4].try_into().expect("4")) as usize;
                if buf.len() - at - 4 < n {
                    return Err(ArchiveError::Usage(format!(
                        "message at byte {at} runs past the buffer"
                    )));
                }
                w.append(seq, &buf[at + 4..at + 4 + n])?;
                at += 4 + n;
                seq += 1;
            }
            Ok(seq - first_sequence)
        })
        .map_err(err)
    }

    #[getter]
    fn next_sequence(&self) -> Option<u64> {
        self.inner.as_ref().and_then(|w| w.next_sequence())
    }

    fn flush(&mut self) -> PyResult<()> {
        self.w()?.flush().map_err(err)
    }

    /// Seals the archive and closes the writer; returns the manifest as JSON.
    fn seal(&mut self) -> PyResult<String> {
        let m = self.w()?.seal().map_err(err)?;
        self.inner = None;
        Ok(serde_json::to_string_pretty(&m).expect("manifest serialises"))
    }
}

#[pyclass(module = "seqbus._core", name = "JournalArchiver")]
pub struct PyJournalArchiver {
    inner: Option<crate::journal::Archiver>,
}

impl PyJournalArchiver {
    fn a(&mut self) -> PyResult<&mut crate::journal::Archiver> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the archive is sealed"))
    }
}

#[pymethods]
impl PyJournalArchiver {
    #[new]
    #[pyo3(signature = (journal_dir, out, segment_bytes, schemas, start=None))]
    fn new(
        journal_dir: &str,
        out: &str,
        segment_bytes: u64,
        schemas: Vec<(u16, String, String)>,
        start: Option<u64>,
    ) -> PyResult<Self> {
        let a = crate::journal::Archiver::create(
            Path::new(journal_dir),
            Path::new(out),
            segment_bytes,
            &schemas,
            start,
        )
        .map_err(err)?;
        Ok(PyJournalArchiver { inner: Some(a) })
    }

    /// Copies up to `max` new journal messages into the archive (GIL released); how many.
    fn poll(&mut self, py: Python<'_>, max: usize) -> PyResult<usize> {
        let a = self.a()?;
        py.allow_threads(|| a.poll(max)).map_err(err)
    }

    /// (next sequence the journal will hold, next sequence the archive needs).
    fn position(&mut self) -> PyResult<(u64, Option<u64>)> {
        let a = self.a()?;
        Ok((a.journal_next(), a.archive_next()))
    }

    fn seal(&mut self) -> PyResult<String> {
        let m = self.a()?.writer.seal().map_err(err)?;
        self.inner = None;
        Ok(serde_json::to_string_pretty(&m).expect("manifest serialises"))
    }
}

/// (first_sequence, records) of a segment as its index lists them.
#[pyfunction]
fn archive_segment_info(seg: &str, idx: &str) -> PyResult<(u64, u64)> {
    let s = open(seg, idx)?;
    Ok((s.first_sequence, s.len() as u64))
}

/// Index positions [start, end) of the records in the sequence and time bounds (inclusive).
#[pyfunction]
fn archive_range(
    seg: &str,
    idx: &str,
    seq_lo: u64,
    seq_hi: u64,
    ts_lo: u64,
    ts_hi: u64,
) -> PyResult<(usize, usize)> {
    Ok(open(seg, idx)?.range(seq_lo, seq_hi, ts_lo, ts_hi))
}

/// The envelope table of index positions [start, end): (rows, {column: buffers}, problems).
#[pyfunction]
fn archive_envelopes<'py>(
    py: Python<'py>,
    seg: &str,
    idx: &str,
    start: usize,
    end: usize,
    names: HashMap<(u16, u16), String>,
) -> PyResult<(usize, Bound<'py, PyDict>, Vec<PyProblem>)> {
    let s = open(seg, idx)?;
    let end = end.min(s.len());
    let start = start.min(end);
    let (cols, probs) = py.allow_threads(|| {
        let mut c = EnvelopeColumns::with_capacity(end - start);
        let mut p = Vec::new();
        c.decode(&s, start, end, &names, &mut p);
        (c, p)
    });
    let d = PyDict::new(py);
    let b = |v: &[u8]| PyBytes::new(py, v);
    d.set_item("sequence", b(as_bytes(&cols.sequence)))?;
    d.set_item("timestamp_ns", b(as_bytes(&cols.timestamp_ns)))?;
    d.set_item("time", b(as_bytes(&cols.time_us)))?;
    d.set_item(
        "account",
        (b(as_bytes(&cols.account_offsets)), b(&cols.account)),
    )?;
    d.set_item("instance", b(as_bytes(&cols.instance)))?;
    d.set_item("command_seq", b(as_bytes(&cols.command_seq)))?;
    d.set_item("kind", (b(as_bytes(&cols.kind_offsets)), b(&cols.kind)))?;
    d.set_item("flags", b(as_bytes(&cols.flags)))?;
    d.set_item("schema_id", b(as_bytes(&cols.schema_id)))?;
    d.set_item("template_id", b(as_bytes(&cols.template_id)))?;
    d.set_item("version", b(as_bytes(&cols.version)))?;
    d.set_item(
        "type",
        (b(as_bytes(&cols.type_offsets)), b(&cols.type_name)),
    )?;
    d.set_item("size", b(as_bytes(&cols.size)))?;
    Ok((cols.rows, d, problems(probs)))
}

/// (len, null_count, validity bitmap or None, [buffers], [children]) in the Arrow layout.
fn export<'py>(py: Python<'py>, c: &Column) -> PyResult<Bound<'py, PyTuple>> {
    let validity: Option<Bound<'py, PyBytes>> =
        c.validity.as_ref().map(|v| PyBytes::new(py, &pack_bits(v)));
    let bufs = PyList::empty(py);
    let kids = PyList::empty(py);
    match &c.data {
        Data::Fixed { values, .. } => bufs.append(PyBytes::new(py, values))?,
        Data::Bool { values } => bufs.append(PyBytes::new(py, &pack_bits(values)))?,
        Data::Var { offsets, bytes } => {
            bufs.append(PyBytes::new(py, as_bytes(offsets)))?;
            bufs.append(PyBytes::new(py, bytes))?;
        }
        Data::List { offsets, child } => {
            bufs.append(PyBytes::new(py, as_bytes(offsets)))?;
            kids.append(export(py, child)?)?;
        }
        Data::Struct { children } => {
            for ch in children {
                kids.append(export(py, ch)?)?;
            }
        }
    }
    PyTuple::new(
        py,
        [
            c.len.into_pyobject(py)?.into_any(),
            c.null_count().into_pyobject(py)?.into_any(),
            validity.into_pyobject(py)?.into_any(),
            bufs.into_any(),
            kids.into_any(),
        ],
    )
}

/// The typed table of message `message` of the schema whose IR is `ir_json`, over index
/// positions [start, end): (rows, [column trees], problems).
#[pyfunction]
fn archive_typed<'py>(
    py: Python<'py>,
    seg: &str,
    idx: &str,
    start: usize,
    end: usize,
    ir_json: &str,
    message: &str,
) -> PyResult<(usize, Bound<'py, PyList>, Vec<PyProblem>)> {
    let schema = ir::Schema::parse(ir_json).map_err(PyValueError::new_err)?;
    let dec = TypedDecoder::new(&schema, message).map_err(PyValueError::new_err)?;
    let s = open(seg, idx)?;
    let end = end.min(s.len());
    let start = start.min(end);
    let (cols, probs): (TypedColumns, Vec<Problem>) = py.allow_threads(|| {
        let mut c = dec.columns();
        let mut p = Vec::new();
        dec.decode(&s, start, end, &mut c, &mut p);
        (c, p)
    });
    let out = PyList::empty(py);
    for c in &cols.columns {
        out.append(export(py, c)?)?;
    }
    Ok((cols.rows, out, problems(probs)))
}

/// The records at index positions [start, end): ([(sequence, offset, message)], problems).
#[pyfunction]
fn archive_records<'py>(
    py: Python<'py>,
    seg: &str,
    idx: &str,
    start: usize,
    end: usize,
) -> PyResult<(Vec<PyRecord<'py>>, Vec<PyProblem>)> {
    let s = open(seg, idx)?;
    let end = end.min(s.len());
    let mut out = Vec::with_capacity(end.saturating_sub(start));
    let mut probs = Vec::new();
    for i in start.min(end)..end {
        match s.record(i) {
            Ok(r) => out.push((r.sequence, r.offset, PyBytes::new(py, r.message))),
            Err(p) => probs.push(p),
        }
    }
    Ok((out, problems(probs)))
}

/// Verifies one segment: (records, good records, first sequence, last timestamp, problems).
#[pyfunction]
#[pyo3(signature = (seg, idx, expect_first=None))]
fn archive_verify_segment(
    py: Python<'_>,
    seg: &str,
    idx: &str,
    expect_first: Option<u64>,
) -> PyResult<(u64, u64, u64, u64, Vec<PyProblem>)> {
    let s = open(seg, idx)?;
    let r = py.allow_threads(|| verify::verify_segment(&s, expect_first));
    Ok((
        r.records,
        r.good,
        r.first_sequence,
        r.last_timestamp_ns,
        problems(r.problems),
    ))
}

/// Adds the archive functions and classes to `seqbus._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyArchiveWriter>()?;
    m.add_class::<PyJournalArchiver>()?;
    m.add_function(wrap_pyfunction!(archive_segment_info, m)?)?;
    m.add_function(wrap_pyfunction!(archive_range, m)?)?;
    m.add_function(wrap_pyfunction!(archive_envelopes, m)?)?;
    m.add_function(wrap_pyfunction!(archive_typed, m)?)?;
    m.add_function(wrap_pyfunction!(archive_records, m)?)?;
    m.add_function(wrap_pyfunction!(archive_verify_segment, m)?)?;
    Ok(())
}

//! The pyo3 classes and functions behind `seqbus.archive` (seqbus-archive's writer, archiver,
//! reader and verifier). They convert and release the GIL; the work is in seqbus-archive.
//! Column buffers cross as `bytes` (one copy of each finished buffer) that pyarrow wraps
//! without copying again.

use std::collections::HashMap;
use std::path::Path;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use seqbus_archive::columns::{
    pack_bits, Column, Data, EnvelopeColumns, EnvelopePrefix, RawColumns, Utf8,
};
use seqbus_archive::reader::{ArchiveReader, Mode};
use seqbus_archive::segment::{Problem, Segment};
use seqbus_archive::typed::{TypedColumns, TypedDecoder};
use seqbus_archive::{ir, verify, ArchiveError};

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
/// (sequence, 0 = whole message / 1 = not one, bytes)
type StreamItem<'py> = (u64, u8, Bound<'py, PyBytes>);

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
    inner: Option<seqbus_archive::ArchiveWriter>,
}

impl PyArchiveWriter {
    fn w(&mut self) -> PyResult<&mut seqbus_archive::ArchiveWriter> {
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
        let w =
            seqbus_archive::ArchiveWriter::create(Path::new(dir), session, segment_bytes, &schemas)
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
    inner: Option<seqbus_archive::journal::Archiver>,
}

impl PyJournalArchiver {
    fn a(&mut self) -> PyResult<&mut seqbus_archive::journal::Archiver> {
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
        let a = seqbus_archive::journal::Archiver::create(
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

    /// (file, offset) where the journal's last segment stops forming records, if it does.
    fn torn_tail(&mut self) -> PyResult<Option<(String, u64)>> {
        let a = self.a()?;
        Ok(a.torn_tail().map(|(p, o)| (p.display().to_string(), o)))
    }

    fn seal(&mut self) -> PyResult<String> {
        let a = self.a()?;
        a.check_journal().map_err(err)?;
        let m = a.writer.seal().map_err(err)?;
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

fn utf8<'py>(py: Python<'py>, c: &Utf8) -> (Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
    (
        PyBytes::new(py, as_bytes(&c.offsets)),
        PyBytes::new(py, &c.bytes),
    )
}

fn prefix<'py>(py: Python<'py>, d: &Bound<'py, PyDict>, p: &EnvelopePrefix) -> PyResult<()> {
    let b = |v: &[u8]| PyBytes::new(py, v);
    d.set_item("sequence", b(as_bytes(&p.sequence)))?;
    d.set_item("timestamp_ns", b(as_bytes(&p.timestamp_ns)))?;
    d.set_item("time", b(as_bytes(&p.time_us)))?;
    d.set_item("account", utf8(py, &p.account))?;
    d.set_item("instance", b(as_bytes(&p.instance)))?;
    d.set_item("command_seq", b(as_bytes(&p.command_seq)))?;
    d.set_item("kind", utf8(py, &p.kind))?;
    Ok(())
}

/// An open archive: the reads behind `seqbus.archive.Archive` (sequence ranges, across
/// segments; fragmented messages whole at their last fragment).
#[pyclass(module = "seqbus._core", name = "ArchiveReader")]
pub struct PyArchiveReader {
    inner: ArchiveReader,
}

#[pymethods]
impl PyArchiveReader {
    #[new]
    fn new(dir: &str) -> PyResult<Self> {
        Ok(PyArchiveReader {
            inner: ArchiveReader::open(Path::new(dir)).map_err(err)?,
        })
    }

    /// [(schema id, package, IR JSON, built in)]: the stored schemas, and the bus's own
    /// schema when the archive does not store it.
    fn schemas(&self) -> Vec<(u16, String, String, bool)> {
        self.inner
            .schemas
            .iter()
            .map(|s| (s.schema_id, s.package.clone(), s.ir.clone(), s.builtin))
            .collect()
    }

    /// {(schema id, template id): "package.Message"}
    fn type_names(&self) -> HashMap<(u16, u16), String> {
        self.inner.names.clone()
    }

    /// [(number, segment file, index file, first sequence, records, first ts, last ts)]; the
    /// live segment of an unsealed archive as its index lists it now.
    fn segments(&self) -> Vec<(u32, String, String, u64, u64, u64, u64)> {
        self.inner
            .segments
            .iter()
            .map(|s| {
                (
                    s.number,
                    s.seg.display().to_string(),
                    s.idx.display().to_string(),
                    s.first_sequence,
                    s.count,
                    s.first_timestamp_ns,
                    s.last_timestamp_ns,
                )
            })
            .collect()
    }

    /// The inclusive sequence range of the records within the bounds, or None.
    fn bounds(&self, seq_lo: u64, seq_hi: u64, ts_lo: u64, ts_hi: u64) -> Option<(u64, u64)> {
        self.inner.bounds(seq_lo, seq_hi, ts_lo, ts_hi)
    }

    /// The records within the bounds as inclusive sequence ranges of at most `max_rows`.
    fn plan(
        &self,
        seq_lo: u64,
        seq_hi: u64,
        ts_lo: u64,
        ts_hi: u64,
        max_rows: u64,
    ) -> Vec<(u64, u64)> {
        self.inner.plan(seq_lo, seq_hi, ts_lo, ts_hi, max_rows)
    }

    /// The envelope table of the messages in [lo, hi]: (rows, {column: buffers}, problems).
    fn envelopes<'py>(
        &self,
        py: Python<'py>,
        lo: u64,
        hi: u64,
    ) -> PyResult<(usize, Bound<'py, PyDict>, Vec<PyProblem>)> {
        let a = &self.inner;
        let (cols, probs) = py.allow_threads(|| {
            let mut c = EnvelopeColumns::with_capacity(rows_hint(lo, hi));
            let mut p = Vec::new();
            c.decode(a, lo, hi, &mut p);
            (c, p)
        });
        let d = PyDict::new(py);
        let b = |v: &[u8]| PyBytes::new(py, v);
        prefix(py, &d, &cols.prefix)?;
        d.set_item("schema_id", b(as_bytes(&cols.schema_id)))?;
        d.set_item("template_id", b(as_bytes(&cols.template_id)))?;
        d.set_item("version", b(as_bytes(&cols.version)))?;
        d.set_item("type", utf8(py, &cols.type_name))?;
        d.set_item("size", b(as_bytes(&cols.size)))?;
        d.set_item("fragments", b(as_bytes(&cols.fragments)))?;
        Ok((cols.rows, d, problems(probs)))
    }

    /// The raw table (every record, fragments included) of [lo, hi].
    fn raw<'py>(
        &self,
        py: Python<'py>,
        lo: u64,
        hi: u64,
    ) -> PyResult<(usize, Bound<'py, PyDict>, Vec<PyProblem>)> {
        let a = &self.inner;
        let (cols, probs) = py.allow_threads(|| {
            let mut c = RawColumns::with_capacity(rows_hint(lo, hi));
            let mut p = Vec::new();
            c.decode(a, lo, hi, &mut p);
            (c, p)
        });
        let d = PyDict::new(py);
        let b = |v: &[u8]| PyBytes::new(py, v);
        prefix(py, &d, &cols.prefix)?;
        d.set_item("flags", b(as_bytes(&cols.flags)))?;
        d.set_item("body_length", b(as_bytes(&cols.body_length)))?;
        d.set_item("size", b(as_bytes(&cols.size)))?;
        d.set_item("body", utf8(py, &cols.body))?;
        Ok((cols.rows, d, problems(probs)))
    }

    /// The typed table of `message` of schema `schema_id` over [lo, hi]:
    /// (rows, [column trees], problems).
    fn typed<'py>(
        &self,
        py: Python<'py>,
        lo: u64,
        hi: u64,
        schema_id: u16,
        message: &str,
    ) -> PyResult<(usize, Bound<'py, PyList>, Vec<PyProblem>)> {
        let a = &self.inner;
        let text = a.schema(schema_id).ok_or_else(|| {
            PyValueError::new_err(format!("the archive has no schema {schema_id}"))
        })?;
        let schema = ir::Schema::parse(&text.ir).map_err(PyValueError::new_err)?;
        let dec = TypedDecoder::new(&schema, message).map_err(PyValueError::new_err)?;
        let (cols, probs): (TypedColumns, Vec<Problem>) = py.allow_threads(|| {
            let mut c = dec.columns();
            let mut p = Vec::new();
            dec.decode(a, lo, hi, &mut c, &mut p);
            (c, p)
        });
        let out = PyList::empty(py);
        for c in &cols.columns {
            out.append(export(py, c)?)?;
        }
        Ok((cols.rows, out, problems(probs)))
    }

    /// The stream of [lo, hi] as a live node's core sees it: [(sequence, kind, message)]
    /// where kind 0 is a whole message (envelope with flags 0, then the whole body) and kind
    /// 1 a record that is not one (a fragment before the last, or a message that does not
    /// reassemble: its envelope only); and the problems.
    fn stream<'py>(
        &self,
        py: Python<'py>,
        lo: u64,
        hi: u64,
    ) -> PyResult<(Vec<StreamItem<'py>>, Vec<PyProblem>)> {
        let a = &self.inner;
        let (items, probs) = py.allow_threads(|| {
            let mut whole: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut p = Vec::new();
            a.read(lo, hi, Mode::Messages, &mut p, &mut |m| {
                let mut v = Vec::with_capacity(m.size());
                v.extend_from_slice(m.envelope);
                v[27] = 0;
                v.extend_from_slice(&m.body);
                whole.push((m.sequence, v));
            });
            let mut items: Vec<(u64, u8, Vec<u8>)> = Vec::with_capacity(whole.len());
            let mut next = whole.into_iter().peekable();
            let mut ignored = Vec::new();
            a.read(lo, hi, Mode::Raw, &mut ignored, &mut |m| {
                if next.peek().is_some_and(|(s, _)| *s == m.sequence) {
                    let (s, v) = next.next().expect("peeked");
                    items.push((s, 0, v));
                } else {
                    items.push((m.sequence, 1, m.envelope.to_vec()));
                }
            });
            (items, p)
        });
        let out = items
            .into_iter()
            .map(|(s, k, v)| (s, k, PyBytes::new(py, &v)))
            .collect();
        Ok((out, problems(probs)))
    }
}

fn rows_hint(lo: u64, hi: u64) -> usize {
    (hi.saturating_sub(lo).saturating_add(1)).min(1 << 20) as usize
}

/// Verifies an archive segment by segment, following fragmented messages across segments.
#[pyclass(module = "seqbus._core", name = "ArchiveVerifier")]
pub struct PyArchiveVerifier {
    frags: verify::Fragments,
}

#[pymethods]
impl PyArchiveVerifier {
    #[new]
    fn new() -> Self {
        PyArchiveVerifier {
            frags: verify::Fragments::default(),
        }
    }

    /// Verifies the next segment: (records, good records, first sequence, last timestamp,
    /// problems).
    #[pyo3(signature = (seg, idx, expect_first=None))]
    fn segment(
        &mut self,
        py: Python<'_>,
        seg: &str,
        idx: &str,
        expect_first: Option<u64>,
    ) -> PyResult<(u64, u64, u64, u64, Vec<PyProblem>)> {
        let s = open(seg, idx)?;
        let frags = &mut self.frags;
        let r = py.allow_threads(|| verify::verify_segment(&s, expect_first, frags));
        Ok((
            r.records,
            r.good,
            r.first_sequence,
            r.last_timestamp_ns,
            problems(r.problems),
        ))
    }

    /// Problems at the end: fragmented messages that never completed in a sealed archive.
    fn finish(&mut self, sealed: bool) -> Vec<PyProblem> {
        problems(self.frags.finish(sealed))
    }

    /// Fragmented messages that reassembled.
    #[getter]
    fn fragmented_messages(&self) -> u64 {
        self.frags.messages
    }

    /// Fragmented messages their sender abandoned between fragments (the account's next
    /// message began anew): warnings, not damage.
    #[getter]
    fn abandoned_messages(&self) -> u64 {
        self.frags.abandoned
    }

    /// Where each abandoned message lies (its first fragment seen), taken once.
    fn take_warnings(&mut self) -> Vec<PyProblem> {
        problems(std::mem::take(&mut self.frags.warnings))
    }
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

/// The bus's schema IR built into the extension (`seqc ir --json schemas/bus.idl`).
#[pyfunction]
fn archive_bus_ir() -> &'static str {
    seqbus_archive::reader::BUS_IR
}

/// Adds the archive functions and classes to `seqbus._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyArchiveWriter>()?;
    m.add_class::<PyJournalArchiver>()?;
    m.add_class::<PyArchiveReader>()?;
    m.add_class::<PyArchiveVerifier>()?;
    m.add_function(wrap_pyfunction!(archive_segment_info, m)?)?;
    m.add_function(wrap_pyfunction!(archive_bus_ir, m)?)?;
    Ok(())
}

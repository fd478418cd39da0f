//! Appending sequenced messages to an archive and sealing it.
//!
//! Records go to the active segment, then their index entry, so a reader that sees an index
//! entry sees the whole record once the writer has flushed ([`ArchiveWriter::flush`] writes
//! the segment before the index). A segment is rolled when it passes `segment_bytes`; the
//! manifest is rewritten at each roll and at sealing.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::format::{self, le_u64};
use crate::manifest::{Manifest, SchemaInfo, SegmentInfo};
use crate::reader::BUS_SCHEMA_ID;
use crate::{ArchiveError, Result};

struct Active {
    info: SegmentInfo,
    seg: BufWriter<File>,
    /// Index entries not yet written: they go to the file only after their records
    /// ([`ArchiveWriter::flush`]), so a reader never sees an entry before its record.
    idx: File,
    pending: Vec<u8>,
    seg_path: PathBuf,
    idx_path: PathBuf,
}

pub struct ArchiveWriter {
    dir: PathBuf,
    manifest: Manifest,
    segment_bytes: u64,
    active: Option<Active>,
    next_sequence: Option<u64>,
    /// The record being written, encoded by the journal's codec (reused).
    record: Vec<u8>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl ArchiveWriter {
    /// Creates a new archive in `dir` (created if missing; it must not hold an archive).
    /// `schemas`: (schema id, package, IR JSON text) of every package the session carries;
    /// the bus's own schema is stored too when it is not among them.
    pub fn create(
        dir: &Path,
        session: &str,
        segment_bytes: u64,
        schemas: &[(u16, String, String)],
    ) -> Result<ArchiveWriter> {
        if segment_bytes < 4096 {
            return Err(ArchiveError::Usage(format!(
                "segment size {segment_bytes} is below the minimum of 4096 bytes"
            )));
        }
        std::fs::create_dir_all(dir.join("schemas")).map_err(|e| ArchiveError::io(dir, e))?;
        if dir.join(format::MANIFEST).exists() {
            return Err(ArchiveError::format(dir, "already holds an archive"));
        }
        let mut infos = Vec::new();
        let bus = (
            BUS_SCHEMA_ID,
            "bus".to_string(),
            crate::reader::BUS_IR.to_string(),
        );
        let with_bus = (!schemas.iter().any(|s| s.0 == BUS_SCHEMA_ID)).then_some(&bus);
        for (id, package, json) in schemas.iter().chain(with_bus) {
            serde_json::from_str::<crate::ir::Schema>(json).map_err(|e| {
                ArchiveError::Usage(format!(
                    "schema IR of package {package:?} is not seqc IR: {e}"
                ))
            })?;
            let rel = format!("schemas/{package}.ir.json");
            let path = dir.join(&rel);
            std::fs::write(&path, json).map_err(|e| ArchiveError::io(&path, e))?;
            infos.push(SchemaInfo {
                schema_id: *id,
                package: package.clone(),
                ir: rel,
            });
        }
        let manifest = Manifest {
            format: Manifest::FORMAT.into(),
            version: format::FORMAT_VERSION,
            session: session.into(),
            sealed: false,
            created_ns: now_ns(),
            sealed_ns: None,
            schemas: infos,
            segments: Vec::new(),
        };
        manifest.store(dir)?;
        Ok(ArchiveWriter {
            dir: dir.to_path_buf(),
            manifest,
            segment_bytes,
            active: None,
            next_sequence: None,
            record: Vec::new(),
        })
    }

    pub fn next_sequence(&self) -> Option<u64> {
        self.next_sequence
    }

    /// Appends the sequenced message `message` (envelope + body) with sequence `sequence`.
    /// Sequences must be contiguous: the first one is any, then each is the previous + 1.
    pub fn append(&mut self, sequence: u64, message: &[u8]) -> Result<()> {
        if self.manifest.sealed {
            return Err(ArchiveError::Usage("the archive is sealed".into()));
        }
        if let Some(n) = self.next_sequence {
            if sequence != n {
                return Err(ArchiveError::Usage(format!(
                    "sequence {sequence} appended where {n} is next: an archive is contiguous"
                )));
            }
        }
        if message.len() < format::ENVELOPE_LEN || message.len() > format::MAX_MESSAGE_LEN {
            return Err(ArchiveError::Usage(format!(
                "message {sequence} is {} bytes: a sequenced message is a 32-byte envelope and a body of at most {} bytes",
                message.len(),
                format::MAX_MESSAGE_LEN
            )));
        }
        let roll = match &self.active {
            None => true,
            Some(a) => {
                a.info.bytes + (format::RECORD_HEADER_LEN + message.len()) as u64
                    > self.segment_bytes
                    && a.info.count > 0
            }
        };
        if roll {
            self.roll(sequence)?;
        }
        let ts = le_u64(message, 0);
        let a = self.active.as_mut().expect("active segment");
        self.record.clear();
        seqbus_journal::encode_record(&mut self.record, sequence, message);
        let offset = a.info.bytes;
        a.seg
            .write_all(&self.record)
            .map_err(|e| ArchiveError::io(&a.seg_path, e))?;
        let mut entry = [0u8; format::INDEX_ENTRY_LEN];
        entry[0..8].copy_from_slice(&offset.to_le_bytes());
        entry[8..16].copy_from_slice(&ts.to_le_bytes());
        a.pending.extend_from_slice(&entry);
        a.info.bytes += (format::RECORD_HEADER_LEN + message.len()) as u64;
        if a.info.count == 0 {
            a.info.first_timestamp_ns = ts;
        }
        a.info.last_timestamp_ns = ts;
        a.info.count += 1;
        self.next_sequence = Some(sequence + 1);
        if a.pending.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn roll(&mut self, first_sequence: u64) -> Result<()> {
        self.close_active(false)?;
        let number = self.manifest.segments.len() as u32 + 1;
        let file = format::segment_file(number);
        let index = format::index_file(number);
        let seg_path = self.dir.join(&file);
        let idx_path = self.dir.join(&index);
        let mut seg = BufWriter::with_capacity(
            1 << 16,
            File::create(&seg_path).map_err(|e| ArchiveError::io(&seg_path, e))?,
        );
        let mut idx = File::create(&idx_path).map_err(|e| ArchiveError::io(&idx_path, e))?;
        let mut head = [0u8; format::SEGMENT_HEADER_LEN];
        head[0..8].copy_from_slice(format::SEGMENT_MAGIC);
        head[8..12].copy_from_slice(&format::FORMAT_VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&number.to_le_bytes());
        head[16..24].copy_from_slice(&first_sequence.to_le_bytes());
        head[24..32].copy_from_slice(&now_ns().to_le_bytes());
        seg.write_all(&head)
            .map_err(|e| ArchiveError::io(&seg_path, e))?;
        let mut ihead = [0u8; format::INDEX_HEADER_LEN];
        ihead[0..8].copy_from_slice(format::INDEX_MAGIC);
        ihead[8..16].copy_from_slice(&first_sequence.to_le_bytes());
        idx.write_all(&ihead)
            .map_err(|e| ArchiveError::io(&idx_path, e))?;
        let info = SegmentInfo {
            number,
            file,
            index,
            first_sequence,
            count: 0,
            first_timestamp_ns: 0,
            last_timestamp_ns: 0,
            bytes: format::SEGMENT_HEADER_LEN as u64,
        };
        self.manifest.segments.push(info.clone());
        self.active = Some(Active {
            info,
            seg,
            idx,
            pending: Vec::with_capacity(1 << 16),
            seg_path,
            idx_path,
        });
        self.flush()?;
        self.manifest.store(&self.dir)
    }

    /// Makes everything appended so far visible to readers (segment first, then index).
    pub fn flush(&mut self) -> Result<()> {
        if let Some(a) = self.active.as_mut() {
            a.seg
                .flush()
                .map_err(|e| ArchiveError::io(&a.seg_path, e))?;
            a.idx
                .write_all(&a.pending)
                .map_err(|e| ArchiveError::io(&a.idx_path, e))?;
            a.pending.clear();
            let last = self.manifest.segments.last_mut().expect("active is listed");
            *last = a.info.clone();
        }
        Ok(())
    }

    fn close_active(&mut self, sync: bool) -> Result<()> {
        self.flush()?;
        if let Some(a) = self.active.take() {
            if sync {
                let seg = a
                    .seg
                    .into_inner()
                    .map_err(|e| ArchiveError::io(&a.seg_path, e.into_error()))?;
                seg.sync_all()
                    .map_err(|e| ArchiveError::io(&a.seg_path, e))?;
                a.idx
                    .sync_all()
                    .map_err(|e| ArchiveError::io(&a.idx_path, e))?;
            }
        }
        Ok(())
    }

    /// Flushes, fsyncs and writes the sealed manifest. The archive is immutable afterwards.
    pub fn seal(&mut self) -> Result<Manifest> {
        if self.manifest.sealed {
            return Ok(self.manifest.clone());
        }
        self.close_active(true)?;
        self.manifest.sealed = true;
        self.manifest.sealed_ns = Some(now_ns());
        self.manifest.store(&self.dir)?;
        Ok(self.manifest.clone())
    }
}

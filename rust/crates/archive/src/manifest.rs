//! `archive.json`: what the archive holds. Written by the writer at each segment roll
//! (`sealed: false`) and last at sealing (`sealed: true`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{format, ArchiveError, Result};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SegmentInfo {
    pub number: u32,
    pub file: String,
    pub index: String,
    pub first_sequence: u64,
    /// Records in the segment (for the active segment of an unsealed archive: at the last
    /// manifest write; readers take the index length).
    pub count: u64,
    pub first_timestamp_ns: u64,
    pub last_timestamp_ns: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchemaInfo {
    pub schema_id: u16,
    pub package: String,
    /// Path of the IR (`seqc ir --json`) relative to the archive directory.
    pub ir: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub session: String,
    pub sealed: bool,
    pub created_ns: u64,
    pub sealed_ns: Option<u64>,
    pub schemas: Vec<SchemaInfo>,
    pub segments: Vec<SegmentInfo>,
}

impl Manifest {
    pub const FORMAT: &'static str = "seqbus-archive";

    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(format::MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| ArchiveError::io(&path, e))?;
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| ArchiveError::format(&path, format!("not an archive manifest: {e}")))?;
        if m.format != Self::FORMAT || m.version != format::FORMAT_VERSION {
            return Err(ArchiveError::format(
                &path,
                format!(
                    "format {:?} version {}, expected {:?} version {}",
                    m.format,
                    m.version,
                    Self::FORMAT,
                    format::FORMAT_VERSION
                ),
            ));
        }
        Ok(m)
    }

    /// Writes the manifest atomically (temporary file, fsync, rename).
    pub fn store(&self, dir: &Path) -> Result<()> {
        use std::io::Write;
        let path = dir.join(format::MANIFEST);
        let tmp = dir.join(".archive.json.tmp");
        let text = serde_json::to_string_pretty(self).expect("manifest serialises");
        let mut f = std::fs::File::create(&tmp).map_err(|e| ArchiveError::io(&tmp, e))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.write_all(b"\n"))
            .and_then(|_| f.sync_all())
            .map_err(|e| ArchiveError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| ArchiveError::io(&path, e))
    }
}

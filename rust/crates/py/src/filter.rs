//! The topic filter between the core's records and Python, with deterministic time records.
//!
//! The core delivers every message (its own filter is not used); this keeps the application
//! messages of the node's topics and drops the rest (control messages, other types) before
//! they cross into Python. So that deterministic timers still see time pass, a dropped
//! message whose stream time enters a new `grid_ns` slot since the previous record becomes a
//! header-only "time advanced" record (type 3). Which records those are depends only on the
//! stream and the topics — never on batch boundaries or on when the node set its timers — so a
//! timer fires at the same stream point live, in a hot backup and in every replay.

use std::collections::HashSet;

use seqbus_net::{RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME};

/// Default slot of stream time for time records: 1 ms.
pub const TIME_GRID_NS: u64 = 1_000_000;
const KIND_APPLICATION: u8 = 1;

pub struct Filter {
    topics: Option<HashSet<(u16, u16)>>,
    grid_ns: u64,
    last_slot: Option<u64>,
    /// Messages dropped.
    pub filtered: u64,
    /// Time records written.
    pub time_records: u64,
}

impl Filter {
    pub fn new(topics: Option<Vec<(u16, u16)>>, grid_ns: u64) -> Filter {
        Filter {
            topics: topics.map(|t| t.into_iter().collect()),
            grid_ns: grid_ns.max(1),
            last_slot: None,
            filtered: 0,
            time_records: 0,
        }
    }

    fn wanted(&self, record: &[u8]) -> bool {
        if record[16 + 26] != KIND_APPLICATION || record.len() < RECORD_HEADER_LEN + 8 {
            return false;
        }
        match &self.topics {
            None => true,
            Some(t) => {
                let body = &record[RECORD_HEADER_LEN..];
                let template = u16::from_le_bytes([body[2], body[3]]);
                let schema = u16::from_le_bytes([body[4], body[5]]);
                t.contains(&(schema, template))
            }
        }
    }

    /// Appends to `out` what Python must see of the records in `raw`; returns how many.
    pub fn apply(&mut self, raw: &[u8], out: &mut Vec<u8>) -> usize {
        let mut n = 0;
        let mut at = 0;
        while at + RECORD_HEADER_LEN <= raw.len() {
            let len = u32::from_le_bytes(raw[at..at + 4].try_into().expect("4 bytes")) as usize;
            let record = &raw[at..at + len];
            at += len;
            let kind = u16::from_le_bytes([record[4], record[5]]);
            if kind == RECORD_TIME {
                continue; // the core's own time records (never asked for)
            }
            if kind != RECORD_MESSAGE {
                out.extend_from_slice(record);
                n += 1;
                continue;
            }
            let time_ns = u64::from_le_bytes(record[16..24].try_into().expect("8 bytes"));
            let slot = time_ns / self.grid_ns;
            let new_slot = self.last_slot.is_none_or(|s| slot > s);
            self.last_slot = Some(self.last_slot.map_or(slot, |s| s.max(slot)));
            if self.wanted(record) {
                out.extend_from_slice(record);
                n += 1;
                continue;
            }
            self.filtered += 1;
            if new_slot {
                out.extend_from_slice(&(RECORD_HEADER_LEN as u32).to_le_bytes());
                out.extend_from_slice(&RECORD_TIME.to_le_bytes());
                out.extend_from_slice(&record[6..RECORD_HEADER_LEN]);
                self.time_records += 1;
                n += 1;
            }
        }
        n
    }
}

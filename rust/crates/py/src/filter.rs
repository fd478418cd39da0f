//! The topic filter between the core's records and Python, with deterministic time records.
//!
//! The core has no topics of its own here: it delivers every application message and a
//! header-only type-3 record for each message it keeps to itself (control messages such as
//! idle clock ticks, fragments before the last). This keeps the application messages of the
//! node's topics and drops the rest before they cross into Python. So that deterministic timers still see time pass, a dropped
//! message whose stream time enters a new `grid_ns` slot since the previous record becomes a
//! header-only "time advanced" record (type 3). Which records those are depends only on the
//! stream and the topics — never on batch boundaries or on when the node set its timers — so a
//! timer fires at the same stream point live, in a hot backup and in every replay.
//!
//! Admin commands (`bus.AdminCommand`, schemas/bus.idl) are routed by their target account,
//! not by topic: one for the node's own account always crosses into Python, whatever the
//! node's topics; one for another account is dropped here like any filtered message (unless
//! the node asked for every admin command by listing its topic, as `seqbus admin` does).

use std::collections::HashSet;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::decode_error;

use seqbus_net::{RECORD_HEADER_LEN, RECORD_MESSAGE, RECORD_TIME};

/// Default slot of stream time for time records: 1 ms.
pub const TIME_GRID_NS: u64 = 1_000_000;
const KIND_APPLICATION: u8 = 1;
/// Schema id of the bus's own messages (schemas/bus.idl, `schema 1`).
pub const BUS_SCHEMA_ID: u16 = 1;
/// Template id of `bus.AdminCommand` (schemas/bus.idl); its block starts with the target
/// account, `char[8]`.
pub const ADMIN_COMMAND_TEMPLATE_ID: u16 = 4;
/// Template id of `bus.AdminReply` (schemas/bus.idl).
pub const ADMIN_REPLY_TEMPLATE_ID: u16 = 5;
/// The IDL message header before every body's block.
const MESSAGE_HEADER_LEN: usize = 8;
const ACCOUNT_LEN: usize = 8;

/// An 8-byte account field without its padding (trailing NUL or space bytes).
fn unpadded(account: &[u8]) -> &[u8] {
    let end = account
        .iter()
        .rposition(|&b| b != 0 && b != b' ')
        .map_or(0, |i| i + 1);
    &account[..end]
}

pub struct Filter {
    topics: Option<HashSet<(u16, u16)>>,
    /// The node's account, unpadded: admin commands targeting it always pass.
    account: Vec<u8>,
    grid_ns: u64,
    last_slot: Option<u64>,
    /// Messages dropped.
    pub filtered: u64,
    /// Time records written.
    pub time_records: u64,
}

impl Filter {
    /// `account` is the node's own (its admin commands pass whatever `topics` says).
    pub fn new(topics: Option<Vec<(u16, u16)>>, grid_ns: u64, account: &[u8]) -> Filter {
        Filter {
            topics: topics.map(|t| t.into_iter().collect()),
            account: unpadded(account).to_vec(),
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
        let body = &record[RECORD_HEADER_LEN..];
        let template = u16::from_le_bytes([body[2], body[3]]);
        let schema = u16::from_le_bytes([body[4], body[5]]);
        let listed = self
            .topics
            .as_ref()
            .is_none_or(|t| t.contains(&(schema, template)));
        if schema == BUS_SCHEMA_ID && template == ADMIN_COMMAND_TEMPLATE_ID {
            return listed || self.targets_me(body);
        }
        listed
    }

    /// True when the AdminCommand `body` targets this node's account.
    fn targets_me(&self, body: &[u8]) -> bool {
        let block_length = u16::from_le_bytes([body[0], body[1]]) as usize;
        let end = MESSAGE_HEADER_LEN + ACCOUNT_LEN;
        // a block too short to hold the target is corrupt: no node's, so nobody's business
        if block_length < ACCOUNT_LEN || body.len() < end || self.account.is_empty() {
            return false;
        }
        unpadded(&body[MESSAGE_HEADER_LEN..end]) == self.account.as_slice()
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
            // the core hands out a type-3 record for each message it does not deliver itself
            // (control messages such as idle clock ticks, fragments before the last): dropped
            // here like any filtered message, but stream time moves on with it
            if kind != RECORD_MESSAGE && kind != RECORD_TIME {
                out.extend_from_slice(record);
                n += 1;
                continue;
            }
            let time_ns = u64::from_le_bytes(record[16..24].try_into().expect("8 bytes"));
            let slot = time_ns / self.grid_ns;
            let new_slot = self.last_slot.is_none_or(|s| slot > s);
            self.last_slot = Some(self.last_slot.map_or(slot, |s| s.max(slot)));
            if kind == RECORD_MESSAGE && self.wanted(record) {
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

/// The live topic filter for batches built elsewhere (`seqbus._core.TopicFilter`): the
/// offline replay passes an archive through it, so a replayed node sees exactly the records a
/// live node of the same class and account sees (topics, admin routing, time records).
#[pyclass(module = "seqbus._core", name = "TopicFilter")]
pub struct PyTopicFilter(Filter);

#[pymethods]
impl PyTopicFilter {
    #[new]
    #[pyo3(signature = (topics, account))]
    fn new(topics: Option<Vec<(u16, u16)>>, account: &str) -> Self {
        PyTopicFilter(Filter::new(topics, TIME_GRID_NS, account.as_bytes()))
    }

    /// What a node sees of `records` (records as the core delivers them: type 1 for an
    /// application message, type 3 for one it keeps to itself). DecodeError on bad framing.
    fn apply<'py>(&mut self, py: Python<'py>, records: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut at = 0;
        while at < records.len() {
            let len = records
                .get(at..at + 4)
                .map_or(0, |b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
            if len < RECORD_HEADER_LEN || at + len > records.len() {
                return Err(decode_error(
                    py,
                    "Record",
                    "length",
                    at,
                    format!("{len} at offset {at} of a {}-byte batch", records.len()),
                ));
            }
            at += len;
        }
        let mut out = Vec::with_capacity(records.len());
        self.0.apply(records, &mut out);
        Ok(PyBytes::new(py, &out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, schema: u16, template: u16, block: &[u8], time_ns: u64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(block.len() as u16).to_le_bytes());
        body.extend_from_slice(&template.to_le_bytes());
        body.extend_from_slice(&schema.to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(block);
        let mut r = vec![0u8; RECORD_HEADER_LEN];
        r[0..4].copy_from_slice(&((RECORD_HEADER_LEN + body.len()) as u32).to_le_bytes());
        r[4..6].copy_from_slice(&RECORD_MESSAGE.to_le_bytes());
        r[16..24].copy_from_slice(&time_ns.to_le_bytes());
        r[16 + 26] = kind;
        r[44..48].copy_from_slice(&(body.len() as u32).to_le_bytes());
        r.extend_from_slice(&body);
        r
    }

    fn admin(target: &[u8; 8], time_ns: u64) -> Vec<u8> {
        let mut block = target.to_vec();
        block.extend_from_slice(&7u64.to_le_bytes());
        record(
            KIND_APPLICATION,
            BUS_SCHEMA_ID,
            ADMIN_COMMAND_TEMPLATE_ID,
            &block,
            time_ns,
        )
    }

    /// A type-3 record of the core: a message it did not deliver (a control message).
    fn core_time(time_ns: u64) -> Vec<u8> {
        let mut r = vec![0u8; RECORD_HEADER_LEN];
        r[0..4].copy_from_slice(&(RECORD_HEADER_LEN as u32).to_le_bytes());
        r[4..6].copy_from_slice(&RECORD_TIME.to_le_bytes());
        r[16..24].copy_from_slice(&time_ns.to_le_bytes());
        r[16 + 26] = 2; // control
        r
    }

    #[test]
    fn control_messages_move_time_once_per_slot() {
        // idle clock ticks (control messages the core keeps to itself) are the only thing
        // that moves stream time when nothing else is sequenced
        let mut f = Filter::new(Some(vec![(7, 1)]), TIME_GRID_NS, b"ME");
        let mut raw = Vec::new();
        for t in [5_000_000, 5_000_001, 15_000_000, 25_000_000] {
            raw.extend_from_slice(&core_time(t));
        }
        let mut out = Vec::new();
        assert_eq!(f.apply(&raw, &mut out), 3);
        let times: Vec<u64> = out
            .chunks(RECORD_HEADER_LEN)
            .map(|r| u64::from_le_bytes(r[16..24].try_into().unwrap()))
            .collect();
        assert_eq!(times, [5_000_000, 15_000_000, 25_000_000]);
        assert_eq!((f.filtered, f.time_records), (4, 3));
    }

    #[test]
    fn admin_commands_follow_the_target_account_not_the_topics() {
        let mut f = Filter::new(Some(vec![(7, 1)]), TIME_GRID_NS, b"ME\0\0\0\0\0\0");
        let mine = admin(b"ME\0\0\0\0\0\0", 1);
        let spaced = admin(b"ME      ", 2);
        let other = admin(b"MD\0\0\0\0\0\0", 3);
        let prefix = admin(b"MEX\0\0\0\0\0", 4);
        let unlisted = record(KIND_APPLICATION, 7, 2, &[0; 8], 5);
        let mut raw = Vec::new();
        for r in [&mine, &spaced, &other, &prefix, &unlisted] {
            raw.extend_from_slice(r);
        }
        let mut out = Vec::new();
        f.apply(&raw, &mut out);
        let mut expected = mine.clone();
        expected.extend_from_slice(&spaced);
        assert_eq!(&out[..expected.len()], &expected[..]);
        assert_eq!(f.filtered, 3);
    }

    #[test]
    fn listing_the_admin_topic_passes_every_account() {
        let topics = vec![(BUS_SCHEMA_ID, ADMIN_COMMAND_TEMPLATE_ID)];
        let mut f = Filter::new(Some(topics), TIME_GRID_NS, b"ADMIN");
        let mut out = Vec::new();
        f.apply(&admin(b"ME\0\0\0\0\0\0", 1), &mut out);
        assert_eq!(f.filtered, 0);
    }

    #[test]
    fn a_control_message_never_passes_even_as_an_admin_command() {
        let mut f = Filter::new(Some(vec![]), TIME_GRID_NS, b"ME");
        let mut r = admin(b"ME\0\0\0\0\0\0", 1);
        r[16 + 26] = 2;
        let mut out = Vec::new();
        f.apply(&r, &mut out);
        assert_eq!(f.filtered, 1);
    }
}

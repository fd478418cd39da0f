//! The replica a member writes: what [`Member`](super::Member) needs from the journal (the
//! journal itself in the sequencer process, a simulated disk in `seqbus-sim`).

use crate::replayer::{Store, StoreError};

/// A member's replica of the stream: what [`Member`](super::Member) needs from the journal.
pub trait Log: Store {
    /// Appends `msg` under `seq` (= [`Store::next_seq`]).
    fn append(&mut self, seq: u64, msg: &[u8]) -> Result<(), StoreError>;
    /// Persists what was appended (per the journal's durability policy); an append is
    /// answered only after this.
    fn flush(&mut self) -> Result<(), StoreError>;
    /// Removes the entries from `seq` on, keeping them aside (never destroyed): a replica's
    /// suffix the leader does not hold. Only entries never published are ever removed.
    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError>;
    /// Persists the term and vote (before any message that depends on them is sent).
    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError>;
}

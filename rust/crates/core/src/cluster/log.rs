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
    /// Carries out [`Storage::Sync`](super::Storage)`{ upto }`: true when what was appended
    /// is durable on return ([`Log::flush`], the default); false when the sync goes on
    /// without the caller, whose I/O layer answers [`Member::handle_durable`]`(upto)` once
    /// it completed (the sequencer process with `sequencer.fsync = "batch"`).
    ///
    /// [`Member::handle_durable`]: super::Member::handle_durable
    fn sync(&mut self, upto: u64) -> Result<bool, StoreError> {
        let _ = upto;
        self.flush()?;
        Ok(true)
    }
    /// Removes the entries from `seq` on, keeping them aside (never destroyed): a replica's
    /// suffix the leader does not hold. Only entries never published are ever removed.
    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError>;
    /// Persists the term and vote (before any message that depends on them is sent).
    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError>;
}

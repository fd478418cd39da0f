//! The replica a member writes: what [`Member`](super::Member) needs from the journal, and a
//! log in memory for simulations.

use crate::replayer::{MemoryStore, Store, StoreError};

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

/// A [`Log`] in memory, for simulations: the entries, the vote, and what was discarded.
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub store: MemoryStore,
    pub term: u64,
    pub voted_for: u16,
    /// Every discarded suffix: (first sequence, messages).
    pub discarded: Vec<(u64, Vec<Vec<u8>>)>,
}

impl Store for MemoryLog {
    fn next_seq(&mut self) -> u64 {
        self.store.next_seq()
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        self.store.read(from, max, f)
    }
}

impl Log for MemoryLog {
    fn append(&mut self, seq: u64, msg: &[u8]) -> Result<(), StoreError> {
        if seq != self.store.next_seq() {
            return Err(StoreError(format!(
                "append of {seq} where {} is next",
                self.store.next_seq()
            )));
        }
        self.store.push(msg);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError> {
        let gone = self.store.split_off(seq);
        if !gone.is_empty() {
            self.discarded.push((seq, gone));
        }
        Ok(())
    }

    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError> {
        self.term = term;
        self.voted_for = voted_for;
        Ok(())
    }
}

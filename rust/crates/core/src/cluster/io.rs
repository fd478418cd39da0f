//! What a member hands its I/O layer and what it is told back. The member does no I/O: it
//! queues datagrams for the other members ([`Member::poll_transmit`]) and requests to its
//! replica ([`Member::poll_storage`]), and learns what became durable from
//! [`Member::handle_durable`].
//!
//! The I/O layer's rule, after every call into the member: carry out its storage requests in
//! order, then send its datagrams. So a term and vote are saved before the vote (or the
//! request for votes) that depends on them leaves, and a record is written before any
//! datagram naming it goes out. A [`Storage::Sync`] may complete later (on a sync thread, or a
//! simulated slow disk): the member acknowledges appends, and counts its own replica toward a
//! majority, only up to what it was told is durable. A request that fails stops the process
//! (fail-stop): the member is not driven again, and starts from its durable replica.
//!
//! [`carry_out`] carries each request out at once, and answers each sync that [`Log::sync`]
//! made durable before it returned.

use super::{Log, Member};
use crate::replayer::StoreError;

/// A request to a member's replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage<'a> {
    /// Append `msg` under `seq`, the replica's next sequence.
    Append { seq: u64, msg: &'a [u8] },
    /// Move the entries from `from` on aside (never destroyed): a suffix the leader does not
    /// hold. Only entries never published are ever removed.
    Discard { from: u64 },
    /// Save the term and vote durably, before the datagrams queued with this request leave.
    SaveVote { term: u64, voted_for: u16 },
    /// Make everything appended so far durable (per the journal's policy), then answer
    /// [`Member::handle_durable`]`(upto)`. Every sync is answered, in the order asked.
    Sync { upto: u64 },
}

/// A storage request as queued (an append's bytes are in the queue's buffer).
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Append(u64),
    Discard(u64),
    SaveVote(u64, u16),
    Sync(u64),
}

impl Op {
    pub(super) fn request(self, msg: &[u8]) -> Storage<'_> {
        match self {
            Op::Append(seq) => Storage::Append { seq, msg },
            Op::Discard(from) => Storage::Discard { from },
            Op::SaveVote(term, voted_for) => Storage::SaveVote { term, voted_for },
            Op::Sync(upto) => Storage::Sync { upto },
        }
    }
}

/// Carries out `m`'s storage requests on `log` at once and in order, answering each sync
/// that is durable when [`Log::sync`] returns (the simulator; the sequencer process, whose
/// journal answers a `batch` sync later, when its sync thread completed it). The caller then
/// sends `m`'s datagrams ([`Member::poll_transmit`]). On an error the rest is not carried out:
/// the process stops.
pub fn carry_out(m: &mut Member, log: &mut dyn Log) -> Result<(), StoreError> {
    while let Some(r) = m.poll_storage() {
        match r {
            Storage::Append { seq, msg } => log.append(seq, msg)?,
            Storage::Discard { from } => log.discard_from(from)?,
            Storage::SaveVote { term, voted_for } => log.save_vote(term, voted_for)?,
            Storage::Sync { upto } => {
                if log.sync(upto)? {
                    m.handle_durable(upto);
                }
            }
        }
    }
    Ok(())
}

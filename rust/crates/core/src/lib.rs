//! seqbus-core: the protocol state machines, without I/O.
//!
//! [`Sequencer`], [`Replayer`], [`Node`] and [`Member`] take datagrams and the current time
//! (ns) in and give datagrams, records and events out, so the whole protocol is tested
//! in-process with a simulated network and a virtual clock (the `seqbus-sim` crate). All four
//! are driven the same way: inputs through `handle_*(now, ..)`, outputs taken with `poll_*`
//! until None (`poll_transmit`: datagrams with where they go; `poll_publish`: downstream
//! packets; `poll_nak`: the answer to the upstream datagram just handled, for its sender;
//! [`Member::poll_storage`]: requests to the journal, answered by
//! [`Member::handle_durable`]; [`Member::poll_event`]), and `next_timeout` for when to call
//! again. Nothing calls back into the I/O layer. What a
//! node is handed of the stream — topics, admin routing, fragment reassembly, time records,
//! the batch layout, the deterministic clock and timers — is [`delivery`], the one model
//! every consumer calls: the node here, offline replay of an archive, the Python binding.
//! Sockets live in `seqbus-transport`.

pub mod cluster;
pub mod delivery;
pub mod detector;
pub mod node;
mod queue;
pub mod replayer;
pub mod rng;
pub mod rto;
pub mod sequencer;

pub use cluster::{Log, Member, MemberParams, Role, To};
pub use delivery::{Clock, Delivery, DeliveryStats};
pub use node::{Dest, Node, NodeError, NodeParams, NodeStats, SendError, Source, Start};
pub use replayer::{MemoryStore, Replayer, ReplayerStats, Store, StoreError};
pub use rng::Rng;
pub use sequencer::{
    AccountKeys, NakHoldoff, Recovered, Sequencer, SequencerParams, SequencerStats,
};

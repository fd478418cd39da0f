//! seqbus-core: the protocol state machines, without I/O.
//!
//! [`Sequencer`], [`Replayer`] and [`Node`] take datagrams and the current time (ns) in and
//! give datagrams, records and events out, so the whole protocol is tested in-process with a
//! simulated network and a virtual clock (`tests/sim.rs`). Sockets live in `seqbus-net`.

pub mod cluster;
pub mod node;
pub mod replayer;
pub mod rto;
pub mod sequencer;

pub use cluster::{Log, Member, MemberParams, MemoryLog, Role};
pub use node::{Dest, Node, NodeError, NodeParams, NodeStats, SendError, Source, Start};
pub use replayer::{MemoryStore, Replayer, ReplayerStats, Store, StoreError};
pub use sequencer::{Recovered, Sequencer, SequencerParams, SequencerStats};

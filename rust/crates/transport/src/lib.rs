//! seqbus-transport: the transports, each carrying the same sequenced stream behind the same
//! two traits ([`Publisher`] for the sequencer, [`Feed`] for a node or a dispatcher).
//!
//! * [`udp`]: MoldUDP64 over UDP multicast or unicast, and the batched socket calls
//!   (`sendmmsg`, `recvmmsg`) every UDP user of the workspace shares.
//! * [`soupbin`]: SoupBinTCP 4.0 packets and session state machines (no I/O).
//! * [`tcp`]: the SoupBinTCP server fed by the sequencer (rewind from the journal, bounded
//!   per-client buffers) and the reconnecting client a node uses; [`tls`]: the same over TLS
//!   (rustls), for links between sites.
//! * [`ring`]: a single-producer / multi-consumer broadcast ring over shared memory (a file
//!   under `/dev/shm`) or process memory; [`shm`] puts the per-host dispatcher and the node
//!   side on it, [`memory`] is the in-process transport.
//!
//! Every transport moves MoldUDP64 packets to the node side unchanged in meaning: a node's
//! protocol logic (`seqbus_core`) sees the same packets whatever carried them.

pub mod memory;
pub mod ring;
pub mod shm;
pub mod soupbin;
mod stream;
pub mod tcp;
pub mod tls;
pub mod udp;

pub use stream::{Feed, Publisher, Received};

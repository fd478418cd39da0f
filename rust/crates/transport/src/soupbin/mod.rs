//! SoupBinTCP 4.0: the packets ([`frame`], defined in `seqbus-wire` with the bus's other
//! formats) and the session state machines ([`session`]). Neither does I/O; [`crate::tcp`]
//! puts them on sockets.

pub use seqbus_wire::soupbin as frame;
pub mod session;

pub use frame::{LoginRequest, Packet, RejectReason, SoupError};
pub use session::{ClientEvent, ClientSession, ServerSession, ServerState, Timing};

//! SoupBinTCP 4.0: the packets ([`frame`]) and the session state machines ([`session`]).
//! Neither does I/O; [`crate::tcp`] puts them on sockets.

pub mod frame;
pub mod session;

pub use frame::{LoginRequest, Packet, RejectReason, SoupError};
pub use session::{ClientEvent, ClientSession, ServerSession, ServerState, Timing};

//! The two ends of the sequenced stream, whatever carries it: a [`Publisher`] is how the
//! sequencer hands out its MoldUDP64 packets, a [`Feed`] is where a node (or a dispatcher)
//! reads them. UDP ([`crate::udp`]), SoupBinTCP ([`crate::tcp`]), the shared-memory ring
//! ([`crate::shm`]) and the in-process bus ([`crate::memory`]) each implement both, so the
//! processes of `seqbus-net` hold a `Box<dyn Publisher>` or a `Box<dyn Feed>` and never ask
//! which transport it is.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

use seqbus_core::Store;

use crate::udp::Outbox;

/// One datagram of the stream as a feed received it.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The MoldUDP64 packet; None when it was cut short (longer than the receive slot): the
    /// caller counts it as malformed.
    pub data: Option<&'a [u8]>,
    /// The address it came from, where the transport knows one (UDP): in a cluster, which
    /// sequencer sent it decides whether it is taken (docs/ha.md, "Fencing").
    pub from: Option<SocketAddr>,
}

/// How the sequencer hands out its packets (persisted already, in order).
pub trait Publisher: Send + Sync {
    /// Publishes every packet of `packets`, in order, and empties it.
    fn publish(&mut self, now_ns: u64, packets: &mut Outbox) -> io::Result<()>;

    /// Serves the transport's clients (SoupBinTCP: logins, rewinds from `store`, writes) and
    /// hands the upstream packets that came over this transport to `upstream`. Returns the
    /// work done (0: idle).
    fn poll(
        &mut self,
        _now_ns: u64,
        _store: &mut dyn Store,
        _upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        0
    }

    /// The longest the sequencer may sleep (some transports have work pending, or input that
    /// no socket announces); None: no limit of its own.
    fn idle_limit(&self) -> Option<Duration> {
        None
    }

    /// Sockets to wait on besides the sequencer's own.
    fn fds(&self) -> Vec<RawFd> {
        Vec::new()
    }

    /// Returns once every packet handed to [`Publisher::publish`] went out (a publisher that
    /// sends on a thread of its own waits for it), with the error that stopped it, if any.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where a node or a dispatcher reads the stream.
pub trait Feed: Send + Sync {
    /// Hands waiting packets to `f`: at most `max` where the transport can bound it (UDP and
    /// the rings; SoupBinTCP hands what one read brought). Returns how many (0: none waiting).
    fn read(
        &mut self,
        now_ns: u64,
        max: usize,
        f: &mut dyn FnMut(Received<'_>),
    ) -> io::Result<usize>;

    /// Sends an upstream packet over this transport; false when it must go by UDP instead.
    fn send_upstream(&mut self, _now_ns: u64, _datagram: &[u8]) -> bool {
        false
    }

    /// How many times the transport's upstream path was logged in (SoupBinTCP); 0 where
    /// upstream packets do not travel with the stream. What was sent before the latest login
    /// may have been dropped (nothing is sent while logged out): send it again.
    fn upstream_logins(&self) -> u64 {
        0
    }

    /// The socket to wait on, if the transport has one.
    fn fd(&self) -> Option<RawFd> {
        None
    }

    /// Blocks until something may be waiting or `timeout` passes, for transports that have
    /// no socket to wait on (the rings); false when [`Feed::fd`] is the way to wait.
    fn wait(&self, _timeout: Duration) -> bool {
        false
    }

    /// True once the transport itself said the session ended (SoupBinTCP's end of session;
    /// on the other transports the MoldUDP64 end-of-session packet says it).
    fn is_ended(&self) -> bool {
        false
    }
}

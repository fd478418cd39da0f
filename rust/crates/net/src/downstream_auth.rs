//! Downstream authentication (docs/sites.md, "Downstream authentication"): with
//! `downstream.key`, every MoldUDP64 datagram the roles send over UDP — the stream, its
//! heartbeats and end of session, a bridge's republished stream, replayers' answers — carries
//! the MAC of `seqbus_wire::auth::seal_downstream`, and whatever reads them drops a datagram
//! whose MAC is missing or wrong before the protocol sees it, counts it and says so (one
//! record at once, then at most one per [`LOG_EVERY`] naming how many more).
//!
//! The MoldUDP64 parser and `seqbus-core` never see a MAC: a [`SealingPublisher`] adds it as
//! the packets leave, a [`VerifiedFeed`] (or [`Verifier::open`] for replayers' answers)
//! removes it as they arrive. Without the key none of this is in the path: the datagrams are
//! byte for byte those of a bus without it. SoupBinTCP, the shared-memory ring and the
//! in-process bus carry the packets without a MAC (TLS authenticates the first; the others
//! never leave the host).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::Store;
use seqbus_transport::udp::Outbox;
use seqbus_transport::{Feed, Publisher, Received};
use seqbus_wire::auth::{open_downstream, seal_downstream, Key};

/// After the first record of a dropped datagram, at most one more per this long.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(10);

/// Seals the packets of an [`Outbox`] with the key.
pub(crate) struct Sealer {
    key: Key,
    buf: Vec<u8>,
    sealed: Outbox,
}

impl Sealer {
    pub(crate) fn new(key: Key) -> Sealer {
        Sealer {
            key,
            buf: Vec::with_capacity(65_536),
            sealed: Outbox::default(),
        }
    }

    /// Replaces every packet of `packets` by the packet and its MAC.
    pub(crate) fn seal(&mut self, packets: &mut Outbox) {
        self.sealed.clear();
        for d in packets.datagrams() {
            self.buf.clear();
            seal_downstream(&self.key, d, &mut self.buf);
            self.sealed.push(&self.buf);
        }
        packets.clear();
        std::mem::swap(packets, &mut self.sealed);
    }
}

/// A sealer for `cfg`'s downstream key; None without one.
pub(crate) fn sealer(cfg: &seqbus_config::Config) -> Option<Sealer> {
    cfg.downstream_key().cloned().map(Sealer::new)
}

/// Seals `packets` when there is a sealer (answers of a replayer on a keyed bus).
pub(crate) fn seal(sealer: &mut Option<Sealer>, packets: &mut Outbox) {
    if let Some(s) = sealer.as_mut() {
        s.seal(packets);
    }
}

/// A UDP publisher whose every datagram carries its MAC.
pub(crate) struct SealingPublisher {
    inner: Box<dyn Publisher>,
    sealer: Sealer,
}

impl SealingPublisher {
    pub(crate) fn new(inner: Box<dyn Publisher>, key: Key) -> SealingPublisher {
        SealingPublisher {
            inner,
            sealer: Sealer::new(key),
        }
    }
}

impl Publisher for SealingPublisher {
    fn publish(&mut self, now_ns: u64, packets: &mut Outbox) -> io::Result<()> {
        self.sealer.seal(packets);
        self.inner.publish(now_ns, packets)
    }

    fn poll(
        &mut self,
        now_ns: u64,
        store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> usize {
        self.inner.poll(now_ns, store, upstream)
    }

    fn idle_limit(&self) -> Option<Duration> {
        self.inner.idle_limit()
    }

    fn fds(&self) -> Vec<RawFd> {
        self.inner.fds()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.inner.finish()
    }
}

/// Checks the MAC of downstream datagrams; counts and reports those without a valid one.
pub(crate) struct Verifier {
    key: Key,
    forged: Arc<AtomicU64>,
    /// Who reads, for the records ("node A/1", "dispatcher", ...), and the log target.
    who: String,
    target: &'static str,
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl Verifier {
    pub(crate) fn new(
        key: Key,
        forged: Arc<AtomicU64>,
        who: String,
        target: &'static str,
    ) -> Verifier {
        Verifier {
            key,
            forged,
            who,
            target,
            logged_at: None,
            unlogged: 0,
        }
    }

    /// The MoldUDP64 packet of `datagram`; None (counted, reported) when its MAC is missing
    /// or wrong.
    pub(crate) fn open<'a>(&mut self, datagram: &'a [u8]) -> Option<&'a [u8]> {
        let p = open_downstream(&self.key, datagram);
        if p.is_none() {
            self.dropped(datagram.len());
        }
        p
    }

    fn dropped(&mut self, len: usize) {
        self.forged.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        if self.logged_at.is_some_and(|t| now - t < LOG_EVERY) {
            self.unlogged += 1;
            return;
        }
        let more = match self.unlogged {
            0 => String::new(),
            n => format!(" ({n} more since the last such record)"),
        };
        crate::watch::record(
            log::Level::Warn,
            self.target,
            format!(
                "{}: dropped a downstream datagram of {len} bytes without a valid MAC of \
                 downstream.key: forged, altered, or from a sender without the key{more}; \
                 {} so far (downstream_forged)",
                self.who,
                self.forged.load(Ordering::Relaxed)
            ),
        );
        self.logged_at = Some(now);
        self.unlogged = 0;
    }
}

/// A feed whose datagrams are checked by a [`Verifier`] and handed on without their MAC.
pub(crate) struct VerifiedFeed {
    inner: Box<dyn Feed>,
    verifier: Verifier,
}

impl VerifiedFeed {
    pub(crate) fn new(inner: Box<dyn Feed>, verifier: Verifier) -> VerifiedFeed {
        VerifiedFeed { inner, verifier }
    }
}

impl Feed for VerifiedFeed {
    fn read(
        &mut self,
        now_ns: u64,
        max: usize,
        f: &mut dyn FnMut(Received<'_>),
    ) -> io::Result<usize> {
        let v = &mut self.verifier;
        self.inner.read(now_ns, max, &mut |r| match r.data {
            Some(d) => {
                if let Some(p) = v.open(d) {
                    f(Received {
                        data: Some(p),
                        from: r.from,
                    })
                }
            }
            None => f(r),
        })
    }

    fn send_upstream(&mut self, now_ns: u64, datagram: &[u8]) -> bool {
        self.inner.send_upstream(now_ns, datagram)
    }

    fn upstream_logins(&self) -> u64 {
        self.inner.upstream_logins()
    }

    fn fd(&self) -> Option<RawFd> {
        self.inner.fd()
    }

    fn wait(&self, timeout: Duration) -> bool {
        self.inner.wait(timeout)
    }

    fn is_ended(&self) -> bool {
        self.inner.is_ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealer_seals_every_packet_and_a_verifier_opens_only_those() {
        let key = Key::new([9; 32]);
        let mut out = Outbox::default();
        out.push(b"first packet");
        out.push(b"second");
        Sealer::new(key.clone()).seal(&mut out);
        let sealed: Vec<Vec<u8>> = out.datagrams().map(|d| d.to_vec()).collect();
        assert_eq!(sealed.len(), 2);
        let forged = Arc::new(AtomicU64::new(0));
        let mut v = Verifier::new(key, forged.clone(), "test".into(), "seqbus::node");
        assert_eq!(v.open(&sealed[0]), Some(&b"first packet"[..]));
        assert_eq!(v.open(&sealed[1]), Some(&b"second"[..]));
        assert_eq!(v.open(b"second"), None, "no MAC");
        let mut altered = sealed[1].clone();
        altered[0] ^= 1;
        assert_eq!(v.open(&altered), None);
        assert_eq!(forged.load(Ordering::Relaxed), 2);
        assert_eq!(
            v.unlogged, 1,
            "the second drop within LOG_EVERY is not logged"
        );
    }
}

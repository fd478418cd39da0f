//! The replayer process loop: request socket → `seqbus_core::Replayer` over a journal →
//! answers sent unicast to the requester.

use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::{Replayer, Store, StoreError};
use seqbus_journal::JournalReader;
use socket2::Socket;

use crate::downstream_auth::Sealer;
use crate::idle::{IdleStrategy, Idler};
use crate::{io_error, Error};
use seqbus_config::Config;
use seqbus_transport::udp::{self, Outbox};

/// Requests one `recvmmsg` takes.
const REQUEST_SLOTS: usize = 16;

/// A journal served up to a limit: a cluster member's replayer serves only what the member
/// knows a majority holds (what was or may be published), never a suffix that may yet be
/// moved aside.
struct Limited {
    reader: JournalReader,
    upto: Option<Arc<AtomicU64>>,
}

impl Limited {
    fn limit(&self) -> u64 {
        self.upto
            .as_ref()
            .map_or(u64::MAX, |u| u.load(Ordering::Acquire))
    }
}

impl Store for Limited {
    fn next_seq(&mut self) -> u64 {
        Store::next_seq(&mut self.reader).min(self.limit().saturating_add(1))
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        let limit = self.limit();
        if from > limit {
            return Ok(0);
        }
        let max = max.min((limit - from).saturating_add(1).min(usize::MAX as u64) as usize);
        Store::read(&mut self.reader, from, max, f)
    }
}

/// Paces answers: a token bucket of `rate` bytes per second holding at most one millisecond's
/// worth (or one datagram).
pub(crate) struct Pacer {
    rate: f64,
    tokens: f64,
    burst: f64,
    at: Instant,
}

impl Pacer {
    /// None when `mb_per_s` is 0 (unpaced).
    pub(crate) fn new(mb_per_s: u64, max_datagram: usize) -> Option<Pacer> {
        (mb_per_s > 0).then(|| {
            let rate = mb_per_s as f64 * 1e6;
            let burst = (rate / 1000.0).max(max_datagram as f64);
            Pacer {
                rate,
                tokens: burst,
                burst,
                at: Instant::now(),
            }
        })
    }

    /// Waits until `bytes` may leave, then takes them from the bucket.
    pub(crate) fn take(&mut self, bytes: usize) {
        let now = Instant::now();
        self.tokens = (self.tokens + (now - self.at).as_secs_f64() * self.rate).min(self.burst);
        self.at = now;
        let need = bytes as f64 - self.tokens;
        if need > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(need / self.rate));
            self.at = Instant::now();
            self.tokens = 0.0;
        } else {
            self.tokens -= bytes as f64;
        }
    }
}

/// Answers one request datagram from `store`: the answer packets into `outbox` (none for a
/// malformed request or another session's).
pub(crate) fn serve_request(
    replayer: &mut Replayer,
    request: &[u8],
    store: &mut dyn Store,
    outbox: &mut Outbox,
) -> Result<(), StoreError> {
    replayer.handle_request(request, store)?;
    while let Some(p) = replayer.poll_transmit() {
        outbox.push(p);
    }
    Ok(())
}

/// Sends the answers in `outbox` to `to`, paced, each with its MAC when the bus has a
/// downstream key (`sealer`); a requester that is gone is its own problem.
pub(crate) fn answer(
    socket: &Socket,
    outbox: &mut Outbox,
    to: &socket2::SockAddr,
    pacer: &mut Option<Pacer>,
    sealer: &mut Option<Sealer>,
) {
    crate::downstream_auth::seal(sealer, outbox);
    if let Some(p) = pacer.as_mut() {
        for d in outbox.datagrams() {
            p.take(d.len());
            let _ = socket.send_to(d, to);
        }
        outbox.clear();
    } else if outbox.send_to(socket, to).is_err() {
        outbox.clear();
    }
}

/// A bound replayer, ready to serve.
pub(crate) struct Serving {
    socket: Socket,
    journal: Limited,
    replayer: Replayer,
    announcer: Option<crate::discovery::Announcer>,
    pacer: Option<Pacer>,
    /// `replayer.tcp_listen`: SoupBinTCP clients, whose commands go to `sequencers`.
    front: Option<crate::sites::TcpFront>,
    sequencers: Vec<socket2::SockAddr>,
    sealer: Option<Sealer>,
}

impl Serving {
    /// Binds `[replayer].listen` and opens the journal in `dir` (created by the sequencer),
    /// served up to `upto` when given.
    pub(crate) fn bind(
        cfg: &Config,
        dir: &Path,
        upto: Option<Arc<AtomicU64>>,
    ) -> Result<Serving, Error> {
        let r = &cfg.replayer;
        let socket = udp::bind(r.listen, 4 << 20)
            .map_err(io_error(format!("replayer.listen {}: bind", r.listen)))?;
        udp::set_sndbuf(&socket, 16 << 20);
        let reader = JournalReader::open(dir, cfg.session().0)?;
        let mut journal = Limited { reader, upto };
        let front = crate::sites::TcpFront::bind(cfg, Store::next_seq(&mut journal))?;
        replayer_log(format!(
            "replayer of session {}: serving gap fills and rewinds on {} from the journal {}{}",
            cfg.bus.session,
            r.listen,
            dir.display(),
            r.tcp_listen
                .map_or(String::new(), |a| format!(", SoupBinTCP on {a}"))
        ));
        Ok(Serving {
            socket,
            front,
            // it cannot tell the leader: every member's upstream (the others drop the copy)
            sequencers: cfg.members().iter().map(|m| m.upstream.into()).collect(),
            journal,
            replayer: Replayer::new(
                cfg.session(),
                cfg.replay_max_packet(),
                r.max_messages_per_request,
            ),
            sealer: crate::downstream_auth::sealer(cfg),
            announcer: crate::discovery::Announcer::open(cfg, r.listen)?,
            pacer: Pacer::new(r.pace_mb_per_s, r.max_packet),
        })
    }

    pub(crate) fn run(mut self, stop: &AtomicBool) -> Result<(), Error> {
        self.serve(stop)?;
        replayer_log(format!(
            "replayer: stopped (its journal holds messages up to {})",
            Store::next_seq(&mut self.journal).saturating_sub(1)
        ));
        Ok(())
    }

    fn serve(&mut self, stop: &AtomicBool) -> Result<(), Error> {
        let mut rx = udp::RecvBatch::new(REQUEST_SLOTS, 2048);
        let mut outbox = Outbox::default();
        let mut idler = Idler::new(IdleStrategy::Block);
        let fds = [self.socket.as_raw_fd()];
        while !stop.load(Ordering::Relaxed) {
            if let Some(a) = self.announcer.as_mut() {
                let next = Store::next_seq(&mut self.journal);
                a.tick(next);
            }
            let n = rx.recv(&self.socket).map_err(io_error("replayer: recv"))?;
            let mut work = n;
            if let Some(f) = self.front.as_mut() {
                let (socket, targets) = (&self.socket, &self.sequencers);
                work += f.pump(crate::now_ns(), &mut self.journal, &mut |d| {
                    for t in targets {
                        let _ = socket.send_to(d, t);
                    }
                })?;
            }
            if work == 0 {
                // keep the index up with the journal while idle, so the first request after
                // a burst of writes does not wait for the new records to be scanned (a
                // damaged journal stops the replayer, naming file and offset)
                self.journal.reader.refresh()?;
                let mut until = Instant::now() + Duration::from_millis(50);
                if let Some(a) = &self.announcer {
                    until = until.min(a.due());
                }
                match &self.front {
                    Some(f) => {
                        // new records are published to the TCP clients when the loop wakes
                        until = until.min(
                            Instant::now() + f.idle_limit().unwrap_or(Duration::from_millis(1)),
                        );
                        let all: Vec<RawFd> = fds.iter().copied().chain(f.fds()).collect();
                        idler.idle(&all, until);
                    }
                    None => idler.idle(&fds, until),
                }
                continue;
            }
            for i in 0..n {
                let Some(d) = rx.get(i) else { continue };
                serve_request(&mut self.replayer, d, &mut self.journal, &mut outbox)?;
                if !outbox.is_empty() {
                    answer(
                        &self.socket,
                        &mut outbox,
                        &rx.from(i),
                        &mut self.pacer,
                        &mut self.sealer,
                    );
                }
            }
        }
        Ok(())
    }
}

/// Runs a standalone replayer serving `[replayer]` until `stop` is set: from
/// `replayer.journal_dir` (default: the sequencer's journal), or, with `replayer.follow`,
/// from a journal of its own that it fills by following the downstream feed.
pub fn run_replayer(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    if cfg.replayer.follow {
        run_follower(cfg, &stop)
    } else {
        Serving::bind(cfg, &cfg.replayer_journal_dir(), None)?.run(&stop)
    }
}

/// A record of the replayer (`seqbus.replayer` in Python).
fn replayer_log(text: String) {
    crate::watch::record(log::Level::Info, "seqbus::replayer", text);
}

/// Where a following replayer reads the stream: the bus's downstream feed (a node of its
/// own, in raw mode) or, a tier below them, other replayers' SoupBinTCP servers.
enum Source {
    Feed(Box<crate::NodeClient>),
    Tcp(crate::sites::Channels),
}

/// A replayer that follows the stream into its own journal and serves requests (and, with
/// `replayer.tcp_listen`, SoupBinTCP logins) from it; its own gaps are filled from
/// `replayer.sources`. With `replayer.follow_tcp` it reads other replayers instead of the
/// downstream feed (docs/sites.md, "Tiered replayers").
pub(crate) fn run_follower(cfg: &Config, stop: &AtomicBool) -> Result<(), Error> {
    use seqbus_core::node::{RAW_RECORD_HEADER_LEN, RECORD_MESSAGE};
    use seqbus_core::Start;
    use seqbus_journal::Journal;

    let r = &cfg.replayer;
    let mut journal = Journal::open(
        &cfg.replayer_journal_dir(),
        cfg.session().0,
        cfg.sequencer.segment_size,
    )?;
    let listen = udp::bind(r.listen, 4 << 20)
        .map_err(io_error(format!("replayer.listen {}: bind", r.listen)))?;
    udp::set_sndbuf(&listen, 16 << 20);
    let sources: Vec<std::net::SocketAddr> = if r.sources.is_empty() {
        cfg.node
            .replayers
            .iter()
            .copied()
            .filter(|a| *a != r.listen)
            .collect()
    } else {
        r.sources.clone()
    };
    let mut pacer = Pacer::new(r.pace_mb_per_s, r.max_packet);
    let mut announcer = crate::discovery::Announcer::open(cfg, r.listen)?;
    let mut front = crate::sites::TcpFront::bind(cfg, journal.next_seq())?;
    let mut source = if r.follow_tcp.is_empty() {
        let mut follow_cfg = cfg.clone();
        follow_cfg.node.replayers = sources;
        if let Some(c) = follow_cfg.cluster.as_mut() {
            // its own listen address is no source of its own gaps
            for m in &mut c.members {
                if m.replayer == Some(r.listen) {
                    m.replayer = None;
                }
            }
        }
        let mut opts = crate::NodeOptions::new("REPLAYER", 0, Start::From(journal.next_seq()));
        opts.idle = Some(IdleStrategy::Block);
        opts.receive_only = true;
        opts.name = Some("replayer following the stream".into());
        opts.listen = r.follow_listen;
        let mut feed = crate::NodeClient::connect(&follow_cfg, opts)?;
        feed.set_raw();
        Source::Feed(Box::new(feed))
    } else {
        Source::Tcp(crate::sites::Channels::open(
            cfg,
            &r.follow_tcp,
            journal.next_seq(),
            "replayer.follow_tcp",
        )?)
    };
    replayer_log(format!(
        "replayer of session {}: following the stream into the journal {} from message {}; \
         serving gap fills and rewinds on {}",
        cfg.bus.session,
        cfg.replayer_journal_dir().display(),
        journal.next_seq(),
        r.listen
    ));
    let mut replayer = Replayer::new(
        cfg.session(),
        cfg.replay_max_packet(),
        r.max_messages_per_request,
    );
    let mut sealer = crate::downstream_auth::sealer(cfg);
    let mut buf = vec![0u8; 65_536];
    let mut records = Vec::with_capacity(1 << 20);
    let mut outbox = Outbox::default();
    let mut idler = Idler::new(IdleStrategy::Block);
    let mut fds: Vec<RawFd> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Some(a) = announcer.as_mut() {
            a.tick(journal.next_seq());
        }
        let now = crate::now_ns();
        let mut work = 0;
        match &mut source {
            Source::Feed(feed) => {
                fds.clear();
                fds.push(listen.as_raw_fd());
                if let Some(f) = &front {
                    fds.extend(f.fds());
                }
                feed.set_extra_fds(&fds);
                records.clear();
                let timeout = match front.as_ref().and_then(|f| f.idle_limit()) {
                    Some(l) => l,
                    None => Duration::from_millis(5),
                };
                work += feed.poll(&mut records, 8192, timeout)?;
                let mut at = 0;
                while at < records.len() {
                    let len =
                        u32::from_le_bytes(records[at..at + 4].try_into().expect("4")) as usize;
                    let ty = u16::from_le_bytes(records[at + 4..at + 6].try_into().expect("2"));
                    if ty == RECORD_MESSAGE {
                        let seq =
                            u64::from_le_bytes(records[at + 8..at + 16].try_into().expect("8"));
                        journal.append(seq, &records[at + RAW_RECORD_HEADER_LEN..at + len])?;
                    }
                    at += len;
                }
            }
            Source::Tcp(links) => {
                let mut next = journal.next_seq();
                work += links.poll(now, &mut next, &mut |seq, m| {
                    journal.append(seq, m).map_err(Error::from)
                })?;
            }
        }
        journal.flush()?;
        while let Some((n, from)) =
            udp::try_recv(&listen, &mut buf).map_err(io_error("replayer: recv"))?
        {
            serve_request(&mut replayer, &buf[..n], &mut journal, &mut outbox)?;
            if !outbox.is_empty() {
                answer(&listen, &mut outbox, &from, &mut pacer, &mut sealer);
            }
            work += 1;
        }
        if let Some(f) = front.as_mut() {
            // commands of its SoupBinTCP clients go on towards the sequencer
            work += f.pump(crate::now_ns(), &mut journal, &mut |d| match &mut source {
                Source::Feed(feed) => feed.forward_upstream(d),
                Source::Tcp(links) => {
                    links.send_upstream(crate::now_ns(), d);
                }
            })?;
        }
        if work > 0 {
            idler.reset();
            continue;
        }
        if let Source::Tcp(links) = &source {
            fds.clear();
            fds.push(listen.as_raw_fd());
            fds.extend(links.fds());
            let until = Instant::now() + Duration::from_millis(5);
            crate::sites::idle(
                &mut idler,
                &mut fds,
                until,
                front.as_ref(),
                announcer.as_ref(),
            );
        }
    }
    journal.flush()?;
    journal.sync()?;
    replayer_log(format!(
        "replayer: stopped at message {}",
        journal.next_seq().saturating_sub(1)
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pacer_holds_answers_to_its_rate() {
        // 1 MB/s with a 1000-byte burst: 21 datagrams of 1000 bytes take at least 20 ms
        let mut p = Pacer::new(1, 1000).unwrap();
        let t = Instant::now();
        for _ in 0..21 {
            p.take(1000);
        }
        assert!(
            t.elapsed() >= Duration::from_millis(19),
            "{:?}",
            t.elapsed()
        );
        assert!(Pacer::new(0, 1000).is_none(), "0 = unpaced");
    }
}

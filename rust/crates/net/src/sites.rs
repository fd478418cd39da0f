//! Beyond one LAN (docs/sites.md): a replayer's SoupBinTCP server ([`TcpFront`]), the
//! redundant SoupBinTCP links a bridge or a tiered replayer reads another replayer through
//! ([`Channels`]), and the bridge itself ([`run_bridge`]), which joins this site to a bus at
//! another one: it logs in from the last message its own journal holds, republishes the stream
//! unchanged on this site's multicast, serves this site's gap fills and rewinds from its
//! journal, and carries this site's commands back.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::{AccountKeys, NakHoldoff, Replayer, Store};
use seqbus_journal::Journal;
use seqbus_transport::tcp::{self, TcpClient, TcpServer};
use seqbus_transport::tls;
use seqbus_transport::udp::{self, Outbox};
use seqbus_wire::mold::{self, MoldPacket, MoldWriter, PacketKind};
use seqbus_wire::upstream::{Nak, TYPE_COMMANDS};
use seqbus_wire::{Account, UpstreamPacket};

use crate::idle::Idler;
use crate::transports::{client_config, credentials, timing};
use crate::{io_error, now_ns, Error};
use seqbus_config::Config;

/// A replayer's SoupBinTCP server (`replayer.tcp_listen`): logins rewind from the store, then
/// get each message as it reaches the store; clients' unsequenced data are upstream packets.
pub(crate) struct TcpFront {
    server: TcpServer,
}

impl TcpFront {
    /// Binds `replayer.tcp_listen`, when configured; `next_seq`: one past the store's end.
    pub(crate) fn bind(cfg: &Config, next_seq: u64) -> Result<Option<TcpFront>, Error> {
        let Some(listen) = cfg.replayer.tcp_listen else {
            return Ok(None);
        };
        let tls = match cfg
            .tls
            .as_ref()
            .and_then(|t| t.cert.as_ref().zip(t.key.as_ref()))
        {
            Some((cert, key)) => {
                Some(tls::server_config(cert, key).map_err(io_error("tls.cert/tls.key"))?)
            }
            None => None,
        };
        let t = &cfg.tcp;
        let mut server = TcpServer::bind(
            tcp::ServerConfig {
                listen,
                session: cfg.session(),
                credentials: credentials(t),
                timing: timing(t),
                client_buffer: t.client_buffer,
                max_packet: 65_535,
                max_clients: t.max_clients,
                tls,
            },
            next_seq,
        )
        .map_err(io_error(format!("replayer.tcp_listen {listen}: bind")))?;
        server.set_log(crate::transports::tcp_log(format!(
            "SoupBinTCP server at {listen}"
        )));
        Ok(Some(TcpFront { server }))
    }

    /// Publishes what `store` holds beyond what was published, then serves the clients;
    /// upstream packets they sent go to `upstream`. Returns the work done.
    pub(crate) fn pump(
        &mut self,
        now: u64,
        store: &mut dyn Store,
        upstream: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, Error> {
        let end = store.next_seq();
        let mut work = 0;
        while self.server.next_seq() < end {
            let server = &mut self.server;
            let from = server.next_seq();
            let n = store
                .read(from, 4096, &mut |seq, m| {
                    server.publish(now, seq, m);
                    true
                })
                .map_err(Error::Store)?;
            if n == 0 {
                break;
            }
            work += n;
        }
        if work > 0 {
            self.server.flush();
        }
        Ok(work + self.server.poll(now, store, upstream))
    }

    pub(crate) fn fds(&self) -> Vec<RawFd> {
        self.server.raw_fds()
    }

    /// The longest the loop may sleep (clients with output pending).
    pub(crate) fn idle_limit(&self) -> Option<Duration> {
        self.server
            .has_pending_output()
            .then_some(Duration::from_micros(200))
    }
}

/// Sleeps with `idler` on `fds` and the TCP front's, until `until`, the front's idle limit or
/// the announcer's next announcement, whichever is first.
pub(crate) fn idle(
    idler: &mut Idler,
    fds: &mut Vec<RawFd>,
    mut until: Instant,
    front: Option<&TcpFront>,
    announcer: Option<&crate::discovery::Announcer>,
) {
    if let Some(f) = front {
        fds.extend(f.fds());
        if let Some(l) = f.idle_limit() {
            until = until.min(Instant::now() + l);
        }
    }
    if let Some(a) = announcer {
        until = until.min(a.due());
    }
    idler.idle(fds, until);
}

/// Takes one message of the stream (into a journal): the error stops the caller.
pub(crate) type Take<'a> = dyn FnMut(u64, &[u8]) -> Result<(), Error> + 'a;

/// Counters of a bridge's (or a tiered replayer's) links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Messages each channel delivered first (the copy that was taken).
    pub first: Vec<u64>,
    /// Messages each channel delivered that another channel had delivered already.
    pub later: Vec<u64>,
    /// Upstream packets sent over each channel.
    pub upstream: Vec<u64>,
}

/// SoupBinTCP links to replayers at another site (or a tier above): each a reconnecting
/// client; every message is taken from whichever link brings it first, and a link that
/// reconnects logs in from the end of what was taken.
pub(crate) struct Channels {
    clients: Vec<TcpClient>,
    stats: ChannelStats,
    ended: Option<u64>,
}

impl Channels {
    /// Links to `servers`, logging in from `next_seq`. `key` names the setting in errors.
    pub(crate) fn open(
        cfg: &Config,
        servers: &[SocketAddr],
        next_seq: u64,
        key: &str,
    ) -> Result<Channels, Error> {
        let mut clients = Vec::new();
        for &server in servers {
            let tls = match cfg.tls.as_ref().and_then(|t| t.ca.as_ref()) {
                Some(ca) => Some(
                    tls::client_config(
                        ca,
                        cfg.tls.as_ref().and_then(|t| t.server_name.as_deref()),
                        server.ip(),
                    )
                    .map_err(io_error("tls.ca"))?,
                ),
                None => None,
            };
            let mut c = TcpClient::new(client_config(cfg, server, tls), next_seq).map_err(|e| {
                Error::Option {
                    name: "tcp",
                    message: format!("{key} {server}: {e}"),
                }
            })?;
            // its lines name the server
            c.set_log(crate::transports::tcp_log(format!("{key} link")));
            clients.push(c);
        }
        let n = clients.len();
        Ok(Channels {
            clients,
            stats: ChannelStats {
                first: vec![0; n],
                later: vec![0; n],
                upstream: vec![0; n],
            },
            ended: None,
        })
    }

    /// Reads every link; hands each message numbered `*next` to `take` (which advances
    /// `*next`), and drops what another link brought first. Returns the messages taken.
    pub(crate) fn poll(
        &mut self,
        now: u64,
        next: &mut u64,
        take: &mut Take<'_>,
    ) -> Result<usize, Error> {
        let mut taken = 0;
        let mut failed = None;
        for (i, c) in self.clients.iter_mut().enumerate() {
            c.resume_from(*next);
            let stats = &mut self.stats;
            let ended = &mut self.ended;
            let r = c.poll(now, &mut |p| {
                let Ok(p) = MoldPacket::parse(p) else { return };
                match p.kind() {
                    PacketKind::Messages => {
                        for (seq, m) in p.messages() {
                            if seq < *next {
                                stats.later[i] += 1;
                                continue;
                            }
                            debug_assert_eq!(seq, *next, "a link never skips a message");
                            if seq != *next || failed.is_some() {
                                continue;
                            }
                            match take(seq, m) {
                                Ok(()) => {
                                    *next += 1;
                                    taken += 1;
                                    stats.first[i] += 1;
                                }
                                Err(e) => failed = Some(e),
                            }
                        }
                    }
                    PacketKind::EndOfSession => *ended = Some(p.sequence()),
                    PacketKind::Heartbeat => {}
                }
            });
            if let Err(e) = r {
                return Err(Error::Io {
                    what: format!("link {}", c.server()),
                    source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, e),
                });
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(taken),
        }
    }

    /// Sends an upstream packet over every logged-in link (the sequencer keeps the first copy
    /// of each command); false when no link is up (the sender retries).
    pub(crate) fn send_upstream(&mut self, now: u64, datagram: &[u8]) -> bool {
        let mut any = false;
        for (i, c) in self.clients.iter_mut().enumerate() {
            if c.send_upstream(now, datagram) {
                self.stats.upstream[i] += 1;
                any = true;
            }
        }
        any
    }

    pub(crate) fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.clients.iter().filter_map(TcpClient::raw_fd)
    }

    /// The end of session the other site announced, once every message before it was taken.
    pub(crate) fn ended(&self, next: u64) -> Option<u64> {
        self.ended.filter(|&e| next >= e)
    }

    pub(crate) fn stats(&self) -> &ChannelStats {
        &self.stats
    }
}

/// MoldUDP64 heartbeats of a republished stream: soon after data, then doubling to the
/// configured period (the sequencer's policy, `sequencer.tail_heartbeat_us`).
struct Heartbeats {
    tail_ns: u64,
    max_ns: u64,
    interval: u64,
    last: u64,
}

impl Heartbeats {
    fn sent_data(&mut self, now: u64) {
        self.last = now;
        self.interval = self.tail_ns;
    }

    fn due(&mut self, now: u64) -> bool {
        if now.saturating_sub(self.last) >= self.interval {
            self.last = now;
            self.interval = (self.interval * 2).min(self.max_ns);
            true
        } else {
            false
        }
    }

    fn next(&self) -> u64 {
        self.last + self.interval
    }
}

/// Runs this site's end of a bridge (`[bridge]`) until `stop` is set or the session ends.
/// Gaps in this site's commands, seen as they pass the bridge. The sequencer's NAKs do not cross
/// a link (SoupBinTCP has no message for them), so the bridge asks for what it saw missing
/// itself, as the sequencer would: a command lost on this site's LAN then costs its sender a
/// round trip to the bridge, not a retransmission timeout. The bridge keeps no commands: it
/// knows of each account only the command after the last it passed on (from the first packet
/// it sees of the account), NAKs a packet whose commands skip past it, at most once per
/// account per holdoff, and leaves anything else (a resend lost again, a NAK lost) to the
/// sender's timer, as before. A NAK the sequencer would not have sent (the commands came
/// another way) only makes the sender resend what it still holds, which the sequencer drops
/// as duplicates. With `[auth]`, only a packet with its account's MAC is NAKed, and the NAK
/// carries that MAC (an account the bridge has no key for gets none).
pub(crate) struct GapWatch {
    pacing: NakHoldoff,
    keys: Option<AccountKeys>,
    expected: HashMap<Account, u64>,
    /// NAKs sent.
    pub(crate) naks: u64,
}

impl GapWatch {
    /// `holdoff_ns` 0: no NAKs.
    pub(crate) fn new(holdoff_ns: u64, keys: Option<AccountKeys>) -> GapWatch {
        GapWatch {
            pacing: NakHoldoff::new(holdoff_ns),
            keys,
            expected: HashMap::new(),
            naks: 0,
        }
    }

    /// Notes a packet on its way to the sequencer; the NAK to send its sender, if it shows a
    /// gap.
    pub(crate) fn observe(&mut self, now_ns: u64, p: &UpstreamPacket<'_>) -> Option<Vec<u8>> {
        if !self.pacing.enabled() || p.kind() != TYPE_COMMANDS {
            return None;
        }
        let account = p.account();
        let key = match &self.keys {
            None => None,
            Some(keys) => match keys.get(&account) {
                Some(k) if p.verify(k) => Some(k),
                _ => return None,
            },
        };
        let mut gap = None;
        // the first packet of an account says where it stands, nothing about what is missing
        let expected = self.expected.entry(account).or_insert(0);
        let known = *expected != 0;
        for c in p.commands() {
            let seq = c.command_seq;
            if known && seq > *expected && gap.is_none() {
                gap = Some((*expected, seq - *expected));
            }
            *expected = (*expected).max(seq + 1);
        }
        let (from, missing) = gap?;
        if !self.pacing.allow(account, now_ns) {
            return None;
        }
        self.naks += 1;
        let nak = Nak {
            session: p.session(),
            account,
            instance: p.instance(),
            expected: from,
            missing: missing.min(u64::from(u16::MAX)) as u16,
            answers: p.nonce(),
        };
        Some(nak.datagram(key))
    }
}

/// A record of the bridge (`seqbus.bridge` in Python).
fn bridge_log(text: String) {
    crate::watch::record(log::Level::Info, "seqbus::bridge", text);
}

pub fn run_bridge(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    let Some(b) = &cfg.bridge else {
        return Err(Error::Option {
            name: "bridge",
            message: "the configuration has no [bridge]".into(),
        });
    };
    let session = cfg.session();
    let mut journal = Journal::open(&b.journal_dir, session.0, cfg.sequencer.segment_size)?;
    let start = journal.next_seq();
    let upstream =
        udp::bind(cfg.sequencer.upstream, cfg.sequencer.recv_buffer).map_err(io_error(format!(
            "sequencer.upstream {} (the bridge's): bind",
            cfg.sequencer.upstream
        )))?;
    let r = &cfg.replayer;
    let requests = udp::bind(r.listen, 4 << 20)
        .map_err(io_error(format!("replayer.listen {}: bind", r.listen)))?;
    udp::set_sndbuf(&requests, 16 << 20);
    let mut announcer = crate::discovery::Announcer::open(cfg, r.listen)?;
    let mut pacer = crate::replayer::Pacer::new(r.pace_mb_per_s, r.max_packet);
    let mut front = TcpFront::bind(cfg, start)?;
    let mut down = crate::transports::publisher(cfg, start, None)?;
    let mut channels = Channels::open(cfg, &b.channels, start, "bridge.channels")?;
    bridge_log(format!(
        "bridge: session {}, journal {} from message {start}; links {}; republishing on {}; \
         commands in on {}, gap fills on {}",
        session.as_str(),
        b.journal_dir.display(),
        b.channels
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        crate::transports::publishing(cfg),
        cfg.sequencer.upstream,
        r.listen
    ));
    // with a downstream key, what it republishes (its publisher) and its answers carry a MAC
    let mut replayer = Replayer::new(session, cfg.replay_max_packet(), r.max_messages_per_request);
    let mut sealer = crate::downstream_auth::sealer(cfg);
    let mut writer = MoldWriter::new(cfg.mold_max_packet());
    let mut outbox = Outbox::default();
    let mut answers = Outbox::default();
    let mut rx = udp::RecvBatch::new(64, 65_536);
    let mut buf = vec![0u8; 65_536];
    let mut idler = Idler::new(cfg.node.idle);
    let mut hb = Heartbeats {
        tail_ns: (cfg.sequencer.tail_heartbeat_us * 1000).max(1),
        max_ns: cfg.sequencer.heartbeat_ms * 1_000_000,
        interval: cfg.sequencer.heartbeat_ms * 1_000_000,
        last: now_ns(),
    };
    let mut next = start;
    let mut malformed = 0u64;
    let mut gaps = GapWatch::new(
        cfg.sequencer.nak_holdoff_us * 1000,
        cfg.auth.as_ref().map(|a| a.keys.iter().cloned().collect()),
    );
    let mut fds: Vec<RawFd> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = now_ns();
        let mut work = 0;
        // the stream in: journal (persist before publish), then this site's multicast
        let first = next;
        writer.begin(session, first);
        let taken = channels.poll(now, &mut next, &mut |seq, m| {
            journal.append(seq, m)?;
            if !writer.push(m) {
                outbox.push(writer.bytes());
                writer.begin(session, seq);
                writer.push(m);
            }
            Ok(())
        })?;
        if taken > 0 {
            if writer.count() > 0 {
                outbox.push(writer.bytes());
            }
            journal.flush()?;
            down.publish(now, &mut outbox)
                .map_err(io_error("downstream: publish"))?;
            hb.sent_data(now);
            work += taken;
        } else if hb.due(now) {
            outbox.push(&mold::heartbeat(session, next));
            down.publish(now, &mut outbox)
                .map_err(io_error("downstream: publish"))?;
        }
        if let Some(end) = channels.ended(next) {
            for _ in 0..3 {
                outbox.push(&mold::end_of_session(session, end));
                down.publish(now, &mut outbox)
                    .map_err(io_error("downstream: publish"))?;
                std::thread::sleep(Duration::from_millis(5));
            }
            bridge_log(format!("bridge: the session ended at message {end}"));
            break;
        }
        // this site's commands out, over every link
        loop {
            let n = rx
                .recv(&upstream)
                .map_err(io_error("bridge upstream: recv"))?;
            for i in 0..n {
                match rx.get(i).map(UpstreamPacket::parse) {
                    Some(Ok(p)) if p.session() == session => {
                        channels.send_upstream(now, rx.get(i).expect("checked"));
                        if let Some(nak) = gaps.observe(now, &p) {
                            // lost, as any datagram may be: the sender's timer covers it
                            let _ = upstream.send_to(&nak, &rx.from(i));
                        }
                    }
                    _ => malformed += 1,
                }
            }
            work += n;
            if n < 64 {
                break;
            }
        }
        // this site's gap fills and rewinds, from the bridge's journal
        while let Some((n, from)) =
            udp::try_recv(&requests, &mut buf).map_err(io_error("bridge replayer: recv"))?
        {
            crate::replayer::serve_request(&mut replayer, &buf[..n], &mut journal, &mut answers)?;
            if !answers.is_empty() {
                crate::replayer::answer(&requests, &mut answers, &from, &mut pacer, &mut sealer);
            }
            work += 1;
        }
        if let Some(f) = front.as_mut() {
            work += f.pump(now, &mut journal, &mut |d| {
                channels.send_upstream(now, d);
            })?;
        }
        if let Some(a) = announcer.as_mut() {
            a.tick(next);
        }
        if work > 0 {
            idler.reset();
            continue;
        }
        fds.clear();
        fds.extend([upstream.as_raw_fd(), requests.as_raw_fd()]);
        fds.extend(channels.fds());
        let until = Instant::now()
            + Duration::from_nanos(hb.next().saturating_sub(now_ns()))
                .min(Duration::from_millis(5));
        idle(
            &mut idler,
            &mut fds,
            until,
            front.as_ref(),
            announcer.as_ref(),
        );
    }
    if malformed > 0 {
        bridge_log(format!(
            "bridge: {malformed} malformed upstream datagrams dropped"
        ));
    }
    let s = channels.stats();
    bridge_log(format!(
        "bridge: stopped at message {next}; first copies per link {:?}, later copies {:?}, \
         commands sent per link {:?}; NAKs to this site's senders {}",
        s.first, s.later, s.upstream, gaps.naks
    ));
    journal.flush()?;
    journal.sync()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqbus_wire::auth::Key;
    use seqbus_wire::upstream::{Command, UpstreamWriter};
    use seqbus_wire::Session;

    const ACCOUNT: Account = *b"SENDER\0\0";

    fn packet(seqs: &[u64], key: Option<&Key>) -> Vec<u8> {
        let mut w = UpstreamWriter::new(1472);
        if let Some(k) = key {
            w.set_key(k.clone(), 1);
        }
        w.begin(TYPE_COMMANDS, Session(*b"SITES00001"), ACCOUNT, 2);
        for &seq in seqs {
            assert!(w.push(&Command {
                command_seq: seq,
                body_length: 4,
                flags: 0,
                fragment: b"body",
            }));
        }
        w.finish().to_vec()
    }

    fn observe(g: &mut GapWatch, now: u64, seqs: &[u64]) -> Option<Nak> {
        let d = packet(seqs, None);
        let p = UpstreamPacket::parse(&d).unwrap();
        g.observe(now, &p).map(|n| Nak::parse(&n).unwrap())
    }

    #[test]
    fn a_packet_past_a_gap_gets_a_nak_for_what_is_missing_once_per_holdoff() {
        let mut g = GapWatch::new(100_000, None);
        assert_eq!(observe(&mut g, 1, &[7, 8]), None); // first sight: where it stands
        assert_eq!(observe(&mut g, 2, &[9, 10]), None);
        let nak = observe(&mut g, 3, &[13, 14]).expect("11 and 12 missing");
        assert_eq!((nak.expected, nak.missing, nak.instance), (11, 2, 2));
        assert_eq!(nak.account, ACCOUNT);
        // the resend passes without a NAK; another gap within the holdoff gets none
        assert_eq!(observe(&mut g, 4, &[11, 12]), None);
        assert_eq!(observe(&mut g, 5, &[16]), None);
        // after it, one; a probe (oldest and last) past what was seen is a gap too
        let nak = observe(&mut g, 200_000, &[15, 30]).expect("after the holdoff");
        assert_eq!((nak.expected, nak.missing), (17, 13));
        assert_eq!(g.naks, 2);
        // holdoff 0: no NAKs at all
        let mut off = GapWatch::new(0, None);
        assert_eq!(observe(&mut off, 1, &[1]), None);
        assert_eq!(observe(&mut off, 2, &[5]), None);
    }

    #[test]
    fn with_keys_only_authentic_packets_are_naked_and_the_nak_carries_the_mac() {
        let key = Key::new([7; 32]);
        let keys: AccountKeys = [(ACCOUNT, key.clone())].into_iter().collect();
        let mut g = GapWatch::new(1, Some(keys));
        for (i, seqs) in [&[1u64][..], &[5]].iter().enumerate() {
            let forged = packet(seqs, None);
            let p = UpstreamPacket::parse(&forged).unwrap();
            assert!(
                g.observe(i as u64 + 1, &p).is_none(),
                "unsigned: not even noted"
            );
        }
        let d = packet(&[1], Some(&key));
        assert!(g.observe(10, &UpstreamPacket::parse(&d).unwrap()).is_none());
        let d = packet(&[4], Some(&key));
        let nak = g
            .observe(20, &UpstreamPacket::parse(&d).unwrap())
            .expect("2, 3 missing");
        assert!(Nak::verify(&nak, &key));
        assert_eq!(Nak::parse(&nak).unwrap().expected, 2);
    }
}

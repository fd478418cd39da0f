//! The sequencer process loop: one thread around a `seqbus_core::cluster::Member` — upstream
//! socket → sequencing → journal (persist) → replication to the other sequencers of
//! `[cluster]` → downstream packets (publish, once a majority holds them). Without
//! `[cluster]` the member is alone: persist, then publish. With `sequencer.pipeline` the
//! upstream reads, the downstream sends and the sends to the other members run on threads of
//! their own around the same loop ([`crate::pipeline`]).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::cluster::{Event, Log, Member, MemberParams, Role};
use seqbus_core::{SequencerParams, Store, StoreError};
use seqbus_journal::syncer::Syncer;
use seqbus_journal::{HardState, Journal};
use seqbus_wire::cluster::is_cluster_message;
use socket2::{SockAddr, Socket};

use seqbus_config::{Config, FsyncPolicy, MemberConfig, Pipeline, Transport};
use seqbus_transport::udp::{self, Outbox};
use seqbus_transport::Publisher;

use crate::idle::Idler;
use crate::watch::record;
use crate::{io_error, now_ns, Error};

/// The target of the sequencer's log records (`seqbus.sequencer` in Python).
const TARGET: &str = "seqbus::sequencer";

fn info(text: String) {
    record(log::Level::Info, TARGET, text);
}

fn warn(text: String) {
    record(log::Level::Warn, TARGET, text);
}

/// Most upstream datagrams handled before the waiting messages are persisted and published.
const MAX_DATAGRAMS_PER_BATCH: usize = 256;

/// The journal as a cluster member's replica: writes per `sequencer.fsync`, the vote in
/// `cluster-state` beside the segments. The `fdatasync`s run on a thread of their own
/// ([`Syncer`]), so the loop that sends the cluster's heartbeats never waits on the disk (a
/// slow one would make its leader look dead). With `interval` publishing does not wait for
/// them, by that policy. With `batch` a sync is asked for each batch, and what it covers
/// counts as durable — is acknowledged, committed, published — only once it completed: the
/// thread signals an eventfd the loop sleeps on ([`JournalLog::wake_fd`]), and the loop takes
/// the answer from [`JournalLog::durable`].
pub(crate) struct JournalLog {
    pub journal: Journal,
    fsync: FsyncPolicy,
    interval: Duration,
    last_sync: Instant,
    syncer: Option<Syncer>,
    /// `batch`: signalled by the sync thread after each sync.
    synced: Option<Arc<crate::notify::EventFd>>,
    /// `batch`: (ticket, upto) of each sync asked and not yet answered, oldest first.
    waiting: std::collections::VecDeque<(u64, u64)>,
}

impl JournalLog {
    fn new(journal: Journal, fsync: FsyncPolicy, interval: Duration) -> Result<JournalLog, Error> {
        let on_slow = move |path: &Path, took: Duration| {
            let survives = match fsync {
                FsyncPolicy::Batch => {
                    "nothing it covers is published before it completes (sequencer.fsync = \
                     \"batch\")"
                }
                _ => {
                    "what was written meanwhile survives a crash of this process, not yet one \
                     of the machine (sequencer.fsync = \"interval\")"
                }
            };
            warn(format!(
                "journal: fdatasync of {} took {} ms: the disk is slow; {survives}",
                path.display(),
                took.as_millis()
            ))
        };
        let starting = io_error("journal: starting the sync thread");
        let (syncer, synced) = match fsync {
            FsyncPolicy::None => (None, None),
            FsyncPolicy::Interval => (
                Some(Syncer::start(Box::new(on_slow)).map_err(starting)?),
                None,
            ),
            FsyncPolicy::Batch => {
                let fd = Arc::new(
                    crate::notify::EventFd::new()
                        .map_err(io_error("journal: an eventfd for syncs"))?,
                );
                let signal = Arc::clone(&fd);
                let on_done = Box::new(move || signal.signal());
                let syncer = Syncer::with_on_done(Box::new(on_slow), on_done).map_err(starting)?;
                (Some(syncer), Some(fd))
            }
        };
        Ok(JournalLog {
            journal,
            fsync,
            interval,
            last_sync: Instant::now(),
            syncer,
            synced,
            waiting: std::collections::VecDeque::new(),
        })
    }

    /// The fd the sync thread signals after each `batch` sync (the loop sleeps on it too).
    pub(crate) fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        self.synced.as_ref().map(|e| e.fd())
    }

    /// `batch`: how far the syncs completed since the last call reach (the `upto` of the
    /// newest one, for [`Member::handle_durable`]), or None when none completed. A failed sync
    /// is an error: the process stops.
    pub(crate) fn durable(&mut self) -> Result<Option<u64>, StoreError> {
        if self.waiting.is_empty() {
            return Ok(None);
        }
        if let Some(e) = &self.synced {
            e.drain();
        }
        let Some(syncer) = &self.syncer else {
            return Ok(None);
        };
        let done = syncer.done().map_err(store_error)?;
        let mut upto = None;
        while let Some(&(ticket, u)) = self.waiting.front() {
            if ticket > done {
                break;
            }
            upto = Some(u);
            self.waiting.pop_front();
        }
        Ok(upto)
    }

    /// Syncs completed on the sync thread so far.
    pub(crate) fn syncs(&self) -> u64 {
        self.syncer.as_ref().map_or(0, Syncer::synced)
    }

    fn close(&mut self) -> Result<(), Error> {
        self.journal.flush()?;
        if let Some(s) = self.syncer.take() {
            s.finish()?;
        }
        self.journal.sync()?;
        Ok(())
    }
}

fn store_error(e: seqbus_journal::JournalError) -> StoreError {
    StoreError(e.to_string())
}

impl Store for JournalLog {
    fn next_seq(&mut self) -> u64 {
        self.journal.next_seq()
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        self.journal.read(from, max, f).map_err(store_error)
    }
}

impl Log for JournalLog {
    fn append(&mut self, seq: u64, msg: &[u8]) -> Result<(), StoreError> {
        self.journal.append(seq, msg).map_err(store_error)
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.journal.flush().map_err(store_error)?;
        match self.fsync {
            FsyncPolicy::Batch => self.journal.sync().map_err(store_error)?,
            FsyncPolicy::Interval if self.last_sync.elapsed() >= self.interval => {
                // (no thread only after `close`, which synced everything)
                if let Some(s) = self.syncer.as_mut() {
                    s.request(&self.journal).map_err(store_error)?;
                }
                self.last_sync = Instant::now();
            }
            _ => {}
        }
        Ok(())
    }

    fn sync(&mut self, upto: u64) -> Result<bool, StoreError> {
        match (self.fsync, self.syncer.as_mut()) {
            (FsyncPolicy::Batch, Some(syncer)) => {
                self.journal.flush().map_err(store_error)?;
                let ticket = syncer.request(&self.journal).map_err(store_error)?;
                self.waiting.push_back((ticket, upto));
                Ok(false)
            }
            _ => {
                self.flush()?;
                Ok(true)
            }
        }
    }

    fn discard_from(&mut self, seq: u64) -> Result<(), StoreError> {
        let next = self.journal.next_seq();
        if let Some(path) = self.journal.discard_from(seq).map_err(store_error)? {
            warn(discarded_line(seq, next, &path));
        }
        Ok(())
    }

    fn save_vote(&mut self, term: u64, voted_for: u16) -> Result<(), StoreError> {
        HardState { term, voted_for }
            .store(self.journal.dir())
            .map_err(store_error)
    }
}

/// Carries out what the member asked of its journal, at once and in order (a sync per the
/// journal's `fsync` policy), then queues the datagrams it has for the other members: the
/// rule of `seqbus_core::cluster`'s I/O layer (a vote is saved before it is sent). A new
/// leader's questions to replayers are queued with them.
fn carry_out(
    member: &mut Member,
    log: &mut JournalLog,
    peer_out: &mut crate::pipeline::PeerBatch,
) -> Result<(), Error> {
    seqbus_core::cluster::carry_out(member, log).map_err(Error::Persist)?;
    while let Some((to, d)) = member.poll_transmit() {
        peer_out.push(to, d);
    }
    Ok(())
}

/// The line that says which messages a follower moved aside: `from` up to (not including)
/// `next`, printed inclusive ("messages 27874 to 27879": 27880 is not among them).
fn discarded_line(from: u64, next: u64, path: &Path) -> String {
    let what = if next == from + 1 {
        format!(
            "message {from} of this journal was never published and the leader does not hold it"
        )
    } else {
        format!(
            "messages {from} to {} ({} of them) of this journal were never published and the \
             leader does not hold them",
            next - 1,
            next - from
        )
    };
    format!("sequencer: {what}: moved aside to {}", path.display())
}

/// Opens the journal in `dir`, reporting (a log record) a torn tail that was cut.
pub(crate) fn open_journal(cfg: &Config, dir: &Path) -> Result<Journal, Error> {
    let journal = Journal::open(dir, cfg.session().0, cfg.sequencer.segment_size)?;
    let r = journal.recovery();
    if let Some((path, offset, reason)) = &r.truncated_at {
        warn(format!(
            "sequencer: journal {}: a write cut short at offset {offset} ({reason}, {} bytes, \
             nothing valid after it) was cut off; the journal continues at {}",
            path.display(),
            r.truncated_bytes,
            journal.next_seq()
        ));
    }
    if r.reserved_bytes > 0 {
        info(format!(
            "sequencer: journal {}: {} zero bytes past the last record (space the writer had \
             reserved; it did not close) were cut; the journal continues at {}",
            dir.display(),
            r.reserved_bytes,
            journal.next_seq()
        ));
    }
    if let Some(path) = &r.torn_segment {
        warn(format!(
            "sequencer: journal segment {} was created but never written (moved aside)",
            path.display()
        ));
    }
    Ok(journal)
}

/// The cluster member of this process: its id and the other members' addresses.
struct Peers {
    /// (id, peer address) of the other members.
    others: Vec<(u16, SockAddr)>,
    socket: Option<Socket>,
}

/// Runs the sequencer until `stop` is set. Every socket is bound and the journal opened and
/// recovered before the first message is sequenced; any failure there is returned at once. A
/// journal that cannot be written stops it (a standby of `[cluster]` then takes over).
pub fn run_sequencer(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    let sc = &cfg.sequencer;
    let id = cfg.member_id.unwrap_or(1);
    let members = cfg.members();
    let me = members
        .iter()
        .find(|m| m.id == id)
        .cloned()
        .expect("for_member checked the id");
    let clustered = cfg.cluster.is_some();
    let journal = open_journal(cfg, &cfg.journal_dir())?;
    let vote = if clustered {
        HardState::load(&cfg.journal_dir())?
    } else {
        HardState::default()
    };
    let mut log = JournalLog::new(
        journal,
        sc.fsync,
        Duration::from_millis(sc.fsync_interval_ms),
    )?;
    let params = member_params(cfg, id, &members);
    let mut member = Member::new(params, &mut log, vote.term, vote.voted_for, now_ns())
        .map_err(Error::Persist)?;
    if clustered {
        // the journal never runs ahead of the vote record (a member persists each term before
        // it writes an entry of it): when it does, the record was lost and the member refuses
        HardState::load_for(&cfg.journal_dir(), member.last_log_term())?;
    }
    member.set_tail_heartbeat(sc.tail_heartbeat_us * 1000);
    member.set_nak_holdoff(sc.nak_holdoff_us * 1000);
    match &cfg.auth {
        Some(a) => {
            member.set_keys(Arc::new(a.keys.iter().cloned().collect()));
            info(format!(
                "sequencer: upstream authentication ON: {} account keys ([auth]); packets \
                 without their account's MAC, replayed or stale are dropped and counted",
                a.keys.len()
            ));
        }
        None => warn(format!(
            "sequencer: upstream authentication OFF (no [auth]): any host that can reach {} \
             can send commands as any account; for trusted networks only (docs/sites.md)",
            sc.upstream
        )),
    }
    if cfg.downstream_key().is_some() {
        info(
            "sequencer: downstream authentication ON (downstream.key): every UDP datagram of \
             the stream and of the replayers' answers carries a MAC; readers with the key drop \
             and count those without"
                .to_string(),
        );
    }
    let upstream = udp::bind(sc.upstream, sc.recv_buffer).map_err(io_error(format!(
        "sequencer.upstream {}: bind",
        sc.upstream
    )))?;
    let peers = if clustered {
        let socket = udp::bind(me.peer, sc.recv_buffer).map_err(io_error(format!(
            "cluster member {id} peer {}: bind",
            me.peer
        )))?;
        udp::set_sndbuf(&socket, 16 << 20);
        Peers {
            others: members
                .iter()
                .filter(|m| m.id != id)
                .map(|m| (m.id, m.peer.into()))
                .collect(),
            socket: Some(socket),
        }
    } else {
        Peers {
            others: Vec::new(),
            socket: None,
        }
    };
    let mut down =
        crate::transports::publisher(cfg, log.journal.next_seq(), clustered.then_some(me.publish))?;
    let pipelined = crate::pipeline::pipelined(sc.pipeline);
    // SoupBinTCP and the in-process bus serve their clients (logins, rewinds, their
    // commands) from the loop, with the journal: their publishing stays there too
    let publish_staged = pipelined
        && matches!(
            cfg.downstream.transport,
            Transport::UdpMulticast | Transport::UdpUnicast | Transport::Shm
        );
    if publish_staged {
        down = Box::new(
            crate::pipeline::PublishStage::start(down, sc.idle)
                .map_err(io_error("sequencer: starting the publish thread"))?,
        );
    }
    info(format!(
        "sequencer: {}",
        match (pipelined, publish_staged) {
            (false, _) => format!(
                "one thread receives, sequences and publishes (sequencer.pipeline = {}; {} \
                 CPUs usable)",
                pipeline_name(sc.pipeline),
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
            (true, true) => format!(
                "pipelined (sequencer.pipeline = {}): threads seqbus-receive, the loop \
                 (sequencing, journal, commit){} and seqbus-publish",
                pipeline_name(sc.pipeline),
                if clustered {
                    ", seqbus-peers (to the other members)"
                } else {
                    ""
                }
            ),
            (true, false) => format!(
                "pipelined (sequencer.pipeline = {}): thread seqbus-receive, then the loop, \
                 which also publishes: {} serves its clients from the loop",
                pipeline_name(sc.pipeline),
                crate::transports::publishing(cfg)
            ),
        }
    ));
    // the loop publishes its counters only when someone can read them
    let board = sc.status.map(|_| Arc::new(crate::status::Board::default()));
    if let (Some(b), true) = (&board, clustered) {
        // the first answer already describes the member
        b.update_member(&member, now_ns(), &crate::status::Takeover::default());
    }
    let status = match (sc.status, &board) {
        (Some(listen), Some(board)) => Some(crate::status::serve(
            listen,
            sc.status_token.clone(),
            cfg.bus.session.clone(),
            board.clone(),
            stop.clone(),
        )?),
        _ => None,
    };
    // the in-process replayer serves what this member knows is committed
    let servable = Arc::new(AtomicU64::new(if clustered {
        member.commit()
    } else {
        u64::MAX
    }));
    let replayer = if sc.replayer_in_process {
        let r = crate::replayer::Serving::bind(cfg, &cfg.journal_dir(), Some(servable.clone()))?;
        let stop = stop.clone();
        Some(
            std::thread::Builder::new()
                .name("seqbus-replayer".into())
                .spawn(move || {
                    // fail-stop: a member whose replayer cannot read its journal (damage,
                    // named by file and offset) stops with that error rather than going on
                    // without one (nodes' gaps would go unfilled); a standby takes over
                    let result = r.run(&stop);
                    if result.is_err() {
                        stop.store(true, Ordering::SeqCst);
                    }
                    result
                })
                .map_err(io_error("replayer thread"))?,
        )
    } else {
        None
    };
    let discovery = if clustered {
        crate::discovery::Listener::open(cfg)?
    } else {
        None
    };
    let who = if clustered {
        format!("sequencer {id}")
    } else {
        "sequencer".to_string()
    };
    let cluster = if clustered {
        format!(
            ", member {id} of {} ({}), term {}",
            members.len(),
            members
                .iter()
                .map(|m| m.id.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            member.term()
        )
    } else {
        String::new()
    };
    info(format!(
        "{who}: session {}{cluster}: commands on {}, publishing on {}; journal {} holds \
         messages up to {}",
        cfg.bus.session,
        sc.upstream,
        crate::transports::publishing(cfg),
        cfg.journal_dir().display(),
        log.journal.next_seq().saturating_sub(1)
    ));
    let result = sequence(
        cfg,
        pipelined,
        &stop,
        &mut log,
        &mut member,
        &upstream,
        &peers,
        down.as_mut(),
        board.as_deref(),
        &servable,
        discovery,
    );
    if result.is_err() {
        stop.store(true, Ordering::SeqCst);
    }
    if let Some(h) = status {
        stop.store(true, Ordering::SeqCst);
        let _ = h.join();
    }
    if let Some(h) = replayer {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return result.and(Err(e)),
            Err(_) => {
                return result.and(Err(Error::Io {
                    what: "replayer thread".into(),
                    source: std::io::Error::other("panicked"),
                }))
            }
        }
    }
    if result.is_ok() {
        info(format!(
            "{who}: stopped at message {}",
            log.journal.next_seq().saturating_sub(1)
        ));
    }
    result
}

fn pipeline_name(p: Pipeline) -> &'static str {
    match p {
        Pipeline::Auto => "\"auto\"",
        Pipeline::On => "\"on\"",
        Pipeline::Off => "\"off\"",
    }
}

fn member_params(cfg: &Config, id: u16, members: &[MemberConfig]) -> MemberParams {
    let sc = &cfg.sequencer;
    let c = cfg.cluster.as_ref();
    MemberParams {
        sequencer: SequencerParams {
            session: cfg.session(),
            // with a downstream key, room for the MAC the publisher adds
            max_packet: cfg.mold_max_packet(),
            heartbeat_ns: sc.heartbeat_ms * 1_000_000,
            clock_tick_ns: sc.clock_tick_ms * 1_000_000,
            term: 0,
            leader: 0,
            max_held: sc
                .max_held
                .unwrap_or(cfg.node.window.max(seqbus_core::sequencer::MAX_HELD)),
        },
        id,
        members: members.iter().map(|m| m.id).collect(),
        election_timeout_ns: c.map_or(40, |c| c.election_timeout_ms) * 1_000_000,
        heartbeat_ns: c.map_or(5, |c| c.heartbeat_ms) * 1_000_000,
        retransmit_ns: c.map_or(2_000, |c| c.retransmit_us) * 1_000,
        max_append: c.map_or(64_000, |c| c.max_packet),
        seed: now_ns() ^ u64::from(id),
        replayer_wait_ns: c.map_or(2_000, |c| c.replayer_wait_us) * 1_000,
        suspicion_phi: c.map_or(0.0, |c| c.suspicion_phi),
    }
}

/// The replayers a new leader asks before it publishes: every other member's, the static
/// list's, and those announced on `[discovery]`.
fn replayer_addresses(cfg: &Config, own: Option<SocketAddr>) -> Vec<SockAddr> {
    cfg.node_replayers()
        .into_iter()
        .filter(|a| Some(*a) != own)
        .map(SockAddr::from)
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn sequence(
    cfg: &Config,
    pipelined: bool,
    stop: &AtomicBool,
    log: &mut JournalLog,
    member: &mut Member,
    upstream: &Socket,
    peers: &Peers,
    down: &mut dyn Publisher,
    board: Option<&crate::status::Board>,
    servable: &AtomicU64,
    mut discovery: Option<crate::discovery::Listener>,
) -> Result<(), Error> {
    let sc = &cfg.sequencer;
    let own_replayer = sc.replayer_in_process.then_some(cfg.replayer.listen);
    let mut replayers = replayer_addresses(cfg, own_replayer);
    member.set_replayers(if peers.socket.is_some() {
        replayers.len()
    } else {
        0
    });
    let mut idler = Idler::new(sc.idle);
    let mut outbox = Outbox::default();
    let mut answers = cfg.downstream_key().map(|k| {
        crate::downstream_auth::Verifier::new(
            k.clone(),
            board.map(|b| b.downstream_forged()).unwrap_or_default(),
            format!("sequencer {}", member.id()),
            "seqbus::sequencer",
        )
    });
    let rx_slots = 64;
    // pipelined: the upstream socket is read on the seqbus-receive thread (stopped and
    // joined when the loop ends, whichever way)
    let mut intake = if pipelined {
        let handle = upstream.try_clone().map_err(io_error(
            "sequencer.upstream: a handle for the receive thread",
        ))?;
        Intake::Staged(
            crate::pipeline::ReceiveStage::start(handle, rx_slots, sc.idle)
                .map_err(io_error("sequencer: starting the receive thread"))?,
        )
    } else {
        Intake::Inline(udp::RecvBatch::new(rx_slots, 65_536))
    };
    let mut rx_peer = udp::RecvBatch::new(16, 65_536);
    let mut peer_out = crate::pipeline::PeerBatch::default();
    // pipelined: what goes to the other members is sent on the seqbus-peers thread
    let mut peer_sends = match (&peers.socket, pipelined) {
        (Some(ps), true) => Some(
            crate::pipeline::Stage::start(
                "seqbus-peers",
                sc.idle,
                crate::pipeline::PeerSending {
                    socket: ps.try_clone().map_err(io_error(
                        "cluster peer socket: a handle for the seqbus-peers thread",
                    ))?,
                    others: peers.others.clone(),
                },
            )
            .map_err(io_error("sequencer: starting the seqbus-peers thread"))?,
        ),
        _ => None,
    };
    let mut fds = vec![match &intake {
        Intake::Inline(_) => upstream.as_raw_fd(),
        Intake::Staged(stage) => stage.from.fd(),
    }];
    if let Some(s) = &peers.socket {
        fds.push(s.as_raw_fd());
    }
    if let Some(d) = &discovery {
        fds.push(d.fd());
    }
    // `fsync = "batch"`: woken when a sync completes
    if let Some(fd) = log.wake_fd() {
        fds.push(fd);
    }
    let mut takeover = crate::status::Takeover::default();
    while !stop.load(Ordering::Relaxed) {
        let mut got = 0;
        while got < MAX_DATAGRAMS_PER_BATCH {
            let n = match &mut intake {
                Intake::Inline(rx) => {
                    let n = rx
                        .recv(upstream)
                        .map_err(io_error("sequencer.upstream: recv"))?;
                    handle_upstream(member, upstream, rx);
                    n
                }
                Intake::Staged(stage) => match stage.from.try_next() {
                    Ok(Some(rx)) => {
                        handle_upstream(member, upstream, &rx);
                        let n = rx.len();
                        stage.from.give_back(rx);
                        // a batch short of its slots: the socket was drained
                        if n < rx_slots {
                            got += n;
                            continue;
                        }
                        n
                    }
                    Ok(None) => 0,
                    // the thread ended early: its error says why
                    Err(crate::pipeline::Gone) => {
                        stage
                            .end()
                            .map_err(io_error("sequencer.upstream: recv (seqbus-receive)"))?;
                        return Err(Error::Io {
                            what: "sequencer.upstream: the receive thread".into(),
                            source: std::io::Error::other("ended"),
                        });
                    }
                },
            };
            if n == 0 {
                break;
            }
            got += n;
            if n < rx_slots && matches!(intake, Intake::Inline(_)) {
                break;
            }
        }
        if let Some(ps) = &peers.socket {
            loop {
                let n = rx_peer
                    .recv(ps)
                    .map_err(io_error("cluster peer socket: recv"))?;
                if n == 0 {
                    break;
                }
                let now = now_ns();
                for i in 0..n {
                    let Some(d) = rx_peer.get(i) else { continue };
                    if is_cluster_message(d) {
                        member.handle_peer(now, d, log).map_err(Error::Persist)?;
                        carry_out(member, log, &mut peer_out)?;
                    } else {
                        // a replayer's answer to this member as a new leader
                        let from = rx_peer.from(i);
                        if let Some(r) = replayers
                            .iter()
                            .position(|a| a.as_socket() == from.as_socket())
                        {
                            // with a downstream key its answers carry a MAC, as every
                            // replayer's do
                            let d = match answers.as_mut() {
                                Some(v) => v.open(d),
                                None => Some(d),
                            };
                            if let Some(d) = d {
                                member.handle_replayer(now, r, d);
                                carry_out(member, log, &mut peer_out)?;
                            }
                        }
                    }
                }
                got += n;
                if n < 16 {
                    break;
                }
            }
        }
        if let Some(d) = discovery.as_mut() {
            for a in d.poll() {
                let a = SockAddr::from(SocketAddr::V4(a));
                if a.as_socket() != own_replayer && !replayers.contains(&a) {
                    replayers.push(a);
                }
            }
            if peers.socket.is_some() {
                member.set_replayers(replayers.len());
            }
        }
        // Commands that came over TCP or the in-process queue; TCP logins and rewinds.
        let mut now = now_ns();
        let served = down.poll(now, log, &mut |d| {
            member.handle_upstream(now_ns(), d);
            // a reliable transport loses no command: no NAK to send
            let _ = member.poll_nak();
        });
        if served > 0 {
            now = now_ns();
        }
        got += served;
        if let Some(b) = board {
            if let Some(target) = b.take_switchover() {
                let answer = member.switchover(now, target);
                b.answer_switchover(answer);
            }
        }
        // what the sync thread made durable: acknowledged (a standby), committed (the leader)
        if let Some(upto) = log.durable().map_err(Error::Persist)? {
            member.handle_durable(upto);
        }
        member.poll(now, log).map_err(Error::Persist)?;
        carry_out(member, log, &mut peer_out)?;
        while let Some(p) = member.poll_publish(now) {
            outbox.push(p);
        }
        if !outbox.is_empty() {
            down.publish(now, &mut outbox)
                .map_err(io_error("downstream: publish"))?;
        }
        if let Some(ps) = &peers.socket {
            peer_out.ask_replayers(ps, &replayers);
            match peer_sends.as_mut() {
                Some(stage) if !peer_out.is_empty() => stage
                    .hand_over(&mut peer_out)
                    .map_err(io_error("cluster peer socket: send"))?,
                Some(_) => {}
                None => peer_out.send(ps, &peers.others),
            }
        }
        servable.store(member.commit(), Ordering::Release);
        while let Some(e) = member.poll_event() {
            report(member.id(), &e);
            if let Event::BecameLeader { .. } = e {
                takeover.became_leader_ns = now;
                takeover.count += 1;
            }
        }
        if let Some(board) = board {
            board.update_member(member, now, &takeover);
            board.update_journal(log.syncs());
        }
        if got == 0 {
            // (`now` is this turn's: an idle turn did next to nothing since)
            let wake = member.next_timeout().saturating_sub(now);
            let wake = Duration::from_nanos(wake).min(Duration::from_millis(50));
            let wake = down.idle_limit().map_or(wake, |l| wake.min(l));
            let more = down.fds();
            let until = Instant::now() + wake;
            let all: Vec<_>;
            let fds: &[_] = if more.is_empty() {
                &fds
            } else {
                all = fds.iter().copied().chain(more).collect();
                &all
            };
            match &mut intake {
                Intake::Inline(_) => idler.idle(fds, until),
                Intake::Staged(stage) => {
                    idler.idle_unless(fds, until, || stage.from.park());
                    stage.from.unpark();
                }
            }
        } else {
            idler.reset();
        }
    }
    if let Intake::Staged(mut stage) = intake {
        stage
            .end()
            .map_err(io_error("sequencer.upstream: recv (seqbus-receive)"))?;
    }
    log.close()?;
    if sc.end_session_on_stop && member.role() == Role::Leader {
        if let Some(seq) = member.sequencer() {
            // sent a few times, spaced: there is no retransmission of an end of session
            let eos = seq.end_of_session();
            for _ in 0..3 {
                outbox.push(&eos);
                down.publish(now_ns(), &mut outbox)
                    .map_err(io_error("downstream: publish"))?;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    // pipelined: every packet handed to the publish thread is out before the loop returns
    down.finish().map_err(io_error("downstream: publish"))?;
    Ok(())
}

/// Where the loop's upstream datagrams come from.
enum Intake {
    /// The loop reads the socket itself.
    Inline(udp::RecvBatch),
    /// The seqbus-receive thread reads it (`sequencer.pipeline`).
    Staged(crate::pipeline::ReceiveStage),
}

/// Sequences the upstream datagrams of `rx`, answering a sender's gap with a NAK.
fn handle_upstream(member: &mut Member, upstream: &Socket, rx: &udp::RecvBatch) {
    if rx.is_empty() {
        return;
    }
    // one clock read per batch of datagrams: they arrived together
    let now = now_ns();
    for i in 0..rx.len() {
        match rx.get(i) {
            Some(d) => {
                member.handle_upstream(now, d);
                if let Some(nak) = member.poll_nak() {
                    // to the address the commands came from: the sender resends now
                    let _ = upstream.send_to(nak, &rx.from(i));
                }
            }
            None => member.note_malformed(),
        }
    }
}

fn report(id: u16, e: &Event) {
    let line = match e {
        Event::BecameLeader { term, epoch_seq } => {
            format!("leads the bus in term {term} (its Epoch is message {epoch_seq})")
        }
        Event::SteppedDown { term, why } => format!("stopped leading term {term}: {why}"),
        Event::Following { term, leader } => format!("follows member {leader} in term {term}"),
        Event::Election {
            term,
            handed_over: true,
            ..
        } => format!("asks for votes in term {term}: its leader hands over"),
        Event::Election {
            term,
            silent_ns: Some(silent),
            tolerated_ns,
            ..
        } => format!(
            "asks for votes in term {term}: its leader silent for {:.1} ms (tolerated {:.1} ms)",
            *silent as f64 / 1e6,
            *tolerated_ns as f64 / 1e6
        ),
        Event::Election {
            term,
            silent_ns: None,
            ..
        } => format!("asks for votes in term {term}: no leader followed"),
        Event::Discarded { from, count } => format!(
            "{count} never-published messages from {from} on were not the leader's: moved aside"
        ),
        Event::Transfer {
            target,
            started: true,
        } => {
            format!("hands the leadership over to member {target}")
        }
        Event::Transfer {
            target,
            started: false,
        } => format!("switchover to member {target} gave up (it did not catch up in time)"),
    };
    info(format!("sequencer {id}: {line}"));
}

/// The journal directory of cluster member `id` as `cfg` names it (for tools).
pub fn member_journal_dir(cfg: &Config, id: Option<u16>) -> Result<PathBuf, Error> {
    Ok(cfg.for_member(id)?.journal_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_held(keys: &str) -> usize {
        let bus = "[bus]\nsession = \"S\"\n[downstream]\ntransport = \"udp-unicast\"\n\
                   subscribers = [\"127.0.0.1:9\"]\n";
        let text = format!("{bus}{keys}");
        let cfg = Config::from_str(&text).expect("a valid configuration");
        member_params(&cfg, 0, &[]).sequencer.max_held
    }

    #[test]
    fn the_sequencer_holds_a_window_of_commands_after_a_gap() {
        // by default what a node's window holds in flight, and never less than 256
        assert_eq!(max_held(""), 256);
        assert_eq!(max_held("[node]\nwindow = 4096\n"), 4096);
        assert_eq!(max_held("[node]\nwindow = 16\n"), 256);
        // configured: as given, 0 included (nothing held: the sender's go-back-N)
        assert_eq!(
            max_held("[sequencer]\nmax_held = 100\n[node]\nwindow = 4096\n"),
            100
        );
        assert_eq!(max_held("[sequencer]\nmax_held = 0\n"), 0);
    }

    #[test]
    fn the_moved_aside_line_names_the_last_message_moved_not_the_next() {
        let p = Path::new("/j/discarded/x");
        let line = discarded_line(27874, 27880, p);
        assert!(
            line.contains("messages 27874 to 27879 (6 of them)"),
            "{line}"
        );
        assert!(!line.contains("27880"), "{line}");
        assert!(discarded_line(5, 6, p).contains("message 5 of this journal was never"));
    }
}

#[cfg(test)]
mod sync_tests {
    use super::*;

    fn log(fsync: FsyncPolicy) -> (tempfile::TempDir, JournalLog) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path(), *b"SYNCLOOP01", 1 << 20).unwrap();
        let l = JournalLog::new(j, fsync, Duration::from_millis(1)).unwrap();
        (dir, l)
    }

    #[test]
    fn interval_and_batch_sync_on_the_sync_thread_and_batch_wakes_the_loop() {
        let (_d, l) = log(FsyncPolicy::Interval);
        assert!(l.syncer.is_some(), "interval runs a sync thread");
        assert!(l.wake_fd().is_none(), "publishing does not wait for it");
        let (_d, l) = log(FsyncPolicy::Batch);
        assert!(l.syncer.is_some(), "batch runs a sync thread too");
        assert!(
            l.wake_fd().is_some(),
            "and wakes the loop when a sync completes"
        );
        let (_d, l) = log(FsyncPolicy::None);
        assert!(l.syncer.is_none());
    }

    /// Waits until `fd` is readable (at most 10 s).
    fn readable(fd: std::os::fd::RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut p, 1, 10_000) == 1 }
    }

    /// `fsync = "batch"`: the sync of a batch is asked, not waited for; nothing it covers is
    /// committed or published until the sync thread completed it and the loop, woken by it,
    /// handed the answer to the member.
    #[test]
    fn with_batch_nothing_is_published_before_the_sync_thread_made_it_durable() {
        let (_d, mut l) = log(FsyncPolicy::Batch);
        let text = "[bus]\nsession = \"S\"\n[downstream]\ntransport = \"udp-unicast\"\n\
                    subscribers = [\"127.0.0.1:9\"]\n";
        let cfg = Config::from_str(text).expect("a valid configuration");
        let members = cfg.members();
        let now = 1_000_000_000;
        let mut m = Member::new(member_params(&cfg, 1, &members), &mut l, 0, 0, now).unwrap();
        let mut peer_out = crate::pipeline::PeerBatch::default();
        m.poll(now, &mut l).unwrap();
        carry_out(&mut m, &mut l, &mut peer_out).unwrap();
        assert!(m.last_index() >= 1, "the session's start is written");
        assert!(!l.waiting.is_empty(), "its sync asked and not answered");
        assert_eq!(m.commit(), 0, "nothing is committed before it is durable");
        assert!(
            m.poll_publish(now).is_none(),
            "nothing is published before it is durable"
        );
        let fd = l.wake_fd().expect("batch");
        let deadline = Instant::now() + Duration::from_secs(10);
        let upto = loop {
            assert!(readable(fd), "the sync thread signals the loop");
            if let Some(upto) = l.durable().unwrap() {
                break upto;
            }
            assert!(Instant::now() < deadline, "no sync completed");
        };
        assert!(l.waiting.is_empty());
        assert!(l.syncs() >= 1);
        m.handle_durable(upto);
        assert_eq!(m.commit(), m.last_index(), "committed once durable");
        let p = m.poll_publish(now).expect("then published").to_vec();
        let p = seqbus_wire::mold::MoldPacket::parse(&p).unwrap();
        assert_eq!((p.sequence(), p.message_count()), (1, 1));
        l.close().unwrap();
    }

    #[test]
    fn the_sync_thread_is_asked_once_an_interval_and_close_waits_for_it() {
        let (_d, mut l) = log(FsyncPolicy::Interval);
        for seq in 1..=5u64 {
            std::thread::sleep(Duration::from_millis(2));
            l.append(seq, b"m").unwrap();
            l.flush().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while l.syncer.as_ref().unwrap().synced() == 0 {
            assert!(Instant::now() < deadline, "no sync ran on the thread");
            std::thread::sleep(Duration::from_millis(1));
        }
        l.close().unwrap();
        assert!(l.syncer.is_none(), "close stopped the thread");
    }
}

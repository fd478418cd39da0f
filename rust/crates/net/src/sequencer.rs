//! The sequencer process loop: one thread, upstream socket → `seqbus_core::Sequencer` →
//! journal (persist) → downstream packets (publish).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::{Recovered, Sequencer, SequencerParams};
use seqbus_journal::Journal;
use socket2::{SockAddr, Socket};

use crate::config::{Config, FsyncPolicy, Transport};
use crate::idle::Idler;
use crate::udp::{self, Outbox};
use crate::{io_error, now_ns, Error};

/// Most upstream datagrams handled before the waiting messages are persisted and published.
const MAX_DATAGRAMS_PER_BATCH: usize = 256;

/// The downstream side: a socket and where its packets go.
pub(crate) struct Downstream {
    pub socket: Option<Socket>,
    pub dests: Vec<SockAddr>,
    /// TCP, shared memory or in-process (`crate::transports`) instead of UDP.
    pub other: Option<crate::transports::Publisher>,
}

impl Downstream {
    /// `next_seq`: one past the last journaled message.
    pub(crate) fn open(cfg: &Config, next_seq: u64) -> Result<Downstream, Error> {
        if let Some(p) = crate::transports::Publisher::open(cfg, next_seq)? {
            return Ok(Downstream {
                socket: None,
                dests: Vec::new(),
                other: Some(p),
            });
        }
        let d = &cfg.downstream;
        match d.transport {
            Transport::UdpMulticast => {
                let group = d.group.expect("checked when parsed");
                let socket = udp::multicast_sender(d.interface, d.ttl).map_err(io_error(format!(
                    "downstream.interface {}: multicast sender",
                    d.interface
                )))?;
                Ok(Downstream {
                    socket: Some(socket),
                    dests: vec![group.into()],
                    other: None,
                })
            }
            Transport::UdpUnicast => {
                let socket = udp::bind(SocketAddr::new(d.interface.into(), 0), 1 << 20)
                    .map_err(io_error(format!("downstream.interface {}: bind", d.interface)))?;
                socket.set_nonblocking(false).map_err(io_error("downstream socket"))?;
                udp::set_sndbuf(&socket, 8 << 20);
                Ok(Downstream {
                    socket: Some(socket),
                    dests: d.subscribers.iter().map(|&a| a.into()).collect(),
                    other: None,
                })
            }
            Transport::Tcp | Transport::Shm | Transport::Memory => {
                unreachable!("opened by crate::transports")
            }
        }
    }

    /// Publishes the packets of `outbox` and empties it.
    pub(crate) fn send(&mut self, outbox: &mut Outbox, now: u64) -> Result<(), Error> {
        if let Some(p) = &mut self.other {
            for d in outbox.datagrams() {
                p.publish(now, d)?;
            }
            outbox.clear();
            p.flush();
            return Ok(());
        }
        let socket = self.socket.as_ref().expect("a UDP downstream has a socket");
        outbox
            .send_to_all(socket, &self.dests)
            .map_err(io_error("downstream: send"))
    }
}

/// Runs the sequencer until `stop` is set. Every socket is bound and the journal opened and
/// recovered before the first message is sequenced; any failure there is returned at once.
pub fn run_sequencer(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    let session = cfg.session();
    let sc = &cfg.sequencer;
    let mut journal = Journal::open(&cfg.journal_dir(), session.0, sc.segment_size)?;
    let mut recovered = Recovered::new_session();
    journal.read(1, usize::MAX, &mut |q, m| {
        recovered.replay(q, m);
        true
    })?;
    let upstream = udp::bind(sc.upstream, sc.recv_buffer)
        .map_err(io_error(format!("sequencer.upstream {}: bind", sc.upstream)))?;
    let mut down = Downstream::open(cfg, recovered.next_seq)?;
    // the loop publishes its counters only when someone can read them
    let board = sc.status.map(|_| Arc::new(crate::status::Board::default()));
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
    let replayer = if sc.replayer_in_process {
        let r = crate::replayer::Serving::bind(cfg, &cfg.journal_dir())?;
        let stop = stop.clone();
        Some(
            std::thread::Builder::new()
                .name("seqbus-replayer".into())
                .spawn(move || r.run(&stop))
                .map_err(io_error("replayer thread"))?,
        )
    } else {
        None
    };
    let result = sequence(
        cfg,
        &stop,
        &mut journal,
        recovered,
        &upstream,
        &mut down,
        board.as_deref(),
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
    result
}

fn sequence(
    cfg: &Config,
    stop: &AtomicBool,
    journal: &mut Journal,
    recovered: Recovered,
    upstream: &Socket,
    down: &mut Downstream,
    board: Option<&crate::status::Board>,
) -> Result<(), Error> {
    let sc = &cfg.sequencer;
    let params = SequencerParams {
        session: cfg.session(),
        max_packet: cfg.bus.max_packet,
        heartbeat_ns: sc.heartbeat_ms * 1_000_000,
        clock_tick_ns: sc.clock_tick_ms * 1_000_000,
        term: 0,
        leader: 0,
    };
    let mut seq = Sequencer::new(params, recovered, now_ns());
    let mut idler = Idler::new(sc.idle);
    let mut outbox = Outbox::default();
    let rx_slots = 64;
    let mut rx = udp::RecvBatch::new(rx_slots, 65_536);
    let mut last_sync = Instant::now();
    let fsync_interval = Duration::from_millis(sc.fsync_interval_ms);
    let fds = [upstream.as_raw_fd()];
    while !stop.load(Ordering::Relaxed) {
        let mut got = 0;
        while got < MAX_DATAGRAMS_PER_BATCH {
            let n = rx.recv(upstream).map_err(io_error("sequencer.upstream: recv"))?;
            if n == 0 {
                break;
            }
            // one clock read per batch of datagrams: they arrived together
            let now = now_ns();
            for i in 0..n {
                match rx.get(i) {
                    Some(d) => {
                        seq.handle_upstream(now, d);
                    }
                    None => seq.note_malformed(),
                }
            }
            got += n;
            if n < rx_slots {
                break;
            }
        }
        if let Some(p) = down.other.as_mut() {
            // Commands that came over TCP or the in-process queue; TCP logins and rewinds.
            got += p.poll(now_ns(), journal, &mut |d| {
                seq.handle_upstream(now_ns(), d);
            });
        }
        let now = now_ns();
        seq.handle_timeout(now);
        if seq.has_pending() {
            for (q, m) in seq.pending() {
                journal.append(q, m)?;
            }
            journal.flush()?;
            match sc.fsync {
                FsyncPolicy::Batch => journal.sync()?,
                FsyncPolicy::Interval if last_sync.elapsed() >= fsync_interval => {
                    journal.sync()?;
                    last_sync = Instant::now();
                }
                _ => {}
            }
            seq.packets(|p| outbox.push(p));
            down.send(&mut outbox, now)?;
            seq.published(now);
        } else if let Some(hb) = seq.poll_heartbeat(now) {
            outbox.push(&hb);
            down.send(&mut outbox, now)?;
        }
        if let Some(board) = board {
            board.update(&seq.stats(), seq.next_seq(), now);
        }
        if got == 0 {
            let wake = seq.next_timeout().saturating_sub(now_ns());
            let wake = Duration::from_nanos(wake).min(Duration::from_millis(50));
            match &down.other {
                Some(p) => {
                    let wake = p.idle_limit().map_or(wake, |l| wake.min(l));
                    let all: Vec<_> = fds.iter().copied().chain(p.fds()).collect();
                    idler.idle(&all, Instant::now() + wake);
                }
                None => idler.idle(&fds, Instant::now() + wake),
            }
        } else {
            idler.reset();
        }
    }
    journal.flush()?;
    journal.sync()?;
    if sc.end_session_on_stop {
        // sent a few times, spaced: there is no retransmission of an end of session
        for _ in 0..3 {
            outbox.push(&seq.end_of_session());
            down.send(&mut outbox, now_ns())?;
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(())
}

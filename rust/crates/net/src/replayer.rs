//! The replayer process loop: request socket → `seqbus_core::Replayer` over a journal →
//! answers sent unicast to the requester.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seqbus_core::Replayer;
use seqbus_journal::JournalReader;
use socket2::Socket;

use crate::config::Config;
use crate::idle::{IdleStrategy, Idler};
use crate::udp::{self, Outbox};
use crate::{io_error, Error};

/// A bound replayer, ready to serve.
pub(crate) struct Serving {
    socket: Socket,
    journal: JournalReader,
    replayer: Replayer,
}

impl Serving {
    /// Binds `[replayer].listen` and opens the journal in `dir` (created by the sequencer).
    pub(crate) fn bind(cfg: &Config, dir: &Path) -> Result<Serving, Error> {
        let r = &cfg.replayer;
        let socket = udp::bind(r.listen, 4 << 20)
            .map_err(io_error(format!("replayer.listen {}: bind", r.listen)))?;
        let _ = socket.set_send_buffer_size(16 << 20);
        let journal = JournalReader::open(dir, cfg.session().0)?;
        Ok(Serving {
            socket,
            journal,
            replayer: Replayer::new(cfg.session(), r.max_packet, r.max_messages_per_request),
        })
    }

    pub(crate) fn run(mut self, stop: &AtomicBool) -> Result<(), Error> {
        let mut buf = vec![0u8; 65_536];
        let mut outbox = Outbox::default();
        let mut idler = Idler::new(IdleStrategy::Block);
        let fds = [self.socket.as_raw_fd()];
        while !stop.load(Ordering::Relaxed) {
            match udp::try_recv(&self.socket, &mut buf).map_err(io_error("replayer: recv"))? {
                Some((n, from)) => {
                    self.replayer.handle_request(&buf[..n], &mut self.journal, &mut |p| {
                        outbox.push(p)
                    })?;
                    if !outbox.is_empty() {
                        // the requester may be gone; that is its problem, not the replayer's
                        if let Err(e) = outbox.send_to(&self.socket, &from) {
                            outbox.clear();
                            let _ = e;
                        }
                    }
                }
                None => idler.idle(&fds, Instant::now() + Duration::from_millis(50)),
            }
        }
        Ok(())
    }
}

/// Runs a standalone replayer serving `[replayer]` from `replayer.journal_dir` (default: the
/// sequencer's journal) until `stop` is set.
pub fn run_replayer(cfg: &Config, stop: Arc<AtomicBool>) -> Result<(), Error> {
    Serving::bind(cfg, &cfg.replayer_journal_dir())?.run(&stop)
}

//! Idle strategies: what a loop does when it found no work.

use std::os::fd::RawFd;
use std::time::Instant;

pub use seqbus_config::IdleStrategy;

const SPINS_BEFORE_YIELD: u32 = 2_000;

/// Carries out an [`IdleStrategy`].
#[derive(Debug)]
pub struct Idler {
    strategy: IdleStrategy,
    spins: u32,
}

impl Idler {
    pub fn new(strategy: IdleStrategy) -> Idler {
        Idler { strategy, spins: 0 }
    }

    /// Work was found: start spinning afresh.
    pub fn reset(&mut self) {
        self.spins = 0;
    }

    /// No work: wait per the strategy, at most until `until`, waking early when one of
    /// `fds` becomes readable (blocking strategy).
    pub fn idle(&mut self, fds: &[RawFd], until: Instant) {
        match self.strategy {
            IdleStrategy::BusySpin => std::hint::spin_loop(),
            IdleStrategy::SpinYield => {
                if self.spins < SPINS_BEFORE_YIELD {
                    self.spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            IdleStrategy::Block => {
                let now = Instant::now();
                if until <= now {
                    return;
                }
                let ms = (until - now)
                    .as_micros()
                    .div_ceil(1000)
                    .min(i32::MAX as u128) as i32;
                let pfd = |fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // no allocation for the usual few sockets (this runs on every wait)
                let mut few = [pfd(-1); 8];
                let mut many = Vec::new();
                let pfds: &mut [libc::pollfd] = if fds.len() <= few.len() {
                    for (p, &fd) in few.iter_mut().zip(fds) {
                        *p = pfd(fd);
                    }
                    &mut few[..fds.len()]
                } else {
                    many.extend(fds.iter().map(|&fd| pfd(fd)));
                    &mut many
                };
                // SAFETY: pfds is a valid array of pollfd for the duration of the call.
                unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
            }
        }
    }
}

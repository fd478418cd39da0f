//! Idle strategies: what a loop does when it found no work.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

pub use seqbus_config::IdleStrategy;

const SPINS_BEFORE_YIELD: u32 = 2_000;
/// The longest `hybrid` spins after the last work before it sleeps.
pub const HYBRID_SPIN: Duration = Duration::from_micros(50);
/// The shortest spin `hybrid` keeps; a window halved below it is none: `hybrid` then sleeps at
/// once, as `block` does, but for a probe now and then (so it notices when spinning pays
/// again).
const HYBRID_SPIN_MIN: Duration = Duration::from_micros(2);
/// With no spin window left, one stretch without work in this many spins the longest window
/// (a probe); each probe that finds nothing doubles the stretches to the next, up to
/// [`HYBRID_PROBE_MAX_EVERY`], and one that finds work sizes the window from the wait it saw.
const HYBRID_PROBE_EVERY: u32 = 8;
const HYBRID_PROBE_MAX_EVERY: u32 = 1024;
/// How long `busy-spin` goes without work before it sleeps until a socket is readable.
pub const BUSY_SPIN_LIMIT: Duration = Duration::from_millis(2);
/// How long `spin-yield` spins and yields without work before it sleeps.
pub const SPIN_YIELD_LIMIT: Duration = Duration::from_millis(1);

/// Carries out an [`IdleStrategy`].
#[derive(Debug)]
pub struct Idler {
    strategy: IdleStrategy,
    spins: u32,
    /// When the current stretch without work began.
    idle_since: Option<Instant>,
    /// `hybrid`: the spin window now, and whether this stretch went to sleep.
    spin: Duration,
    slept: bool,
    /// `hybrid`: how long this stretch spins (the window, or a probe's when it is none), the
    /// stretches begun while the window was none, and how many of them to the next probe.
    window: Duration,
    stretches: u32,
    probe_every: u32,
}

impl Idler {
    pub fn new(strategy: IdleStrategy) -> Idler {
        Idler {
            strategy,
            spins: 0,
            idle_since: None,
            spin: Idler::max_spin(strategy),
            slept: false,
            window: Idler::max_spin(strategy),
            stretches: 0,
            probe_every: HYBRID_PROBE_EVERY,
        }
    }

    /// The longest a strategy goes without work before it sleeps.
    fn max_spin(strategy: IdleStrategy) -> Duration {
        match strategy {
            IdleStrategy::BusySpin => BUSY_SPIN_LIMIT,
            IdleStrategy::SpinYield => SPIN_YIELD_LIMIT,
            IdleStrategy::Hybrid => HYBRID_SPIN,
            IdleStrategy::Block => Duration::ZERO,
        }
    }

    pub fn strategy(&self) -> IdleStrategy {
        self.strategy
    }

    /// Work was found: start spinning afresh.
    pub fn reset(&mut self) {
        // a spin that ended in a sleep was wasted (what it waited for needed a core this
        // process held); one that found work paid: halve, or double back
        if self.strategy == IdleStrategy::Hybrid && self.spin.is_zero() {
            if let Some(since) = self.idle_since {
                if !self.window.is_zero() {
                    // a probe: its spin found work after waiting `waited`, a window twice
                    // that long spins again; one that slept makes probes rarer
                    if self.slept {
                        self.probe_every = (self.probe_every * 2).min(HYBRID_PROBE_MAX_EVERY);
                    } else {
                        self.probe_every = HYBRID_PROBE_EVERY;
                        self.spin = (since.elapsed() * 2).clamp(HYBRID_SPIN_MIN, HYBRID_SPIN);
                    }
                }
            }
        } else if self.strategy != IdleStrategy::Block && self.idle_since.is_some() {
            self.spin = if self.slept {
                let half = self.spin / 2;
                match self.strategy {
                    // spinning does not pay here (more busy processes than cores): sleep at
                    // once, as `block` does, but for a probe now and then
                    IdleStrategy::Hybrid if half < HYBRID_SPIN_MIN => Duration::ZERO,
                    _ => half.max(HYBRID_SPIN_MIN),
                }
            } else {
                (self.spin * 2)
                    .max(HYBRID_SPIN_MIN)
                    .min(Idler::max_spin(self.strategy))
            };
        }
        self.spins = 0;
        self.idle_since = None;
        self.slept = false;
    }

    /// `hybrid`'s spin window now.
    pub fn spin_window(&self) -> Duration {
        self.spin
    }

    /// How long this stretch without work has lasted (starting it on the first call).
    fn idle_for(&mut self) -> Duration {
        let now = Instant::now();
        now - *self.idle_since.get_or_insert(now)
    }

    /// No work: wait per the strategy, at most until `until`, waking early when one of
    /// `fds` becomes readable (when it sleeps).
    pub fn idle(&mut self, fds: &[RawFd], until: Instant) {
        self.idle_unless(fds, until, || false)
    }

    /// [`Idler::idle`], but just before it would sleep it calls `ready`, which may announce
    /// the sleep to whoever wakes this thread (crate::pipeline: a stage's consumer says it is
    /// parked) and look once more for work: true, work came meanwhile, and it does not sleep.
    pub fn idle_unless(&mut self, fds: &[RawFd], until: Instant, ready: impl FnOnce() -> bool) {
        let sleep = |slept: &mut bool| {
            if !ready() {
                *slept = true;
                block(fds, until);
            }
        };
        match self.strategy {
            IdleStrategy::BusySpin => {
                if self.idle_for() >= self.spin {
                    sleep(&mut self.slept);
                } else {
                    std::hint::spin_loop();
                }
            }
            IdleStrategy::SpinYield => {
                if self.idle_for() >= self.spin {
                    sleep(&mut self.slept);
                } else if self.spins < SPINS_BEFORE_YIELD {
                    self.spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            IdleStrategy::Hybrid => {
                if self.idle_since.is_none() {
                    // a new stretch without work: how long it spins
                    self.window = if self.spin.is_zero() {
                        self.stretches = self.stretches.wrapping_add(1);
                        if self.stretches >= self.probe_every {
                            self.stretches = 0;
                            HYBRID_SPIN
                        } else {
                            Duration::ZERO
                        }
                    } else {
                        self.spin
                    };
                }
                if self.idle_for() >= self.window {
                    sleep(&mut self.slept);
                } else {
                    std::hint::spin_loop();
                }
            }
            IdleStrategy::Block => sleep(&mut self.slept),
        }
    }
}

/// Sleeps in `ppoll` until one of `fds` is readable or `until` (µs precision: `poll`'s
/// milliseconds would round a 200 µs retransmission timeout up to 1 ms).
fn block(fds: &[RawFd], until: Instant) {
    let now = Instant::now();
    if until <= now {
        return;
    }
    let left = until - now;
    let ts = libc::timespec {
        tv_sec: left.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: left.subsec_nanos() as libc::c_long,
    };
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
    // SAFETY: pfds is a valid array of pollfd and ts a valid timespec for the duration of
    // the call; a null signal mask leaves the mask as it is.
    unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        for (s, v) in [
            ("busy-spin", IdleStrategy::BusySpin),
            ("spin-yield", IdleStrategy::SpinYield),
            ("hybrid", IdleStrategy::Hybrid),
            ("block", IdleStrategy::Block),
        ] {
            assert_eq!(s.parse::<IdleStrategy>().unwrap(), v);
        }
        assert!("nap"
            .parse::<IdleStrategy>()
            .unwrap_err()
            .contains("hybrid"));
    }

    #[test]
    fn hybrid_sleeps_until_the_deadline_once_its_spin_is_over() {
        let mut i = Idler::new(IdleStrategy::Hybrid);
        i.idle(&[], Instant::now()); // starts the stretch
        std::thread::sleep(HYBRID_SPIN);
        let t = Instant::now();
        i.idle(&[], t + Duration::from_millis(30));
        assert!(
            t.elapsed() >= Duration::from_millis(29),
            "{:?}",
            t.elapsed()
        );
        assert!(i.slept);
    }

    #[test]
    fn hybrids_spin_halves_when_wasted_and_doubles_back_when_it_pays() {
        let mut i = Idler::new(IdleStrategy::Hybrid);
        let stretch = |i: &mut Idler, slept: bool| {
            i.idle_since = Some(Instant::now());
            i.slept = slept;
            i.reset();
        };
        stretch(&mut i, true);
        assert_eq!(i.spin_window(), HYBRID_SPIN / 2);
        stretch(&mut i, false);
        assert_eq!(i.spin_window(), HYBRID_SPIN);
        for _ in 0..4 {
            stretch(&mut i, true);
        }
        assert_eq!(i.spin_window(), HYBRID_SPIN / 16);
        // work found without any idle call in between changes nothing
        i.reset();
        assert_eq!(i.spin_window(), HYBRID_SPIN / 16);
        // halved below the shortest spin: none, as `block`
        for _ in 0..20 {
            stretch(&mut i, true);
        }
        assert_eq!(i.spin_window(), Duration::ZERO);
        // a probe that found work spins again
        stretch(&mut i, false);
        assert_eq!(i.spin_window(), HYBRID_SPIN_MIN);
        stretch(&mut i, false);
        assert_eq!(i.spin_window(), 2 * HYBRID_SPIN_MIN);
    }

    #[test]
    fn hybrid_without_a_window_sleeps_at_once_and_probes_ever_more_rarely() {
        let mut i = Idler::new(IdleStrategy::Hybrid);
        i.spin = Duration::ZERO;
        let mut probes = Vec::new();
        for n in 1..=3000u32 {
            // a stretch: its first idle call with a deadline already past returns at once
            i.idle(&[], Instant::now());
            if i.window > Duration::ZERO {
                assert_eq!(i.window, HYBRID_SPIN);
                probes.push(n);
            }
            i.slept = true; // as if it ended in a sleep: the probe found nothing
            i.reset();
            assert_eq!(i.spin_window(), Duration::ZERO);
        }
        // every failed probe doubles the stretches to the next, up to 1024
        assert_eq!(probes, [8, 24, 56, 120, 248, 504, 1016, 2040]);
    }

    #[test]
    fn a_probe_that_finds_work_sizes_the_window_from_its_wait() {
        let mut i = Idler::new(IdleStrategy::Hybrid);
        i.spin = Duration::ZERO;
        i.probe_every = 64;
        i.stretches = 63;
        i.idle(&[], Instant::now()); // the 64th stretch: a probe
        assert_eq!(i.window, HYBRID_SPIN);
        i.idle_since = Some(Instant::now() - Duration::from_micros(10)); // work after 10 us
        i.slept = false;
        i.reset();
        let w = i.spin_window();
        assert!(w >= Duration::from_micros(20) && w <= HYBRID_SPIN, "{w:?}");
        assert_eq!(i.probe_every, HYBRID_PROBE_EVERY);
        // found after 40 us: twice that is more than the longest window
        i.spin = Duration::ZERO;
        i.stretches = HYBRID_PROBE_EVERY - 1;
        i.idle(&[], Instant::now());
        i.idle_since = Some(Instant::now() - Duration::from_micros(40));
        i.slept = false;
        i.reset();
        assert_eq!(i.spin_window(), HYBRID_SPIN);
        // a stretch with no window that is not a probe changes nothing
        i.spin = Duration::ZERO;
        i.idle(&[], Instant::now());
        assert_eq!(i.window, Duration::ZERO);
        i.slept = true;
        i.reset();
        assert_eq!(
            (i.spin_window(), i.probe_every),
            (Duration::ZERO, HYBRID_PROBE_EVERY)
        );
    }

    #[test]
    fn busy_spin_keeps_its_shortest_window() {
        let mut i = Idler::new(IdleStrategy::BusySpin);
        for _ in 0..40 {
            i.idle_since = Some(Instant::now());
            i.slept = true;
            i.reset();
        }
        assert_eq!(i.spin_window(), HYBRID_SPIN_MIN);
    }
}

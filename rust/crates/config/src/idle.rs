//! The idle strategies a process may be configured with (`idle` keys); `seqbus-net` carries
//! them out.

use serde::Deserialize;

/// How a process waits for input (`idle` keys of the configuration; `seqbus-net`'s `Idler`
/// carries them out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleStrategy {
    /// Poll the sockets in a tight loop (lowest latency, one core at 100%); only after 2 ms
    /// without any work does it sleep until a socket is readable, so that on a host with more
    /// busy processes than cores the one it waits for can run (the limit adapts as `hybrid`'s
    /// spin does).
    BusySpin,
    /// Spin a while, then `sched_yield` between polls; after 1 ms without work, sleep like
    /// `block` (a yield does not hand the core over when every other process is busy too;
    /// the limit adapts as `hybrid`'s spin does).
    SpinYield,
    /// Spin for up to 50 µs after the last work (an answer that comes within a round trip is
    /// taken without a wake-up), then sleep like `block`. The spin adapts: it halves each time
    /// it ends without work and doubles back each time work came during it, so on a host with
    /// more busy processes than cores it shrinks to (almost) `block`.
    Hybrid,
    /// Sleep in `ppoll(2)` until a socket is readable or the next deadline.
    Block,
}

impl std::str::FromStr for IdleStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "busy-spin" => Ok(IdleStrategy::BusySpin),
            "spin-yield" => Ok(IdleStrategy::SpinYield),
            "hybrid" => Ok(IdleStrategy::Hybrid),
            "block" => Ok(IdleStrategy::Block),
            _ => Err(format!(
                "unknown idle strategy {s:?} (busy-spin, spin-yield, hybrid or block)"
            )),
        }
    }
}

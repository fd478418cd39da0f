//! The idle strategies a process may be configured with (`idle` keys); `seqbus-net` carries
//! them out.

use serde::Deserialize;

/// How a process waits for input (`idle` keys of the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleStrategy {
    /// Never sleep: poll the sockets in a tight loop (lowest latency, one core at 100%).
    BusySpin,
    /// Spin for a while, then `sched_yield` between polls.
    SpinYield,
    /// Sleep in `poll(2)` until a socket is readable or the next deadline.
    Block,
}

impl std::str::FromStr for IdleStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "busy-spin" => Ok(IdleStrategy::BusySpin),
            "spin-yield" => Ok(IdleStrategy::SpinYield),
            "block" => Ok(IdleStrategy::Block),
            _ => Err(format!(
                "unknown idle strategy {s:?} (busy-spin, spin-yield or block)"
            )),
        }
    }
}

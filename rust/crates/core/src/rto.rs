//! Retransmission timeouts from measured round trips, as TCP computes them (RFC 6298): a
//! smoothed round trip and its mean deviation; the timeout is their sum with four deviations,
//! kept between a floor and a ceiling, and doubled each time it expires with nothing confirmed.
//! Callers time only what was sent once (Karn's rule). Used for a node's commands, a node's
//! replay requests and a cluster leader's appends.

/// A retransmission timeout, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rto {
    srtt: u64,
    rttvar: u64,
    rto: u64,
    min: u64,
    max: u64,
}

impl Rto {
    /// `initial` until the first sample, then within `[min, max]`.
    pub fn new(initial: u64, min: u64, max: u64) -> Rto {
        let min = min.min(max).max(1);
        Rto {
            srtt: 0,
            rttvar: 0,
            rto: initial.clamp(min, max),
            min,
            max,
        }
    }

    /// Takes one round-trip sample.
    pub fn sample(&mut self, r: u64) {
        let r = r.max(1);
        if self.srtt == 0 {
            self.srtt = r;
            self.rttvar = r / 2;
        } else {
            self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(r)) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
        self.rto = (self.srtt + 4 * self.rttvar).clamp(self.min, self.max);
    }

    /// The timeout expired with nothing confirmed: double it (RFC 6298 5.5).
    pub fn backoff(&mut self) {
        self.rto = (self.rto * 2).min(self.max);
    }

    /// The timeout in force.
    pub fn get(&self) -> u64 {
        self.rto
    }

    /// The smoothed round trip (0 before the first sample).
    pub fn srtt(&self) -> u64 {
        self.srtt
    }

    /// Changes the floor.
    pub fn set_min(&mut self, min: u64) {
        self.min = min.min(self.max).max(1);
        self.rto = self.rto.max(self.min);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_samples_within_bounds_and_backs_off() {
        let mut r = Rto::new(50_000, 200, 50_000);
        assert_eq!(r.get(), 50_000);
        r.sample(100);
        // srtt 100, rttvar 50: 300
        assert_eq!((r.srtt(), r.get()), (100, 300));
        for _ in 0..50 {
            r.sample(100);
        }
        assert_eq!(r.get(), 200, "the floor");
        r.backoff();
        assert_eq!(r.get(), 400);
        for _ in 0..20 {
            r.backoff();
        }
        assert_eq!(r.get(), 50_000, "the ceiling");
        r.sample(1_000);
        assert!(r.get() > 1_000 && r.get() < 50_000);
    }
}

//! The phi-accrual failure detector (Hayashibara, Défago, Yared and Katayama, "The φ Accrual
//! Failure Detector", 2004; as Cassandra and Akka use it) that tells a slow peer from a dead
//! one (docs/ha.md, "Failure detection").
//!
//! A detector learns the intervals between a peer's arrivals and turns the silence since the
//! last one into φ = −log10(P(a silence at least this long | the peer is alive)). A peer is
//! suspected only when φ reaches the threshold **and** the silence is at least the configured
//! floor (`cluster.election_timeout_ms`): on a quiet host, where arrivals are regular, φ
//! rises past any threshold well before the floor, so a dead peer is suspected at the floor as
//! before; on a busy host, where a descheduled peer falls silent for tens of milliseconds now
//! and then, the learned spread keeps φ low for silences of that length, and it takes a longer
//! silence to suspect it.
//!
//! Arrivals closer together than `grain` (half the cluster heartbeat) count as one: a leader's
//! pipelined appends come microseconds apart while data flows and every `heartbeat` when it
//! does not, and what the detector must learn is how long the gaps between heartbeats get.
//!
//! Scheduler pauses are rare and long: a normal fit of hundreds of regular intervals and a few
//! pauses of 50 ms still puts a 50 ms silence at φ ≈ 12. So the longest silence the peer
//! survived also counts: a silence shorter than 1.5 times it is not suspected
//! ([`SURVIVED_MARGIN`]), up to [`SURVIVED_CAP`] election timeouts. The window of intervals
//! holds only seconds (1,000 heartbeats of an idle bus: 5 s), and a busy host pauses every
//! minute or so: the longest survived silence is remembered beyond it, halved every
//! [`SURVIVED_HALF_LIFE_NS`] of the peer's time, so a host that paused 30 ms a minute ago still
//! has a 40 ms silence taken for slow. Only a silence that ended with the same peer heard
//! again is learned (a replaced leader's is not), so what is tolerated grows by at most half at
//! a time, and a dead peer is still suspected within four election timeouts on the busiest
//! host.

use std::collections::VecDeque;

/// Intervals kept (the newest; Akka keeps 1000, Cassandra 1000) for φ: 5 s of an idle bus's
/// heartbeats.
pub const WINDOW: usize = 1000;
/// Fewer samples than this say nothing yet: the floor alone decides.
pub const MIN_SAMPLES: usize = 16;
/// A silence up to this many times the longest one survived in the window is not suspected.
pub const SURVIVED_MARGIN: f64 = 1.5;
/// ... but a silence of this many floors (election timeouts) always is (given φ).
pub const SURVIVED_CAP: u64 = 4;
/// The longest survived silence is halved every this long (of the peer's arrivals), however
/// many intervals came since.
pub const SURVIVED_HALF_LIFE_NS: u64 = 60_000_000_000;

/// The arrival history of one peer and the φ of its current silence.
#[derive(Debug, Clone)]
pub struct Detector {
    grain_ns: u64,
    /// The spread assumed at least (a perfectly regular history would otherwise make any
    /// lateness infinitely suspicious).
    min_std_ns: f64,
    last_ns: Option<u64>,
    intervals: VecDeque<u64>,
    sum: f64,
    sum_sq: f64,
    /// The longest silence survived, halved every [`SURVIVED_HALF_LIFE_NS`].
    survived_ns: f64,
}

impl Detector {
    /// A detector that merges arrivals closer than `grain_ns` and assumes a spread of at least
    /// `min_std_ns`.
    pub fn new(grain_ns: u64, min_std_ns: u64) -> Detector {
        Detector {
            grain_ns: grain_ns.max(1),
            min_std_ns: min_std_ns.max(1) as f64,
            last_ns: None,
            intervals: VecDeque::new(),
            sum: 0.0,
            sum_sq: 0.0,
            survived_ns: 0.0,
        }
    }

    /// The peer was heard at `now_ns`.
    pub fn heard(&mut self, now_ns: u64) {
        match self.last_ns {
            None => self.last_ns = Some(now_ns),
            Some(last) if now_ns >= last + self.grain_ns => {
                let d = now_ns - last;
                if self.intervals.len() == WINDOW {
                    let old = self.intervals.pop_front().expect("full") as f64;
                    self.sum -= old;
                    self.sum_sq -= old * old;
                }
                self.intervals.push_back(d);
                self.sum += d as f64;
                self.sum_sq += (d as f64) * (d as f64);
                let fade = 0.5f64.powf(d as f64 / SURVIVED_HALF_LIFE_NS as f64);
                self.survived_ns = (self.survived_ns * fade).max(d as f64);
                self.last_ns = Some(now_ns);
            }
            Some(_) => {}
        }
    }

    /// Forgets when the peer was last heard (a new leader: its first arrival starts a new
    /// silence), keeping what the intervals taught.
    pub fn restart(&mut self) {
        self.last_ns = None;
    }

    /// The silence φ and [`Detector::suspects`] judge at `now_ns`: from the last arrival
    /// counted (the first of a burst closer together than the grain), None before any.
    pub fn silence(&self, now_ns: u64) -> Option<u64> {
        self.last_ns.map(|last| now_ns.saturating_sub(last))
    }

    /// Samples learned so far.
    pub fn samples(&self) -> usize {
        self.intervals.len()
    }

    /// φ of the silence from the last arrival to `now_ns`: 0 when nothing was heard yet,
    /// infinite while fewer than [`MIN_SAMPLES`] intervals are known (then only the floor
    /// counts).
    pub fn phi(&self, now_ns: u64) -> f64 {
        let Some(last) = self.last_ns else {
            return 0.0;
        };
        let n = self.intervals.len();
        if n < MIN_SAMPLES {
            return f64::INFINITY;
        }
        let mean = self.sum / n as f64;
        let var = (self.sum_sq / n as f64 - mean * mean).max(0.0);
        let std = var.sqrt().max(self.min_std_ns);
        phi_normal(now_ns.saturating_sub(last) as f64, mean, std)
    }

    /// The silence tolerated before φ is asked: `floor_ns`, or 1.5 times the longest one the
    /// peer survived (remembered, halved every [`SURVIVED_HALF_LIFE_NS`]) when that is longer,
    /// up to four floors (with the detector off, `threshold` 0, the floor alone).
    pub fn tolerated(&self, floor_ns: u64, threshold: f64) -> u64 {
        if threshold <= 0.0 || self.intervals.len() < MIN_SAMPLES {
            return floor_ns;
        }
        let longest = self.survived_ns as u64;
        let learned = (longest as f64 * SURVIVED_MARGIN) as u64;
        learned
            .min(floor_ns.saturating_mul(SURVIVED_CAP))
            .max(floor_ns)
    }

    /// Whether the peer is taken for dead at `now_ns`: silent for at least what is
    /// [tolerated](Detector::tolerated), and φ at or above `threshold`.
    pub fn suspects(&self, now_ns: u64, floor_ns: u64, threshold: f64) -> bool {
        match self.last_ns {
            None => true,
            Some(last) => {
                now_ns >= last.saturating_add(self.tolerated(floor_ns, threshold))
                    && self.phi(now_ns) >= threshold
            }
        }
    }
}

/// φ of a silence of `t` under a normal distribution of intervals (mean, std), with the
/// logistic approximation of its tail that Akka uses (error below 0.0002).
fn phi_normal(t: f64, mean: f64, std: f64) -> f64 {
    let y = (t - mean) / std;
    let e = (-y * (1.5976 + 0.070566 * y * y)).exp();
    if t > mean {
        if e == 0.0 {
            // far out in the tail: P underflows, φ is as large as it gets
            return f64::INFINITY;
        }
        -(e / (1.0 + e)).log10()
    } else {
        -(1.0 - 1.0 / (1.0 + e)).log10()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn regular(every: u64, n: u64) -> Detector {
        let mut d = Detector::new(2 * MS + MS / 2, MS);
        for i in 0..n {
            d.heard(i * every);
        }
        d
    }

    #[test]
    fn phi_grows_with_the_silence() {
        let d = regular(5 * MS, 100);
        let last = 99 * 5 * MS;
        let mut before = -1.0;
        for ms in [1, 5, 8, 10, 15, 20] {
            let phi = d.phi(last + ms * MS);
            assert!(phi >= before, "{ms} ms: {phi} after {before}");
            before = phi;
        }
        assert!(d.phi(last + 5 * MS) < 1.0);
        assert!(d.phi(last + 20 * MS) > 8.0);
    }

    #[test]
    fn a_regular_peer_is_suspected_at_the_floor_a_peer_with_pauses_later() {
        let floor = 40 * MS;
        let quiet = regular(5 * MS, 200);
        let last = 199 * 5 * MS;
        assert!(!quiet.suspects(last + floor - 1, floor, 8.0));
        assert!(quiet.suspects(last + floor, floor, 8.0));
        // one pause of 45 ms in every ten heartbeats: a 45 ms silence is expected now
        let mut busy = Detector::new(2 * MS + MS / 2, MS);
        let mut t = 0;
        for i in 0..200 {
            busy.heard(t);
            t += if i % 10 == 9 { 45 * MS } else { 5 * MS };
        }
        let last = t - if 199 % 10 == 9 { 45 * MS } else { 5 * MS };
        assert!(!busy.suspects(last + floor, floor, 8.0));
        assert!(!busy.suspects(last + 60 * MS, floor, 8.0));
        // 1.5 × 45 ms, faded by the second since
        let tolerated = busy.tolerated(floor, 8.0);
        assert!(
            (67 * MS..=67 * MS + MS / 2).contains(&tolerated),
            "{tolerated}"
        );
        assert!(!busy.suspects(last + 67 * MS, floor, 8.0));
        // a silence far past what it ever did is still suspected
        assert!(busy.suspects(last + 120 * MS, floor, 8.0));
        // rare pauses: a normal fit alone would suspect them, the survived silence does not
        let mut rare = Detector::new(2 * MS + MS / 2, MS);
        let (mut t, mut last) = (0, 0);
        for i in 0..1000 {
            rare.heard(t);
            last = t;
            t += if i % 50 == 49 { 48 * MS } else { 5 * MS / 2 };
        }
        assert!(rare.phi(last + 48 * MS) > 8.0);
        assert!(!rare.suspects(last + 48 * MS, floor, 8.0));
        // the cap: four floors at most, however long the survived silence
        rare.heard(last + 500 * MS);
        assert_eq!(rare.tolerated(floor, 8.0), 4 * floor);
        // the detector off: the floor alone
        assert_eq!(rare.tolerated(floor, 0.0), floor);
    }

    #[test]
    fn a_survived_pause_is_remembered_past_the_window_and_fades() {
        let floor = 40 * MS;
        let mut d = Detector::new(2 * MS + MS / 2, MS);
        let mut t = 0;
        for _ in 0..100 {
            d.heard(t);
            t += 5 * MS;
        }
        d.heard(t + 30 * MS); // a pause of 35 ms, survived
        t += 30 * MS;
        assert_eq!(d.tolerated(floor, 8.0), 52_500_000);
        // 20 s of regular heartbeats: four windows, and the pause is still remembered
        for _ in 0..4_000 {
            t += 5 * MS;
            d.heard(t);
        }
        assert!(d.samples() == WINDOW && d.intervals.iter().all(|&i| i == 5 * MS));
        let tolerated = d.tolerated(floor, 8.0);
        assert!((41 * MS..45 * MS).contains(&tolerated), "{tolerated}");
        assert!(
            !d.suspects(t + 41 * MS, floor, 8.0),
            "a 41 ms silence is slow, not dead"
        );
        assert!(d.suspects(t + 46 * MS, floor, 8.0));
        // a minute later it counts for less than the floor
        for _ in 0..12_000 {
            t += 5 * MS;
            d.heard(t);
        }
        assert_eq!(d.tolerated(floor, 8.0), floor);
    }

    #[test]
    fn arrivals_within_a_grain_count_once_and_few_samples_leave_it_to_the_floor() {
        let mut d = Detector::new(2 * MS, MS);
        d.heard(0);
        for us in 1..100 {
            d.heard(us * 1000); // pipelined appends, 1 µs apart
        }
        assert_eq!(d.samples(), 0);
        d.heard(5 * MS);
        assert_eq!(d.samples(), 1);
        assert_eq!(d.phi(6 * MS), f64::INFINITY);
        assert!(!d.suspects(6 * MS, 40 * MS, 8.0));
        assert!(d.suspects(45 * MS, 40 * MS, 8.0));
        d.restart();
        assert_eq!(d.phi(100 * MS), 0.0);
        assert!(d.suspects(100 * MS, 40 * MS, 8.0), "never heard: suspected");
    }
}

//! The project's one seeded generator, splitmix64 (Steele, Lea and Flood, 2014): election
//! timeouts in a cluster member, and the simulator's network decisions. Small, fast and
//! reproducible from its seed; not for anything an adversary may predict.

/// A splitmix64 generator; the field is its state (the seed to start from).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: f64) -> bool {
        pct > 0.0 && (self.next_u64() % 1_000_000) as f64 / 10_000.0 < pct
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_sequence_is_splitmix64s() {
        // the reference outputs of splitmix64 seeded with 1234567
        let mut r = Rng(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        let mut a = Rng(7);
        let mut b = Rng(7);
        assert!((0..100).all(|_| a.range(10, 20) == b.range(10, 20)));
        assert!((0..1000).all(|_| (10..=20).contains(&a.range(10, 20))));
        assert!(!a.chance(0.0));
    }
}

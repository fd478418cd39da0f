//! Authentication of upstream packets (docs/upstream.md, "Authentication"): a per-account key,
//! a MAC over the whole packet (BLAKE3 in keyed mode, truncated to 128 bits) and a per-sender
//! nonce that lets the sequencer tell a replayed or stale packet from a fresh one.
//!
//! The nonce is `boot_ns` (the sender's start, ns since the Unix epoch) and a `counter` of
//! the packets it sealed since. The sequencer keeps, per `(account, instance)`, the newest boot
//! and a window of the last [`WINDOW`] counters of that boot, as IPsec's anti-replay window
//! (RFC 4303 §3.4.3) does: a counter seen before is a replay, one older than the window or of
//! an older boot is stale.
//!
//! Downstream (docs/sites.md, "Downstream authentication"): with a bus-wide downstream key,
//! every MoldUDP64 datagram carries [`MAC_LEN`] bytes after its last message block, the MAC of
//! everything before them ([`seal_downstream`], [`open_downstream`]). It needs no nonce: a
//! captured genuine packet sent again carries the genuine messages of its sequence numbers,
//! which a node drops as duplicates.

/// Bytes of a key.
pub const KEY_LEN: usize = 32;
/// Bytes of the MAC a packet carries (BLAKE3 keyed hash, truncated).
pub const MAC_LEN: usize = 16;
/// Bytes an authenticated upstream packet carries after its command blocks:
/// `boot_ns u64 | counter u64 | mac [16]`.
pub const TRAILER_LEN: usize = 16 + MAC_LEN;
/// Counters below the newest by this many or more are stale.
pub const WINDOW: u64 = 64;

/// A 256-bit MAC key. Its `Debug` shows nothing of it, so it never reaches a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; KEY_LEN]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(<hidden>)")
    }
}

impl Key {
    pub fn new(bytes: [u8; KEY_LEN]) -> Key {
        Key(bytes)
    }

    /// A key from 64 hexadecimal digits (surrounding white space ignored). The error never
    /// repeats the text.
    pub fn from_hex(text: &str) -> Result<Key, String> {
        let t = text.trim();
        if t.len() != 2 * KEY_LEN {
            return Err(format!(
                "a key is {KEY_LEN} bytes written as {} hexadecimal digits (got {} characters)",
                2 * KEY_LEN,
                t.len()
            ));
        }
        let mut k = [0u8; KEY_LEN];
        for (i, pair) in t.as_bytes().chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(h), Some(l)) => k[i] = (h * 16 + l) as u8,
                _ => return Err(format!("not a hexadecimal digit at position {}", 2 * i)),
            }
        }
        Ok(Key(k))
    }

    /// The MAC of `data`.
    pub fn mac(&self, data: &[u8]) -> [u8; MAC_LEN] {
        let h = blake3::keyed_hash(&self.0, data);
        h.as_bytes()[..MAC_LEN].try_into().expect("16 bytes")
    }

    /// True when `mac` is the MAC of `data` (compared in constant time).
    pub fn verify(&self, data: &[u8], mac: &[u8]) -> bool {
        let want = self.mac(data);
        mac.len() == MAC_LEN && want.iter().zip(mac).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
    }
}

/// Separates downstream MACs from upstream ones: a key used for both never makes an upstream
/// packet's MAC valid downstream.
const DOWNSTREAM_CONTEXT: &[u8] = b"seqbus downstream MoldUDP64\0";

impl Key {
    /// The downstream MAC of `packet` (a whole MoldUDP64 packet).
    pub fn downstream_mac(&self, packet: &[u8]) -> [u8; MAC_LEN] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(DOWNSTREAM_CONTEXT);
        h.update(packet);
        h.finalize().as_bytes()[..MAC_LEN]
            .try_into()
            .expect("16 bytes")
    }
}

/// Appends `packet` and its downstream MAC to `out` (the datagram a keyed bus sends).
pub fn seal_downstream(key: &Key, packet: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(packet);
    out.extend_from_slice(&key.downstream_mac(packet));
}

/// The MoldUDP64 packet of a datagram sealed by [`seal_downstream`] with `key`; None when the
/// trailer is missing or the MAC is not that of the bytes before it (compared in constant
/// time).
pub fn open_downstream<'a>(key: &Key, datagram: &'a [u8]) -> Option<&'a [u8]> {
    let cut = datagram.len().checked_sub(MAC_LEN)?;
    let (packet, mac) = datagram.split_at(cut);
    let want = key.downstream_mac(packet);
    let diff = want.iter().zip(mac).fold(0u8, |d, (a, b)| d | (a ^ b));
    (diff == 0).then_some(packet)
}

/// A sender's nonce: its start and the number of packets it sealed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nonce {
    pub boot_ns: u64,
    pub counter: u64,
}

/// What a [`ReplayWindow`] says of a nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    Fresh,
    /// This very nonce was accepted before.
    Replayed,
    /// Of an older boot of the sender, or older than the window.
    Stale,
}

/// The anti-replay state of one sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayWindow {
    boot: u64,
    top: u64,
    /// Bit i: counter `top - i` was accepted.
    seen: u64,
}

impl ReplayWindow {
    /// The window after accepting the sender's first nonce.
    pub fn new(n: Nonce) -> ReplayWindow {
        ReplayWindow {
            boot: n.boot_ns,
            top: n.counter,
            seen: 1,
        }
    }

    pub fn check(&self, n: Nonce) -> Freshness {
        if n.boot_ns != self.boot {
            return if n.boot_ns < self.boot {
                Freshness::Stale
            } else {
                Freshness::Fresh
            };
        }
        if n.counter > self.top {
            return Freshness::Fresh;
        }
        let back = self.top - n.counter;
        if back >= WINDOW {
            Freshness::Stale
        } else if self.seen & (1 << back) != 0 {
            Freshness::Replayed
        } else {
            Freshness::Fresh
        }
    }

    /// Records a nonce [`ReplayWindow::check`] found fresh (after its MAC was verified).
    pub fn accept(&mut self, n: Nonce) {
        if n.boot_ns > self.boot {
            *self = ReplayWindow::new(n);
        } else if n.counter > self.top {
            let shift = n.counter - self.top;
            self.seen = if shift >= WINDOW {
                0
            } else {
                self.seen << shift
            } | 1;
            self.top = n.counter;
        } else {
            self.seen |= 1 << (self.top - n.counter);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_from_hex_and_hide_in_debug() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let k = Key::from_hex(&format!("  {hex}\n")).unwrap();
        assert_eq!(format!("{k:?}"), "Key(<hidden>)");
        let e = Key::from_hex("abc").unwrap_err();
        assert!(e.contains("64 hexadecimal digits"), "{e}");
        assert!(!e.contains("abc"), "the text is not repeated: {e}");
        assert!(Key::from_hex(&hex.replace('0', "g")).is_err());
    }

    #[test]
    fn macs_verify_and_differ_by_key_and_data() {
        let a = Key::new([1; 32]);
        let b = Key::new([2; 32]);
        let m = a.mac(b"hello");
        assert!(a.verify(b"hello", &m));
        assert!(!b.verify(b"hello", &m));
        assert!(!a.verify(b"hellp", &m));
        assert!(!a.verify(b"hello", &m[..15]));
    }

    #[test]
    fn downstream_datagrams_open_only_with_their_key_and_unaltered() {
        let key = Key::new([3; 32]);
        let packet = b"SESSION001\0\0\0\0\0\0\0\x07\0\x01\0\x02hi";
        let mut d = Vec::new();
        seal_downstream(&key, packet, &mut d);
        assert_eq!(d.len(), packet.len() + MAC_LEN);
        assert_eq!(open_downstream(&key, &d), Some(&packet[..]));
        assert_eq!(open_downstream(&Key::new([4; 32]), &d), None, "another key");
        for i in 0..d.len() {
            let mut altered = d.clone();
            altered[i] ^= 0x40;
            assert_eq!(open_downstream(&key, &altered), None, "byte {i} altered");
        }
        assert_eq!(open_downstream(&key, packet), None, "no trailer");
        assert_eq!(open_downstream(&key, &d[..MAC_LEN - 1]), None, "too short");
        // an upstream MAC of the same bytes under the same key is not a downstream one
        let mut upstream_style = packet.to_vec();
        upstream_style.extend_from_slice(&key.mac(packet));
        assert_eq!(open_downstream(&key, &upstream_style), None);
    }

    #[test]
    fn the_window_tells_fresh_replayed_and_stale() {
        let n = |boot, counter| Nonce {
            boot_ns: boot,
            counter,
        };
        let mut w = ReplayWindow::new(n(100, 5));
        assert_eq!(w.check(n(100, 5)), Freshness::Replayed);
        assert_eq!(
            w.check(n(100, 4)),
            Freshness::Fresh,
            "late but in the window"
        );
        w.accept(n(100, 4));
        assert_eq!(w.check(n(100, 4)), Freshness::Replayed);
        w.accept(n(100, 70));
        assert_eq!(w.check(n(100, 7)), Freshness::Fresh);
        assert_eq!(w.check(n(100, 6)), Freshness::Stale, "64 behind the newest");
        assert_eq!(w.check(n(100, 70)), Freshness::Replayed);
        assert_eq!(w.check(n(99, 1000)), Freshness::Stale, "an older boot");
        assert_eq!(w.check(n(101, 1)), Freshness::Fresh, "the sender restarted");
        w.accept(n(101, 1));
        assert_eq!(w.check(n(100, 71)), Freshness::Stale);
        w.accept(n(101, 1000));
        assert_eq!(w.check(n(101, 1)), Freshness::Stale);
    }
}

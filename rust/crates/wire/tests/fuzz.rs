//! Property-based fuzzing of every parser: arbitrary bytes never panic and never yield a view
//! that reads past its buffer; valid packets round-trip; any mutation of a valid packet either
//! parses consistently or is rejected.
//!
//! Each property runs 2,000 cases in `cargo test`; `SEQBUS_FUZZ_INPUTS=1000000` (what
//! `make fuzz` sets) runs that many per property: docs/benchmarks.md records such a run.

use proptest::prelude::*;
use seqbus_wire::control::Control;
use seqbus_wire::envelope::Envelope;
use seqbus_wire::mold::{MoldPacket, MoldWriter, Request};
use seqbus_wire::upstream::{Command, UpstreamPacket, UpstreamWriter, TYPE_COMMANDS};
use seqbus_wire::Session;

fn walk_mold(p: &MoldPacket<'_>, len: usize) -> usize {
    let mut total = 20;
    for (_, m) in p.messages() {
        total += 2 + m.len();
    }
    assert!(total <= len);
    total
}

/// Cases per property: `SEQBUS_FUZZ_INPUTS`, or `default`.
fn fuzz_config(default: u64) -> ProptestConfig {
    ProptestConfig {
        cases: seqbus_wire::fuzz_inputs(default) as u32,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(fuzz_config(2000))]

    #[test]
    fn mold_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(p) = MoldPacket::parse(&bytes) {
            let used = walk_mold(&p, bytes.len());
            prop_assert!(p.message_count() == 0 || used == bytes.len());
        }
    }

    #[test]
    fn mold_round_trip_and_mutations(
        seq in 1u64..u64::MAX / 2,
        msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..60), 1..20),
        flip in any::<(usize, u8)>(),
        cut in any::<usize>(),
    ) {
        let mut w = MoldWriter::new(2000);
        w.begin(Session::new("FUZZ").unwrap(), seq);
        for m in &msgs {
            prop_assert!(w.push(m));
        }
        let bytes = w.bytes().to_vec();
        let p = MoldPacket::parse(&bytes).unwrap();
        let got: Vec<_> = p.messages().map(|(q, m)| (q, m.to_vec())).collect();
        let want: Vec<_> = msgs.iter().enumerate().map(|(i, m)| (seq + i as u64, m.clone())).collect();
        prop_assert_eq!(got, want);
        let mut m = bytes.clone();
        let i = flip.0 % m.len();
        m[i] ^= flip.1 | 1;
        if let Ok(p) = MoldPacket::parse(&m) {
            walk_mold(&p, m.len());
        }
        let c = cut % bytes.len();
        prop_assert!(MoldPacket::parse(&bytes[..c]).is_err());
    }

    #[test]
    fn request_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        if let Ok(r) = Request::parse(&bytes) {
            prop_assert_eq!(&r.encode()[..], &bytes[..]);
            prop_assert!(r.sequence > 0 && r.count > 0 && r.count < 0xFFFF);
        }
    }

    #[test]
    fn upstream_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(p) = UpstreamPacket::parse(&bytes) {
            let mut n = 0;
            for c in p.commands() {
                prop_assert!(c.fragment.len() <= c.body_length as usize);
                n += 1;
            }
            prop_assert_eq!(n, p.count() as usize);
        }
    }

    #[test]
    fn upstream_round_trip_and_mutations(
        cmds in proptest::collection::vec((1u64.., proptest::collection::vec(any::<u8>(), 0..50)), 1..10),
        flip in any::<(usize, u8)>(),
    ) {
        let mut w = UpstreamWriter::new(1400);
        w.begin(TYPE_COMMANDS, Session::new("FUZZ").unwrap(), *b"ACCT\0\0\0\0", 7);
        for (s, f) in &cmds {
            let c = Command { command_seq: *s, body_length: f.len() as u32, flags: 0, fragment: f };
            prop_assert!(w.push(&c));
        }
        let bytes = w.bytes().to_vec();
        let p = UpstreamPacket::parse(&bytes).unwrap();
        let got: Vec<_> = p.commands().map(|c| (c.command_seq, c.fragment.to_vec())).collect();
        prop_assert_eq!(&got, &cmds);
        let mut m = bytes.clone();
        let i = flip.0 % m.len();
        m[i] ^= flip.1 | 1;
        if let Ok(p) = UpstreamPacket::parse(&m) {
            for c in p.commands() {
                prop_assert!(c.fragment.len() <= c.body_length as usize);
            }
        }
    }

    #[test]
    fn envelope_and_control_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(e) = Envelope::parse(&bytes) {
            prop_assert_eq!(&e.encode()[..], &bytes[..32]);
        }
        if let Ok(c) = Control::parse(&bytes) {
            // what parses re-encodes to a prefix-compatible message of the same kind
            prop_assert_eq!(Control::parse(&c.encode()).unwrap(), c);
        }
    }

    #[test]
    fn cluster_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(m) = seqbus_wire::cluster::Message::parse(&bytes) {
            // what parses re-encodes to the same bytes (reserved bytes aside)
            let mut out = Vec::new();
            seqbus_wire::cluster::encode(&mut out, m.session, m.from, m.term, &m.body);
            let again = seqbus_wire::cluster::Message::parse(&out).unwrap();
            prop_assert_eq!(again, m);
        }
        let _ = seqbus_wire::cluster::Announce::parse(&bytes);
    }

    #[test]
    fn cluster_append_mutations(
        entries in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..6),
        cut in 0usize..400,
        flip in 0usize..400,
    ) {
        let mut w = seqbus_wire::cluster::AppendWriter::new(1400);
        w.begin(seqbus_wire::Session::new("F").unwrap(), 1, 2, 3, 1, 2);
        for e in &entries {
            prop_assert!(w.push(e));
        }
        let good = w.bytes().to_vec();
        let m = seqbus_wire::cluster::Message::parse(&good).unwrap();
        let seqbus_wire::cluster::Body::Append(a) = m.body else { panic!("not an append") };
        prop_assert_eq!(a.entries().map(|e| e.to_vec()).collect::<Vec<_>>(), entries);
        let mut bad = good.clone();
        bad.truncate(cut.min(good.len()));
        if bad.len() < good.len() {
            prop_assert!(seqbus_wire::cluster::Message::parse(&bad).is_err());
        }
        let mut flipped = good.clone();
        let i = flip % flipped.len();
        flipped[i] ^= 0xFF;
        if let Ok(m) = seqbus_wire::cluster::Message::parse(&flipped) {
            if let seqbus_wire::cluster::Body::Append(a) = m.body {
                prop_assert!(a.entries().map(|e| e.len() + 2).sum::<usize>() + 52 == flipped.len());
            }
        }
    }
}

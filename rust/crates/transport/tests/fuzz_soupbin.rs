//! Fuzzing of the SoupBinTCP parser and both session state machines: 1,000,000 inputs per
//! run — random bytes, and valid streams with bytes flipped, inserted, removed or cut —
//! split at random points. Nothing may panic; every input ends parsed, waiting for more
//! bytes, or closed with a reason. The generator is seeded, so a failure reproduces.
//!
//! `SEQBUS_FUZZ_INPUTS` overrides the count, `SEQBUS_FUZZ_SEED` the seed.

use seqbus_transport::soupbin::frame::{self, LoginRequest, Packet, RejectReason};
use seqbus_transport::soupbin::{ClientSession, ServerSession, ServerState, Timing};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn valid_stream(rng: &mut Rng, from_server: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..1 + rng.below(6) {
        let data: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
        let p = if from_server {
            match rng.below(6) {
                0 => Packet::LoginAccepted {
                    session: *b"SESSION   ",
                    sequence: rng.next() % 1_000_000,
                },
                1 => Packet::LoginRejected(if rng.below(2) == 0 {
                    RejectReason::NotAuthorized
                } else {
                    RejectReason::SessionNotAvailable
                }),
                2 => Packet::ServerHeartbeat,
                3 => Packet::EndOfSession,
                4 => Packet::Debug(&data),
                _ => Packet::SequencedData(&data),
            }
        } else {
            match rng.below(5) {
                0 => Packet::LoginRequest(
                    LoginRequest::new("user", "pw", "", rng.next() % 1000).unwrap(),
                ),
                1 => Packet::ClientHeartbeat,
                2 => Packet::LogoutRequest,
                3 => Packet::Debug(&data),
                _ => Packet::UnsequencedData(&data),
            }
        };
        frame::write(&mut out, &p);
    }
    out
}

fn mutate(rng: &mut Rng, mut b: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        match rng.below(5) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(b.len() + 1);
                b.insert(i, rng.next() as u8);
            }
            2 if !b.is_empty() => {
                let i = rng.below(b.len());
                b.remove(i);
            }
            3 if !b.is_empty() => {
                let n = rng.below(b.len());
                b.truncate(n);
            }
            _ => {
                // A length prefix set to something interesting.
                if b.len() >= 2 {
                    let v = [0u16, 1, 2, 46, 47, 48, 0x7fff, 0xffff][rng.below(8)];
                    b[..2].copy_from_slice(&v.to_be_bytes());
                }
            }
        }
    }
    b
}

#[test]
fn a_million_inputs_through_parser_and_sessions() {
    let inputs = seqbus_wire::fuzz_inputs(1_000_000);
    let seed: u64 = std::env::var("SEQBUS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eb0_5eb0);
    let mut rng = Rng(seed | 1);
    let timing = Timing::default();
    let login = LoginRequest::new("user", "pw", "", 1).unwrap();
    let (mut parsed, mut closed) = (0u64, 0u64);
    for i in 0..inputs {
        let from_server = i % 2 == 0;
        let input = match rng.below(3) {
            0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
            _ => {
                let v = valid_stream(&mut rng, from_server);
                mutate(&mut rng, v)
            }
        };
        // The parser alone, over the whole input.
        let mut at = 0;
        while at < input.len() {
            match frame::parse(&input[at..], 65_535) {
                Ok(Some((_, used))) => {
                    assert!(used >= 3 && at + used <= input.len(), "input {i}");
                    at += used;
                    parsed += 1;
                }
                Ok(None) | Err(_) => break,
            }
        }
        // The sessions, fed in random pieces.
        let cut = rng.below(input.len() + 1);
        if from_server {
            let mut c = ClientSession::new(0, &login, timing, 1 + rng.below(70_000));
            let mut ok = true;
            for part in [&input[..cut], &input[cut..]] {
                c.handle_input(1, part, &mut |e| {
                    if let seqbus_transport::soupbin::ClientEvent::Closed(r) = e {
                        assert!(!r.is_empty());
                        ok = false;
                    }
                });
            }
            closed += u64::from(!ok);
        } else {
            let mut s = ServerSession::new(0, timing, 1 + rng.below(70_000));
            for part in [&input[..cut], &input[cut..]] {
                s.handle_input(1, part, &mut |d| assert!(d.len() < 70_000));
                if let ServerState::LoginPending(_) = s.state() {
                    s.accept(1, *b"SESSION   ", 1);
                    s.handle_input(1, &[], &mut |_| {});
                }
            }
            if let Some(r) = s.close_reason() {
                assert!(!r.is_empty());
                closed += 1;
            }
        }
    }
    assert!(
        parsed > inputs / 2,
        "the generator makes mostly parseable packets: {parsed}"
    );
    assert!(
        closed > inputs / 20,
        "and plenty of malformed ones: {closed}"
    );
    eprintln!("fuzz: {inputs} inputs, {parsed} packets parsed, {closed} links closed with a reason, 0 crashes");
}

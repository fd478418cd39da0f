//! Fragment reassembly: a body larger than a packet is sent as several commands (envelope
//! flag 1, more follow; flag 2, the last), each sequenced as a message of its own. The
//! fragments of one sender account are consecutive among its own messages (a node sends
//! one command at a time, in order); other senders' messages may lie between them. The
//! whole body is handed out at the last fragment, under its sequence.

use std::collections::HashMap;

use seqbus_wire::envelope::FLAG_LAST_FRAGMENT;
use seqbus_wire::{Account, Envelope};

/// What a message is once reassembly has seen it.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A whole body: the message's own, or the fragments' joined (`fragments` > 1).
    Whole { body: &'a [u8], fragments: u32 },
    /// A fragment with more to follow.
    More,
    /// A last fragment whose body does not add up to the length its envelope gives (the
    /// earlier fragments were not seen: the stream was entered between them, or they were
    /// damaged): reassembled length, expected length.
    Short { have: usize, want: u32 },
}

/// The fragments of every sender account that are waiting for their last one.
#[derive(Debug, Default)]
pub struct Reassembler {
    open: HashMap<Account, (Vec<u8>, u32)>,
    /// The body completed last (handed out borrowed).
    done: Vec<u8>,
}

impl Reassembler {
    pub fn new() -> Reassembler {
        Reassembler::default()
    }

    /// Takes the next message of the stream: `env` and `part`, the body bytes it carries.
    pub fn push<'a>(&'a mut self, env: &Envelope, part: &'a [u8]) -> Piece<'a> {
        if !env.is_fragmented() {
            return Piece::Whole {
                body: part,
                fragments: 1,
            };
        }
        let (buf, n) = self.open.entry(env.account).or_default();
        buf.extend_from_slice(part);
        *n += 1;
        if env.flags != FLAG_LAST_FRAGMENT {
            return Piece::More;
        }
        let (body, fragments) = self.open.remove(&env.account).expect("just added");
        // the previous body's buffer is reused by the next chain of this account
        self.done = body;
        if self.done.len() != env.body_length as usize {
            return Piece::Short {
                have: self.done.len(),
                want: env.body_length,
            };
        }
        Piece::Whole {
            body: &self.done,
            fragments,
        }
    }

    /// The bytes of the message that came out [`Piece::Short`] last: what its fragments
    /// carried from where the reader entered the stream.
    pub fn last_tail(&self) -> &[u8] {
        &self.done
    }

    /// Whether no sender is between fragments (a point where a reader may start afresh).
    pub fn is_idle(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqbus_wire::envelope::{FLAG_FRAGMENT, KIND_APPLICATION};

    fn env(account: &[u8; 8], flags: u8, total: u32) -> Envelope {
        Envelope {
            account: *account,
            kind: KIND_APPLICATION,
            flags,
            body_length: total,
            ..Envelope::default()
        }
    }

    #[test]
    fn fragments_of_each_account_join_at_their_last() {
        let mut r = Reassembler::new();
        let a = b"A\0\0\0\0\0\0\0";
        let b = b"B\0\0\0\0\0\0\0";
        assert_eq!(r.push(&env(a, FLAG_FRAGMENT, 6), b"abc"), Piece::More);
        assert_eq!(
            r.push(&env(b, 0, 2), b"xy"),
            Piece::Whole {
                body: b"xy",
                fragments: 1
            }
        );
        assert_eq!(r.push(&env(b, FLAG_FRAGMENT, 4), b"12"), Piece::More);
        assert!(!r.is_idle());
        assert_eq!(
            r.push(&env(a, FLAG_LAST_FRAGMENT, 6), b"def"),
            Piece::Whole {
                body: b"abcdef",
                fragments: 2
            }
        );
        assert_eq!(
            r.push(&env(b, FLAG_LAST_FRAGMENT, 5), b"34"),
            Piece::Short { have: 4, want: 5 }
        );
        assert!(r.is_idle());
        // a last fragment without its first (the stream entered between them)
        assert_eq!(
            r.push(&env(a, FLAG_LAST_FRAGMENT, 9), b"ghi"),
            Piece::Short { have: 3, want: 9 }
        );
    }
}

//! Fragment reassembly: a body larger than a packet is sent as several commands (envelope
//! flag 1, more follow, with flag 4 on the first; flag 2, the last), each sequenced as a
//! message of its own. The fragments of one sender account are consecutive among its own
//! messages (a node sends one command at a time, in order); other senders' messages may lie
//! between them. The whole body is handed out at the last fragment, under its sequence.
//!
//! A sender that stops between the fragments of a body (it died, or restarted) leaves them
//! without their last. The account's next message ends that chain: a first fragment (flag 4)
//! or a whole message of the account means its earlier fragments will never complete, so they
//! are discarded and counted ([`Abandoned`]), never joined to what follows. Without that, the
//! account's next fragmented message would be appended to them and lost as malformed.

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

/// A chain of fragments discarded because its account's next message began anew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abandoned {
    pub account: Account,
    /// Fragments of the chain this reader saw, and their bytes.
    pub fragments: u32,
    pub bytes: usize,
}

/// The fragments of every sender account that are waiting for their last one.
#[derive(Debug, Default)]
pub struct Reassembler {
    open: HashMap<Account, (Vec<u8>, u32)>,
    /// The body completed last (handed out borrowed).
    done: Vec<u8>,
    /// The chain the last `push` discarded.
    abandoned: Option<Abandoned>,
    /// Chains discarded so far, and their fragments.
    abandoned_messages: u64,
    abandoned_fragments: u64,
}

impl Reassembler {
    pub fn new() -> Reassembler {
        Reassembler::default()
    }

    /// Takes the next message of the stream: `env` and `part`, the body bytes it carries.
    /// An application message of an account between fragments (a whole one, or a first
    /// fragment) discards the account's open chain: [`Reassembler::abandoned`] tells.
    pub fn push<'a>(&'a mut self, env: &Envelope, part: &'a [u8]) -> Piece<'a> {
        self.abandoned = None;
        if !env.is_fragmented() {
            if !self.open.is_empty() {
                if let Some((buf, n)) = self.open.remove(&env.account) {
                    self.abandon(env.account, buf.len(), n);
                }
            }
            return Piece::Whole {
                body: part,
                fragments: 1,
            };
        }
        let (buf, n) = self.open.entry(env.account).or_default();
        let stale = (env.first_fragment() && *n > 0).then_some((buf.len(), *n));
        if stale.is_some() {
            buf.clear();
            *n = 0;
        }
        buf.extend_from_slice(part);
        *n += 1;
        if let Some((bytes, count)) = stale {
            self.abandon(env.account, bytes, count);
        }
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

    fn abandon(&mut self, account: Account, bytes: usize, fragments: u32) {
        self.abandoned = Some(Abandoned {
            account,
            fragments,
            bytes,
        });
        self.abandoned_messages += 1;
        self.abandoned_fragments += fragments as u64;
    }

    /// The chain of fragments the last [`Reassembler::push`] discarded, if it did.
    pub fn abandoned(&self) -> Option<Abandoned> {
        self.abandoned
    }

    /// Chains of fragments discarded so far (messages that never completed) and their
    /// fragments.
    pub fn abandoned_counts(&self) -> (u64, u64) {
        (self.abandoned_messages, self.abandoned_fragments)
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
    use seqbus_wire::envelope::{FLAG_FIRST_FRAGMENT, FLAG_FRAGMENT, KIND_APPLICATION};

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

    #[test]
    fn a_first_fragment_or_a_whole_message_discards_the_accounts_open_chain() {
        let mut r = Reassembler::new();
        let a = b"A\0\0\0\0\0\0\0";
        let b = b"B\0\0\0\0\0\0\0";
        let first = FLAG_FIRST_FRAGMENT | FLAG_FRAGMENT;
        // A's sender stops after two fragments of a 9-byte body
        assert_eq!(r.push(&env(a, first, 9), b"old"), Piece::More);
        assert_eq!(r.push(&env(a, FLAG_FRAGMENT, 9), b"OLD"), Piece::More);
        assert_eq!(r.abandoned(), None);
        // B between fragments too: untouched by A's restart
        assert_eq!(r.push(&env(b, first, 4), b"12"), Piece::More);
        // A, restarted, sends a new fragmented body: it starts afresh
        assert_eq!(r.push(&env(a, first, 6), b"new"), Piece::More);
        assert_eq!(
            r.abandoned(),
            Some(Abandoned {
                account: *a,
                fragments: 2,
                bytes: 6
            })
        );
        assert_eq!(
            r.push(&env(a, FLAG_LAST_FRAGMENT, 6), b"NEW"),
            Piece::Whole {
                body: b"newNEW",
                fragments: 2
            }
        );
        assert_eq!(r.abandoned(), None);
        // a whole message of B ends B's open chain the same way
        assert_eq!(
            r.push(&env(b, 0, 2), b"xy"),
            Piece::Whole {
                body: b"xy",
                fragments: 1
            }
        );
        assert_eq!(r.abandoned().map(|x| (x.fragments, x.bytes)), Some((1, 2)));
        assert!(r.is_idle());
        assert_eq!(r.abandoned_counts(), (2, 3));
        // fragments without their first (the reader entered between them) still come out
        // short at their last, never partial
        assert_eq!(r.push(&env(a, FLAG_FRAGMENT, 9), b"mid"), Piece::More);
        assert_eq!(
            r.push(&env(a, FLAG_LAST_FRAGMENT, 9), b"end"),
            Piece::Short { have: 6, want: 9 }
        );
    }
}

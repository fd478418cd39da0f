//! The replayer's protocol logic: a MoldUDP64 request and a message store in, ordinary
//! downstream packets (to be sent unicast to the requester) out.

use seqbus_wire::mold::{self, MoldWriter, Request};
use seqbus_wire::Session;

use crate::queue::Queue;

/// Where a replayer reads sequenced messages from (the journal, or memory in tests).
pub trait Store {
    /// One past the last stored message (1 when empty).
    fn next_seq(&mut self) -> u64;
    /// Calls `f(seq, message)` for stored messages from `from` on, in order, until `f`
    /// returns false or `max` messages were given; returns how many were given.
    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError>;
}

/// A store that cannot be read (e.g. a corrupt journal record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

/// Counters of a replayer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayerStats {
    pub requests: u64,
    pub malformed: u64,
    pub wrong_session: u64,
    pub messages_sent: u64,
    pub packets_sent: u64,
}

/// The replayer state machine.
#[derive(Debug)]
pub struct Replayer {
    session: Session,
    max_per_request: u16,
    writer: MoldWriter,
    stats: ReplayerStats,
    /// Answer packets, for [`Replayer::poll_transmit`] to hand out.
    out: Queue<()>,
}

impl Replayer {
    /// Answers in packets of at most `max_packet` bytes, at most `max_per_request` messages
    /// per request.
    pub fn new(session: Session, max_packet: usize, max_per_request: u16) -> Replayer {
        Replayer {
            session,
            max_per_request,
            writer: MoldWriter::new(max_packet),
            stats: ReplayerStats::default(),
            out: Queue::new(),
        }
    }

    pub fn stats(&self) -> ReplayerStats {
        self.stats
    }

    /// Handles one request datagram: its answer packets are then handed out by
    /// [`Replayer::poll_transmit`], to send to the requester. A request for messages the
    /// store does not hold yet is answered with a heartbeat carrying the store's next
    /// sequence number. Malformed requests are counted and dropped. On a store error the
    /// packets already queued stand (a prefix of the answer); answers to an earlier request
    /// not taken are dropped.
    pub fn handle_request(
        &mut self,
        datagram: &[u8],
        store: &mut dyn Store,
    ) -> Result<(), StoreError> {
        self.out.clear();
        let r = match Request::parse(datagram) {
            Ok(r) => r,
            Err(_) => {
                self.stats.malformed += 1;
                return Ok(());
            }
        };
        if r.session != self.session {
            self.stats.wrong_session += 1;
            return Ok(());
        }
        self.stats.requests += 1;
        let next = store.next_seq();
        if r.sequence >= next {
            self.out.push((), &mold::heartbeat(self.session, next));
            self.stats.packets_sent += 1;
            return Ok(());
        }
        let max = r.count.min(self.max_per_request) as usize;
        let reaches_end = r.sequence + max as u64 >= next;
        let session = self.session;
        let w = &mut self.writer;
        let stats = &mut self.stats;
        let out = &mut self.out;
        w.begin(session, r.sequence);
        let mut expect = r.sequence;
        store.read(r.sequence, max, &mut |seq, msg| {
            debug_assert_eq!(seq, expect);
            expect = seq + 1;
            if !w.push(msg) {
                out.push((), w.bytes());
                stats.packets_sent += 1;
                w.begin(session, seq);
                if !w.push(msg) {
                    return false;
                }
            }
            stats.messages_sent += 1;
            true
        })?;
        if w.count() > 0 {
            out.push((), w.bytes());
            self.stats.packets_sent += 1;
        }
        if reaches_end {
            // tells the requester where the stored stream ends (a rewinding node's target)
            out.push((), &mold::heartbeat(self.session, next));
            self.stats.packets_sent += 1;
        }
        Ok(())
    }

    /// The next answer packet to send to the requester; call until None after each request.
    pub fn poll_transmit(&mut self) -> Option<&[u8]> {
        self.out.pop().map(|(_, p)| p)
    }
}

/// A store in memory (tests and simulations).
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    messages: Vec<Vec<u8>>,
}

impl MemoryStore {
    /// Stores the message with the next sequence number.
    pub fn push(&mut self, msg: &[u8]) {
        self.messages.push(msg.to_vec());
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Removes and returns the messages from `seq` on.
    pub fn split_off(&mut self, seq: u64) -> Vec<Vec<u8>> {
        let at = (seq.max(1) - 1) as usize;
        if at >= self.messages.len() {
            return Vec::new();
        }
        self.messages.split_off(at)
    }
}

impl Store for MemoryStore {
    fn next_seq(&mut self) -> u64 {
        self.messages.len() as u64 + 1
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        let mut n = 0;
        for (i, m) in self
            .messages
            .iter()
            .enumerate()
            .skip(from as usize - 1)
            .take(max)
        {
            if !f(i as u64 + 1, m) {
                break;
            }
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seqbus_wire::mold::MoldPacket;

    /// The packets answering `request`.
    fn answer(r: &mut Replayer, request: &[u8], store: &mut MemoryStore) -> Vec<Vec<u8>> {
        r.handle_request(request, store).unwrap();
        std::iter::from_fn(|| r.poll_transmit().map(<[u8]>::to_vec)).collect()
    }

    #[test]
    fn answers_from_store_in_packets() {
        let s = Session::new("R").unwrap();
        let mut store = MemoryStore::default();
        for i in 0..100u32 {
            store.push(&i.to_le_bytes());
        }
        let mut r = Replayer::new(s, 100, 50);
        let req = Request {
            session: s,
            sequence: 11,
            count: 200,
        };
        let out = answer(&mut r, &req.encode(), &mut store);
        let msgs: Vec<(u64, Vec<u8>)> = out
            .iter()
            .flat_map(|p| {
                MoldPacket::parse(p)
                    .unwrap()
                    .messages()
                    .map(|(q, m)| (q, m.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(msgs.len(), 50);
        assert_eq!(msgs[0], (11, 10u32.to_le_bytes().to_vec()));
        assert_eq!(msgs[49].0, 60);
        let beyond = Request {
            sequence: 101,
            ..req
        };
        let out = answer(&mut r, &beyond.encode(), &mut store);
        let hb = MoldPacket::parse(&out[0]).unwrap();
        assert_eq!((hb.message_count(), hb.sequence()), (0, 101));
        assert!(answer(&mut r, b"bad", &mut store).is_empty(), "no answer");
        assert_eq!(r.stats().malformed, 1);
    }
}

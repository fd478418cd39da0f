//! The outputs a state machine queues for its I/O layer to take ([`Queue::pop`]): datagrams,
//! storage requests. One flat buffer, reused once everything was taken: no allocation per
//! item once the buffer has grown to a turn's worth.

/// Items with bytes each, in one flat buffer, handed out in the order queued. The buffer is
/// reused once everything was taken: no allocation per item.
#[derive(Debug)]
pub(crate) struct Queue<H> {
    bytes: Vec<u8>,
    items: Vec<(H, usize, usize)>,
    next: usize,
}

impl<H: Copy> Default for Queue<H> {
    fn default() -> Queue<H> {
        Queue::new()
    }
}

impl<H: Copy> Queue<H> {
    pub(crate) fn new() -> Queue<H> {
        Queue {
            bytes: Vec::new(),
            items: Vec::new(),
            next: 0,
        }
    }

    pub(crate) fn push(&mut self, head: H, bytes: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.items.push((head, at, self.bytes.len()));
    }

    /// Drops every item not taken.
    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.bytes.clear();
        self.next = 0;
    }

    /// Whether every item queued was taken.
    pub(crate) fn drained(&self) -> bool {
        self.next == self.items.len()
    }

    /// The next item, or None (and the queue emptied for reuse) when all were taken.
    pub(crate) fn pop(&mut self) -> Option<(H, &[u8])> {
        if self.next == self.items.len() {
            if self.next > 0 {
                self.clear();
            }
            return None;
        }
        let (head, a, b) = self.items[self.next];
        self.next += 1;
        Some((head, &self.bytes[a..b]))
    }
}

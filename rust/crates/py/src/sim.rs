//! `SimBus`: a whole bus in one thread with a virtual clock, for `seqbus.testing`.
//!
//! It drives the sans-IO state machines of `seqbus-core` (sequencer, replayer over a memory
//! store, one `Node` per simulated node) and moves their datagrams through a simulated network
//! with seeded delays and loss; nothing here touches a socket or the wall clock, so a scenario
//! replays identically. The Python harness owns the loop:
//! `process()` → poll every node → `transmit()` → `advance()`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use seqbus_core::{
    Dest, MemoryStore, Node, NodeParams, Recovered, Replayer, Sequencer, SequencerParams, Source,
    Start,
};
use seqbus_wire::Session;

use crate::errors::{send_error, seqbus_error};
use crate::filter::{Filter, TIME_GRID_NS};

const MAX_PACKET: usize = 1472;

/// splitmix64: the network's seeded decisions (delays, loss).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn chance(&mut self, pct: f64) -> bool {
        pct > 0.0 && (self.next() % 1_000_000) as f64 / 10_000.0 < pct
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum To {
    Sequencer,
    /// A gap-fill request, with the index of the node that asked.
    Replayer(usize),
    Node(usize, bool),
}

/// A datagram in flight: (due time, tie-break id, destination, bytes), earliest first.
type InFlight = Reverse<(u64, u64, To, Vec<u8>)>;

struct SimNode {
    node: Node,
    filter: Filter,
    /// Downstream loss on this node's link, percent.
    loss_pct: f64,
    /// Live downstream packets still to drop on this node's link.
    drop_next: u64,
}

/// A sequencer, a replayer and any number of nodes over a simulated network.
#[pyclass(module = "seqbus._core", unsendable)]
pub struct SimBus {
    now: u64,
    session: Session,
    rng: Rng,
    delay: (u64, u64),
    upstream_loss_pct: f64,
    queue: BinaryHeap<InFlight>,
    next_id: u64,
    sequencer: Sequencer,
    store: MemoryStore,
    replayer: Replayer,
    nodes: Vec<Option<SimNode>>,
    window: usize,
    out: Vec<u8>,
    datagrams: u64,
    dropped: u64,
}

impl SimBus {
    fn send(&mut self, to: To, data: &[u8], loss_pct: f64) {
        self.datagrams += 1;
        if self.rng.chance(loss_pct) {
            self.dropped += 1;
            return;
        }
        let at = self.now + self.rng.range(self.delay.0, self.delay.1);
        self.next_id += 1;
        self.queue
            .push(Reverse((at, self.next_id, to, data.to_vec())));
    }

    fn publish(&mut self, packets: &[Vec<u8>]) {
        for i in 0..self.nodes.len() {
            for p in packets {
                let Some(n) = self.nodes[i].as_mut() else {
                    continue;
                };
                if n.drop_next > 0 {
                    n.drop_next -= 1;
                    self.datagrams += 1;
                    self.dropped += 1;
                    continue;
                }
                let loss = n.loss_pct;
                self.send(To::Node(i, true), p, loss);
            }
        }
    }

    fn node(&mut self, id: usize) -> PyResult<&mut Node> {
        match self.nodes.get_mut(id) {
            Some(Some(n)) => Ok(&mut n.node),
            _ => Err(PyIndexError::new_err(format!("no node {id} on this bus"))),
        }
    }
}

fn start_of(start: &Bound<'_, PyAny>) -> PyResult<Start> {
    if let Ok(s) = start.extract::<String>() {
        return match s.as_str() {
            "live" => Ok(Start::Live),
            "rewind" => Ok(Start::From(1)),
            other => Err(PyValueError::new_err(format!("bad start {other:?}"))),
        };
    }
    match start.extract::<u64>() {
        Ok(seq) if seq >= 1 => Ok(Start::From(seq)),
        _ => Err(PyValueError::new_err(format!("bad start {start}"))),
    }
}

#[pymethods]
impl SimBus {
    #[new]
    #[pyo3(signature = (*, seed = 1, start_ns = 1_700_000_000_000_000_000, min_delay_ns = 20_000, max_delay_ns = 60_000, upstream_loss_pct = 0.0, clock_tick_ns = 10_000_000, heartbeat_ns = 1_000_000, window = 64))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        seed: u64,
        start_ns: u64,
        min_delay_ns: u64,
        max_delay_ns: u64,
        upstream_loss_pct: f64,
        clock_tick_ns: u64,
        heartbeat_ns: u64,
        window: usize,
    ) -> PyResult<Self> {
        if min_delay_ns == 0 || max_delay_ns < min_delay_ns {
            return Err(PyValueError::new_err(
                "need 0 < min_delay_ns <= max_delay_ns",
            ));
        }
        let session = Session::new("SIM").map_err(PyValueError::new_err)?;
        let sequencer = Sequencer::new(
            SequencerParams {
                session,
                max_packet: MAX_PACKET,
                heartbeat_ns,
                clock_tick_ns,
                term: 0,
                leader: 0,
            },
            Recovered::new_session(),
            start_ns,
        );
        Ok(SimBus {
            now: start_ns,
            session,
            rng: Rng(seed),
            delay: (min_delay_ns, max_delay_ns),
            upstream_loss_pct,
            queue: BinaryHeap::new(),
            next_id: 0,
            sequencer,
            store: MemoryStore::default(),
            replayer: Replayer::new(session, 60_000, 2000),
            nodes: Vec::new(),
            window,
            out: Vec::new(),
            datagrams: 0,
            dropped: 0,
        })
    }

    /// Virtual time, ns since the epoch.
    #[getter]
    fn now_ns(&self) -> u64 {
        self.now
    }

    /// Sequence number the sequencer gives the next message.
    #[getter]
    fn next_seq(&self) -> u64 {
        self.sequencer.next_seq()
    }

    /// Add a node; returns its id.
    #[pyo3(signature = (account, instance = 1, *, start = None, topics = None, window = None))]
    fn add_node(
        &mut self,
        account: &str,
        instance: u16,
        start: Option<&Bound<'_, PyAny>>,
        topics: Option<Vec<(u16, u16)>>,
        window: Option<usize>,
    ) -> PyResult<usize> {
        let start = match start {
            Some(s) => start_of(s)?,
            None => Start::Live,
        };
        let params = NodeParams {
            session: self.session,
            account: seqbus_wire::account(account).map_err(PyValueError::new_err)?,
            instance,
            start,
            topics: None,
            window: window.unwrap_or(self.window),
            max_packet: MAX_PACKET,
            retry_ns: 3_000_000,
            request_timeout_ns: 1_000_000,
            request_backoff_max_ns: 20_000_000,
            failover_after: 4,
            replayers: 1,
            max_request: 2000,
            reorder_limit: 1 << 20,
        };
        self.nodes.push(Some(SimNode {
            node: Node::new(params, self.now),
            filter: Filter::new(topics, TIME_GRID_NS, account.as_bytes()),
            loss_pct: 0.0,
            drop_next: 0,
        }));
        Ok(self.nodes.len() - 1)
    }

    /// Take a node off the bus at once, as if its process died.
    fn remove_node(&mut self, id: usize) -> PyResult<()> {
        self.node(id)?;
        self.nodes[id] = None;
        Ok(())
    }

    /// Percent of live downstream packets lost on the link to node `id`.
    fn set_downstream_loss(&mut self, id: usize, pct: f64) -> PyResult<()> {
        self.node(id)?;
        if let Some(n) = self.nodes[id].as_mut() {
            n.loss_pct = pct;
        }
        Ok(())
    }

    /// Drop the next `count` live downstream packets on the link to node `id`.
    fn drop_downstream(&mut self, id: usize, count: u64) -> PyResult<()> {
        self.node(id)?;
        if let Some(n) = self.nodes[id].as_mut() {
            n.drop_next += count;
        }
        Ok(())
    }

    /// Deliver every datagram due now; the sequencer persists (memory store) and publishes.
    fn process(&mut self, py: Python<'_>) -> PyResult<()> {
        while self.queue.peek().is_some_and(|Reverse(e)| e.0 <= self.now) {
            let Reverse((_, _, to, data)) = self.queue.pop().expect("peeked");
            match to {
                To::Sequencer => {
                    self.sequencer.handle_upstream(self.now, &data);
                }
                To::Replayer(who) => {
                    let mut answers = Vec::new();
                    self.replayer
                        .handle_request(&data, &mut self.store, &mut |p| answers.push(p.to_vec()))
                        .map_err(|e| seqbus_error(py, "JournalError", (e.to_string(),)))?;
                    for a in answers {
                        self.send(To::Node(who, false), &a, 0.0);
                    }
                }
                To::Node(i, live) => {
                    let now = self.now;
                    if let Some(Some(n)) = self.nodes.get_mut(i) {
                        let src = if live {
                            Source::Live
                        } else {
                            Source::Replayer(0)
                        };
                        n.node.handle_datagram(now, src, &data);
                    }
                }
            }
        }
        self.sequencer.handle_timeout(self.now);
        if self.sequencer.has_pending() {
            for (_, m) in self.sequencer.pending() {
                self.store.push(m);
            }
            let mut packets = Vec::new();
            self.sequencer.packets(|p| packets.push(p.to_vec()));
            self.sequencer.published(self.now);
            self.publish(&packets);
        } else if let Some(hb) = self.sequencer.poll_heartbeat(self.now) {
            self.publish(&[hb.to_vec()]);
        }
        Ok(())
    }

    /// Records node `id` can deliver now, in the batch layout; b"" when none.
    #[pyo3(signature = (id, max_records = 4096))]
    fn poll<'py>(
        &mut self,
        py: Python<'py>,
        id: usize,
        max_records: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut raw = std::mem::take(&mut self.out);
        raw.clear();
        self.node(id)?;
        let n = self.nodes[id].as_mut().expect("checked");
        let delivered = n.node.deliver(&mut raw, max_records.max(1));
        let mut out = Vec::with_capacity(raw.len());
        n.filter.apply(&raw, &mut out);
        let batch = PyBytes::new(py, &out);
        self.out = raw;
        delivered.map_err(|e| {
            let text = e.to_string();
            match e {
                seqbus_core::NodeError::Gap { .. } => seqbus_error(py, "GapError", (text,)),
                seqbus_core::NodeError::SessionEnded(last) => {
                    seqbus_error(py, "SessionEndedError", (text, last))
                }
            }
        })?;
        Ok(batch)
    }

    /// Every node's outgoing datagrams due now (commands, hellos, gap requests) onto the net.
    fn transmit(&mut self) {
        let now = self.now;
        let mut outgoing: Vec<(usize, Dest, Vec<u8>)> = Vec::new();
        for (i, slot) in self.nodes.iter_mut().enumerate() {
            if let Some(n) = slot {
                n.node
                    .poll_transmit(now, &mut |d, data| outgoing.push((i, d, data.to_vec())));
            }
        }
        let loss = self.upstream_loss_pct;
        for (i, dest, data) in outgoing {
            match dest {
                Dest::Sequencer | Dest::AllSequencers => self.send(To::Sequencer, &data, loss),
                Dest::Replayer(_) => self.send(To::Replayer(i), &data, 0.0),
            }
        }
    }

    /// Move the clock to the next thing due (a datagram, a timeout), at most to `limit_ns`.
    /// Returns the new time. Timeouts at or before now are not waited for: `process` and
    /// `transmit` have just run at this time, so whatever they left is not due again until
    /// something else happens.
    fn advance(&mut self, limit_ns: u64) -> u64 {
        let now = self.now;
        let mut wake = limit_ns;
        let mut consider = |t: u64| {
            if t > now {
                wake = wake.min(t);
            }
        };
        consider(self.sequencer.next_timeout());
        if let Some(Reverse(e)) = self.queue.peek() {
            consider(e.0);
        }
        for n in self.nodes.iter().flatten() {
            if let Some(t) = n.node.next_timeout() {
                consider(t);
            }
        }
        self.now = self.now.max(wake);
        self.now
    }

    fn send_command(&mut self, py: Python<'_>, id: usize, body: &[u8]) -> PyResult<u64> {
        self.node(id)?.send(body).map_err(|e| send_error(py, e))
    }

    fn is_rewinding(&mut self, id: usize) -> PyResult<bool> {
        Ok(self.node(id)?.is_rewinding())
    }

    fn is_ready(&mut self, id: usize) -> PyResult<bool> {
        Ok(self.node(id)?.is_ready())
    }

    fn node_stats<'py>(&mut self, py: Python<'py>, id: usize) -> PyResult<Bound<'py, PyDict>> {
        let s = self.node(id)?.stats();
        let f = &self.nodes[id].as_ref().expect("checked").filter;
        let (filtered, time_records) = (f.filtered, f.time_records);
        let d = PyDict::new(py);
        for (k, v) in [
            ("received", s.received),
            ("delivered", s.delivered),
            ("filtered", filtered),
            ("time_records", time_records),
            ("duplicates", s.duplicates),
            ("gaps", s.gaps),
            ("requests", s.requests),
            ("retransmits", s.retransmits),
            ("in_flight", s.in_flight),
            ("resent", s.resent),
            ("sent", s.sent),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Network counters: datagrams sent and dropped.
    fn net_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("datagrams", self.datagrams)?;
        d.set_item("dropped", self.dropped)?;
        d.set_item("sequenced", self.sequencer.next_seq() - 1)?;
        Ok(d)
    }
}

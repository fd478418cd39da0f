//! `SimBus`: the simulated bus of `seqbus-sim` (the one the Rust tests run on) for
//! `seqbus.testing`: sequencers (one, or a cluster), replayers and nodes of `seqbus-core` in
//! one thread, over a seeded lossy network on a virtual clock. This converts; the Python
//! harness owns the loop: `process()` → poll every node → `transmit()` → `advance()`.

use std::path::Path;

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use seqbus_core::{NodeError, Start};
use seqbus_sim::{Bus, Faults, NodeOptions, SimParams};
use seqbus_wire::Session;

use crate::client::start_of;
use crate::errors::{send_error, seqbus_error};

/// Sequencers, replayers and any number of nodes over a simulated network.
#[pyclass(module = "seqbus._core")]
pub struct SimBus {
    bus: Bus,
    window: usize,
    out: Vec<u8>,
}

impl SimBus {
    fn check(&mut self, id: usize) -> PyResult<()> {
        match self.bus.node(id) {
            Some(_) => Ok(()),
            None => Err(PyIndexError::new_err(format!("no node {id} on this bus"))),
        }
    }

    fn check_member(&self, id: u16) -> PyResult<()> {
        if id == 0 || id > self.bus.params().members {
            return Err(PyIndexError::new_err(format!(
                "no sequencer {id} on this bus"
            )));
        }
        Ok(())
    }

    fn node(&mut self, id: usize) -> PyResult<&mut seqbus_core::Node> {
        self.check(id)?;
        Ok(&mut self.bus.node(id).expect("checked").node)
    }
}

#[pymethods]
impl SimBus {
    #[new]
    #[pyo3(signature = (*, seed = 1, start_ns = 1_700_000_000_000_000_000, min_delay_ns = 20_000, max_delay_ns = 60_000, upstream_loss_pct = 0.0, loss_pct = 0.0, dup_pct = 0.0, clock_tick_ns = 10_000_000, heartbeat_ns = 1_000_000, window = 64, sequencers = 1, journal = None, replay_packet = 60_000))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        seed: u64,
        start_ns: u64,
        min_delay_ns: u64,
        max_delay_ns: u64,
        upstream_loss_pct: f64,
        loss_pct: f64,
        dup_pct: f64,
        clock_tick_ns: u64,
        heartbeat_ns: u64,
        window: usize,
        sequencers: u16,
        journal: Option<&str>,
        replay_packet: usize,
    ) -> PyResult<Self> {
        if min_delay_ns == 0 || max_delay_ns < min_delay_ns {
            return Err(PyValueError::new_err(
                "need 0 < min_delay_ns <= max_delay_ns",
            ));
        }
        if sequencers == 0 {
            return Err(PyValueError::new_err("sequencers: at least 1"));
        }
        let mut p = SimParams::new(
            seed,
            sequencers,
            Faults {
                loss_pct,
                dup_pct,
                delay: (min_delay_ns, max_delay_ns),
            },
        );
        p.start_ns = start_ns;
        p.session = Session::new("SIM").map_err(PyValueError::new_err)?;
        // a recorded session: its journal is every sequencer's, its session the bus's, and
        // virtual time goes on from its last message
        let mut stream = Vec::new();
        if let Some(dir) = journal {
            let (session, messages) = crate::journal::read_stream(py, Path::new(dir))?;
            p.session = Session(session);
            if let Some(last) = messages.last() {
                let t = seqbus_wire::Envelope::parse(last).map_or(0, |e| e.timestamp_ns);
                p.start_ns = p.start_ns.max(t + 1_000_000);
            }
            stream = messages;
        }
        p.clock_tick_ns = clock_tick_ns;
        p.heartbeat_ns = heartbeat_ns;
        p.replay_packet = replay_packet.clamp(64, 65_507);
        // a cluster keeps a replayer that follows the stream, as deployments do
        p.following_replayer = sequencers > 1;
        let mut bus = Bus::with_stream(p, &stream);
        bus.set_upstream_loss(upstream_loss_pct);
        Ok(SimBus {
            bus,
            window,
            out: Vec::new(),
        })
    }

    /// Virtual time, ns since the epoch.
    #[getter]
    fn now_ns(&self) -> u64 {
        self.bus.now()
    }

    /// Sequence number the bus gives the next message.
    #[getter]
    fn next_seq(&self) -> u64 {
        self.bus.next_seq()
    }

    /// The sequencer leading the bus (1 without a cluster), or None during an election.
    #[getter]
    fn leader(&self) -> Option<u16> {
        self.bus.leader()
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
        seqbus_wire::account(account).map_err(PyValueError::new_err)?;
        let mut o = NodeOptions::new(account, start);
        o.instance = instance;
        o.topics = topics;
        o.window = window.unwrap_or(self.window);
        Ok(self.bus.add_node(&o))
    }

    /// Take a node off the bus at once, as if its process died.
    fn remove_node(&mut self, id: usize) -> PyResult<()> {
        self.check(id)?;
        self.bus.remove_node(id);
        Ok(())
    }

    /// Percent of live downstream packets lost on the link to node `id`.
    fn set_downstream_loss(&mut self, id: usize, pct: f64) -> PyResult<()> {
        self.check(id)?;
        self.bus.node(id).expect("checked").loss_pct = pct;
        Ok(())
    }

    /// Drop the next `count` live downstream packets on the link to node `id`.
    fn drop_downstream(&mut self, id: usize, count: u64) -> PyResult<()> {
        self.check(id)?;
        self.bus.node(id).expect("checked").drop_next += count;
        Ok(())
    }

    /// Kill sequencer `id` (1-based): its state is lost, its journal stays.
    fn kill_sequencer(&mut self, id: u16) -> PyResult<()> {
        self.check_member(id)?;
        self.bus.kill_member(id);
        Ok(())
    }

    /// Restart sequencer `id` from its journal.
    fn restart_sequencer(&mut self, id: u16) -> PyResult<()> {
        self.check_member(id)?;
        self.bus.restart_member(id);
        Ok(())
    }

    /// Deliver every datagram due now; the sequencers persist and publish.
    fn process(&mut self) {
        self.bus.process();
    }

    /// Records node `id` can deliver now, in the batch layout; b"" when none.
    #[pyo3(signature = (id, max_records = 4096))]
    fn poll<'py>(
        &mut self,
        py: Python<'py>,
        id: usize,
        max_records: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.check(id)?;
        self.out.clear();
        let delivered = self.bus.deliver(id, &mut self.out, max_records.max(1));
        let batch = PyBytes::new(py, &self.out);
        delivered.map_err(|e| {
            let text = e.to_string();
            match e {
                NodeError::Gap { .. } => seqbus_error(py, "GapError", (text,)),
                NodeError::SessionEnded(last) => {
                    seqbus_error(py, "SessionEndedError", (text, last))
                }
            }
        })?;
        Ok(batch)
    }

    /// Every node's outgoing datagrams due now (commands, hellos, gap requests) onto the net.
    fn transmit(&mut self) {
        for i in 0..self.bus.node_count() {
            self.bus.transmit(i);
        }
    }

    /// Move the clock to the next thing due (a datagram, a timeout), at most to `limit_ns`.
    /// Returns the new time.
    fn advance(&mut self, limit_ns: u64) -> u64 {
        self.bus.advance_until(limit_ns)
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
        let d = PyDict::new(py);
        for (k, v) in [
            ("received", s.received),
            ("delivered", s.delivered),
            ("filtered", s.filtered),
            ("time_records", s.time_records),
            ("abandoned", s.abandoned),
            ("abandoned_fragments", s.abandoned_fragments),
            ("duplicates", s.duplicates),
            ("gaps", s.gaps),
            ("requests", s.requests),
            ("retransmits", s.retransmits),
            ("in_flight", s.in_flight),
            ("resent", s.resent),
            ("sent", s.sent),
            ("fenced", s.fenced),
            ("leader_changes", s.leader_changes),
            ("naks", s.naks),
            ("probes", s.probes),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Network counters: datagrams sent and dropped, messages sequenced.
    fn net_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("datagrams", self.bus.datagrams)?;
        d.set_item("dropped", self.bus.dropped)?;
        d.set_item("sequenced", self.bus.next_seq() - 1)?;
        Ok(d)
    }
}

//! seqbus-sim: a whole bus in one thread — a sequencer or a cluster of them, their replayers,
//! a replayer that follows the stream, and any number of nodes — over a simulated network with
//! seeded loss, duplication, delay (reordering) and process kills, on a virtual clock. Nothing
//! touches a socket or the wall clock, so a scenario replays identically from its seed.
//!
//! It is the one simulator of the project: the Rust tests (`tests/node.rs`: a node's
//! behaviour; `tests/protocol.rs`: one sequencer under loss; `tests/recovery.rs`: loss
//! recovered in round trips — NAKs, early heartbeats, learned timeouts; `tests/cluster.rs`: a
//! cluster under leader kills) and the Python harness `seqbus.testing` (through
//! `seqbus._core.SimBus`) run on it. A test picks what the network loses with
//! [`Bus::set_drop`], besides the seeded [`Faults`].
//!
//! The members' journals are [`SimLog`]s: a simulated disk that fails on a seeded schedule
//! ([`SimParams::storage`], [`storage`]). A member whose disk fails stops (fail-stop, as the
//! sequencer process does on `Error::Persist`) and is started again from its durable journal
//! after [`SimParams::restart_ns`]. After every step the invariant checkers ([`checkers`])
//! check the whole bus and panic on the first rule broken.
//!
//! It drives the sans-IO state machines of `seqbus-core` exactly as the processes of
//! `seqbus-net` do: a member ([`seqbus_core::Member`]) sequences, replicates and publishes; a
//! replayer answers from its member's log up to what that member knows is committed; nodes
//! ([`seqbus_core::Node`]) deliver, send and fill gaps. The caller owns the loop:
//!
//! ```text
//! loop {
//!     bus.process();                       // datagrams due now; sequencers; replayer
//!     for each node i: bus.deliver(i, ..) / bus.node(i).send(..) ; bus.transmit(i)
//!     bus.advance();                       // to the next thing due
//! }
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use seqbus_core::cluster::{carry_out, Event, Log, Member, MemberParams, Storage};
use seqbus_core::{
    Dest, MemoryStore, Node, NodeError, NodeParams, Replayer, SequencerParams, Source, Start,
    Store, StoreError,
};

pub mod checkers;
pub mod storage;

use checkers::{Action, Checker, Live, MemberView, Step, Who};
use seqbus_wire::cluster::is_cluster_message;
use seqbus_wire::Session;
pub use storage::{SimLog, StorageFaults, StorageStats};

/// The network's seeded decisions: the project's one generator, `seqbus_core::Rng`.
pub use seqbus_core::Rng;

/// What the network does to every datagram.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub loss_pct: f64,
    pub dup_pct: f64,
    /// Delay range in ns; different delays reorder datagrams.
    pub delay: (u64, u64),
}

impl Faults {
    pub fn clean(delay_ns: u64) -> Faults {
        Faults {
            loss_pct: 0.0,
            dup_pct: 0.0,
            delay: (delay_ns, delay_ns),
        }
    }
}

/// Settings of a simulated bus.
#[derive(Debug, Clone)]
pub struct SimParams {
    pub seed: u64,
    /// Virtual time at the start, ns since the epoch.
    pub start_ns: u64,
    pub session: Session,
    /// Sequencers: 1 is a plain sequencer; 3 or more a cluster that survives a failure.
    pub members: u16,
    pub faults: Faults,
    pub max_packet: usize,
    /// MoldUDP64 heartbeat and clock-tick periods.
    pub heartbeat_ns: u64,
    pub clock_tick_ns: u64,
    /// Cluster timings (docs/ha.md).
    pub election_timeout_ns: u64,
    pub cluster_heartbeat_ns: u64,
    pub retransmit_ns: u64,
    /// A replayer that follows the stream into a store of its own, besides one per member.
    pub following_replayer: bool,
    /// Largest replayer answer, bytes (`replayer.max_packet`).
    pub replay_packet: usize,
    /// Nodes ask the following replayer first (it is their replayer 0, as when `[node]
    /// replayers` lists it before the members' own), rather than last.
    pub follower_first: bool,
    /// Commands a sequencer holds per account after a gap (`sequencer.max_held`).
    pub max_held: usize,
    /// `cluster.suspicion_phi`.
    pub suspicion_phi: f64,
    /// What the members' disks do ([`storage`]); none by default.
    pub storage: StorageFaults,
    /// A member whose process stopped on a disk error is started again after a time in this
    /// range (ns), as a supervisor would.
    pub restart_ns: (u64, u64),
    /// The members' syncs run off their loop, as a sync thread would run them: a
    /// [`Storage::Sync`] is answered when it completes, one after another, and a slow or
    /// stalled fsync delays only what waits for it (acknowledgements, the leader's own vote
    /// toward the commit), not the process. False: the loop carries the sync out and is
    /// blocked meanwhile.
    pub sync_off_loop: bool,
    /// A broken I/O layer, to show what the checkers catch: with `sync_off_loop`, every sync
    /// is answered as soon as it is asked, before the disk made anything durable.
    pub answer_syncs_early: bool,
}

impl SimParams {
    pub fn new(seed: u64, members: u16, faults: Faults) -> SimParams {
        SimParams {
            seed,
            start_ns: 1_000_000_000,
            session: Session::new("SIM").expect("valid"),
            members,
            faults,
            max_packet: 1472,
            heartbeat_ns: 1_000_000,
            clock_tick_ns: 5_000_000,
            election_timeout_ns: 40_000_000,
            cluster_heartbeat_ns: 5_000_000,
            retransmit_ns: 2_000_000,
            following_replayer: true,
            replay_packet: 60_000,
            follower_first: false,
            max_held: seqbus_core::sequencer::MAX_HELD,
            suspicion_phi: 8.0,
            storage: StorageFaults::none(),
            restart_ns: (20_000_000, 100_000_000),
            sync_off_loop: false,
            answer_syncs_early: false,
        }
    }
}

/// How a simulated node joins.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub account: String,
    pub instance: u16,
    pub start: Start,
    pub topics: Option<Vec<(u16, u16)>>,
    pub window: usize,
    pub retry_ns: u64,
    pub request_timeout_ns: u64,
    pub replay_depth: usize,
    /// Replayers the node may ask (the first n); None: every one of the bus.
    pub replayers: Option<usize>,
}

impl NodeOptions {
    pub fn new(account: &str, start: Start) -> NodeOptions {
        NodeOptions {
            account: account.to_string(),
            instance: 1,
            start,
            topics: None,
            window: 64,
            retry_ns: 3_000_000,
            request_timeout_ns: 1_000_000,
            replay_depth: 1,
            replayers: None,
        }
    }
}

/// Which way a datagram goes, for a test's own choice of what the network loses
/// ([`Bus::set_drop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// A node's upstream datagram (commands, hello) to a sequencer.
    Upstream { node: usize },
    /// A live downstream packet to a node.
    Live { node: usize },
    /// A replayer's answer to a node.
    Answer { node: usize },
    /// A sequencer's NAK to the node whose commands have a gap.
    Nak { node: usize },
    /// Anything else: between sequencers, to and from the following replayer.
    Other,
}

/// Decides which datagrams the network loses, on top of [`Faults`]: true drops it.
pub type DropFilter = Box<dyn FnMut(Link, &[u8]) -> bool + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum To {
    /// A member's upstream or cluster socket, and the node that sent it (its NAKs go back
    /// there).
    Member(u16, Option<usize>),
    /// A sequencer's NAK to node `.0`.
    Nak(usize),
    /// Replayer `index` (members' first, then the following one), asked by `requester`.
    Replayer { index: usize, requester: Requester },
    /// A node, with where its datagram came from.
    Node(usize, Src),
    /// The following replayer's feed.
    Follower(Src),
    /// A replayer's answer to a new leader (member, replayer).
    MemberAnswer(u16, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Requester {
    Node(usize),
    Follower,
    Member(u16),
}

/// `seqbus_core::Source`, ordered for the event queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Src {
    Live,
    Sequencer(u16),
    Replayer(usize),
}

impl From<Src> for Source {
    fn from(s: Src) -> Source {
        match s {
            Src::Live => Source::Live,
            Src::Sequencer(k) => Source::Sequencer(k),
            Src::Replayer(i) => Source::Replayer(i),
        }
    }
}

/// A datagram in flight: (due time, tie-break id, destination, bytes), earliest first.
type InFlight = Reverse<(u64, u64, To, Vec<u8>)>;

/// A member's log seen up to what the member knows is committed: what its replayer serves.
struct Committed<'a> {
    log: &'a mut SimLog,
    upto: u64,
}

impl Store for Committed<'_> {
    fn next_seq(&mut self) -> u64 {
        self.log.next_seq().min(self.upto + 1)
    }

    fn read(
        &mut self,
        from: u64,
        max: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize, StoreError> {
        if from > self.upto {
            return Ok(0);
        }
        let max = max.min((self.upto + 1 - from) as usize);
        self.log.read(from, max, f)
    }
}

/// What a member's step sends: a datagram, or a MoldUDP64 packet published downstream.
enum Out {
    Send(To, Vec<u8>),
    Publish(Vec<u8>),
}

/// A member's process stopped on its disk: when, who, and the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFailure {
    pub at_ns: u64,
    pub member: u16,
    pub error: String,
}

/// One sequencer: its state machine (None while its process is dead) and its log (which
/// survives a kill, as a journal on disk does).
pub struct SimMember {
    pub member: Option<Member>,
    pub log: SimLog,
    replayer: Replayer,
    /// Stopped (SIGSTOP): keeps its state, runs nothing; datagrams for it wait in `held`
    /// (its socket buffers) until it is resumed.
    paused: bool,
    held: Vec<(To, Vec<u8>)>,
    /// Blocked in an fsync until then (0: not): runs nothing, datagrams wait in `held`, and
    /// what the blocked step sends waits in `outbox`.
    busy_until: u64,
    outbox: Vec<Out>,
    /// Syncs in progress off the loop ([`SimParams::sync_off_loop`]), oldest first.
    syncs: VecDeque<PendingSync>,
    /// Counts its processes (the checkers compare a new one's journal again).
    incarnation: u64,
    /// Stopped on a disk error: started again then.
    restart_at: Option<u64>,
}

impl SimMember {
    fn blocked(&self) -> bool {
        self.paused || self.busy_until > 0
    }
}

/// A sync running off a member's loop.
#[derive(Debug, Clone, Copy)]
struct PendingSync {
    /// When it completes.
    done_at: u64,
    /// What the member asked for, answered with [`Member::handle_durable`].
    upto: u64,
    /// The journal's records it makes durable (fewer if a discard came after it).
    records: usize,
    /// The member was told already (a broken I/O layer, [`SimParams::answer_syncs_early`]).
    told: bool,
}

/// The datagrams `member` has for the other members and the replayers, taken after its
/// storage requests.
fn transmits(member: &mut Member, outs: &mut Vec<Out>) {
    let id = member.id();
    while let Some((to, d)) = member.poll_transmit() {
        let to = match to {
            seqbus_core::To::Member(to) => To::Member(to, None),
            seqbus_core::To::Replayer(index) => To::Replayer {
                index,
                requester: Requester::Member(id),
            },
        };
        outs.push(Out::Send(to, d.to_vec()));
    }
}

/// Every datagram `node` has to send at `now`.
fn node_transmits(node: &mut Node, now: u64) -> Vec<(Dest, Vec<u8>)> {
    std::iter::from_fn(|| node.poll_transmit(now).map(|(d, p)| (d, p.to_vec()))).collect()
}

/// The packets `replayer` answers `request` with from `store` (a prefix of them when `store`
/// fails part way).
fn replayer_answers(
    replayer: &mut Replayer,
    request: &[u8],
    store: &mut dyn Store,
) -> (Vec<Vec<u8>>, Result<(), StoreError>) {
    let r = replayer.handle_request(request, store);
    let answers = std::iter::from_fn(|| replayer.poll_transmit().map(<[u8]>::to_vec)).collect();
    (answers, r)
}

/// How syncs are carried out ([`SimParams::sync_off_loop`], [`SimParams::answer_syncs_early`]).
#[derive(Debug, Clone, Copy)]
struct SyncMode {
    off_loop: bool,
    early: bool,
}

/// Carries out `member`'s storage requests on `log`, in order. On the loop, each sync at once
/// (a slow one blocks the process: [`SimLog::take_stall`]); off it, each sync is queued behind
/// the ones in progress and answered when it completes ([`Bus::complete_syncs`]).
fn carry_out_requests(
    mode: SyncMode,
    now: u64,
    member: &mut Member,
    log: &mut SimLog,
    syncs: &mut VecDeque<PendingSync>,
) -> Result<(), StoreError> {
    if !mode.off_loop {
        return carry_out(member, log);
    }
    while let Some(r) = member.poll_storage() {
        match r {
            Storage::Append { seq, msg } => log.append(seq, msg)?,
            Storage::Discard { from } => {
                log.discard_from(from)?;
                let keep = (from - 1) as usize;
                for s in syncs.iter_mut() {
                    s.records = s.records.min(keep);
                }
            }
            Storage::SaveVote { term, voted_for } => log.save_vote(term, voted_for)?,
            Storage::Sync { upto } => {
                log.flush()?;
                let took = log.take_stall();
                let start = syncs.back().map_or(now, |s| s.done_at.max(now));
                syncs.push_back(PendingSync {
                    done_at: start + took,
                    upto,
                    records: log.flushed(),
                    told: mode.early,
                });
                if mode.early {
                    member.handle_durable(upto);
                }
            }
        }
    }
    Ok(())
}

pub struct SimNode {
    pub node: Node,
    /// Live downstream loss on this node's link, percent (on top of the network's faults).
    pub loss_pct: f64,
    /// Live downstream packets still to drop on this node's link.
    pub drop_next: u64,
}

struct Follower {
    node: Node,
    store: MemoryStore,
    replayer: Replayer,
    out: Vec<u8>,
}

/// The simulated bus.
pub struct Bus {
    p: SimParams,
    now: u64,
    rng: Rng,
    queue: BinaryHeap<InFlight>,
    next_id: u64,
    members: Vec<SimMember>,
    follower: Option<Follower>,
    nodes: Vec<Option<SimNode>>,
    upstream_loss_pct: f64,
    events: Vec<(u64, u16, Event)>,
    /// Every message any sequencer ever published, by sequence: a second, different message
    /// under a number already published is a violation the bus must never commit.
    published: std::collections::HashMap<u64, Vec<u8>>,
    /// Sequences published twice with different messages: (sequence, member).
    pub renumbered: Vec<(u64, u16)>,
    pub datagrams: u64,
    pub dropped: u64,
    drop: Option<DropFilter>,
    /// The invariant checkers, run after every step ([`checkers`]).
    checker: Checker,
    /// What the checkers last saw of each member (see [`Bus::check`]).
    fingerprints: Vec<[u64; 8]>,
    steps: u64,
    /// Every member process that stopped on its disk.
    pub disk_failures: Vec<DiskFailure>,
    /// Syncs that completed off the members' loops ([`SimParams::sync_off_loop`]).
    pub syncs_completed: u64,
    /// The most syncs one member had in progress at once.
    pub most_syncs_in_progress: usize,
}

impl Bus {
    pub fn new(p: SimParams) -> Bus {
        Bus::with_stream(p, &[])
    }

    /// A bus whose sequencers start from a recorded stream (every member's journal holds
    /// `stream`, messages 1..=n, as a sequencer restarted on a journal copied from
    /// elsewhere): nodes rewind it from the replayers and the bus goes on from there. The
    /// session must be the stream's.
    pub fn with_stream(p: SimParams, stream: &[Vec<u8>]) -> Bus {
        assert!(p.members >= 1);
        let ids: Vec<u16> = (1..=p.members).collect();
        let mut members = Vec::new();
        for &id in &ids {
            let mut log = SimLog::with_stream(
                p.storage,
                p.seed ^ 0x5354_4F52_4147_4500 ^ u64::from(id).wrapping_mul(0x9E37_79B9),
                stream,
            );
            log.set_sync_off_loop(p.sync_off_loop);
            let mut member =
                Member::new(Bus::member_params(&p, id, &ids), &mut log, 0, 0, p.start_ns)
                    .expect("a memory log reads");
            if p.members > 1 {
                member.set_replayers(p.members as usize + usize::from(p.following_replayer));
            }
            members.push(SimMember {
                member: Some(member),
                log,
                replayer: Replayer::new(p.session, p.replay_packet, 2000),
                paused: false,
                held: Vec::new(),
                busy_until: 0,
                outbox: Vec::new(),
                syncs: VecDeque::new(),
                incarnation: 0,
                restart_at: None,
            });
        }
        let mut bus = Bus {
            now: p.start_ns,
            rng: Rng(p.seed),
            queue: BinaryHeap::new(),
            next_id: 0,
            members,
            follower: None,
            nodes: Vec::new(),
            upstream_loss_pct: 0.0,
            events: Vec::new(),
            published: std::collections::HashMap::new(),
            renumbered: Vec::new(),
            datagrams: 0,
            dropped: 0,
            drop: None,
            checker: Checker::new(p.members as usize),
            fingerprints: vec![[u64::MAX; 8]; p.members as usize],
            steps: 0,
            disk_failures: Vec::new(),
            syncs_completed: 0,
            most_syncs_in_progress: 0,
            p,
        };
        if bus.p.following_replayer {
            let mut opts = NodeOptions::new("REPLAYER", Start::From(1));
            opts.replay_depth = 4;
            let mut params = bus.node_params(&opts);
            params.replayers = bus.p.members as usize; // it asks the members' replayers
            let mut node = Node::new(params, bus.now);
            node.set_raw(true);
            node.set_replay_depth(4);
            bus.follower = Some(Follower {
                node,
                store: MemoryStore::default(),
                replayer: Replayer::new(bus.p.session, bus.p.replay_packet, 2000),
                out: Vec::new(),
            });
        }
        bus
    }

    fn member_params(p: &SimParams, id: u16, ids: &[u16]) -> MemberParams {
        MemberParams {
            sequencer: SequencerParams {
                session: p.session,
                max_packet: p.max_packet,
                heartbeat_ns: p.heartbeat_ns,
                clock_tick_ns: p.clock_tick_ns,
                term: 0,
                leader: 0,
                max_held: p.max_held,
            },
            id,
            members: ids.to_vec(),
            election_timeout_ns: p.election_timeout_ns,
            heartbeat_ns: p.cluster_heartbeat_ns,
            retransmit_ns: p.retransmit_ns,
            max_append: 60_000,
            seed: p.seed,
            replayer_wait_ns: p.retransmit_ns,
            suspicion_phi: p.suspicion_phi,
        }
    }

    /// The protocol settings of a node joining with `o` (for [`Bus::add_node_with`]).
    pub fn node_params(&self, o: &NodeOptions) -> NodeParams {
        NodeParams {
            session: self.p.session,
            account: seqbus_wire::account(&o.account).expect("a valid account"),
            instance: o.instance,
            start: o.start,
            topics: o.topics.clone(),
            window: o.window,
            max_packet: self.p.max_packet,
            retry_ns: o.retry_ns,
            request_timeout_ns: o.request_timeout_ns,
            request_backoff_max_ns: 20_000_000,
            failover_after: 2,
            replayers: o.replayers.unwrap_or(self.replayer_count()),
            max_request: 2000,
            reorder_limit: 1 << 20,
        }
    }

    /// Replayers a node can ask: one per member, then the following one.
    pub fn replayer_count(&self) -> usize {
        self.p.members as usize + usize::from(self.p.following_replayer)
    }

    /// The replayer a node's `Dest::Replayer(i)` names (`follower_first` puts the following
    /// replayer, otherwise last, first).
    fn node_replayer(&self, i: usize) -> usize {
        if self.p.follower_first && self.p.following_replayer {
            (i + self.replayer_count() - 1) % self.replayer_count()
        } else {
            i
        }
    }

    /// The inverse of [`Bus::node_replayer`]: how a node knows replayer `index`.
    fn replayer_for_node(&self, index: usize) -> usize {
        if self.p.follower_first && self.p.following_replayer {
            (index + 1) % self.replayer_count()
        } else {
            index
        }
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn params(&self) -> &SimParams {
        &self.p
    }

    /// The message published under `seq`, if any was.
    pub fn published(&self, seq: u64) -> Option<&[u8]> {
        self.published.get(&seq).map(Vec::as_slice)
    }

    /// The following replayer's store.
    pub fn follower_store(&self) -> Option<&MemoryStore> {
        self.follower.as_ref().map(|f| &f.store)
    }

    /// Adds a node; returns its index.
    pub fn add_node(&mut self, o: &NodeOptions) -> usize {
        let i = self.add_node_with(self.node_params(o));
        self.nodes[i]
            .as_mut()
            .expect("just added")
            .node
            .set_replay_depth(o.replay_depth);
        i
    }

    /// Adds a node of the given settings (its session must be the bus's; its replayers are
    /// the bus's, the first `params.replayers`); returns its index.
    pub fn add_node_with(&mut self, params: NodeParams) -> usize {
        let node = Node::new(params, self.now);
        self.nodes.push(Some(SimNode {
            node,
            loss_pct: 0.0,
            drop_next: 0,
        }));
        self.nodes.len() - 1
    }

    /// Takes node `i` off the bus at once, as if its process died.
    pub fn remove_node(&mut self, i: usize) {
        self.nodes[i] = None;
    }

    /// Node `i`, if it is on the bus.
    pub fn node_ref(&self, i: usize) -> Option<&SimNode> {
        self.nodes.get(i).and_then(Option::as_ref)
    }

    pub fn node(&mut self, i: usize) -> Option<&mut SimNode> {
        self.nodes.get_mut(i).and_then(Option::as_mut)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn set_upstream_loss(&mut self, pct: f64) {
        self.upstream_loss_pct = pct;
    }

    /// Member `id` (1-based), if its process is alive.
    pub fn member(&self, id: u16) -> Option<&Member> {
        self.members[(id - 1) as usize].member.as_ref()
    }

    /// Member `id` (1-based), if its process is alive, to change its settings.
    pub fn member_mut(&mut self, id: u16) -> Option<&mut Member> {
        self.members[(id - 1) as usize].member.as_mut()
    }

    /// Member `id`'s log (kept across kills).
    pub fn log(&self, id: u16) -> &SimLog {
        &self.members[(id - 1) as usize].log
    }

    /// Member `id`'s log, to schedule a fault on it (a lost write, other fault rates).
    pub fn log_mut(&mut self, id: u16) -> &mut SimLog {
        &mut self.members[(id - 1) as usize].log
    }

    /// The invariant checkers' state (the committed stream, steps checked).
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// True while member `id` is down after a disk error, waiting to be started again (or
    /// for good, when its journal is damaged and no peer's copy can repair it).
    pub fn member_down(&self, id: u16) -> bool {
        let m = &self.members[(id - 1) as usize];
        m.member.is_none() && m.restart_at.is_some()
    }

    /// Runs the checkers after a step of `action`, with what it published.
    fn check(&mut self, action: Action, published: &[(u16, Vec<u8>)]) {
        self.steps += 1;
        // what the checkers read of each member; a step that changed none of it and
        // published nothing cannot break a rule (most steps: heartbeats, acknowledgements)
        let mut changed = !published.is_empty();
        for (k, m) in self.members.iter().enumerate() {
            let x = m.member.as_ref().filter(|_| m.busy_until == 0);
            let fp = [
                u64::from(m.member.is_some()) | u64::from(m.busy_until > 0) << 1,
                m.incarnation,
                x.map_or(0, |x| u64::from(x.role() == seqbus_core::Role::Leader)),
                x.map_or(0, Member::term),
                x.map_or(0, Member::commit),
                m.log.records().len() as u64,
                m.log.durable() as u64,
                (m.log.lost().len() as u64) << 32 | m.log.discarded.len() as u64,
            ];
            if self.fingerprints[k] != fp {
                self.fingerprints[k] = fp;
                changed = true;
            }
        }
        if !changed {
            return;
        }
        let step = Step {
            n: self.steps,
            now_ns: self.now,
            action,
        };
        let views = Bus::views(&self.members);
        let mut messages: Vec<(u16, u64, &[u8])> = Vec::new();
        for (member, p) in published {
            let mp = seqbus_wire::MoldPacket::parse(p).expect("parsed when released");
            messages.extend(mp.messages().map(|(q, m)| (*member, q, m)));
        }
        let published = messages;
        self.checker.after_step(&step, &views, &published);
    }

    fn views(members: &[SimMember]) -> Vec<MemberView<'_>> {
        members
            .iter()
            .enumerate()
            .map(|(k, m)| MemberView {
                id: k as u16 + 1,
                live: m
                    .member
                    .as_ref()
                    .filter(|_| m.busy_until == 0)
                    .map(|x| Live {
                        incarnation: m.incarnation,
                        leader: x.role() == seqbus_core::Role::Leader,
                        term: x.term(),
                        commit: x.commit(),
                    }),
                records: m.log.records(),
                durable: m.log.durable(),
                lost: m.log.lost(),
                discarded: &m.log.discarded,
            })
            .collect()
    }

    /// Runs the checkers on the message records `who` was handed (`raw`: records of the
    /// following replayer's layout).
    fn check_delivered(&mut self, action: Action, out: &[u8], raw: bool) {
        let header = if raw {
            seqbus_core::node::RAW_RECORD_HEADER_LEN
        } else {
            16
        };
        let mut records = Vec::new();
        let mut at = 0;
        while at + 16 <= out.len() {
            let len = u32::from_le_bytes(out[at..at + 4].try_into().expect("4")) as usize;
            let ty = u16::from_le_bytes(out[at + 4..at + 6].try_into().expect("2"));
            let seq = u64::from_le_bytes(out[at + 8..at + 16].try_into().expect("8"));
            if ty == seqbus_core::node::RECORD_MESSAGE {
                records.push((seq, &out[at + header..at + len]));
            }
            at += len;
        }
        if records.is_empty() {
            return;
        }
        self.steps += 1;
        let step = Step {
            n: self.steps,
            now_ns: self.now,
            action,
        };
        let views = Bus::views(&self.members);
        let who = match action {
            Action::Deliver(i) => Who::Node(i),
            _ => Who::Follower,
        };
        self.checker.delivered(&step, &views, who, &records, raw);
    }

    /// The end of a member's step: an error stops its process (a disk's: fail-stop, started
    /// again later; any other breaks the protocol's safety: the run fails); a blocked fsync
    /// keeps what it sends until the process wakes; then the checkers run.
    fn end_step(&mut self, k: usize, action: Action, outs: Vec<Out>, r: Result<(), StoreError>) {
        let id = k as u16 + 1;
        if let Err(e) = r {
            match self.members[k].log.take_failure() {
                Some(why) => {
                    self.fail_stop(k, &format!("{e} ({why})"));
                    return;
                }
                None => panic!(
                    "step {} (t={} ns): member {id}: {e} (not a disk fault: the protocol's \
                     safety broke)",
                    self.steps + 1,
                    self.now
                ),
            }
        }
        let stall = self.members[k].log.take_stall();
        let published = if stall > 0 {
            let m = &mut self.members[k];
            m.busy_until = self.now + stall;
            m.outbox.extend(outs);
            Vec::new()
        } else {
            self.release(k, outs)
        };
        self.check(action, &published);
    }

    /// A member's process stops on a disk error: what it had not made durable is lost, and a
    /// supervisor starts it again after `restart_ns`.
    fn fail_stop(&mut self, k: usize, error: &str) {
        let now = self.now;
        self.disk_failures.push(DiskFailure {
            at_ns: now,
            member: k as u16 + 1,
            error: error.to_string(),
        });
        let back = now + self.rng.range(self.p.restart_ns.0, self.p.restart_ns.1);
        self.crash(k);
        self.members[k].restart_at = Some(back);
    }

    /// A member's process dies: its state, its socket buffers and what it had not sent are
    /// gone; its journal keeps what was durable (and perhaps part of a flush in progress).
    fn crash(&mut self, k: usize) {
        let m = &mut self.members[k];
        m.member = None;
        m.busy_until = 0;
        m.syncs.clear();
        m.outbox.clear();
        m.held.clear();
        m.log.crash();
        self.check(Action::Crash(k as u16 + 1), &[]);
    }

    /// Sends what a member's step sent; returns the packets it published, with the member.
    fn release(&mut self, k: usize, outs: Vec<Out>) -> Vec<(u16, Vec<u8>)> {
        let id = k as u16 + 1;
        let mut published = Vec::new();
        let src = if self.p.members == 1 {
            Src::Live
        } else {
            Src::Sequencer(id)
        };
        for o in outs {
            match o {
                Out::Send(to, d) => self.send(to, &d, 0.0),
                Out::Publish(p) => {
                    let mp = seqbus_wire::MoldPacket::parse(&p)
                        .expect("a member publishes valid packets");
                    for (q, m) in mp.messages() {
                        match self.published.get(&q) {
                            Some(old) if old.as_slice() != m => self.renumbered.push((q, id)),
                            Some(_) => {}
                            None => {
                                self.published.insert(q, m.to_vec());
                            }
                        }
                    }
                    for i in 0..self.nodes.len() {
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
                        self.send(To::Node(i, src), &p, loss);
                    }
                    if self.follower.is_some() {
                        self.send(To::Follower(src), &p, 0.0);
                    }
                    published.push((id, p));
                }
            }
        }
        published
    }

    /// Members whose fsync completed by now wake (their held datagrams are read); members
    /// stopped on a disk error whose time has come start again.
    fn wake_and_restart(&mut self) {
        for k in 0..self.members.len() {
            let m = &mut self.members[k];
            if m.busy_until > 0 && m.busy_until <= self.now {
                m.busy_until = 0;
                m.log.settle();
                let outs = std::mem::take(&mut m.outbox);
                let published = self.release(k, outs);
                self.check(Action::Wake(k as u16 + 1), &published);
                if !self.members[k].paused {
                    for (to, d) in std::mem::take(&mut self.members[k].held) {
                        self.arrive(to, &d);
                    }
                }
            }
            let m = &self.members[k];
            if m.member.is_none() && m.restart_at.is_some_and(|t| t <= self.now) {
                self.restart_member(k as u16 + 1);
            }
        }
    }

    /// The member currently leading (alive, role leader, highest term), if any.
    pub fn leader(&self) -> Option<u16> {
        self.members
            .iter()
            .filter_map(|m| m.member.as_ref())
            .filter(|m| m.role() == seqbus_core::Role::Leader)
            .max_by_key(|m| m.term())
            .map(Member::id)
    }

    /// Kills member `id`'s process: its state is lost, its log keeps what was durable.
    pub fn kill_member(&mut self, id: u16) {
        let k = (id - 1) as usize;
        self.members[k].restart_at = None;
        if self.members[k].member.is_some() {
            self.crash(k);
        }
    }

    /// Stops member `id`'s process without killing it (SIGSTOP).
    pub fn pause_member(&mut self, id: u16) {
        self.members[(id - 1) as usize].paused = true;
    }

    /// Resumes a stopped member (SIGCONT): it runs on from the state it had, and reads what
    /// was sent to it meanwhile — after one turn of its timers when `timers_first` (a
    /// process that wakes on a timer before it reads its sockets: the worst case for
    /// fencing, as it acts on its stale view first).
    pub fn resume_member(&mut self, id: u16, timers_first: bool) {
        let k = (id - 1) as usize;
        self.members[k].paused = false;
        if timers_first {
            self.run_member(k);
        }
        let m = &mut self.members[k];
        for (to, d) in std::mem::take(&mut m.held) {
            self.arrive(to, &d);
        }
    }

    /// Asks leader `id` to hand over to `target` (or the most up-to-date follower).
    pub fn switchover(&mut self, id: u16, target: Option<u16>) -> Result<u16, String> {
        let now = self.now;
        match self.members[(id - 1) as usize].member.as_mut() {
            Some(m) => m.switchover(now, target),
            None => Err(format!("member {id} is not running")),
        }
    }

    /// Sends `datagram` to every node's downstream as member `from` would (what a deposed
    /// leader might still send: a test of fencing).
    pub fn inject_live(&mut self, from: u16, datagram: &[u8]) {
        for i in 0..self.nodes.len() {
            if self.nodes[i].is_some() {
                self.send(To::Node(i, Src::Sequencer(from)), datagram, 0.0);
            }
        }
    }

    /// Restarts member `id` from its log, term and vote. The journal is opened as the real
    /// one is (a torn tail cut); a member that finds damage in it refuses to start, and the
    /// journal is repaired from a peer's copy (as a person runs `seqbus journal repair`)
    /// before it is started again; when no peer's journal is a copy of it, it stays down.
    /// Returns whether it runs.
    pub fn restart_member(&mut self, id: u16) -> bool {
        let k = (id - 1) as usize;
        let ids: Vec<u16> = (1..=self.p.members).collect();
        let params = Bus::member_params(&self.p, id, &ids);
        self.members[k].log.open();
        for _ in 0..8 {
            let m = &mut self.members[k];
            let (term, vote) = (m.log.term, m.log.voted_for);
            match Member::new(params.clone(), &mut m.log, term, vote, self.now) {
                Ok(mut member) => {
                    if self.p.members > 1 {
                        member.set_replayers(
                            self.p.members as usize + usize::from(self.p.following_replayer),
                        );
                    }
                    m.member = Some(member);
                    m.restart_at = None;
                    m.incarnation += 1;
                    self.check(Action::Restart(id), &[]);
                    return true;
                }
                Err(e) => {
                    let why = m.log.take_failure().unwrap_or_else(|| {
                        panic!("member {id} cannot start on a journal without disk faults: {e}")
                    });
                    self.disk_failures.push(DiskFailure {
                        at_ns: self.now,
                        member: id,
                        error: format!("refuses to start: {e} ({why})"),
                    });
                    let peers: Vec<SimLog> = (0..self.members.len())
                        .filter(|&j| j != k)
                        .map(|j| self.members[j].log.clone())
                        .collect();
                    let log = &mut self.members[k].log;
                    if !log.lost().is_empty() && !peers.iter().any(|p| log.repair_from(p)) {
                        // no copy to repair from: it needs a person's look
                        self.members[k].restart_at = Some(u64::MAX);
                        return false;
                    }
                }
            }
        }
        self.members[k].restart_at = Some(u64::MAX);
        false
    }

    /// Member events since the last call: (time, member, event).
    pub fn take_events(&mut self) -> Vec<(u64, u16, Event)> {
        std::mem::take(&mut self.events)
    }

    /// Loses the datagrams `drop` picks (besides what the faults lose).
    pub fn set_drop(&mut self, drop: Option<DropFilter>) {
        self.drop = drop;
    }

    fn send(&mut self, to: To, data: &[u8], extra_loss: f64) {
        self.datagrams += 1;
        if let Some(f) = self.drop.as_mut() {
            let link = match to {
                To::Member(_, Some(node)) => Link::Upstream { node },
                To::Node(node, Src::Replayer(_)) => Link::Answer { node },
                To::Node(node, _) => Link::Live { node },
                To::Nak(node) => Link::Nak { node },
                _ => Link::Other,
            };
            if f(link, data) {
                self.dropped += 1;
                return;
            }
        }
        let f = self.p.faults;
        if self.rng.chance(f.loss_pct) || self.rng.chance(extra_loss) {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.chance(f.dup_pct) { 2 } else { 1 };
        for _ in 0..copies {
            let at = self.now + self.rng.range(f.delay.0, f.delay.1);
            self.next_id += 1;
            self.queue
                .push(Reverse((at, self.next_id, to, data.to_vec())));
        }
    }

    /// Delivers every datagram due now, then runs every live member (timers, replication,
    /// publishing) and the following replayer.
    pub fn process(&mut self) {
        self.wake_and_restart();
        self.complete_syncs();
        while self.queue.peek().is_some_and(|Reverse(e)| e.0 <= self.now) {
            let Reverse((_, _, to, data)) = self.queue.pop().expect("peeked");
            self.arrive(to, &data);
        }
        for k in 0..self.members.len() {
            self.run_member(k);
        }
        self.run_follower();
    }

    fn sync_mode(&self) -> SyncMode {
        SyncMode {
            off_loop: self.p.sync_off_loop,
            early: self.p.answer_syncs_early,
        }
    }

    /// Syncs off the members' loops that completed by now: what they synced is durable, and
    /// each member is told (it acknowledges, or counts it toward the commit).
    fn complete_syncs(&mut self) {
        let now = self.now;
        for k in 0..self.members.len() {
            let m = &mut self.members[k];
            self.most_syncs_in_progress = self.most_syncs_in_progress.max(m.syncs.len());
            if m.paused || m.syncs.front().is_none_or(|s| s.done_at > now) {
                continue;
            }
            let mut outs = Vec::new();
            while let Some(s) = m.syncs.front().copied().filter(|s| s.done_at <= now) {
                m.syncs.pop_front();
                m.log.settle_to(s.records);
                self.syncs_completed += 1;
                if let Some(member) = m.member.as_mut().filter(|_| !s.told) {
                    member.handle_durable(s.upto);
                }
            }
            if let Some(member) = m.member.as_mut() {
                transmits(member, &mut outs);
            }
            let published = self.release(k, outs);
            self.check(Action::Synced(k as u16 + 1), &published);
        }
    }

    fn arrive(&mut self, to: To, data: &[u8]) {
        let now = self.now;
        let mode = self.sync_mode();
        match to {
            To::Member(id, _) if self.members[(id - 1) as usize].blocked() => {
                self.members[(id - 1) as usize]
                    .held
                    .push((to, data.to_vec()));
            }
            To::Replayer { index, .. }
                if index < self.members.len() && self.members[index].blocked() =>
            {
                self.members[index].held.push((to, data.to_vec()));
            }
            To::Member(id, from) => {
                let k = (id - 1) as usize;
                let mut out = Vec::new();
                let m = &mut self.members[k];
                let Some(member) = m.member.as_mut() else {
                    return;
                };
                let mut nak = None;
                let peer = is_cluster_message(data);
                let r = if peer {
                    member.handle_peer(now, data, &mut m.log)
                } else {
                    member.handle_upstream(now, data);
                    nak = member.poll_nak().map(<[u8]>::to_vec);
                    Ok(())
                };
                let r = r
                    .and_then(|()| carry_out_requests(mode, now, member, &mut m.log, &mut m.syncs));
                transmits(member, &mut out);
                // a gap in the sender's commands: the NAK goes back to it
                if let (Some(nak), Some(node)) = (nak, from) {
                    out.push(Out::Send(To::Nak(node), nak));
                }
                let action = if peer {
                    Action::Peer(id)
                } else {
                    Action::Upstream(id)
                };
                self.end_step(k, action, out, r);
            }
            To::Nak(i) => {
                if let Some(Some(n)) = self.nodes.get_mut(i) {
                    n.node.handle_nak(now, data);
                }
            }
            To::Replayer { index, requester } => {
                if index < self.members.len() {
                    let m = &mut self.members[index];
                    let Some(member) = m.member.as_ref() else {
                        return;
                    };
                    let mut store = Committed {
                        upto: member.commit(),
                        log: &mut m.log,
                    };
                    let (answers, r) = replayer_answers(&mut m.replayer, data, &mut store);
                    // a replayer that cannot read its member's journal stops the member's
                    // whole process (docs/ha.md, "A running member stops on damage")
                    let to = match requester {
                        Requester::Node(i) => {
                            To::Node(i, Src::Replayer(self.replayer_for_node(index)))
                        }
                        Requester::Follower => To::Follower(Src::Replayer(index)),
                        Requester::Member(id) => To::MemberAnswer(id, index),
                    };
                    let outs = answers.into_iter().map(|a| Out::Send(to, a)).collect();
                    self.end_step(index, Action::Serve(index as u16 + 1), outs, r.map(|_| ()));
                    return;
                }
                let answers = match self.follower.as_mut() {
                    Some(f) => {
                        let (answers, r) = replayer_answers(&mut f.replayer, data, &mut f.store);
                        r.expect("memory reads");
                        answers
                    }
                    None => Vec::new(),
                };
                let to = match requester {
                    Requester::Node(i) => To::Node(i, Src::Replayer(self.replayer_for_node(index))),
                    Requester::Follower => To::Follower(Src::Replayer(index)),
                    Requester::Member(id) => To::MemberAnswer(id, index),
                };
                for a in answers {
                    self.send(to, &a, 0.0);
                }
            }
            To::Node(i, src) => {
                if let Some(Some(n)) = self.nodes.get_mut(i) {
                    n.node.handle_datagram(now, src.into(), data);
                }
            }
            To::Follower(src) => {
                if let Some(f) = self.follower.as_mut() {
                    f.node.handle_datagram(now, src.into(), data);
                }
            }
            To::MemberAnswer(id, index) => {
                let k = (id - 1) as usize;
                let m = &mut self.members[k];
                if m.blocked() {
                    m.held.push((to, data.to_vec()));
                } else if let Some(member) = m.member.as_mut() {
                    member.handle_replayer(now, index, data);
                    let r = carry_out_requests(mode, now, member, &mut m.log, &mut m.syncs);
                    let mut out = Vec::new();
                    transmits(member, &mut out);
                    self.end_step(k, Action::ReplayerAnswer(id), out, r);
                }
            }
        }
    }

    fn run_member(&mut self, k: usize) {
        let now = self.now;
        let mode = self.sync_mode();
        let mut outs = Vec::new();
        let m = &mut self.members[k];
        if m.blocked() {
            return;
        }
        let Some(member) = m.member.as_mut() else {
            return;
        };
        let r = member
            .poll(now, &mut m.log)
            .and_then(|()| carry_out_requests(mode, now, member, &mut m.log, &mut m.syncs));
        transmits(member, &mut outs);
        let id = member.id();
        if r.is_ok() {
            while let Some(p) = member.poll_publish(now) {
                outs.push(Out::Publish(p.to_vec()));
            }
        }
        while let Some(e) = member.poll_event() {
            self.events.push((now, id, e));
        }
        self.end_step(k, Action::Turn(id), outs, r);
    }

    fn run_follower(&mut self) {
        let now = self.now;
        let Some(f) = self.follower.as_mut() else {
            return;
        };
        f.out.clear();
        f.node
            .deliver(&mut f.out, usize::MAX)
            .expect("a follower has replayers");
        let delivered = std::mem::take(&mut f.out);
        self.check_delivered(Action::Follower, &delivered, true);
        let f = self.follower.as_mut().expect("present");
        f.out = delivered;
        let mut at = 0;
        while at < f.out.len() {
            let len = u32::from_le_bytes(f.out[at..at + 4].try_into().expect("4")) as usize;
            let ty = u16::from_le_bytes(f.out[at + 4..at + 6].try_into().expect("2"));
            let seq = u64::from_le_bytes(f.out[at + 8..at + 16].try_into().expect("8"));
            if ty == seqbus_core::node::RECORD_MESSAGE {
                assert_eq!(
                    seq,
                    f.store.len() as u64 + 1,
                    "the follower stores in order"
                );
                f.store
                    .push(&f.out[at + seqbus_core::node::RAW_RECORD_HEADER_LEN..at + len]);
            }
            at += len;
        }
        for (d, data) in node_transmits(&mut f.node, now) {
            if let Dest::Replayer(i) = d {
                self.send(
                    To::Replayer {
                        index: i,
                        requester: Requester::Follower,
                    },
                    &data,
                    0.0,
                );
            }
        }
    }

    /// Records node `i` can deliver now (docs/architecture.md, "Batches from Rust to Python").
    pub fn deliver(
        &mut self,
        i: usize,
        out: &mut Vec<u8>,
        max_records: usize,
    ) -> Result<usize, NodeError> {
        let start = out.len();
        let r = match self.nodes.get_mut(i).and_then(Option::as_mut) {
            Some(n) => n.node.deliver(out, max_records),
            None => Ok(0),
        };
        if out.len() > start {
            self.check_delivered(Action::Deliver(i), &out[start..], false);
        }
        r
    }

    /// Sends what node `i` has due: commands to the leader it knows (every member while it
    /// knows none, or when its protocol asks for all), requests to replayers.
    pub fn transmit(&mut self, i: usize) {
        let now = self.now;
        let Some(n) = self.nodes.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let leader = n.node.leader();
        let loss = self.upstream_loss_pct;
        for (d, data) in node_transmits(&mut n.node, now) {
            match (d, leader) {
                (Dest::Sequencer, Some(l)) => self.send(To::Member(l, Some(i)), &data, loss),
                (Dest::Sequencer | Dest::AllSequencers, _) => {
                    for id in 1..=self.p.members {
                        self.send(To::Member(id, Some(i)), &data, loss);
                    }
                }
                (Dest::Replayer(index), _) => self.send(
                    To::Replayer {
                        index: self.node_replayer(index),
                        requester: Requester::Node(i),
                    },
                    &data,
                    0.0,
                ),
            }
        }
    }

    /// When something is next due: a datagram, a member's timer, a node's or the follower's.
    pub fn next_due(&self) -> u64 {
        let mut t = u64::MAX;
        if let Some(Reverse(e)) = self.queue.peek() {
            t = t.min(e.0);
        }
        for m in &self.members {
            if m.busy_until > 0 {
                t = t.min(m.busy_until);
            }
            if let Some(s) = m.syncs.front().filter(|_| !m.paused) {
                t = t.min(s.done_at);
            }
            if let Some(r) = m.restart_at.filter(|_| m.member.is_none()) {
                t = t.min(r);
            }
        }
        for m in self
            .members
            .iter()
            .filter(|m| !m.blocked())
            .filter_map(|m| m.member.as_ref())
        {
            t = t.min(m.next_timeout());
        }
        for n in self.nodes.iter().flatten() {
            if let Some(x) = n.node.next_timeout() {
                t = t.min(x);
            }
        }
        if let Some(f) = &self.follower {
            if let Some(x) = f.node.next_timeout() {
                t = t.min(x);
            }
        }
        t
    }

    /// Moves the clock to the next thing due, by at least `min_step_ns` and at most
    /// `max_step_ns`.
    pub fn advance(&mut self, min_step_ns: u64, max_step_ns: u64) {
        let due = self.next_due();
        self.now = due.clamp(self.now + min_step_ns, self.now + max_step_ns);
    }

    /// Moves the clock to the next thing due after now (a datagram, a timer), at most to
    /// `limit_ns`; returns the new time. What is due at or before now is not waited for: the
    /// caller has just run the bus at this time, so what it left is not due again until
    /// something else happens (the loop of `seqbus.testing`, which runs application code
    /// between the steps).
    pub fn advance_until(&mut self, limit_ns: u64) -> u64 {
        let now = self.now;
        let mut wake = limit_ns;
        let mut consider = |t: u64| {
            if t > now {
                wake = wake.min(t);
            }
        };
        // every datagram due now was delivered: the earliest left is the next
        if let Some(Reverse(e)) = self.queue.peek() {
            consider(e.0);
        }
        for m in &self.members {
            if m.busy_until > 0 {
                consider(m.busy_until);
            }
            if let Some(s) = m.syncs.front().filter(|_| !m.paused) {
                consider(s.done_at);
            }
            if let Some(r) = m.restart_at.filter(|_| m.member.is_none()) {
                consider(r);
            }
        }
        for m in self
            .members
            .iter()
            .filter(|m| !m.blocked())
            .filter_map(|m| m.member.as_ref())
        {
            consider(m.next_timeout());
        }
        for n in self.nodes.iter().flatten() {
            if let Some(t) = n.node.next_timeout() {
                consider(t);
            }
        }
        if let Some(f) = &self.follower {
            if let Some(t) = f.node.next_timeout() {
                consider(t);
            }
        }
        self.now = self.now.max(wake);
        self.now
    }

    /// The sequence the bus gives its next message: the highest any live member reached.
    pub fn next_seq(&self) -> u64 {
        self.members
            .iter()
            .filter_map(|m| m.member.as_ref())
            .map(Member::next_seq)
            .max()
            .unwrap_or(1)
    }
}

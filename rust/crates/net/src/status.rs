//! The sequencer's status endpoint (`[sequencer] status`, docs/configuration.md): a small HTTP
//! server on a thread of its own serving `GET /status` (JSON) and `GET /metrics` (Prometheus
//! text format) from counters the sequencing loop publishes with relaxed atomic stores. It
//! never takes a lock the loop waits for. Bound to loopback by default; on any other address a
//! token is required (`Authorization: Bearer TOKEN`), compared in constant time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use seqbus_core::cluster::{Member, Role};
use seqbus_core::SequencerStats;
use seqbus_transport::soupbin::frame::constant_time_eq;

use crate::Error;

/// What the sequencing loop publishes; read by the status thread.
#[derive(Debug, Default)]
pub struct Board {
    datagrams: AtomicU64,
    malformed: AtomicU64,
    wrong_session: AtomicU64,
    duplicates: AtomicU64,
    out_of_order: AtomicU64,
    forged: AtomicU64,
    replayed: AtomicU64,
    stale: AtomicU64,
    /// Replayers' answers without a valid downstream MAC dropped (`downstream.key`); the
    /// sequencing loop's verifier counts into it directly.
    downstream_forged: Arc<AtomicU64>,
    sequenced: AtomicU64,
    packets: AtomicU64,
    heartbeats: AtomicU64,
    next_sequence: AtomicU64,
    last_publish_ns: AtomicU64,
    // the cluster member (docs/ha.md)
    clustered: AtomicBool,
    member: AtomicU64,
    /// 0 follower, 1 pre-candidate, 2 candidate, 3 leader.
    role: AtomicU64,
    term: AtomicU64,
    leader: AtomicU64,
    commit: AtomicU64,
    last_index: AtomicU64,
    /// Entries the slowest standby lacks (leader only).
    lag_max: AtomicU64,
    /// (id, matched, heard ns) of up to 8 standbys (leader only); id 0 = none.
    peers: [[AtomicU64; 3]; 8],
    elections: AtomicU64,
    held_suspicions: AtomicU64,
    quorum_stepdowns: AtomicU64,
    own_pauses: AtomicU64,
    takeovers: AtomicU64,
    became_leader_ns: AtomicU64,
    not_leader: AtomicU64,
    discarded: AtomicU64,
    /// `fdatasync`s completed on the journal's sync thread.
    journal_syncs: AtomicU64,
    // a switchover asked for over HTTP: 0 none, 1 any target, 2 + id a given one
    switchover: AtomicU64,
    switchover_answer: Mutex<Option<Result<u16, String>>>,
}

/// When this member last became leader, and how often it did (for the status).
#[derive(Debug, Clone, Copy, Default)]
pub struct Takeover {
    pub became_leader_ns: u64,
    pub count: u64,
}

fn role_code(r: Role) -> u64 {
    match r {
        Role::Follower => 0,
        Role::PreCandidate => 1,
        Role::Candidate => 2,
        Role::Leader => 3,
    }
}

fn role_name(code: u64) -> &'static str {
    match code {
        1 => Role::PreCandidate.as_str(),
        2 => Role::Candidate.as_str(),
        3 => Role::Leader.as_str(),
        _ => Role::Follower.as_str(),
    }
}

impl Board {
    /// The counter the sequencing loop's downstream verifier adds to.
    pub fn downstream_forged(&self) -> Arc<AtomicU64> {
        self.downstream_forged.clone()
    }

    /// Publishes the loop's counters (a handful of relaxed stores).
    pub fn update(&self, s: &SequencerStats, next_sequence: u64, now_ns: u64) {
        let r = Ordering::Relaxed;
        self.datagrams.store(s.datagrams, r);
        self.malformed.store(s.malformed, r);
        self.wrong_session.store(s.wrong_session, r);
        self.duplicates.store(s.duplicates, r);
        self.out_of_order.store(s.out_of_order, r);
        self.forged.store(s.forged, r);
        self.replayed.store(s.replayed, r);
        self.stale.store(s.stale, r);
        self.sequenced.store(s.sequenced, r);
        self.packets.store(s.packets, r);
        self.heartbeats.store(s.heartbeats, r);
        self.next_sequence.store(next_sequence, r);
        self.last_publish_ns.store(now_ns, r);
    }

    /// Publishes the journal's counters.
    pub fn update_journal(&self, syncs: u64) {
        self.journal_syncs.store(syncs, Ordering::Relaxed);
    }

    /// Publishes a cluster member's state and, while it leads, its sequencer's counters.
    pub fn update_member(&self, m: &Member, now_ns: u64, takeover: &Takeover) {
        let r = Ordering::Relaxed;
        match m.sequencer() {
            Some(seq) => self.update(&seq.stats(), seq.next_seq(), now_ns),
            None => {
                self.next_sequence.store(m.last_index() + 1, r);
                self.last_publish_ns.store(now_ns, r);
            }
        }
        let st = m.stats();
        self.clustered.store(true, r);
        self.member.store(m.id() as u64, r);
        self.role.store(role_code(m.role()), r);
        self.term.store(m.term(), r);
        self.leader.store(m.leader().unwrap_or(0) as u64, r);
        self.commit.store(m.commit(), r);
        self.last_index.store(m.last_index(), r);
        self.elections.store(st.elections, r);
        self.held_suspicions.store(st.held_suspicions, r);
        self.quorum_stepdowns.store(st.quorum_stepdowns, r);
        self.own_pauses.store(st.own_pauses, r);
        self.not_leader.store(st.not_leader, r);
        self.discarded.store(st.discarded, r);
        self.takeovers.store(takeover.count, r);
        self.became_leader_ns.store(takeover.became_leader_ns, r);
        let peers = m.peers();
        let mut lag = 0;
        for (slot, p) in self
            .peers
            .iter()
            .zip(peers.iter().map(Some).chain(std::iter::repeat(None)))
        {
            match p {
                Some(p) => {
                    lag = lag.max(m.last_index().saturating_sub(p.matched));
                    slot[0].store(p.id as u64, r);
                    slot[1].store(p.matched, r);
                    slot[2].store(p.heard_ns, r);
                }
                None => slot[0].store(0, r),
            }
        }
        self.lag_max.store(lag, r);
    }

    /// A switchover asked for over HTTP, taken by the sequencing loop: Some(target).
    pub fn take_switchover(&self) -> Option<Option<u16>> {
        match self.switchover.swap(0, Ordering::AcqRel) {
            0 => None,
            1 => Some(None),
            n => Some(Some((n - 2) as u16)),
        }
    }

    /// The loop's answer to the switchover it took.
    pub fn answer_switchover(&self, answer: Result<u16, String>) {
        *self.switchover_answer.lock().expect("not poisoned") = Some(answer);
    }

    /// Asks the loop for a switchover and waits (at most `patience`) for its answer.
    fn ask_switchover(&self, target: Option<u16>, patience: Duration) -> Result<u16, String> {
        *self.switchover_answer.lock().expect("not poisoned") = None;
        self.switchover
            .store(target.map_or(1, |t| t as u64 + 2), Ordering::Release);
        let end = std::time::Instant::now() + patience;
        while std::time::Instant::now() < end {
            if let Some(a) = self.switchover_answer.lock().expect("not poisoned").take() {
                return a;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.switchover.store(0, Ordering::Release);
        Err("the sequencer did not answer in time".into())
    }

    /// The cluster part of the metrics (when clustered).
    fn cluster_metrics(&self) -> Vec<(&'static str, &'static str, &'static str, u64)> {
        let r = Ordering::Relaxed;
        if !self.clustered.load(r) {
            return Vec::new();
        }
        vec![
            (
                "cluster_member",
                "This sequencer's member id.",
                "gauge",
                self.member.load(r),
            ),
            (
                "cluster_is_leader",
                "1 while this sequencer leads the bus.",
                "gauge",
                u64::from(self.role.load(r) == 3),
            ),
            (
                "cluster_term",
                "The current term (epoch).",
                "gauge",
                self.term.load(r),
            ),
            (
                "cluster_leader",
                "Member id of the leader this sequencer follows (0: none known).",
                "gauge",
                self.leader.load(r),
            ),
            (
                "cluster_commit_index",
                "Highest sequence known held by a majority.",
                "gauge",
                self.commit.load(r),
            ),
            (
                "cluster_last_index",
                "Last sequence in this sequencer's journal.",
                "gauge",
                self.last_index.load(r),
            ),
            (
                "cluster_replication_lag_max",
                "Messages the slowest standby lacks (on the leader).",
                "gauge",
                self.lag_max.load(r),
            ),
            (
                "cluster_elections",
                "Elections this sequencer started.",
                "counter",
                self.elections.load(r),
            ),
            (
                "cluster_held_suspicions",
                "Election timeouts that passed while the failure detector took the leader for \
                 slow, not dead: no election started.",
                "counter",
                self.held_suspicions.load(r),
            ),
            (
                "cluster_quorum_stepdowns",
                "Times this sequencer stopped leading for want of a majority (CheckQuorum).",
                "counter",
                self.quorum_stepdowns.load(r),
            ),
            (
                "cluster_own_pauses",
                "Times this sequencer, leading, had not run for two heartbeats (descheduled).",
                "counter",
                self.own_pauses.load(r),
            ),
            (
                "cluster_takeovers",
                "Times this sequencer became leader.",
                "counter",
                self.takeovers.load(r),
            ),
            (
                "cluster_last_takeover_ns",
                "When this sequencer last became leader (ns since the epoch; 0: never).",
                "gauge",
                self.became_leader_ns.load(r),
            ),
            (
                "cluster_not_leader",
                "Upstream datagrams dropped because this sequencer was not leading.",
                "counter",
                self.not_leader.load(r),
            ),
            (
                "cluster_discarded",
                "Never-published journal entries moved aside.",
                "counter",
                self.discarded.load(r),
            ),
        ]
    }

    fn cluster_json(&self) -> serde_json::Value {
        let r = Ordering::Relaxed;
        if !self.clustered.load(r) {
            return serde_json::Value::Null;
        }
        let last = self.last_index.load(r);
        let peers: Vec<serde_json::Value> = self
            .peers
            .iter()
            .filter(|s| s[0].load(r) != 0)
            .map(|s| {
                serde_json::json!({
                    "id": s[0].load(r),
                    "matched": s[1].load(r),
                    "lag": last.saturating_sub(s[1].load(r)),
                    "heard_ns": s[2].load(r),
                })
            })
            .collect();
        let became = self.became_leader_ns.load(r);
        serde_json::json!({
            "member": self.member.load(r),
            "role": role_name(self.role.load(r)),
            "term": self.term.load(r),
            "leader": self.leader.load(r),
            "commit_index": self.commit.load(r),
            "last_index": last,
            "replication_lag_max": self.lag_max.load(r),
            "standbys": peers,
            "elections": self.elections.load(r),
            "held_suspicions": self.held_suspicions.load(r),
            "quorum_stepdowns": self.quorum_stepdowns.load(r),
            "own_pauses": self.own_pauses.load(r),
            "takeovers": self.takeovers.load(r),
            "last_takeover_ns": if became == 0 { serde_json::Value::Null } else { became.into() },
        })
    }

    /// (name, help, kind, value) of every counter and gauge.
    fn metrics(&self) -> [(&'static str, &'static str, &'static str, u64); 15] {
        let r = Ordering::Relaxed;
        [
            (
                "upstream_datagrams",
                "Upstream datagrams received.",
                "counter",
                self.datagrams.load(r),
            ),
            (
                "upstream_malformed",
                "Malformed upstream datagrams dropped.",
                "counter",
                self.malformed.load(r),
            ),
            (
                "upstream_wrong_session",
                "Upstream datagrams of another session dropped.",
                "counter",
                self.wrong_session.load(r),
            ),
            (
                "commands_duplicate",
                "Commands already sequenced (retries, hot-hot copies) dropped.",
                "counter",
                self.duplicates.load(r),
            ),
            (
                "commands_out_of_order",
                "Commands ahead of their account's next one dropped.",
                "counter",
                self.out_of_order.load(r),
            ),
            (
                "upstream_forged",
                "Upstream datagrams whose MAC is not their account's key dropped ([auth]).",
                "counter",
                self.forged.load(r),
            ),
            (
                "upstream_replayed",
                "Authentic upstream datagrams seen before dropped ([auth]).",
                "counter",
                self.replayed.load(r),
            ),
            (
                "upstream_stale",
                "Authentic upstream datagrams older than the anti-replay window or of an earlier start of their sender dropped ([auth]).",
                "counter",
                self.stale.load(r),
            ),
            (
                "downstream_forged",
                "Downstream datagrams (replayers' answers) without a valid MAC dropped (downstream.key).",
                "counter",
                self.downstream_forged.load(r),
            ),
            (
                "messages_sequenced",
                "Messages sequenced (commands and control).",
                "counter",
                self.sequenced.load(r),
            ),
            (
                "packets_sent",
                "Downstream packets built (data and heartbeats).",
                "counter",
                self.packets.load(r),
            ),
            (
                "heartbeats_sent",
                "Heartbeats sent.",
                "counter",
                self.heartbeats.load(r),
            ),
            (
                "next_sequence",
                "Sequence number the next message will get.",
                "gauge",
                self.next_sequence.load(r),
            ),
            (
                "last_activity_ns",
                "Clock (ns since the epoch) of the loop's last publication.",
                "gauge",
                self.last_publish_ns.load(r),
            ),
            (
                "journal_syncs",
                "fdatasyncs of the journal completed on its sync thread (sequencer.fsync \"batch\" or \"interval\").",
                "counter",
                self.journal_syncs.load(r),
            ),
        ]
    }

    /// The `GET /status` document.
    pub fn status_json(&self, session: &str, started_ns: u64) -> String {
        let mut counters = serde_json::Map::new();
        for (name, _, _, value) in self.metrics() {
            counters.insert(name.to_string(), value.into());
        }
        for (name, _, _, value) in self.cluster_metrics() {
            counters.insert(name.to_string(), value.into());
        }
        serde_json::json!({
            "role": "sequencer",
            "session": session,
            "started_ns": started_ns,
            "now_ns": now_ns(),
            "counters": counters,
            "cluster": self.cluster_json(),
        })
        .to_string()
    }

    /// The `GET /metrics` document (Prometheus text exposition format 0.0.4).
    pub fn prometheus(&self, session: &str) -> String {
        let mut out = String::new();
        for (name, help, kind, value) in self.metrics().into_iter().chain(self.cluster_metrics()) {
            out.push_str(&format!(
                "# HELP seqbus_sequencer_{name} {help}\n# TYPE seqbus_sequencer_{name} {kind}\n\
                 seqbus_sequencer_{name}{{session=\"{session}\"}} {value}\n"
            ));
        }
        let lags = self.standby_lags();
        if !lags.is_empty() {
            out.push_str(
                "# HELP seqbus_sequencer_cluster_replication_lag Messages each standby lacks \
                 (on the leader).\n# TYPE seqbus_sequencer_cluster_replication_lag gauge\n",
            );
            for (id, lag) in lags {
                out.push_str(&format!(
                    "seqbus_sequencer_cluster_replication_lag{{session=\"{session}\",standby=\"{id}\"}} {lag}\n"
                ));
            }
        }
        out
    }

    /// (member id, messages it lacks) of each standby this sequencer replicates to.
    fn standby_lags(&self) -> Vec<(u64, u64)> {
        let r = Ordering::Relaxed;
        if !self.clustered.load(r) {
            return Vec::new();
        }
        let last = self.last_index.load(r);
        self.peers
            .iter()
            .filter(|s| s[0].load(r) != 0)
            .map(|s| (s[0].load(r), last.saturating_sub(s[1].load(r))))
            .collect()
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The status server: bound at once (a bad or busy address fails the sequencer's start, naming
/// `sequencer.status`), then served on its own thread until `stop` is set.
pub fn serve(
    listen: SocketAddr,
    token: Option<String>,
    session: String,
    board: Arc<Board>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, Error> {
    let server = tiny_http::Server::http(listen).map_err(|e| Error::Io {
        what: format!("sequencer.status {listen}: bind"),
        source: std::io::Error::other(e.to_string()),
    })?;
    let started = now_ns();
    std::thread::Builder::new()
        .name("seqbus-status".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let request = match server.recv_timeout(Duration::from_millis(100)) {
                    Ok(Some(r)) => r,
                    Ok(None) => continue,
                    Err(_) => break,
                };
                let _ = answer(request, token.as_deref(), &session, started, &board);
            }
        })
        .map_err(|e| Error::Io {
            what: "status thread".into(),
            source: e,
        })
}

fn answer(
    request: tiny_http::Request,
    token: Option<&str>,
    session: &str,
    started: u64,
    board: &Board,
) -> std::io::Result<()> {
    use tiny_http::{Header, Method, Response};
    let text = |body: String, code: u16, kind: &str| {
        let header = Header::from_bytes("Content-Type", kind).expect("a valid header");
        Response::from_string(body)
            .with_status_code(code)
            .with_header(header)
    };
    if let Some(token) = token {
        let given = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Authorization"))
            .map(|h| h.value.as_str().to_string())
            .unwrap_or_default();
        let expected = format!("Bearer {token}");
        if !constant_time_eq(given.as_bytes(), expected.as_bytes()) {
            let body = "a token is required: Authorization: Bearer TOKEN\n".to_string();
            return request.respond(text(body, 401, "text/plain; charset=utf-8"));
        }
    }
    let path = request.url().split('?').next().unwrap_or("").to_string();
    if *request.method() == Method::Post && path == "/switchover" {
        // POST /switchover[?to=ID]: a planned handover to another member (docs/ha.md)
        let query = request
            .url()
            .split_once('?')
            .map_or("", |(_, q)| q)
            .to_string();
        let target = match query.strip_prefix("to=") {
            None if query.is_empty() => None,
            Some(id) => match id.parse::<u16>() {
                Ok(id) => Some(id),
                Err(_) => {
                    return request.respond(text(
                        format!("bad member id {id:?}\n"),
                        400,
                        "text/plain; charset=utf-8",
                    ))
                }
            },
            None => {
                return request.respond(text(
                    "POST /switchover or /switchover?to=ID\n".into(),
                    400,
                    "text/plain; charset=utf-8",
                ))
            }
        };
        let body = match board.ask_switchover(target, Duration::from_secs(2)) {
            Ok(to) => (
                serde_json::json!({"ok": true, "target": to}).to_string(),
                200,
            ),
            Err(e) => (
                serde_json::json!({"ok": false, "error": e}).to_string(),
                409,
            ),
        };
        return request.respond(text(body.0, body.1, "application/json"));
    }
    if *request.method() != Method::Get {
        return request.respond(text(
            "only GET (and POST /switchover)\n".into(),
            405,
            "text/plain; charset=utf-8",
        ));
    }
    let response = match path.as_str() {
        "/status" => text(board.status_json(session, started), 200, "application/json"),
        "/metrics" => text(board.prometheus(session), 200, "text/plain; version=0.0.4"),
        _ => text(
            "not found: GET /status or /metrics\n".into(),
            404,
            "text/plain; charset=utf-8",
        ),
    };
    request.respond(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_lines_name_every_counter_with_the_session() {
        let b = Board::default();
        let stats = SequencerStats {
            sequenced: 42,
            duplicates: 3,
            ..SequencerStats::default()
        };
        b.update(&stats, 43, 7);
        let text = b.prometheus("S1");
        assert!(text.contains("seqbus_sequencer_messages_sequenced{session=\"S1\"} 42\n"));
        assert!(text.contains("# TYPE seqbus_sequencer_commands_duplicate counter\n"));
        assert!(text.contains("seqbus_sequencer_next_sequence{session=\"S1\"} 43\n"));
        let json: serde_json::Value = serde_json::from_str(&b.status_json("S1", 1)).unwrap();
        assert_eq!(json["counters"]["messages_sequenced"], 42);
        assert_eq!(json["counters"]["downstream_forged"], 0);
        assert_eq!(json["session"], "S1");
        b.downstream_forged().fetch_add(2, Ordering::Relaxed);
        assert!(b
            .prometheus("S1")
            .contains("seqbus_sequencer_downstream_forged{session=\"S1\"} 2\n"));
        assert!(
            !text.contains("cluster_replication_lag{"),
            "not clustered: no standbys"
        );
    }

    #[test]
    fn each_standbys_lag_is_a_labelled_metric() {
        let b = Board::default();
        let r = Ordering::Relaxed;
        b.clustered.store(true, r);
        b.last_index.store(100, r);
        for (slot, (id, matched)) in b.peers.iter().zip([(2, 95), (3, 100)]) {
            slot[0].store(id, r);
            slot[1].store(matched, r);
        }
        let text = b.prometheus("S1");
        assert!(text.contains("# TYPE seqbus_sequencer_cluster_replication_lag gauge\n"));
        assert!(text.contains(
            "seqbus_sequencer_cluster_replication_lag{session=\"S1\",standby=\"2\"} 5\n"
        ));
        assert!(text.contains(
            "seqbus_sequencer_cluster_replication_lag{session=\"S1\",standby=\"3\"} 0\n"
        ));
    }
}

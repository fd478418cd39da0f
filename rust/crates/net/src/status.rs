//! The sequencer's status endpoint (`[sequencer] status`, docs/configuration.md): a small HTTP
//! server on a thread of its own serving `GET /status` (JSON) and `GET /metrics` (Prometheus
//! text format) from counters the sequencing loop publishes with relaxed atomic stores. It
//! never takes a lock the loop waits for. Bound to loopback by default; on any other address a
//! token is required (`Authorization: Bearer TOKEN`), compared in constant time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    sequenced: AtomicU64,
    packets: AtomicU64,
    heartbeats: AtomicU64,
    next_sequence: AtomicU64,
    last_publish_ns: AtomicU64,
}

impl Board {
    /// Publishes the loop's counters (a handful of relaxed stores).
    pub fn update(&self, s: &SequencerStats, next_sequence: u64, now_ns: u64) {
        let r = Ordering::Relaxed;
        self.datagrams.store(s.datagrams, r);
        self.malformed.store(s.malformed, r);
        self.wrong_session.store(s.wrong_session, r);
        self.duplicates.store(s.duplicates, r);
        self.out_of_order.store(s.out_of_order, r);
        self.sequenced.store(s.sequenced, r);
        self.packets.store(s.packets, r);
        self.heartbeats.store(s.heartbeats, r);
        self.next_sequence.store(next_sequence, r);
        self.last_publish_ns.store(now_ns, r);
    }

    /// (name, help, kind, value) of every counter and gauge.
    fn metrics(&self) -> [(&'static str, &'static str, &'static str, u64); 10] {
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
        ]
    }

    /// The `GET /status` document.
    pub fn status_json(&self, session: &str, started_ns: u64) -> String {
        let mut counters = serde_json::Map::new();
        for (name, _, _, value) in self.metrics() {
            counters.insert(name.to_string(), value.into());
        }
        serde_json::json!({
            "role": "sequencer",
            "session": session,
            "started_ns": started_ns,
            "now_ns": now_ns(),
            "counters": counters,
        })
        .to_string()
    }

    /// The `GET /metrics` document (Prometheus text exposition format 0.0.4).
    pub fn prometheus(&self, session: &str) -> String {
        let mut out = String::new();
        for (name, help, kind, value) in self.metrics() {
            out.push_str(&format!(
                "# HELP seqbus_sequencer_{name} {help}\n# TYPE seqbus_sequencer_{name} {kind}\n\
                 seqbus_sequencer_{name}{{session=\"{session}\"}} {value}\n"
            ));
        }
        out
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
    if *request.method() != Method::Get {
        return request.respond(text("only GET\n".into(), 405, "text/plain; charset=utf-8"));
    }
    let path = request.url().split('?').next().unwrap_or("").to_string();
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
        assert_eq!(json["session"], "S1");
    }
}

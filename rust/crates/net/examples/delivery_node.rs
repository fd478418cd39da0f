//! A Rust node with topics and deterministic timers, for the delivery cross-check
//! (`tests/e2e/test_crosscheck.py`): it rewinds the bus from its first message, walks every
//! batch with the core's clock (`seqbus_core::delivery::Walk`), and on every message of
//! `timer_schema` sets a timer at the message's time plus `delay_ns * (1 + sequence % 3)`.
//! It writes what it was handed and when each timer fired, one line each:
//!
//! ```text
//! R <type> <sequence> <envelope hex> <body hex>    a message (1) or time (3) record
//! C <sequence>                                     caught up with live
//! T <sequence set at> <deadline> <sequence fired at>
//! ```
//!
//! and stops at the first record `margin_ns` past the message whose order id (the u64 after
//! the message header) is `end_order_id`.
//!
//! `delivery_node CONFIG ACCOUNT INSTANCE TOPICS TIMER_SCHEMA DELAY_NS END_ORDER_ID MARGIN_NS OUT`
//! with TOPICS as `schema:template[,schema:template…]`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use seqbus_core::delivery::{Clock, Step, Walk, RECORD_CAUGHT_UP, RECORD_MESSAGE};
use seqbus_net::{Config, NodeClient, NodeOptions, Start};

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        write!(s, "{x:02x}").expect("to a string");
    }
    s
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [config, account, instance, topics, timer_schema, delay_ns, end_order_id, margin_ns, out] =
        &args[..]
    else {
        return Err(
            "usage: delivery_node CONFIG ACCOUNT INSTANCE TOPICS TIMER_SCHEMA DELAY_NS \
                    END_ORDER_ID MARGIN_NS OUT"
                .into(),
        );
    };
    let topics: Vec<(u16, u16)> = topics
        .split(',')
        .map(|t| {
            let (s, m) = t.split_once(':').ok_or("topics: schema:template")?;
            Ok::<_, Box<dyn std::error::Error>>((s.parse()?, m.parse()?))
        })
        .collect::<Result<_, _>>()?;
    let timer_schema: u16 = timer_schema.parse()?;
    let delay_ns: u64 = delay_ns.parse()?;
    let end_order_id: u64 = end_order_id.parse()?;
    let margin_ns: u64 = margin_ns.parse()?;

    let cfg = Config::from_path(Path::new(config))?;
    let mut opts = NodeOptions::new(account, instance.parse()?, Start::From(1));
    opts.topics = Some(topics);
    let mut client = NodeClient::connect(&cfg, opts)?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(out)?);

    let clock = Clock::new();
    let mut timers: HashMap<u64, u64> = HashMap::new(); // id -> sequence set at
    let mut end_ns: Option<u64> = None;
    let mut batch = Vec::new();
    let give_up = Instant::now() + Duration::from_secs(120);
    eprintln!("delivery_node: rewinding");
    loop {
        if Instant::now() > give_up {
            return Err("the end marker and the margin after it never came".into());
        }
        batch.clear();
        client.poll(&mut batch, 4096, Duration::from_millis(10))?;
        for step in Walk::new(&batch, 0, &clock) {
            let r = match step? {
                Step::TimersDue => {
                    while let Some((id, at)) = clock.pop_due() {
                        let set_at = timers.remove(&id).expect("a timer of ours");
                        writeln!(out, "T {set_at} {at} {}", clock.sequence())?;
                    }
                    continue;
                }
                Step::Record(r) => r,
            };
            if r.record_type == RECORD_CAUGHT_UP {
                writeln!(out, "C {}", r.sequence)?;
                continue;
            }
            writeln!(
                out,
                "R {} {} {} {}",
                r.record_type,
                r.sequence,
                hex(r.envelope),
                hex(r.body)
            )?;
            if r.record_type == RECORD_MESSAGE && r.message_type().0 == timer_schema {
                let at = clock.time_ns() + delay_ns * (1 + r.sequence % 3);
                timers.insert(clock.set_timer(at), r.sequence);
                let order_id = u64::from_le_bytes(r.body[8..16].try_into()?);
                if order_id == end_order_id {
                    end_ns = Some(clock.time_ns());
                }
            }
            if end_ns.is_some_and(|e| clock.time_ns() >= e + margin_ns) {
                out.flush()?;
                eprintln!("delivery_node: done at sequence {}", r.sequence);
                return Ok(());
            }
        }
    }
}

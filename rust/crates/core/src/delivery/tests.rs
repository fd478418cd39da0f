//! The delivery rules one by one: topics, admin routing by account, time records,
//! reassembly, raw mode, and timers over a batch.

use super::*;
use seqbus_wire::envelope::{FLAG_FRAGMENT, FLAG_LAST_FRAGMENT, KIND_CONTROL};

const ME: Account = *b"ME\0\0\0\0\0\0";

fn body(schema: u16, template: u16, block: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(block.len() as u16).to_le_bytes());
    b.extend_from_slice(&template.to_le_bytes());
    b.extend_from_slice(&schema.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(block);
    b
}

fn msg(kind: u8, account: &Account, time_ns: u64, flags: u8, total: usize, part: &[u8]) -> Vec<u8> {
    let env = Envelope {
        timestamp_ns: time_ns,
        command_seq: 1,
        account: *account,
        instance: 1,
        kind,
        flags,
        body_length: total as u32,
    };
    let mut m = env.encode().to_vec();
    m.extend_from_slice(part);
    m
}

fn app(time_ns: u64, b: &[u8]) -> Vec<u8> {
    msg(KIND_APPLICATION, b"GW\0\0\0\0\0\0", time_ns, 0, b.len(), b)
}

fn admin(target: &[u8; 8], time_ns: u64) -> Vec<u8> {
    let mut block = target.to_vec();
    block.extend_from_slice(&7u64.to_le_bytes());
    app(
        time_ns,
        &body(BUS_SCHEMA_ID, ADMIN_COMMAND_TEMPLATE_ID, &block),
    )
}

/// (type, sequence, time, body) of every record of `out`.
fn records(out: &[u8]) -> Vec<(u16, u64, u64, Vec<u8>)> {
    let mut v = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let r = Record::parse(out, at).unwrap();
        v.push((r.record_type, r.sequence, r.time_ns(), r.body.to_vec()));
        at += r.len();
    }
    v
}

#[test]
fn control_messages_move_time_once_per_slot() {
    // idle clock ticks (control messages) are what moves stream time when nothing else is
    // sequenced: one time record per new millisecond, whatever the packets or batches
    let mut d = Delivery::new(&ME, Some(&[(7, 1)]));
    let mut out = Vec::new();
    for (i, t) in [5_000_000, 5_000_001, 15_000_000, 25_000_000]
        .into_iter()
        .enumerate()
    {
        d.message(
            i as u64 + 1,
            &msg(KIND_CONTROL, &[0; 8], t, 0, 0, &[]),
            &mut out,
        );
    }
    let r = records(&out);
    assert_eq!(
        r.iter().map(|r| (r.0, r.1, r.2)).collect::<Vec<_>>(),
        [
            (RECORD_TIME, 1, 5_000_000),
            (RECORD_TIME, 3, 15_000_000),
            (RECORD_TIME, 4, 25_000_000)
        ]
    );
    assert_eq!((d.stats().filtered, d.stats().time_records), (4, 3));
}

#[test]
fn a_delivered_message_opens_its_slot_too() {
    let mut d = Delivery::new(&ME, Some(&[(7, 1)]));
    let mut out = Vec::new();
    d.message(1, &app(2_000_100, &body(7, 1, b"x")), &mut out);
    d.message(2, &app(2_000_200, &body(7, 2, b"y")), &mut out); // same slot: nothing
    d.message(3, &app(3_000_000, &body(7, 2, b"z")), &mut out); // new slot: time
    let r = records(&out);
    assert_eq!(
        r.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        [(RECORD_MESSAGE, 1), (RECORD_TIME, 3)]
    );
    assert_eq!(r[0].3, body(7, 1, b"x"));
}

#[test]
fn admin_commands_follow_the_target_account_not_the_topics() {
    let mut d = Delivery::new(&ME, Some(&[(7, 1)]));
    let mut out = Vec::new();
    let cases = [
        admin(b"ME\0\0\0\0\0\0", 1),
        admin(b"ME      ", 2),
        admin(b"MD\0\0\0\0\0\0", 3),
        admin(b"MEX\0\0\0\0\0", 4),
        app(5, &body(7, 2, &[0; 8])),
    ];
    for (i, m) in cases.iter().enumerate() {
        d.message(i as u64 + 1, m, &mut out);
    }
    let kinds: Vec<(u16, u64)> = records(&out).iter().map(|r| (r.0, r.1)).collect();
    // all in one slot: the first message opened it, so no time record follows
    assert_eq!(kinds, [(RECORD_MESSAGE, 1), (RECORD_MESSAGE, 2)]);
    assert_eq!(d.stats().filtered, 3);
}

#[test]
fn listing_the_admin_topic_passes_every_account() {
    let mut d = Delivery::new(
        b"ADMIN\0\0\0",
        Some(&[(BUS_SCHEMA_ID, ADMIN_COMMAND_TEMPLATE_ID)]),
    );
    let mut out = Vec::new();
    assert_eq!(d.message(1, &admin(b"ME\0\0\0\0\0\0", 1), &mut out), 1);
    assert_eq!(d.stats().filtered, 0);
}

#[test]
fn a_control_message_never_passes_even_as_an_admin_command() {
    let mut d = Delivery::new(&ME, Some(&[]));
    let mut m = admin(b"ME\0\0\0\0\0\0", 1);
    m[26] = KIND_CONTROL;
    let mut out = Vec::new();
    d.message(1, &m, &mut out);
    assert_eq!(records(&out)[0].0, RECORD_TIME);
    assert_eq!(d.stats().filtered, 1);
}

#[test]
fn fragments_are_handed_out_whole_at_the_last() {
    let mut d = Delivery::new(&ME, None);
    let whole = body(7, 1, &[9u8; 100]);
    let (a, b) = whole.split_at(50);
    let gw = b"GW\0\0\0\0\0\0";
    let mut out = Vec::new();
    d.message(
        1,
        &msg(
            KIND_APPLICATION,
            gw,
            1_000_000,
            FLAG_FRAGMENT,
            whole.len(),
            a,
        ),
        &mut out,
    );
    // another sender's message between them (one of GW's own would end GW's chain)
    let between = body(7, 2, b"between");
    let xx = b"XX\0\0\0\0\0\0";
    d.message(
        2,
        &msg(KIND_APPLICATION, xx, 1_000_001, 0, between.len(), &between),
        &mut out,
    );
    d.message(
        3,
        &msg(
            KIND_APPLICATION,
            gw,
            2_000_000,
            FLAG_LAST_FRAGMENT,
            whole.len(),
            b,
        ),
        &mut out,
    );
    let r = records(&out);
    assert_eq!(
        r.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        [(RECORD_TIME, 1), (RECORD_MESSAGE, 2), (RECORD_MESSAGE, 3)]
    );
    assert_eq!(r[2].3, whole);
    // the envelope says a whole body: flags 0, the whole length
    let rec = Record::parse(&out, out.len() - r[2].3.len() - RECORD_HEADER_LEN).unwrap();
    assert_eq!(rec.envelope[27], 0);
    // a last fragment without its first does not reassemble: counted, filtered
    d.message(
        4,
        &msg(
            KIND_APPLICATION,
            gw,
            3_000_000,
            FLAG_LAST_FRAGMENT,
            whole.len(),
            b,
        ),
        &mut out,
    );
    assert_eq!(d.stats().malformed, 1);
    assert_eq!(records(&out).last().unwrap().0, RECORD_TIME);
}

#[test]
fn raw_mode_hands_out_every_message_as_published() {
    let mut d = Delivery::raw();
    let m = msg(KIND_CONTROL, &[0; 8], 1, 0, 0, &[]);
    let mut out = Vec::new();
    d.message(5, &m, &mut out);
    assert_eq!(out.len(), RAW_RECORD_HEADER_LEN + m.len());
    assert_eq!(&out[RAW_RECORD_HEADER_LEN..], &m[..]);
}

#[test]
fn timers_fire_before_the_first_record_at_or_past_them() {
    let mut d = Delivery::new(&ME, Some(&[(7, 1)]));
    let mut batch = Vec::new();
    for (seq, t, template) in [
        (1, 1_000_000, 1),
        (2, 1_500_000, 2),
        (3, 2_100_000, 2),
        (4, 2_200_000, 1),
    ] {
        d.message(seq, &app(t, &body(7, template, b"")), &mut batch);
    }
    let clock = Clock::new();
    let mut fired = Vec::new();
    let mut seen = Vec::new();
    for step in Walk::new(&batch, 0, &clock) {
        match step.unwrap() {
            Step::TimersDue => {
                while let Some((id, at)) = clock.pop_due() {
                    fired.push((id, at, clock.sequence()));
                }
            }
            Step::Record(r) => {
                seen.push(r.sequence);
                if r.sequence == 1 {
                    clock.set_timer(clock.time_ns() + 600_000); // due at 1.6 ms
                }
            }
        }
    }
    // sequence 2 (1.5 ms, filtered, same slot) is no record; the time record of 3 is
    assert_eq!(seen, [1, 3, 4]);
    assert_eq!(fired, [(1, 1_600_000, 3)]);
}

#[test]
fn a_bad_batch_is_an_error_naming_the_field() {
    let clock = Clock::new();
    let mut b = Vec::new();
    write_record(&mut b, RECORD_MESSAGE, 1, &[0; 32], &body(7, 1, b""));
    b[44] = 99; // body_length
    let e = Walk::new(&b, 0, &clock).next().unwrap().unwrap_err();
    assert_eq!((e.field, e.offset), ("body_length", 44));
    let e = Walk::new(&b[..20], 0, &clock).next().unwrap().unwrap_err();
    assert_eq!(e.field, "record_length");
}

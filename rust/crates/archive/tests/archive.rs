//! Writer → reader round trip, corruption reported with its position, verify, typed decode.

use std::path::Path;

use seqbus_archive::columns::{Data, EnvelopeColumns};
use seqbus_archive::reader::Mode;
use seqbus_archive::typed::TypedDecoder;
use seqbus_archive::verify::{verify_segment, Fragments};
use seqbus_archive::{ir, ArchiveReader, ArchiveWriter, Manifest, Segment};

const IR: &str = r#"{"format": "seqc-ir", "ir_version": 1, "package": "t", "schema_id": 5, "version": 1,
 "enums": [{"name": "Side", "primitive": "u8", "is_flags": false, "values": [{"name": "Buy", "value": 1}]}],
 "structs": [],
 "messages": [{"name": "Order", "id": 3, "body": {"name": "Order", "path": "Order", "block_length": 18,
   "fields": [
     {"name": "id", "kind": "fixed", "type": {"kind": "primitive", "name": "u64", "size": 8, "primitive": "u64"}, "offset": 0, "size": 8, "since": 1},
     {"name": "side", "kind": "fixed", "type": {"kind": "enum", "name": "Side", "size": 1, "primitive": "u8"}, "offset": 8, "size": 1, "since": 1},
     {"name": "stop", "kind": "optional", "type": {"kind": "primitive", "name": "i64", "size": 8, "primitive": "i64"}, "offset": 9, "size": 9, "since": 1},
     {"name": "fills", "kind": "group", "type": null, "offset": null, "size": 0, "since": 1, "index": 0,
      "group": {"name": "OrderFills", "path": "Order.fills", "block_length": 4, "fields": [
        {"name": "qty", "kind": "fixed", "type": {"kind": "primitive", "name": "u32", "size": 4, "primitive": "u32"}, "offset": 0, "size": 4, "since": 1}]}},
     {"name": "note", "kind": "string", "type": null, "offset": null, "size": 0, "since": 1, "index": 0}
   ]}}]}"#;

fn order(id: u64, stop: Option<i64>, fills: &[u32], note: &str) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [18u16, 3, 5, 1] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&id.to_le_bytes());
    b.push(1);
    b.push(stop.is_some() as u8);
    b.extend_from_slice(&stop.unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&[1, 1]); // one group, one var field
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&(fills.len() as u32).to_le_bytes());
    for q in fills {
        b.extend_from_slice(&q.to_le_bytes());
    }
    b.extend_from_slice(&(note.len() as u32).to_le_bytes());
    b.extend_from_slice(note.as_bytes());
    b
}

fn message(ts: u64, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&ts.to_le_bytes());
    m.extend_from_slice(&7u64.to_le_bytes());
    m.extend_from_slice(b"GW\0\0\0\0\0\0");
    m.extend_from_slice(&1u16.to_le_bytes());
    m.push(1);
    m.push(0);
    m.extend_from_slice(&(body.len() as u32).to_le_bytes());
    m.extend_from_slice(body);
    m
}

fn write(dir: &Path, n: u64) -> Manifest {
    let mut w = ArchiveWriter::create(dir, "T", 4096, &[(5, "t".into(), IR.into())]).unwrap();
    for s in 1..=n {
        let fills: Vec<u32> = (0..(s % 3) as u32).collect();
        let stop = if s % 2 == 0 { Some(-(s as i64)) } else { None };
        w.append(s, &message(1000 * s, &order(s, stop, &fills, "hé")))
            .unwrap();
    }
    w.seal().unwrap()
}

fn open(dir: &Path, m: &Manifest, i: usize) -> Segment {
    Segment::open(
        &dir.join(&m.segments[i].file),
        &dir.join(&m.segments[i].index),
    )
    .unwrap()
}

#[test]
fn round_trip_and_ranges() {
    let t = tempfile::tempdir().unwrap();
    let m = write(t.path(), 300);
    assert!(m.sealed && m.segments.len() > 2);
    let a = ArchiveReader::open(t.path()).unwrap();
    let mut total = 0;
    let mut frags = Fragments::default();
    for (i, info) in m.segments.iter().enumerate() {
        let s = open(t.path(), &m, i);
        assert_eq!(s.len() as u64, info.count);
        let mut c = EnvelopeColumns::with_capacity(s.len());
        let mut p = Vec::new();
        let lo = info.first_sequence;
        c.decode(&a, lo, lo + info.count - 1, &mut p);
        assert!(p.is_empty());
        assert_eq!(c.prefix.sequence[0] as u64, info.first_sequence);
        assert_eq!(&c.type_name.bytes[..7], b"t.Order");
        total += c.rows;
        assert!(verify_segment(&s, Some(info.first_sequence), &mut frags)
            .problems
            .is_empty());
    }
    assert_eq!(total, 300);
    // a range across segments, and the plan of a range in pieces
    let mut c = EnvelopeColumns::with_capacity(0);
    let mut p = Vec::new();
    c.decode(&a, 5, 250, &mut p);
    assert_eq!(c.rows, 246);
    assert_eq!(
        a.plan(5, 250, 0, u64::MAX, 100),
        vec![(5, 104), (105, 204), (205, 250)]
    );
    assert_eq!(
        a.bounds(0, u64::MAX, 1000 * 7, 1000 * 260 + 5),
        Some((7, 260))
    );
    assert_eq!(a.bounds(0, u64::MAX, 1000 * 301, u64::MAX), None);
    let s = open(t.path(), &m, 1);
    let f = s.first_sequence;
    assert_eq!(s.range(f + 2, f + 4, 0, u64::MAX), (2, 5));
    assert_eq!(s.range(0, u64::MAX, 1000 * (f + 3), 1000 * (f + 5)), (3, 6));
}

#[test]
fn corrupt_record_is_reported_with_offset_and_skipped() {
    let t = tempfile::tempdir().unwrap();
    let m = write(t.path(), 100);
    let s = open(t.path(), &m, 0);
    let (off, _) = s.entry(4);
    drop(s);
    let path = t.path().join(&m.segments[0].file);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[off as usize + 40] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let s = open(t.path(), &m, 0);
    let p = s.record(4).err().unwrap();
    assert_eq!((p.offset, p.sequence), (off, 5));
    assert!(p.to_string().contains("checksum"));
    let rep = verify_segment(&s, Some(1), &mut Fragments::default());
    assert_eq!(rep.problems.len(), 1);
    assert_eq!(rep.good, rep.records - 1);
}

#[test]
fn typed_decode_from_ir() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), 10);
    let schema = ir::Schema::parse(IR).unwrap();
    let d = TypedDecoder::new(&schema, "Order").unwrap();
    let a = ArchiveReader::open(t.path()).unwrap();
    let mut out = d.columns();
    let mut p = Vec::new();
    d.decode(&a, 1, 10, &mut out, &mut p);
    assert!(p.is_empty());
    assert_eq!(out.rows, 10);
    // id: u64 → 16-byte decimal; stop: nullable; fills: list offsets
    let Data::Fixed { width: 16, values } = &out.columns[6].data else {
        panic!()
    };
    assert_eq!(i128::from_le_bytes(values[16..32].try_into().unwrap()), 2);
    assert_eq!(out.columns[8].validity.as_ref().unwrap()[..3], [0, 1, 0]);
    let Data::List { offsets, .. } = &out.columns[9].data else {
        panic!()
    };
    assert_eq!(offsets[..4], [0, 1, 3, 3]);
    let Data::Var { bytes, .. } = &out.columns[10].data else {
        panic!()
    };
    assert!(bytes.starts_with("hé".as_bytes()));
    assert!(TypedDecoder::new(&schema, "Nope").is_err());
}

#[test]
fn fragments_are_reassembled_at_the_last_one_across_segments() {
    let t = tempfile::tempdir().unwrap();
    let body = order(42, Some(-1), &[1, 2, 3], "fragmented");
    let mut w = ArchiveWriter::create(t.path(), "T", 4096, &[(5, "t".into(), IR.into())]).unwrap();
    let frag = |ts: u64, part: &[u8], flags: u8| {
        let mut m = message(ts, part);
        m[27] = flags;
        m[28..32].copy_from_slice(&(body.len() as u32).to_le_bytes());
        m
    };
    let mut other = message(2, &order(7, None, &[], ""));
    other[16..24].copy_from_slice(b"XX\0\0\0\0\0\0");
    // the first fragment, then enough of another sender's messages to fill the segment
    w.append(1, &frag(1, &body[..20], 1)).unwrap();
    let mut seq = 2;
    while w.next_sequence() == Some(seq) && seq < 60 {
        w.append(seq, &other).unwrap();
        seq += 1;
    }
    w.append(seq, &frag(seq, &body[20..], 2)).unwrap();
    let m = w.seal().unwrap();
    assert!(
        m.segments.len() >= 2,
        "the last fragment is in a later segment"
    );
    let a = ArchiveReader::open(t.path()).unwrap();
    let mut got = Vec::new();
    let mut p = Vec::new();
    a.read(1, seq, Mode::Messages, &mut p, &mut |msg| {
        got.push((msg.sequence, msg.fragments, msg.body.to_vec()))
    });
    assert!(p.is_empty());
    assert_eq!(got.len() as u64, seq - 1); // the others, then the reassembled message
    assert_eq!(got.last().unwrap(), &(seq, 2, body.clone()));
    // a read of the last record alone finds the first fragment in the first segment
    let mut only = Vec::new();
    a.read(seq, seq, Mode::Messages, &mut p, &mut |msg| {
        only.push(msg.body.to_vec())
    });
    assert_eq!(only, vec![body.clone()]);
    let schema = ir::Schema::parse(IR).unwrap();
    let d = TypedDecoder::new(&schema, "Order").unwrap();
    let mut out = d.columns();
    d.decode(&a, seq, seq, &mut out, &mut p);
    assert_eq!(out.rows, 1);
    assert!(p.is_empty());
    // the raw view lists both fragments
    let mut raw = 0;
    a.read(1, seq, Mode::Raw, &mut p, &mut |_| raw += 1);
    assert_eq!(raw, seq);
}

use std::fs::OpenOptions;
use std::io::Write;

use proptest::prelude::*;
use seqbus_journal::{
    decode_record, encode_record, journal_session, repair, HardState, Journal, JournalError,
    JournalReader, RecordError,
};

const S: [u8; 10] = *b"TEST      ";

fn msg(i: u64) -> Vec<u8> {
    let mut m = i.to_le_bytes().to_vec();
    m.resize(8 + (i % 50) as usize, i as u8);
    m
}

fn all(j: &mut Journal) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    j.read(1, usize::MAX, &mut |q, m| {
        out.push((q, m.to_vec()));
        true
    })
    .unwrap();
    out
}

#[test]
fn append_reopen_and_read_across_segments() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
        for i in 1..=5000 {
            j.append(i, &msg(i)).unwrap();
            if i % 100 == 0 {
                j.flush().unwrap();
            }
        }
        j.flush().unwrap();
        j.sync().unwrap();
    }
    let segs = std::fs::read_dir(d.path()).unwrap().count();
    assert!(segs > 2, "{segs} segments");
    let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
    assert_eq!(j.next_seq(), 5001);
    assert_eq!(j.recovery().records, 5000);
    let got = all(&mut j);
    assert_eq!(got.len(), 5000);
    assert!(got.iter().all(|(q, m)| *m == msg(*q)));
    // a read from the middle stops at max
    let mut n = 0;
    j.read(2500, 10, &mut |q, _| {
        assert_eq!(q, 2500 + n);
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 10);
}

#[test]
fn one_read_spans_many_chunks_of_a_large_segment() {
    // records of 77 bytes never line up with the reader's 4 MiB chunks: every chunk must end
    // on a record boundary (a record cut in two once made the whole read fail)
    let d = tempfile::tempdir().unwrap();
    let mut j = Journal::open(d.path(), S, 64 << 20).unwrap();
    let body = |i: u64| {
        let mut m = i.to_le_bytes().to_vec();
        m.resize(61, (i % 251) as u8);
        m
    };
    let total = 200_000u64; // ~15 MiB in one segment
    for i in 1..=total {
        j.append(i, &body(i)).unwrap();
    }
    j.flush().unwrap();
    assert_eq!(segment_files(d.path()).len(), 1);
    let mut next = 1;
    let n = j
        .read(1, usize::MAX, &mut |q, m| {
            assert_eq!((q, m), (next, &body(next)[..]));
            next += 1;
            true
        })
        .unwrap();
    assert_eq!((n as u64, next), (total, total + 1));
    let r = JournalReader::open(d.path(), S).unwrap();
    let mut seen = 0u64;
    r.read(123_457, usize::MAX, &mut |q, _| {
        assert_eq!(q, 123_457 + seen);
        seen += 1;
        true
    })
    .unwrap();
    assert_eq!(seen, total - 123_456);
}

#[test]
fn torn_tail_is_truncated_and_numbering_continues() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
        for i in 1..=100 {
            j.append(i, &msg(i)).unwrap();
        }
        j.flush().unwrap();
    }
    // a write cut short (kill -9 mid-write): half a record at the end
    let seg = d.path().join(format!("{:020}.seg", 1));
    let mut rec = Vec::new();
    encode_record(&mut rec, 101, &msg(101));
    let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&rec[..rec.len() / 2]).unwrap();
    drop(f);
    let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
    assert_eq!(j.next_seq(), 101);
    assert_eq!(j.recovery().truncated_bytes, (rec.len() / 2) as u64);
    j.append(101, &msg(101)).unwrap();
    j.flush().unwrap();
    drop(j);
    let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
    assert_eq!(all(&mut j).len(), 101);
}

#[test]
fn corrupt_tail_record_is_truncated_but_corrupt_middle_segment_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
        for i in 1..=3000 {
            j.append(i, &msg(i)).unwrap();
        }
        j.flush().unwrap();
    }
    let seg1 = d.path().join(format!("{:020}.seg", 1));
    let mut bytes = std::fs::read(&seg1).unwrap();
    bytes[100] ^= 0xFF;
    std::fs::write(&seg1, &bytes).unwrap();
    match Journal::open(d.path(), S, 1 << 16) {
        Err(JournalError::Corrupt { path, .. }) => assert_eq!(path, seg1),
        other => panic!("expected a corrupt-journal error, got {other:?}"),
    }
}

fn write_journal(dir: &std::path::Path, n: u64, segment: u64) {
    let mut j = Journal::open(dir, S, segment).unwrap();
    for i in 1..=n {
        j.append(i, &msg(i)).unwrap();
    }
    j.flush().unwrap();
}

fn segment_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

#[test]
fn damage_in_the_middle_of_the_last_segment_is_refused_not_cut() {
    // 8 bytes flipped in the middle of the only segment: valid records follow, so this is
    // damage, and opening must fail naming the file and offset, leaving every byte in place
    let d = tempfile::tempdir().unwrap();
    write_journal(d.path(), 3000, 1 << 30);
    let seg = segment_files(d.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let size = bytes.len();
    let mid = size / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0x5A;
    }
    std::fs::write(&seg, &bytes).unwrap();
    for _ in 0..2 {
        match Journal::open(d.path(), S, 1 << 30) {
            Err(JournalError::Corrupt {
                path,
                offset,
                reason,
            }) => {
                assert_eq!(path, seg);
                assert!(
                    offset as usize <= mid && offset as usize + 200 > mid,
                    "{offset}"
                );
                assert!(reason.contains("not a torn write"), "{reason}");
            }
            other => panic!("expected damage to be refused, got {other:?}"),
        }
        assert_eq!(
            std::fs::metadata(&seg).unwrap().len() as usize,
            size,
            "nothing cut"
        );
    }
    // a reader (replayer, archiver) refuses it too
    let e = JournalReader::open(d.path(), S).unwrap_err();
    assert!(matches!(e, JournalError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&seg.display().to_string()), "{e}");
}

#[test]
fn a_bad_last_record_with_nothing_after_it_is_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    write_journal(d.path(), 500, 1 << 30);
    let seg = segment_files(d.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xFF; // inside the last record's message
    std::fs::write(&seg, &bytes).unwrap();
    let j = Journal::open(d.path(), S, 1 << 30).unwrap();
    assert_eq!(j.next_seq(), 500);
    let (path, _, reason) = j.recovery().truncated_at.clone().unwrap();
    assert_eq!(path, seg);
    assert!(reason.contains("checksum"), "{reason}");
}

#[test]
fn repair_from_a_peer_restores_every_message_byte_for_byte() {
    let d = tempfile::tempdir().unwrap();
    let (ours, peer) = (d.path().join("ours"), d.path().join("peer"));
    // the peer's segments are cut elsewhere (another segment size): repair goes by sequence
    write_journal(&ours, 6000, 1 << 16);
    write_journal(&peer, 6000, 1 << 20);
    let segs = segment_files(&ours);
    assert!(segs.len() > 3);
    let originals: Vec<Vec<u8>> = segs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // damage a middle segment and the last one
    for (k, p) in [(1usize, &segs[1]), (segs.len() - 1, segs.last().unwrap())] {
        let mut b = originals[k].clone();
        let at = b.len() / 3;
        b[at..at + 8].copy_from_slice(&[0xEE; 8]);
        std::fs::write(p, &b).unwrap();
    }
    assert!(Journal::open(&ours, S, 1 << 16).is_err());
    let report = repair(&ours, S, &peer).unwrap();
    assert_eq!(report.rewritten.len(), 2, "{report:?}");
    for p in &report.kept {
        assert!(p.exists(), "the damaged file is kept: {}", p.display());
    }
    for (p, orig) in segs.iter().zip(&originals) {
        assert_eq!(&std::fs::read(p).unwrap(), orig, "{}", p.display());
    }
    let mut j = Journal::open(&ours, S, 1 << 16).unwrap();
    assert_eq!(all(&mut j).len(), 6000);
}

#[test]
fn repair_refuses_a_peer_that_disagrees() {
    let d = tempfile::tempdir().unwrap();
    let (ours, peer) = (d.path().join("ours"), d.path().join("peer"));
    write_journal(&ours, 2000, 1 << 30);
    let mut j = Journal::open(&peer, S, 1 << 30).unwrap();
    for i in 1..=2000 {
        j.append(i, &msg(i + 1)).unwrap(); // other messages under the same numbers
    }
    j.flush().unwrap();
    let seg = segment_files(&ours).pop().unwrap();
    let mut b = std::fs::read(&seg).unwrap();
    let at = b.len() / 2;
    b[at..at + 4].copy_from_slice(&[0; 4]);
    std::fs::write(&seg, &b).unwrap();
    let e = repair(&ours, S, &peer).unwrap_err();
    assert!(e.to_string().contains("differs from the peer"), "{e}");
    assert_eq!(std::fs::read(&seg).unwrap(), b, "nothing changed");
}

#[test]
fn discard_moves_a_suffix_aside_and_numbering_continues_there() {
    let d = tempfile::tempdir().unwrap();
    write_journal(d.path(), 3000, 1 << 16);
    let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
    let aside = j.discard_from(1200).unwrap().unwrap();
    assert_eq!(j.next_seq(), 1200);
    j.append(1200, b"new").unwrap();
    j.flush().unwrap();
    drop(j);
    let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
    let got = all(&mut j);
    assert_eq!(got.len(), 1200);
    assert_eq!(got[1199], (1200, b"new".to_vec()));
    // the discarded messages are kept, readable as a segment
    let kept = std::fs::read(&aside).unwrap();
    let (r, _) = decode_record(&kept[32..]).unwrap();
    assert_eq!((r.sequence, r.message), (1200, &msg(1200)[..]));
    let mut n = 0;
    let mut at = 32;
    while at < kept.len() {
        let (r, len) = decode_record(&kept[at..]).unwrap();
        assert_eq!(r.message, &msg(r.sequence)[..]);
        n += 1;
        at += len;
    }
    assert_eq!(n, 3000 - 1199);
}

#[test]
fn hard_state_survives_and_damage_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(HardState::load(d.path()).unwrap(), HardState::default());
    let h = HardState {
        term: 7,
        voted_for: 2,
    };
    h.store(d.path()).unwrap();
    assert_eq!(HardState::load(d.path()).unwrap(), h);
    let p = d.path().join("cluster-state");
    let mut b = std::fs::read(&p).unwrap();
    b[9] ^= 1;
    std::fs::write(&p, &b).unwrap();
    assert!(HardState::load(d.path()).is_err());
}

#[test]
fn a_vote_record_behind_the_journal_is_refused_naming_it() {
    let d = tempfile::tempdir().unwrap();
    // a new member: no record, an empty journal (or one from before any election)
    assert_eq!(
        HardState::load_for(d.path(), 0).unwrap(),
        HardState::default()
    );
    // no record, but the journal holds entries of term 115
    let err = HardState::load_for(d.path(), 115).unwrap_err().to_string();
    assert!(err.contains("cluster-state: is missing"), "{err}");
    assert!(err.contains("entries of term 115"), "{err}");
    // a record of an older term than the journal's
    let h = HardState {
        term: 114,
        voted_for: 3,
    };
    h.store(d.path()).unwrap();
    let err = HardState::load_for(d.path(), 115).unwrap_err().to_string();
    assert!(err.contains("says term 114"), "{err}");
    // the record at or past the journal's term is the state
    for term in [115, 120] {
        let h = HardState { term, voted_for: 2 };
        h.store(d.path()).unwrap();
        assert_eq!(HardState::load_for(d.path(), 115).unwrap(), h);
    }
}

#[test]
fn wrong_session_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    Journal::open(d.path(), S, 1 << 16).unwrap();
    let e = Journal::open(d.path(), *b"OTHER     ", 1 << 16).unwrap_err();
    assert!(e.to_string().contains("belongs to session \"TEST\""), "{e}");
}

#[test]
fn reader_follows_the_writer() {
    let d = tempfile::tempdir().unwrap();
    let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
    let mut r = JournalReader::open(d.path(), S).unwrap();
    assert_eq!(r.next_seq(), 1);
    for i in 1..=4000 {
        j.append(i, &msg(i)).unwrap();
        if i % 7 == 0 {
            j.flush().unwrap();
        }
        if i % 500 == 0 {
            r.refresh().unwrap();
            assert_eq!(r.next_seq(), i - i % 7 + 1);
        }
    }
    j.flush().unwrap();
    r.refresh().unwrap();
    assert_eq!(r.next_seq(), 4001);
    let mut n = 0u64;
    r.read(1, usize::MAX, &mut |q, m| {
        n += 1;
        assert_eq!(m, msg(q));
        true
    })
    .unwrap();
    assert_eq!(n, 4000);
}

/// A reader on another thread, refreshing while the writer's large writes extend the file
/// (the file's size grows page by page during one `write`, so the reader sees a record cut
/// short, and a whole one after it moments later): it never reports damage, and ends with
/// every message.
#[test]
fn reader_on_another_thread_never_takes_a_growing_file_for_damage() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = tempfile::tempdir().unwrap();
    let mut j = Journal::open(d.path(), S, 64 << 20).unwrap();
    let dir = d.path().to_path_buf();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let writing = done.clone();
    let reader = std::thread::spawn(move || {
        let mut r = JournalReader::open(&dir, S).unwrap();
        let mut refreshes = 0u64;
        // bounded: the writer's end, then one last look
        let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let last = writing.load(Ordering::SeqCst);
            r.refresh().map_err(|e| e.to_string())?;
            refreshes += 1;
            if last || std::time::Instant::now() > end {
                return Ok::<_, String>((r.next_seq(), refreshes));
            }
        }
    });
    // 100 writes of 20,000 records (~1 MB each, two segments: before the reader compared what
    // it read with the size it read it at, it reported damage in each of 4 runs of this size)
    let n = 2_000_000u64;
    for i in 1..=n {
        j.append(i, &msg(i)).unwrap();
        if i % 20000 == 0 {
            j.flush().unwrap();
        }
    }
    done.store(true, Ordering::SeqCst);
    let (next, refreshes) = reader.join().unwrap().expect("no damage reported");
    assert_eq!(next, n + 1, "after {refreshes} refreshes");
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

/// Small batches are copied into a mapping of a file grown ahead of them: a reader sees each
/// batch once flushed (the zeros past it are the end, not a torn tail), a closed journal is as
/// long as its records, and a writer that died without closing leaves zeros that reopening
/// cuts silently, with every record kept.
#[test]
fn small_batches_through_the_mapping_and_the_zero_tail() {
    let d = tempfile::tempdir().unwrap();
    let seg = d.path().join(format!("{:020}.seg", 1));
    let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
    let mut r = JournalReader::open(d.path(), S).unwrap();
    for i in 1..=300 {
        j.append(i, &msg(i)).unwrap();
        j.flush().unwrap();
        if i % 50 == 0 {
            r.refresh().unwrap();
            assert_eq!(r.next_seq(), i + 1);
            assert_eq!(r.torn_tail(), None, "the reserve is not a torn tail");
        }
    }
    let written: u64 = 32 + (1..=300).map(|i| 16 + msg(i).len() as u64).sum::<u64>();
    assert!(file_len(&seg) > written, "grown ahead of the records");
    drop(j);
    assert_eq!(file_len(&seg), written, "closing cuts the reserve");

    // a writer that dies without closing (a child process that exits without dropping it)
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "dying_writer_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("SEQBUS_DYING_WRITER_DIR", d.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(file_len(&seg) > written);
    let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
    let rec = j.recovery().clone();
    assert!(
        rec.reserved_bytes > 0 && rec.truncated_at.is_none(),
        "{rec:?}"
    );
    assert_eq!(j.next_seq(), 401);
    assert_eq!(
        all(&mut j),
        (1..=400).map(|i| (i, msg(i))).collect::<Vec<_>>()
    );
}

/// The child of [`small_batches_through_the_mapping_and_the_zero_tail`]: appends 301..=400 by
/// small batches and exits without closing the journal.
#[test]
fn dying_writer_child() {
    let Ok(dir) = std::env::var("SEQBUS_DYING_WRITER_DIR") else {
        return; // only as the child
    };
    let mut j = Journal::open(std::path::Path::new(&dir), S, 1 << 20).unwrap();
    assert_eq!(j.recovery().reserved_bytes, 0);
    for i in 301..=400 {
        j.append(i, &msg(i)).unwrap();
        j.flush().unwrap();
    }
    std::process::exit(0); // no destructor runs: the reserve stays, the lock goes with the process
}

/// A reader on another thread while the writer copies small batches into the mapping: it
/// never reports damage (a record half copied is never followed by a whole one) and ends with
/// every message.
#[test]
fn reader_on_another_thread_follows_small_batches_through_the_mapping() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = tempfile::tempdir().unwrap();
    let mut j = Journal::open(d.path(), S, 4 << 20).unwrap();
    let dir = d.path().to_path_buf();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let writing = done.clone();
    let reader = std::thread::spawn(move || {
        let mut r = JournalReader::open(&dir, S).unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let last = writing.load(Ordering::SeqCst);
            r.refresh().map_err(|e| e.to_string())?;
            if last || std::time::Instant::now() > end {
                return Ok::<_, String>(r.next_seq());
            }
        }
    });
    // batches of 1 to 3 records, across several segments
    let n = 200_000u64;
    for i in 1..=n {
        j.append(i, &msg(i)).unwrap();
        if i % 3 == i % 2 {
            j.flush().unwrap();
        }
    }
    j.flush().unwrap();
    done.store(true, Ordering::SeqCst);
    assert_eq!(reader.join().unwrap().expect("no damage reported"), n + 1);
}

/// Zeros in the middle of the last segment with records after them are damage, as any bad
/// bytes are: refused with the file and offset, nothing cut.
#[test]
fn zeros_with_records_after_them_are_damage() {
    let d = tempfile::tempdir().unwrap();
    write_journal(d.path(), 200, 1 << 20);
    let seg = segment_files(d.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = 32 + (1..=100).map(|i| 16 + msg(i).len()).sum::<usize>();
    bytes[at..at + 200].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    let e = Journal::open(d.path(), S, 1 << 20).unwrap_err();
    assert!(
        e.to_string().contains(&format!("offset {at}")) && e.to_string().contains("damage"),
        "{e}"
    );
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "nothing cut");
}

/// Cases per property: `SEQBUS_FUZZ_INPUTS`, or `default`.
fn fuzz_config(default: u64) -> ProptestConfig {
    ProptestConfig {
        cases: seqbus_wire::fuzz_inputs(default) as u32,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(fuzz_config(2000))]

    #[test]
    fn record_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        match decode_record(&bytes) {
            Ok((r, n)) => {
                prop_assert!(n <= bytes.len());
                let mut again = Vec::new();
                encode_record(&mut again, r.sequence, r.message);
                prop_assert_eq!(&again[..], &bytes[..n]);
            }
            Err(RecordError::Incomplete) | Err(RecordError::Invalid(_)) => {}
        }
    }

    #[test]
    fn record_round_trip(seq in 1u64.., m in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut b = Vec::new();
        encode_record(&mut b, seq, &m);
        let (r, n) = decode_record(&b).unwrap();
        prop_assert_eq!((r.sequence, r.message, n), (seq, &m[..], b.len()));
        // any single flipped bit is caught
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 1;
            prop_assert!(decode_record(&c).map(|(r, _)| (r.sequence, r.message.to_vec())) != Ok((seq, m.clone())));
        }
    }
}

#[test]
fn reader_follows_a_writer_that_discards_a_suffix() {
    // a cluster member cuts an unpublished suffix and writes other messages (other lengths)
    // from the cut; a reader that had read past the cut (the member's in-process replayer)
    // must read the new messages, not report damage or serve the old ones, whether it looks
    // between the cut and the new writes or only after both
    for look_between in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
        for i in 1..=300 {
            j.append(i, &msg(i)).unwrap();
        }
        j.flush().unwrap();
        let mut r = JournalReader::open(d.path(), S).unwrap();
        assert_eq!(r.next_seq(), 301);
        j.discard_from(200).unwrap().unwrap();
        if look_between {
            r.refresh().unwrap();
            assert_eq!(r.next_seq(), 200);
        }
        let other = |i: u64| vec![0xA5; 3 + (i % 7) as usize];
        for i in 200..=320 {
            j.append(i, &other(i)).unwrap();
        }
        j.flush().unwrap();
        r.refresh().unwrap();
        assert_eq!(r.next_seq(), 321, "look between: {look_between}");
        let mut n = 0;
        r.read(1, usize::MAX, &mut |q, m| {
            let want = if q < 200 { msg(q) } else { other(q) };
            assert_eq!(m, &want[..], "message {q}, look between: {look_between}");
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 320);
    }
}

#[test]
fn reader_still_reports_damage_after_reading_again() {
    // the second look that tells a cut from damage must not hide damage
    let d = tempfile::tempdir().unwrap();
    let mut j = Journal::open(d.path(), S, 1 << 20).unwrap();
    for i in 1..=100 {
        j.append(i, &msg(i)).unwrap();
    }
    j.flush().unwrap();
    let mut r = JournalReader::open(d.path(), S).unwrap();
    for i in 101..=200 {
        j.append(i, &msg(i)).unwrap();
    }
    j.flush().unwrap();
    drop(j);
    // flip a byte inside record 150's message
    let seg = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let mut at = 32;
    for _ in 1..150 {
        let (_, len) = decode_record(&bytes[at..]).unwrap();
        at += len;
    }
    bytes[at + 20] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    let e = r.refresh().unwrap_err();
    assert!(matches!(e, JournalError::Corrupt { .. }), "{e}");
}

/// The child of [`a_segment_cut_short_under_the_writer_is_named_when_it_faults`]: maps a
/// segment by small writes, has it truncated as another process would, and writes again.
#[test]
fn sigbus_child() {
    let Ok(dir) = std::env::var("SEQBUS_SIGBUS_CHILD_DIR") else {
        return; // only as the child
    };
    let mut j = Journal::open(std::path::Path::new(&dir), S, 1 << 20).unwrap();
    for i in 1..=10 {
        j.append(i, &msg(i)).unwrap();
        j.flush().unwrap(); // small batches go into the mapping
    }
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(0)
        .unwrap();
    j.append(11, &msg(11)).unwrap();
    j.flush().unwrap();
    unreachable!("the write into the cut mapping faults");
}

#[test]
fn a_segment_cut_short_under_the_writer_is_named_when_it_faults() {
    use std::os::unix::process::ExitStatusExt;
    let d = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigbus_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("SEQBUS_SIGBUS_CHILD_DIR", d.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{stderr}");
    assert!(
        stderr.contains("seqbus journal: SIGBUS writing ")
            && stderr.contains(".seg: the segment was cut short under this process"),
        "{stderr}"
    );
    assert!(stderr.contains(&d.path().display().to_string()), "{stderr}");
}

#[test]
fn a_reader_reads_every_segment_at_once_and_names_a_missing_one() {
    let d = tempfile::tempdir().unwrap();
    write_journal(d.path(), 6000, 1 << 15);
    let segs = segment_files(d.path());
    assert!(segs.len() > 5, "{}", segs.len());
    // one open reads them all (it took one more segment per refresh)
    for r in [
        JournalReader::open(d.path(), S).unwrap(),
        JournalReader::open_at_rest(d.path(), S).unwrap(),
    ] {
        assert_eq!((r.segments(), r.next_seq()), (segs.len(), 6001));
        let mut n = 0u64;
        r.read(1, usize::MAX, &mut |q, m| {
            assert_eq!(m, &msg(q)[..]);
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 6000);
    }
    // a middle segment gone: the reader stops before it, and a journal at rest is damaged,
    // named by the segment after the hole
    std::fs::remove_file(&segs[2]).unwrap();
    let r = JournalReader::open(d.path(), S).unwrap();
    assert_eq!(r.segments(), 2);
    match JournalReader::open_at_rest(d.path(), S).unwrap_err() {
        JournalError::Corrupt { path, reason, .. } => {
            assert_eq!(path, segs[3]);
            assert!(reason.contains("what lies between is missing"), "{reason}");
        }
        e => panic!("{e}"),
    }
}

#[test]
fn repair_reads_a_peer_of_many_segments() {
    let d = tempfile::tempdir().unwrap();
    let (ours, peer) = (d.path().join("ours"), d.path().join("peer"));
    write_journal(&ours, 6000, 1 << 16);
    write_journal(&peer, 6000, 1 << 15);
    assert!(segment_files(&peer).len() > 5);
    let segs = segment_files(&ours);
    let last = segs.len() - 2; // damage late in the journal, past the peer's first segment
    let original = std::fs::read(&segs[last]).unwrap();
    let mut b = original.clone();
    let at = b.len() / 2;
    b[at..at + 8].copy_from_slice(&[0xEE; 8]);
    std::fs::write(&segs[last], &b).unwrap();
    let report = repair(&ours, S, &peer).unwrap();
    assert_eq!(report.rewritten.len(), 1, "{report:?}");
    assert_eq!(std::fs::read(&segs[last]).unwrap(), original);
}

#[test]
fn a_journal_has_one_writer_and_a_second_touches_nothing() {
    let d = tempfile::tempdir().unwrap();
    let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
    for i in 1..=5 {
        j.append(i, &msg(i)).unwrap();
        j.flush().unwrap(); // mapped, with zeros reserved past the end
    }
    let seg = segment_files(d.path()).pop().unwrap();
    let before = std::fs::metadata(&seg).unwrap().len();
    match Journal::open(d.path(), S, 1 << 16).unwrap_err() {
        JournalError::InUse { path, holder } => {
            assert_eq!(path, d.path());
            assert_eq!(holder, Some(std::process::id()));
        }
        e => panic!("{e}"),
    }
    let peer = tempfile::tempdir().unwrap();
    write_journal(peer.path(), 5, 1 << 16);
    assert!(matches!(
        repair(d.path(), S, peer.path()),
        Err(JournalError::InUse { .. })
    ));
    // the reserved zeros the second writer would have cut are still there
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), before);
    j.append(6, &msg(6)).unwrap();
    j.flush().unwrap();
    drop(j);
    let mut j = Journal::open(d.path(), S, 1 << 16).unwrap();
    assert_eq!(all(&mut j).len(), 6);
}

/// Flips 8 bytes of the session field (header bytes 8..16) of `path`.
fn flip_session(path: &std::path::Path) {
    let mut b = std::fs::read(path).unwrap();
    for x in &mut b[8..16] {
        *x ^= 0xA5;
    }
    std::fs::write(path, &b).unwrap();
}

#[test]
fn a_damaged_segment_header_is_damage_named_and_repaired_from_a_peer() {
    for segment in [1u64 << 24, 1 << 15] {
        // one segment, then many: the flip is in the first segment either way
        let d = tempfile::tempdir().unwrap();
        let (ours, peer) = (d.path().join("ours"), d.path().join("peer"));
        write_journal(&ours, 3000, segment);
        write_journal(&peer, 3000, 1 << 20);
        let segs = segment_files(&ours);
        assert_eq!(segs.len() == 1, segment == 1 << 24);
        let original = std::fs::read(&segs[0]).unwrap();
        assert_eq!(&original[..8], b"SEQBUSJ2");
        flip_session(&segs[0]);
        // the session is not taken from the damaged header
        match journal_session(&ours) {
            Ok(session) => {
                assert!(segs.len() > 1);
                assert_eq!(session, S);
            }
            Err(JournalError::Corrupt { path, offset, .. }) => {
                assert_eq!((path, offset), (segs[0].clone(), 20));
            }
            Err(e) => panic!("{e}"),
        }
        // every reader names the damaged file and the header's checksum
        let e = JournalReader::open_at_rest(&ours, S)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&segs[0].display().to_string()), "{e}");
        assert!(e.contains("segment header: checksum does not match"), "{e}");
        let e = Journal::open(&ours, S, segment).unwrap_err().to_string();
        assert!(e.contains("checksum does not match"), "{e}");
        // repair restores the header with the records, byte for byte
        let report = repair(&ours, S, &peer).unwrap();
        assert_eq!(report.rewritten, vec![(segs[0].clone(), 20)], "{report:?}");
        assert_eq!(std::fs::read(&segs[0]).unwrap(), original);
        let mut j = Journal::open(&ours, S, segment).unwrap();
        assert_eq!(all(&mut j).len(), 3000);
    }
}

#[test]
fn segments_of_the_first_format_are_read_and_a_foreign_session_in_one_is_damage() {
    let d = tempfile::tempdir().unwrap();
    let (ours, peer) = (d.path().join("ours"), d.path().join("peer"));
    write_journal(&ours, 3000, 1 << 15);
    write_journal(&peer, 3000, 1 << 20);
    let segs = segment_files(&ours);
    assert!(segs.len() > 2);
    // rewrite every header as format 1 wrote it: magic SEQBUSJ1, no checksum
    let mut originals = Vec::new();
    for p in &segs {
        let mut b = std::fs::read(p).unwrap();
        b[..8].copy_from_slice(b"SEQBUSJ1");
        b[20..24].copy_from_slice(&[0; 4]);
        std::fs::write(p, &b).unwrap();
        originals.push(b);
    }
    {
        let mut j = Journal::open(&ours, S, 1 << 15).unwrap();
        assert_eq!(all(&mut j).len(), 3000);
        assert_eq!(journal_session(&ours).unwrap(), S);
    }
    // a format 1 header has no checksum: its flipped session is outvoted by the other
    // headers, named by the readers, and repaired from the peer (in format 2)
    flip_session(&segs[0]);
    assert_eq!(journal_session(&ours).unwrap(), S);
    let e = JournalReader::open_at_rest(&ours, S)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&segs[0].display().to_string()), "{e}");
    let report = repair(&ours, S, &peer).unwrap();
    assert_eq!(report.rewritten, vec![(segs[0].clone(), 8)], "{report:?}");
    let repaired = std::fs::read(&segs[0]).unwrap();
    assert_eq!(&repaired[..8], b"SEQBUSJ2");
    assert_eq!(repaired[32..], originals[0][32..]);
    let mut j = Journal::open(&ours, S, 1 << 15).unwrap();
    assert_eq!(all(&mut j).len(), 3000);
}

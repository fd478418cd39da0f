//! A cluster whose disks fail (`seqbus_sim::storage`), on seeded schedules: slow and stalled
//! fsyncs, failed writes, torn writes at a crash, lost writes and reads that return damaged
//! bytes. The invariant checkers (`seqbus_sim::checkers`) run after every step of every
//! scenario; each scenario also checks that its fault happened and that every node was handed
//! every command exactly once, in each sender's order.
//!
//! `SEQBUS_SIM_SEEDS` (default 8 per scenario here) runs more seeds; a long run (docs/testing.md):
//! `SEQBUS_SIM_SEEDS=2000 cargo test --release -p seqbus-sim --test cluster --test storage`.

mod common;

use common::{Kills, Load};
use seqbus_core::node::RECORD_MESSAGE;
use seqbus_core::Start;
use seqbus_sim::{NodeOptions, Rng, StorageFaults};

fn seeds() -> u64 {
    std::env::var("SEQBUS_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(8, |n: u64| n.max(1))
}

#[test]
fn slow_fsyncs_delay_but_lose_nothing() {
    let mut slow = 0;
    for seed in 0..seeds() {
        let f = StorageFaults {
            slow_fsync_pct: 20.0,
            slow_fsync_ns: (100_000, 5_000_000),
            ..StorageFaults::none()
        };
        let mut l = Load::new(100 + seed, f, 2.0);
        l.settle_with(300, |_| {});
        slow += l.stats().slow_fsyncs;
        assert!(l.bus.disk_failures.is_empty());
    }
    eprintln!("slow fsyncs: {slow}");
    assert!(slow > 0, "no slow fsync happened");
}

/// An fsync that blocks for 1.5 to 4 election timeouts: the others take the blocked leader
/// for dead and elect another; the blocked member, when its fsync returns, acts on a stale
/// view (its answers and packets were held while it was blocked) and is fenced.
#[test]
fn stalled_fsyncs_cost_elections_not_messages() {
    let (mut stalls, mut elections) = (0, 0);
    for seed in 0..seeds() {
        let f = StorageFaults {
            stall_pct: 3.0,
            stall_ns: (60_000_000, 160_000_000),
            ..StorageFaults::none()
        };
        let mut l = Load::new(200 + seed, f, 0.0);
        l.settle_with(600, |_| {});
        stalls += l.stats().stalls;
        elections += (1..=3)
            .filter_map(|id| l.bus.member(id))
            .map(|m| m.stats().elections)
            .sum::<u64>();
    }
    eprintln!("stalled fsyncs: {stalls}, elections {elections}");
    assert!(stalls > 0, "no fsync stalled");
    assert!(elections > seeds(), "no stall cost an election");
}

/// Appends, flushes and votes that fail: the member's process stops on the error
/// (fail-stop, as the sequencer's `Error::Persist`) and is started again from its durable
/// journal and vote.
#[test]
fn failed_writes_stop_the_member_which_restarts_from_its_journal() {
    let mut failures = 0;
    for seed in 0..seeds() {
        let f = StorageFaults {
            write_fail_pct: 0.3,
            vote_fail_pct: 3.0,
            ..StorageFaults::none()
        };
        let mut l = Load::new(300 + seed, f, 2.0);
        l.settle_with(400, |_| {});
        failures += l.bus.disk_failures.len();
        let s = l.stats();
        assert_eq!(
            l.bus.disk_failures.len() as u64,
            s.failed_writes + s.failed_votes,
            "{:?}",
            l.bus.disk_failures
        );
    }
    eprintln!("processes stopped on a failed write: {failures}");
    assert!(failures > 0, "no write failed");
}

/// Members killed while an fsync is in progress (slow fsyncs keep one in progress often):
/// the flush's records are lost, some written whole and the next torn; the journal cuts the
/// torn record at open and the member catches up from the leader.
#[test]
fn torn_writes_at_a_crash_are_cut_at_open() {
    let mut torn = 0;
    for seed in 0..seeds() {
        let f = StorageFaults {
            slow_fsync_pct: 60.0,
            slow_fsync_ns: (500_000, 3_000_000),
            torn_pct: 100.0,
            ..StorageFaults::none()
        };
        let mut l = Load::new(400 + seed, f, 0.0);
        let mut kills = Kills::new(Rng(seed), &l, 50_000_000, usize::MAX);
        l.settle_with(400, |l| kills.step(l));
        torn += l.stats().torn;
        assert!(l.stats().cut_at_open >= l.stats().torn.saturating_sub(1));
    }
    eprintln!("torn records: {torn}");
    assert!(torn > 0, "no crash tore a record");
}

/// A record the disk acknowledged and lost, in the middle of a journal (a valid record after
/// it), on a seeded schedule (which record, which member). Found either when the member
/// restarts and reads its journal (it refuses to start), or while it runs, when its replayer
/// reads the record for a node that rewinds from the start (its whole process stops, as
/// docs/ha.md "A running member stops on damage" says, and then refuses to start); either
/// way its journal is repaired from a peer's copy (`seqbus journal repair`) and it starts
/// again. The record was durable on all three members, so the committed stream stays on a
/// majority's intact journals throughout.
#[test]
fn lost_writes_are_found_and_repaired_from_a_peer() {
    let mut repaired = 0;
    for seed in 0..seeds() {
        let mut l = Load::new(500 + seed, StorageFaults::none(), 0.0);
        let mut rng = Rng(seed ^ 0x105);
        l.settle_with(200, |_| {});
        // quiet: every journal holds the whole stream (the leader's clock ticks still
        // come: a moment when the three journals are the same length, so that a peer holds
        // every record the victim does, as `seqbus journal repair` needs)
        for _ in 0..200 {
            l.step(200);
        }
        let same = |l: &Load| {
            let n = l.bus.log(1).records().len();
            (2..=3).all(|id| l.bus.log(id).records().len() == n)
        };
        for _ in 0..10_000 {
            if same(&l) {
                break;
            }
            l.step(200);
        }
        assert!(
            same(&l),
            "seed {seed}: the journals never reached the same length"
        );
        let c = (1..=3).map(|id| l.bus.log(id).durable()).min().unwrap() as u64;
        let s = 2 + rng.next_u64() % (c - 2);
        let while_running = seed % 2 == 1;
        let victim = if while_running {
            1 // the replayer a node with one replayer asks
        } else {
            1 + (rng.next_u64() % 3) as u16
        };
        l.bus.log_mut(victim).lose(s);
        if while_running {
            let mut o = NodeOptions::new("LATE", Start::From(1));
            o.replayers = Some(1);
            let late = l.bus.add_node(&o);
            let mut handed = 0;
            let mut buf = Vec::new();
            let limit = l.bus.now() + 60_000_000_000;
            while handed < 3 * 200 {
                assert!(
                    l.bus.now() < limit,
                    "seed {seed}: the late node has {handed}"
                );
                l.step(200);
                buf.clear();
                l.bus.deliver(late, &mut buf, usize::MAX).unwrap();
                let mut at = 0;
                while at < buf.len() {
                    let len = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
                    let ty = u16::from_le_bytes(buf[at + 4..at + 6].try_into().unwrap());
                    handed += u64::from(ty == RECORD_MESSAGE);
                    at += len;
                }
                l.bus.transmit(late);
            }
        } else {
            l.bus.kill_member(victim);
            assert!(
                l.bus.restart_member(victim),
                "seed {seed}: repaired from a peer"
            );
        }
        l.settle_with(400, |_| {});
        let st = l.bus.log(victim).stats();
        assert_eq!(st.repaired, 1, "seed {seed}: {:?}", l.bus.disk_failures);
        assert!(l.bus.log(victim).lost().is_empty());
        assert!(l.bus.member(victim).is_some());
        repaired += st.repaired;
        let found: Vec<&str> = l
            .bus
            .disk_failures
            .iter()
            .filter(|f| f.member == victim)
            .map(|f| f.error.as_str())
            .collect();
        assert!(
            found.iter().any(|e| e.contains("was lost")),
            "seed {seed}: {found:?}"
        );
        if while_running {
            assert!(
                found.len() >= 2,
                "seed {seed}: stopped, then refused: {found:?}"
            );
        }
    }
    eprintln!("lost records found and repaired: {repaired}");
}

/// Reads that return damaged bytes (the checksum catches them): a member that meets one —
/// catching a follower up, answering a node's or the following replayer's request — stops
/// rather than hand the bytes on, and starts again (the bytes on its disk are sound).
#[test]
fn damaged_reads_stop_the_member_rather_than_hand_on_wrong_bytes() {
    let mut damaged = 0;
    for seed in 0..seeds() {
        let f = StorageFaults {
            damaged_read_pct: 2.0,
            ..StorageFaults::none()
        };
        // loss makes nodes and the following replayer ask the members' replayers
        let mut l = Load::new(600 + seed, f, 5.0);
        l.settle_with(400, |_| {});
        damaged += l.stats().damaged_reads;
        assert_eq!(
            l.bus.disk_failures.len() as u64,
            l.stats().damaged_reads,
            "every damaged read stopped its member"
        );
    }
    eprintln!("damaged reads: {damaged}");
    assert!(damaged > 0, "no read was damaged");
}

/// What the checksums prevent, shown: the same damaged reads with the checksum not checked
/// hand wrong bytes on, and the checkers catch them.
#[test]
#[should_panic(expected = "with other bytes than the committed entry")]
fn without_checksums_damaged_reads_reach_a_node_and_the_checkers_catch_it() {
    let f = StorageFaults {
        damaged_read_pct: 30.0,
        ..StorageFaults::none()
    };
    let mut l = Load::new(700, f, 5.0);
    for id in 1..=3 {
        l.bus.log_mut(id).skip_checksums();
    }
    l.settle_with(400, |_| {});
}

/// A known gap, shown: a lost write at the tail of a journal cannot be told from a torn
/// write, so the journal cuts it at open, and an acknowledged record is gone. When that member
/// was part of the only majority holding it, the committed stream is no longer on a majority
/// and the checkers say so, from the moment the record is lost (Raft assumes acknowledged
/// records survive; protocol-aware recovery would ask the peers before cutting).
#[test]
#[should_panic(expected = "fewer than a majority")]
fn a_lost_write_at_the_tail_is_cut_as_torn_and_the_checkers_catch_it() {
    let mut l = Load::new(800, StorageFaults::none(), 0.0);
    l.settle_with(100, |_| {});
    let leader = l.bus.leader().unwrap();
    let behind = 1 + (leader % 3);
    let holder = (1..=3).find(|&id| id != leader && id != behind).unwrap();
    // one follower stops; the other and the leader commit more
    l.bus.pause_member(behind);
    l.settle_with(200, |_| {});
    let last = l.bus.log(holder).durable() as u64;
    l.bus.log_mut(holder).lose(last);
    l.bus.kill_member(holder);
    l.bus.restart_member(holder);
}

/// One run of [`syncs_off_the_loop_delay_acknowledgements_not_the_process`]: slow and
/// stalled fsyncs and torn writes, with members killed now and then (`kills`). Returns
/// (elections after the first, stalls, syncs completed off the loop, the most in progress at
/// once, torn records).
fn slow_disks(seed: u64, off_loop: bool, kills: bool) -> (u64, u64, u64, usize, u64) {
    let f = StorageFaults {
        slow_fsync_pct: 30.0,
        slow_fsync_ns: (200_000, 4_000_000),
        stall_pct: 3.0,
        stall_ns: (60_000_000, 160_000_000),
        torn_pct: 100.0,
        ..StorageFaults::none()
    };
    let mut l = Load::with(800 + seed, f, 1.0, |p| p.sync_off_loop = off_loop);
    let mut killer = Kills::new(Rng(seed ^ 0x5c), &l, 80_000_000, if kills { 4 } else { 0 });
    l.settle_with(500, |l| killer.step(l));
    let elections = l
        .bus
        .take_events()
        .into_iter()
        .filter(|(_, _, e)| matches!(e, seqbus_core::cluster::Event::Election { .. }))
        .count();
    (
        elections.saturating_sub(1) as u64,
        l.stats().stalls,
        l.bus.syncs_completed,
        l.bus.most_syncs_in_progress,
        l.stats().torn,
    )
}

/// The members' syncs off their loops, as the storage requests allow
/// (`seqbus_core::cluster::Storage::Sync`, answered by `Member::handle_durable` when it
/// completes): slow and stalled fsyncs, and members killed meanwhile (what was written and
/// not yet synced is lost or torn). A follower acknowledges, and a leader counts its own
/// replica, only as far as the disk made the entries durable, so the checkers' rule (a
/// published entry is durable on a majority) holds after every step, and every node is handed
/// every command once and in order. The same seeds without kills, in the loop and off it, in
/// the same run, counting the elections after the first: a stalled fsync in the loop blocks
/// the member's process and often costs an election; off the loop it delays acknowledgements
/// only (a standby whose sync lags still answers each append, with what is durable, so the
/// leader hears it), and costs almost none.
#[test]
fn syncs_off_the_loop_delay_acknowledgements_not_the_process() {
    let (mut on, mut off) = ((0, 0), (0, 0));
    let (mut completed, mut most, mut torn) = (0, 0, 0);
    for seed in 0..seeds() {
        let (e, s, _, _, _) = slow_disks(seed, false, false);
        on = (on.0 + e, on.1 + s);
        let (e, s, _, _, _) = slow_disks(seed, true, false);
        off = (off.0 + e, off.1 + s);
        let (_, _, c, m, t) = slow_disks(seed, true, true);
        completed += c;
        most = most.max(m);
        torn += t;
    }
    eprintln!(
        "elections after the first (stalled fsyncs): syncs in the loop {} ({}), off it {} \
         ({}); with kills, {completed} syncs completed off the loop, at most {most} in \
         progress at once, {torn} torn records",
        on.0, on.1, off.0, off.1
    );
    assert!(completed > 0 && most >= 2, "no sync ran behind another");
    assert!(torn > 0, "no record was torn");
    assert!(on.1 > 0 && off.1 > 0, "no fsync stalled");
    assert!(on.0 > 0, "no stall in the loop cost an election: {on:?}");
    assert!(
        off.0 * 10 <= on.0,
        "elections (stalls): in the loop {on:?}, off it {off:?}"
    );
}

/// What answering a sync only once it completes prevents, shown: an I/O layer that tells
/// the member its entries are durable as soon as it asks (before the disk made them so) lets
/// followers acknowledge, and the leader publish, entries that a crash then takes from a
/// majority's journals, and the checkers catch it.
#[test]
#[should_panic(expected = "fewer than a majority")]
fn syncs_answered_before_the_disk_makes_them_durable_are_caught() {
    let f = StorageFaults {
        slow_fsync_pct: 100.0,
        slow_fsync_ns: (2_000_000, 4_000_000),
        ..StorageFaults::none()
    };
    let mut l = Load::with(900, f, 0.0, |p| {
        p.sync_off_loop = true;
        p.answer_syncs_early = true;
    });
    l.settle_with(300, |_| {});
}

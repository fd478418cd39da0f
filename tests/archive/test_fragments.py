"""Issue 18: a message fragmented across archive segments is read whole and once by every
reader — the envelope, typed and raw tables, any cut into slices, `archive cat`, `archive
export`, offline replay — and agrees with verify; one that cannot be reassembled is reported,
never skipped silently."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from examples.exchange.messages import BookUpdateView, ExchangeNode, NewOrderView, OrderAcceptedView

from seqbus.archive import Archive, replay
from tests.archive import session as sess

TYPES = ["exchange.NewOrder", "exchange.BookUpdate", "exchange.OrderAccepted"]
PREFIX = {"sequence", "timestamp_ns", "instance", "command_seq", "version", "envelope_account"}


@pytest.fixture(scope="module")
def frag() -> sess.Fragmented:
    return sess.build_fragmented(300)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, frag: sess.Fragmented) -> Path:
    """The session in segments of 4 KiB (the smallest): dozens of boundaries, and messages
    whose fragments lie in two or three segments."""
    return sess.write_records(tmp_path_factory.mktemp("frag") / "small.archive", frag.records, 4096)


def test_the_session_crosses_segments(small: Path, frag: sess.Fragmented) -> None:
    fragmented = sum(1 for n in frag.fragments.values() if n > 1)
    assert fragmented > 400 and len(Archive(small).segments()) > 50
    assert sess.crossing(small, frag.records) > 40


def test_verify_follows_fragments_across_segments(small: Path, frag: sess.Fragmented) -> None:
    rep = Archive(small).verify()
    assert rep.ok, rep.problems[:3]
    assert rep.records == len(frag.records)
    assert rep.fragmented_messages == sum(1 for n in frag.fragments.values() if n > 1)


def test_envelope_table_has_one_row_per_message(small: Path, frag: sess.Fragmented) -> None:
    a = Archive(small)
    t = a.envelope_table()
    assert t.column("sequence").to_pylist() == [m.sequence for m in frag.messages]
    assert t.column("type").to_pylist() == [m.type for m in frag.messages]
    assert t.column("timestamp_ns").to_pylist() == [m.timestamp_ns for m in frag.messages]
    assert t.column("account").to_pylist() == [m.account for m in frag.messages]
    assert t.column("command_seq").to_pylist() == [m.command_seq for m in frag.messages]
    assert t.column("fragments").to_pylist() == [frag.fragments[m.sequence] for m in frag.messages]
    assert t.column("size").to_pylist() == [32 + len(m.body) for m in frag.messages]
    assert a.problems == []


def test_raw_table_keeps_every_record(small: Path, frag: sess.Fragmented) -> None:
    t = Archive(small).raw_table()
    assert t.column("sequence").to_pylist() == [s for s, _ in frag.records]
    assert t.column("flags").to_pylist() == [m[27] for _, m in frag.records]
    assert t.column("body").to_pylist() == [m[32:] for _, m in frag.records]


@pytest.mark.parametrize("typ", TYPES)
def test_typed_tables_equal_the_generated_codec(small: Path, frag: sess.Fragmented, typ: str) -> None:
    a = Archive(small)
    t = a.table(typ)
    want = [m for m in frag.messages if m.type == typ]
    seq = "envelope_sequence" if "envelope_sequence" in t.column_names else "sequence"
    assert t.column(seq).to_pylist() == [m.sequence for m in want]
    acct_is_field = "envelope_account" in t.column_names
    got = [sess.plain({k: v for k, v in r.items()
                       if k not in PREFIX and (acct_is_field or k != "account")})
           for r in t.to_pylist()]
    assert got == list(sess.expected_rows(frag.messages, typ))
    assert a.problems == []


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 64, 1000])
def test_any_cut_into_slices_reads_each_message_once(small: Path, frag: sess.Fragmented, rows: int) -> None:
    """Slices (batches, Spark partitions, stream micro-batches) cut through fragmented
    messages and segments alike: each message is read once, in the slice of its last
    fragment."""
    a = Archive(small)
    slices = a.slices(max_rows=rows)
    assert sum(s.records for s in slices) == len(frag.records)
    seqs = [s for b in a.envelope_batches(slices) for s in b.column("sequence").to_pylist()]
    assert seqs == [m.sequence for m in frag.messages]
    orders = [s for b in a.typed_batches("exchange.BookUpdate", slices)
              for s in b.column("sequence").to_pylist()]
    assert orders == [m.sequence for m in frag.messages if m.type == "exchange.BookUpdate"]
    assert a.problems == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "seqbus.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_cat_prints_every_message_whole(small: Path, frag: sess.Fragmented) -> None:
    p = _cli("archive", "cat", str(small), "--json")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["sequence"] for x in lines] == [m.sequence for m in frag.messages]
    assert all(x["fields"] is not None for x in lines)
    books = [x for x in lines if x["type"] == "exchange.BookUpdate"]
    assert [len(x["fields"]["levels"]) for x in books] == [
        len(r["levels"]) for r in sess.expected_rows(frag.messages, "exchange.BookUpdate")]


def test_export_writes_every_message(small: Path, frag: sess.Fragmented, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    p = _cli("archive", "export", str(small), str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert pq.read_table(tmp_path / "out" / "envelope").num_rows == len(frag.messages)
    for typ in TYPES:
        assert pq.read_table(tmp_path / "out" / typ).num_rows == sum(m.type == typ for m in frag.messages)


class Counting(ExchangeNode):
    """What a node of the session saw: per type, a count and the (sequence, time, key) list."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[tuple[int, int, int]]] = {}

    def _saw(self, typ: str, key: int) -> None:
        self.seen.setdefault(typ, []).append((self.sequence(), self.sequencer_time(), key))

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        self._saw("exchange.NewOrder", len(msg.memo))

    def on_book_update(self, msg: BookUpdateView, mine: bool) -> None:
        self._saw("exchange.BookUpdate", sum(level.quantity for level in msg.levels))

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        self._saw("exchange.OrderAccepted", int(msg.order_id))


def test_offline_replay_hands_every_message_to_the_node(small: Path, frag: sess.Fragmented) -> None:
    node = replay(Counting, Archive(small), account="AUDIT")
    import examples.exchange.messages as x

    def key(m: sess.Msg) -> int:
        if m.type == "exchange.NewOrder":
            return len(x.NewOrder.decode(m.body).memo)
        if m.type == "exchange.BookUpdate":
            return sum(level.quantity for level in x.BookUpdate.decode(m.body).levels)
        return int(x.OrderAccepted.decode(m.body).order_id)

    for typ in TYPES:
        assert node.seen[typ] == [(m.sequence, m.timestamp_ns, key(m)) for m in frag.messages
                                  if m.type == typ], typ
    # a replay that starts between the fragments of messages still sees them whole
    mid = next(s for s, m in frag.records[500:] if m[27] == 1)
    node = replay(Counting, Archive(small), account="AUDIT", seq_lo=mid + 1)
    got = sorted(s for v in node.seen.values() for s, _, _ in v)
    assert got == [m.sequence for m in frag.messages if m.sequence > mid and m.type in TYPES]


def test_a_message_that_starts_before_the_archive_is_reported(tmp_path: Path, frag: sess.Fragmented) -> None:
    """An archive that starts between the fragments of a message (archived from a sequence
    in the middle of the session) cannot reassemble it: every reader reports it, with its
    position, and verify agrees."""
    cut = next(i for i, (_, m) in enumerate(frag.records) if m[27] == 1 and i > 10)
    last = next(s for s, m in frag.records[cut:] if m[27] == 2 and m[16:24] == frag.records[cut][1][16:24])
    path = sess.write_records(tmp_path / "a", frag.records[cut + 1:], 4096)
    a = Archive(path, on_problem="collect")
    env = a.envelope_table()
    assert last not in env.column("sequence").to_pylist()
    [p] = [p for p in a.problems if p.sequence == last]
    assert "starts before the archive's first sequence" in p.message
    assert p.file.startswith("seg-") and p.offset >= 32
    rep = Archive(path).verify()
    assert any(p.sequence == last and "reassembles to" in p.message for p in rep.problems)
    assert _cli("archive", "cat", str(path)).returncode == 1


def test_an_unreadable_fragment_is_reported_at_its_message(tmp_path: Path, frag: sess.Fragmented) -> None:
    path = sess.write_records(tmp_path / "a", frag.records, 4096)
    i = next(i for i, (_, m) in enumerate(frag.records) if m[27] == 1 and i > 100)
    seq, m = frag.records[i]
    last = next(s for s, r in frag.records[i:] if r[27] == 2 and r[16:24] == m[16:24])
    a = Archive(path)
    seg = next(s for s in a.segments() if s.first_sequence <= seq <= s.last_sequence)
    idx = Path(seg.idx).read_bytes()
    off = struct.unpack_from("<Q", idx, 16 + 16 * (seq - seg.first_sequence))[0]
    data = bytearray(Path(seg.seg).read_bytes())
    data[off + 16 + 33] ^= 0x5A
    Path(seg.seg).write_bytes(bytes(data))
    a = Archive(path, on_problem="collect")
    env = a.envelope_table()
    assert last not in env.column("sequence").to_pylist()
    assert env.num_rows == len(frag.messages) - 1
    probs = {p.sequence: p.message for p in a.problems}
    assert "checksum" in probs[seq]
    assert "an earlier fragment is unreadable" in probs[last] and f"sequence {seq}" in probs[last]
    # verify describes both faults as the readers do (it said "fragmented message (from
    # sequence N) reassembles to M bytes", hiding the cause and where the message starts)
    rep = Archive(path).verify()
    checked = {(p.file, p.offset, p.sequence): p.message for p in rep.problems}
    read = {(p.file, p.offset, p.sequence): p.message for p in a.problems}
    assert checked == read


def test_verify_reports_a_message_whose_last_fragment_never_came(tmp_path: Path, frag: sess.Fragmented) -> None:
    end = next(i for i, (_, m) in enumerate(frag.records) if m[27] == 1 and i > 100)
    path = sess.write_records(tmp_path / "a", frag.records[:end + 1], 4096)
    rep = Archive(path).verify()
    assert any("has no last fragment" in p.message for p in rep.problems)


def test_control_messages_are_named_without_the_bus_schema(tmp_path: Path, frag: sess.Fragmented) -> None:
    exchange_only = [s for s in sess.schemas() if s[1] != "bus"]
    path = sess.write_records(tmp_path / "a", frag.records, 1 << 20, exchange_only)
    # the writer stores the bus's schema itself; an archive without it decodes control too
    (path / "schemas" / "bus.ir.json").unlink()
    m = json.loads((path / "archive.json").read_text())
    m["schemas"] = [s for s in m["schemas"] if s["package"] != "bus"]
    (path / "archive.json").write_text(json.dumps(m))
    a = Archive(path)
    types = Counter(a.envelope_table().column("type").to_pylist())
    assert types["bus.SessionStart"] == 1 and types["bus.ClockTick"] == 6
    assert a.table("bus.SessionStart").column("session").to_pylist() == ["FRAG"]


def test_built_in_bus_schema_is_what_seqc_makes() -> None:
    from seqbus.archive._native import core

    assert json.loads(core.archive_bus_ir()) == json.loads(sess.ir_json("bus"))

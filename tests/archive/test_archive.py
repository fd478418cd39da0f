"""Session archives: writing, reading back every message and field, verification, corruption."""

from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from seqbus.archive import Archive, ArchiveError, ArchiveWriter, CorruptRecordError
from tests.archive import session as sess

TYPES = ["exchange.NewOrder", "exchange.OrderAccepted", "exchange.OrderRejected",
         "exchange.Trade", "exchange.BookUpdate", "bus.SessionStart", "bus.ClockTick"]


def typed_rows(a: Archive, typ: str) -> list[dict[str, Any]]:
    t = a.table(typ)
    prefix = {"sequence", "timestamp_ns", "instance", "command_seq", "version", "envelope_account"}
    acct_is_field = "envelope_account" in t.column_names
    out = []
    for r in t.to_pylist():
        r = {k: v for k, v in r.items() if k not in prefix and (acct_is_field or k != "account")}
        out.append(sess.plain(r))
    return out


def test_envelope_table_is_the_stream(archive_path: Path, messages: list[sess.Msg]) -> None:
    a = Archive(archive_path)
    assert a.sealed and len(a.segments()) > 1
    t = a.envelope_table()
    assert t.column("sequence").to_pylist() == [m.sequence for m in messages]
    assert t.column("timestamp_ns").to_pylist() == [m.timestamp_ns for m in messages]
    assert t.column("account").to_pylist() == [m.account for m in messages]
    assert t.column("instance").to_pylist() == [m.instance for m in messages]
    assert t.column("command_seq").to_pylist() == [m.command_seq for m in messages]
    assert t.column("type").to_pylist() == [m.type for m in messages]
    assert t.column("size").to_pylist() == [len(m.message) for m in messages]
    assert [x.value for x in t.column("time")] == [m.timestamp_ns // 1000 for m in messages]
    assert a.problems == []


@pytest.mark.parametrize("typ", TYPES)
def test_typed_table_equals_the_generated_codec(archive_path: Path, messages: list[sess.Msg], typ: str) -> None:
    """Every field kind of the SPEC §3 example (nested groups, optionals, flags, enums, u64
    extremes, strings, bytes) decodes from the IR exactly as the nodes' own codec reads it."""
    a = Archive(archive_path)
    got = typed_rows(a, typ)
    want = list(sess.expected_rows(messages, typ))
    assert len(got) == len(want) > 0
    assert got == want
    t = a.table(typ)
    assert t.column("sequence" if "sequence" in t.column_names else "envelope_sequence").to_pylist() == [
        m.sequence for m in messages if m.type == typ]


def test_new_order_table_shape(archive_path: Path) -> None:
    import pyarrow as pa

    s = Archive(archive_path).typed_schema("NewOrder")
    assert s.field("order_id").type == pa.decimal128(20, 0)  # u64 kept exact
    assert s.field("client_id").type == pa.int64()  # u32 widened
    assert s.field("stop_price").nullable and not s.field("quantity").nullable
    assert s.field("side").type == pa.string()
    assert s.field("inst").type == pa.list_(pa.field("item", pa.string(), nullable=False))
    legs = s.field("legs").type
    assert pa.types.is_list(legs) and pa.types.is_list(legs.value_type.field("fills").type)
    assert s.field("envelope_account").type == pa.string()  # renamed: NewOrder has `account`
    assert s.field("account").type == pa.string()


def test_older_writer_version_reads_absent_fields_as_null(tmp_path: Path, schemas: list[tuple[int, str, str]]) -> None:
    """A NewOrder written at version 1 (no expire_at, @since(2)) reads expire_at as null."""
    body = sess.new_order(3).encode()
    bl = struct.unpack_from("<H", body)[0]
    assert bl == 54
    v1 = struct.pack("<HHHH", 45, 1, 7, 1) + body[8:8 + 45] + body[8 + 54:]
    msg = sess.envelope(sess.T0, 1, "GW", 1, v1) + v1
    with ArchiveWriter(tmp_path / "a", "V1", schemas) as w:
        w.append(1, msg)
    row = Archive(tmp_path / "a").table("exchange.NewOrder").to_pylist()[0]
    want = sess.plain(__import__("examples.exchange.messages", fromlist=["NewOrder"]).NewOrder.decode(body).to_dict())
    assert row["expire_at"] is None and want["expire_at"] is not None
    assert row["version"] == 1
    assert sess.plain(row["legs"]) == want["legs"] and row["memo"] == want["memo"]


def _record_offset(a: Archive, sequence: int) -> tuple[Path, int]:
    for s in a.segments():
        if s.first_sequence <= sequence <= s.last_sequence:
            idx = Path(s.idx).read_bytes()
            off = struct.unpack_from("<Q", idx, 16 + 16 * (sequence - s.first_sequence))[0]
            return Path(s.seg), off
    raise AssertionError(sequence)


def test_corrupt_record_is_reported_with_its_position_and_the_rest_reads(archive_path: Path, messages: list[sess.Msg]) -> None:
    a = Archive(archive_path)
    victim = a.segments()[1].first_sequence + 3
    seg, off = _record_offset(a, victim)
    data = bytearray(seg.read_bytes())
    data[off + 16 + 40] ^= 0xFF  # a byte of the body
    seg.write_bytes(bytes(data))

    rep = Archive(archive_path).verify()
    assert [(p.file, p.offset, p.sequence) for p in rep.problems] == [(seg.name, off, victim)]
    assert "checksum" in rep.problems[0].message
    assert rep.good == len(messages) - 1

    a = Archive(archive_path)
    t = a.envelope_table()
    assert t.num_rows == len(messages) - 1
    assert victim not in t.column("sequence").to_pylist()
    assert [(p.file, p.offset, p.sequence) for p in a.problems] == [(seg.name, off, victim)]
    typ = next(m.type for m in messages if m.sequence == victim)
    assert a.table(typ).num_rows == sum(m.type == typ for m in messages) - 1

    with pytest.raises(CorruptRecordError, match=f"{seg.name}:{off}: sequence {victim}"):
        Archive(archive_path, on_problem="fail").envelope_table()


def test_corrupt_length_and_torn_tail(archive_path: Path, messages: list[sess.Msg]) -> None:
    a = Archive(archive_path)
    s0 = a.segments()[0]
    seg, off = _record_offset(a, s0.first_sequence + 1)
    data = bytearray(seg.read_bytes())
    struct.pack_into("<I", data, off, 0xFFFFFF)  # an impossible length
    data += b"\x01\x02\x03"  # and a torn write after the last record
    seg.write_bytes(bytes(data))
    rep = Archive(archive_path).verify()
    msgs = [p.message for p in rep.problems]
    assert any("bad record length" in m for m in msgs)
    assert any("3 bytes after the last indexed record" in m for m in msgs)
    assert Archive(archive_path).envelope_table().num_rows == len(messages) - 1


def test_a_record_cut_by_the_end_of_its_file_says_so(archive_path: Path) -> None:
    a = Archive(archive_path)
    last = a.segments()[-1]
    seg = Path(last.seg)
    seg.write_bytes(seg.read_bytes()[:-10])  # the last record loses its last 10 bytes
    msgs = [p.message for p in Archive(archive_path).verify().problems]
    assert any("runs past the end of the file (" in m for m in msgs), msgs
    assert not any("bad record length" in m for m in msgs), msgs


def test_an_index_shorter_than_the_manifest_is_reported_not_read_short(
    archive_path: Path, messages: list[sess.Msg]
) -> None:
    """A sealed segment whose index lost its last entry: readers read the whole record of the
    manifest or say why not; they dropped the record in silence."""
    a = Archive(archive_path)
    s1 = a.segments()[1]
    idx = Path(s1.idx)
    idx.write_bytes(idx.read_bytes()[:-16])  # one entry of 16 bytes torn off
    rep = Archive(archive_path).verify()
    assert any("bytes after the last indexed record" in p.message for p in rep.problems)
    assert any("the manifest lists" in p.message for p in rep.problems)
    b = Archive(archive_path)
    t = b.envelope_table()
    [p] = b.problems
    assert (p.file, p.sequence) == (Path(s1.seg).name, s1.first_sequence)
    assert "the manifest lists" in p.message
    assert t.num_rows == len(messages) - s1.count  # the segment, said, not one record, unsaid
    with pytest.raises(CorruptRecordError, match="the manifest lists"):
        Archive(archive_path, on_problem="fail").envelope_table()


def test_body_that_does_not_decode_names_field_and_offset(tmp_path: Path, schemas: list[tuple[int, str, str]]) -> None:
    body = bytearray(sess.new_order(2).encode())
    body[8 + 45] = 7  # the presence byte of expire_at (block offset 45)
    good = sess.new_order(3).encode()
    with ArchiveWriter(tmp_path / "a", "BAD", schemas) as w:
        w.append(1, sess.envelope(sess.T0, 1, "GW", 1, bytes(body)) + bytes(body))
        w.append(2, sess.envelope(sess.T0 + 1, 2, "GW", 1, good) + good)
    a = Archive(tmp_path / "a")
    t = a.table("exchange.NewOrder")
    assert t.column("sequence").to_pylist() == [2]
    [p] = a.problems
    assert p.sequence == 1 and "NewOrder.expire_at" in p.message and "body offset 53" in p.message
    assert "presence byte is 7" in p.message
    assert Archive(tmp_path / "a").verify().ok  # the record itself is intact


def test_gap_between_segments_is_reported(archive_path: Path) -> None:
    m = json.loads((archive_path / "archive.json").read_text())
    gone = m["segments"].pop(1)
    (archive_path / "archive.json").write_text(json.dumps(m))
    rep = Archive(archive_path).verify()
    assert any(
        f"gap: sequences {gone['first_sequence']} to {gone['first_sequence'] + gone['count'] - 1} are missing"
        in p.message for p in rep.problems)


def test_sequence_and_time_bounds(archive_path: Path, messages: list[sess.Msg]) -> None:
    a = Archive(archive_path)
    t = a.envelope_table(seq_lo=100, seq_hi=260)
    assert t.column("sequence").to_pylist() == list(range(100, 261))
    lo, hi = messages[49].timestamp_ns, messages[399].timestamp_ns
    t = a.envelope_table(ts_lo=lo, ts_hi=hi)
    assert t.column("sequence").to_pylist() == [m.sequence for m in messages if lo <= m.timestamp_ns <= hi]
    assert a.envelope_table(seq_lo=10_000).num_rows == 0
    assert len(a.slices(seq_lo=100, seq_hi=101)) == 1


def test_writer_rules(tmp_path: Path, schemas: list[tuple[int, str, str]]) -> None:
    body = sess.new_order(1).encode()
    msg = sess.envelope(sess.T0, 1, "GW", 1, body) + body
    w = ArchiveWriter(tmp_path / "a", "W", schemas)
    w.append(5, msg)
    with pytest.raises(ArchiveError, match="sequence 7 appended where 6 is next"):
        w.append(7, msg)
    with pytest.raises(ArchiveError, match="32-byte envelope"):
        w.append(6, b"short")
    w.seal()
    with pytest.raises(ArchiveError, match="sealed"):
        w.append(6, msg)
    with pytest.raises(ArchiveError, match="already holds an archive"):
        ArchiveWriter(tmp_path / "a", "W", schemas)
    with pytest.raises(ArchiveError, match="not seqc IR"):
        ArchiveWriter(tmp_path / "b", "W", [(7, "exchange", "{}")])
    with pytest.raises(ArchiveError, match="not a seqbus archive"):
        Archive(tmp_path / "nowhere")


def test_live_archive_is_readable_before_sealing(tmp_path: Path, messages: list[sess.Msg], schemas: list[tuple[int, str, str]]) -> None:
    w = ArchiveWriter(tmp_path / "a", "LIVE", schemas, segment_bytes=8192)
    for m in messages[:150]:
        w.append(m.sequence, m.message)
    w.flush()
    a = Archive(tmp_path / "a")
    assert not a.sealed and a.last_sequence == 150
    for m in messages[150:]:
        w.append(m.sequence, m.message)
    w.flush()
    a.refresh()
    assert a.last_sequence == len(messages)
    assert Counter(a.envelope_table().column("type").to_pylist()) == Counter(m.type for m in messages)
    w.seal()
    assert Archive(tmp_path / "a").verify().ok


def test_fragmented_message_is_reassembled(tmp_path: Path, schemas: list[tuple[int, str, str]]) -> None:
    """A body sent in fragments (interleaved with another sender's message) reads as one
    message at its last fragment, as the nodes receive it."""
    body = sess.new_order(7).encode()
    parts = [body[:40], body[40:80], body[80:]]
    other = sess.new_order(8).encode()

    def frag(ts: int, part: bytes, flags: int) -> bytes:
        return sess.ENVELOPE.pack(ts, 9, b"GW".ljust(8, b"\0"), 1, 1, flags, len(body)) + part

    msgs = [frag(sess.T0 + 1, parts[0], 1),
            sess.envelope(sess.T0 + 2, 1, "XX", 1, other) + other,
            frag(sess.T0 + 3, parts[1], 1),
            frag(sess.T0 + 4, parts[2], 2)]
    with ArchiveWriter(tmp_path / "a", "FRAG", schemas) as w:
        for i, m in enumerate(msgs, 1):
            w.append(i, m)
    a = Archive(tmp_path / "a")
    env = a.envelope_table()
    assert env.column("type").to_pylist() == ["exchange.NewOrder", "exchange.NewOrder"]
    assert env.column("sequence").to_pylist() == [2, 4]
    assert env.column("fragments").to_pylist() == [1, 3]
    assert env.column("size").to_pylist() == [32 + len(other), 32 + len(body)]
    assert a.raw_table().column("flags").to_pylist() == [1, 0, 1, 2]
    t = a.table("NewOrder")
    assert t.column("sequence").to_pylist() == [2, 4]
    got = sess.plain({k: v for k, v in t.to_pylist()[1].items()
                      if k not in {"sequence", "timestamp_ns", "instance", "command_seq", "version", "envelope_account"}})
    assert got == next(sess.expected_rows([sess.Msg(4, 0, "GW", 1, 9, "exchange.NewOrder", body)], "exchange.NewOrder"))
    assert a.problems == []


def test_schemas_are_given_as_idl_as_ir_or_as_the_generated_package(tmp_path: Path) -> None:
    from seqbus.archive import load_ir, package_ir

    idl = sess.idl("exchange")
    ir_file = tmp_path / "exchange.json"
    ir_file.write_text(sess.ir_json("exchange"))
    assert load_ir([idl]) == load_ir([ir_file])
    # the IR seqc wrote beside the generated package is the one `seqc ir --json` prints
    assert load_ir(["examples.exchange.messages"]) == load_ir([ir_file])
    assert package_ir("seqbus.bus")[:2] == (1, "bus")
    with pytest.raises(ArchiveError, match="a module, not a package seqc generated"):
        package_ir("seqbus.errors")
    with pytest.raises(ArchiveError, match="seqbus.archive: has no ir.json"):
        package_ir("seqbus.archive")
    with pytest.raises(ArchiveError, match="no.such.package: not an importable package"):
        load_ir(["no.such.package"])
    assert load_ir([idl])[0][:2] == (json.loads(ir_file.read_text())["schema_id"], "exchange")
    bad = tmp_path / "bad.idl"
    bad.write_text("package bad;\nschema 9 version 1;\nmessage M = 1 { x: nosuchtype; }\n")
    with pytest.raises(ArchiveError, match=r"bad\.idl:3:\d+"):
        load_ir([bad])


def test_a_body_failing_late_leaves_no_part_of_itself_in_the_table(tmp_path: Path, schemas: list[tuple[int, str, str]]) -> None:
    """Decoding checks and writes in one pass: a body that fails after its groups and most of
    its fields were written (here its last string is not UTF-8) is taken back out whole, and
    the rows around it are exact."""
    bad = bytearray(sess.new_order(7).encode())  # three legs, with fills
    at = bytes(bad).index("acct-7-é".encode())
    bad[at + 7:at + 9] = b"\xff\xfe"
    msgs = [sess.Msg(1, sess.T0, "GW", 1, 1, "exchange.NewOrder", sess.new_order(6).encode()),
            sess.Msg(2, sess.T0 + 1, "GW", 1, 2, "exchange.NewOrder", bytes(bad)),
            sess.Msg(3, sess.T0 + 2, "GW", 1, 3, "exchange.NewOrder", sess.new_order(11).encode())]
    with ArchiveWriter(tmp_path / "a", "BAD", schemas) as w:
        for m in msgs:
            w.append(m.sequence, m.message)
    a = Archive(tmp_path / "a", on_problem="collect")
    assert typed_rows(a, "exchange.NewOrder") == list(sess.expected_rows([msgs[0], msgs[2]], "exchange.NewOrder"))
    [p] = a.problems
    assert p.sequence == 2 and "NewOrder.account" in p.message and "not valid UTF-8" in p.message

"""``seqc compat OLD NEW``: one test per kind of change, plus the exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from seqc import compile_files
from seqc.compat import compare

BASE = """package demo;
schema 5 version {version};
enum Side : u8 {{ Buy = 1; Sell = 2; }}
struct Px {{ m: i64; e: i8; }}
message Order = 1 {{
{fields}
}}
message Cancel = 2 {{ id: u64; }}
"""
FIELDS = """    id: u64;
    qty: u32;
    side: Side;
    px: Px;
    legs: group { ratio: u16; }
    note: string;"""


def codes(tmp_path: Path, new: str, *, old: str = BASE.format(version=1, fields=FIELDS)) -> list[str]:
    (tmp_path / "old.idl").write_text(old)
    (tmp_path / "new.idl").write_text(new)
    o = compile_files([str(tmp_path / "old.idl")])[0]
    n = compile_files([str(tmp_path / "new.idl")])[0]
    return [f"{'B' if c.breaking else 'n'}:{c.code}" for c in compare(o, n)]


@pytest.mark.parametrize(("new", "expected"), [
    (BASE.format(version=1, fields=FIELDS), []),
    (BASE.format(version=2, fields=FIELDS + "\n    extra: optional u32 @since(2);"),
     ["n:C025"]),
    (BASE.format(version=1, fields=FIELDS.replace("    qty: u32;\n", "")), ["B:C020", "B:C022",
                                                                         "B:C022"]),
    (BASE.format(version=1, fields=FIELDS.replace("qty: u32", "qty: u64")), ["B:C021",
                                                                           "B:C022", "B:C022"]),
    (BASE.format(version=1, fields=FIELDS.replace("qty: u32", "qty: optional u32")),
     ["B:C021", "B:C022", "B:C022"]),
    (BASE.format(version=1, fields=FIELDS.replace("    id: u64;\n    qty: u32;",
                                                  "    qty: u32;\n    id: u64;")),
     ["B:C022", "B:C022"]),
    (BASE.format(version=1, fields=FIELDS).replace("message Order = 1", "message Order = 3"),
     ["B:C011"]),
    (BASE.format(version=1, fields=FIELDS).replace("message Cancel = 2 { id: u64; }\n", ""),
     ["B:C010"]),
    (BASE.format(version=1, fields=FIELDS).replace("schema 5", "schema 6"), ["B:C001"]),
    (BASE.format(version=1, fields=FIELDS).replace("Sell = 2;", "Sell = 3;"), ["B:C031"]),
    (BASE.format(version=1, fields=FIELDS).replace(" Sell = 2;", ""), ["B:C030"]),
    (BASE.format(version=1, fields=FIELDS).replace("Sell = 2;", "Sell = 2; Short = 3;"),
     ["n:C032"]),
    (BASE.format(version=1, fields=FIELDS).replace("e: i8;", "e: i16;"), ["B:C021"]),
    (BASE.format(version=1, fields=FIELDS + "\n    more: u8;"), ["B:C024"]),
    (BASE.format(version=1, fields=FIELDS.replace("ratio: u16;", "ratio: u16; w: u8;")),
     ["B:C024"]),
    (BASE.format(version=1, fields=FIELDS.replace("note: string;", "note: bytes;")),
     ["B:C021"]),
], ids=["same", "added-since", "removed", "retyped", "made-optional", "reordered", "id-changed",
        "message-removed", "schema-id", "enum-value-changed", "enum-value-removed",
        "enum-value-added", "struct-changed", "added-without-since", "group-field-no-since",
        "var-retyped"])
def test_change_kind(tmp_path: Path, new: str, expected: list[str]) -> None:
    assert sorted(codes(tmp_path, new)) == sorted(expected)


def test_since_changed_and_version_lowered(tmp_path: Path) -> None:
    v2 = BASE.format(version=2, fields=FIELDS + "\n    x: optional u8 @since(2);")
    v3 = BASE.format(version=3, fields=FIELDS + "\n    x: optional u8 @since(3);")
    assert codes(tmp_path, v3, old=v2) == ["B:C023"]
    assert "B:C002" in codes(tmp_path, BASE.format(version=1, fields=FIELDS), old=v2)


def test_cli_exit_status_and_positions(tmp_path: Path) -> None:
    (tmp_path / "old.idl").write_text(BASE.format(version=1, fields=FIELDS))
    (tmp_path / "new.idl").write_text(BASE.format(version=1, fields=FIELDS.replace(
        "qty: u32", "qty: u64")))
    res = subprocess.run([sys.executable, "-m", "seqc.cli", "compat", "old.idl", "new.idl"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 1
    assert "new.idl:7:5: breaking[C021]: field Order.qty retyped from `u32` to `u64`" in res.stdout
    same = subprocess.run([sys.executable, "-m", "seqc.cli", "compat", "old.idl", "old.idl"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert same.returncode == 0 and same.stdout == ""


def test_evolution_schemas_are_compatible_forward_only() -> None:
    here = Path(__file__).parent / "evolution"
    v1, v2, v3 = (compile_files([str(here / f"v{i}.idl")])[0] for i in (1, 2, 3))
    for old, new in ((v1, v2), (v2, v3), (v1, v3)):
        assert not [c for c in compare(old, new) if c.breaking]
    assert [c for c in compare(v3, v1) if c.breaking]

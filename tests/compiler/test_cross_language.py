"""One contract across four languages (issue 31, item 2): random messages of the all-types
schema pass Python → Java → C++ → Rust → Python with their bytes and values unchanged, and
damaged messages get the same answer, an error or the same value, from every language.

Each language has a codec tool (``CODEC_TOOLS``): it reads one message per stdin line as hex
and answers one line, ``{"name", "json", "hex"}`` (the canonical JSON of the decoded value, as
tests/compiler/vectors.py defines it, compared as text, and the bytes the decoded value
encodes to) or
``{"error"}``. The tools run for the whole module, one process each, killed by PID at the end;
every answer is waited for with a bound.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqbus.errors import DecodeError
from tests.compiler.test_properties import everything, ints
from tests.compiler.vectors import canonical_json

ROOT = Path(__file__).resolve().parent.parent.parent
#: Seconds one tool may take to answer one message (a JVM's first answer included).
ANSWER_S = 60.0


def _rust_tool() -> list[str]:
    subprocess.run(["cargo", "build", "-q", "--example", "codec_tool", "-p", "seqbus-codecs"],
                   cwd=ROOT / "rust", check=True)
    return [str(ROOT / "rust" / "target" / "debug" / "examples" / "codec_tool")]


def _java_tool() -> list[str]:
    subprocess.run(["make", "-s", "java-tool"], cwd=ROOT, check=True)
    classes = ROOT / "runtime" / "java" / "codec" / "target"
    return ["java", "-cp", f"{classes / 'classes'}:{classes / 'test-classes'}",
            "seqbus.codec.tool.CodecTool"]


def _cpp_tool() -> list[str]:
    subprocess.run(["make", "-s", "cpp-tool"], cwd=ROOT, check=True)
    return [str(ROOT / "var" / "build" / "cpp" / "codec" / "seqbus-cpp-codec")]


#: Language → a function building its codec tool and returning the command (less the package).
CODEC_TOOLS = {
    "java": _java_tool,
    "cpp": _cpp_tool,
    "rust": _rust_tool,
}
#: The order of the chain after Python.
CHAIN = ["java", "cpp", "rust"]


class Tool:
    """One codec tool process, asked one message at a time."""

    def __init__(self, lang: str, argv: list[str]) -> None:
        self.lang = lang
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def ask(self, message: bytes) -> dict[str, Any]:
        self.stdin.write(message.hex() + "\n")
        self.stdin.flush()
        deadline = time.monotonic() + ANSWER_S
        while not select.select([self.stdout], [], [], 0.5)[0]:
            if self.proc.poll() is not None:
                raise AssertionError(f"the {self.lang} codec tool died (rc "
                                     f"{self.proc.returncode}) on {message.hex()}: "
                                     f"{self.proc.stderr.read() if self.proc.stderr else ''}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the {self.lang} codec tool gave no answer in "
                                     f"{ANSWER_S:.0f} s to {message.hex()}")
        line = self.stdout.readline()
        if not line:
            raise AssertionError(f"the {self.lang} codec tool closed its output on "
                                 f"{message.hex()}")
        answer: dict[str, Any] = json.loads(line)
        if "json" in answer:
            # the canonical JSON as text, as the tool wrote it (parsed, 1e16 and 1e+16 are one)
            head, tail = f'{{"name":{json.dumps(answer["name"])},"json":', f',"hex":"{answer["hex"]}"}}'
            text = line.rstrip("\n")
            assert text.startswith(head) and text.endswith(tail), f"{self.lang}: {text}"
            answer["json"] = text[len(head):-len(tail)]
        return answer

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, 9)
            self.proc.wait(10)


@pytest.fixture(scope="module")
def tools() -> Iterator[dict[str, Tool]]:
    missing = [lang for lang in CHAIN if lang not in CODEC_TOOLS]
    assert not missing, f"no codec tool for {missing}"
    started = {lang: Tool(lang, CODEC_TOOLS[lang]() + ["alltypes"]) for lang in CHAIN}
    try:
        yield started
    finally:
        for tool in started.values():
            tool.close()


def python_answer(alltypes: ModuleType, message: bytes) -> dict[str, Any]:
    """What the Python codecs make of ``message``, in the codec tools' shape."""
    try:
        view = alltypes.Everything.decode(message)
        value = view.to_dict()
    except DecodeError as exc:
        return {"error": str(exc)}
    again = alltypes.Everything.from_dict(value).encode()
    return {"name": "Everything", "json": canonical_json(value), "hex": again.hex()}


def boundary_messages(a: ModuleType) -> list[Any]:
    """Each integer field at its least and greatest value, every optional absent and present,
    empty and nested groups."""
    lo = {"u8v": 0, "u16v": 0, "u32v": 0, "u64v": 0, "i8v": -(2**7), "i16v": -(2**15),
          "i32v": -(2**31), "i64v": -(2**63)}
    hi = {"u8v": 2**8 - 1, "u16v": 2**16 - 1, "u32v": 2**32 - 1, "u64v": 2**64 - 1,
          "i8v": 2**7 - 1, "i16v": 2**15 - 1, "i32v": 2**31 - 1, "i64v": 2**63 - 1}
    outer = a.Outer(inner=a.Inner(a=255, b=-0.0), tag="xyz", raw=b"\xff\x00", ok=True)
    plain = {**lo, "b": False, "f32v": 0.0, "f64v": 0.0, "name": "", "raw": b"",
             "color": a.Color.Red, "perm": a.Perm(0), "outer": outer, "o_u64": None,
             "o_color": None, "o_outer": None, "o_f64": None, "o_char": None, "items": [],
             "text": "", "data": b"", "empty": []}
    sub = a.EverythingItemsSub(v=-(2**63), blob=b"")
    deep = [a.EverythingItems(id=2**32 - 1, label="é✓", sub=[sub, sub], note=-(2**15)),
            a.EverythingItems(id=0, label="", sub=[], note=None)]
    return [
        a.Everything(**plain),
        a.Everything(**{**plain, **hi, "b": True, "f32v": 3.4028234663852886e38,
                        "f64v": -1.7976931348623157e308, "name": "abcdef",
                        "raw": b"\x00\x01\x02\x03", "color": a.Color.Blue,
                        "perm": a.Perm(2**32 - 1), "o_u64": 2**64 - 1,
                        "o_color": a.Color.Green, "o_outer": outer, "o_f64": 5e-324,
                        "o_char": "zz", "items": deep, "text": "\x00\n\"\\",
                        "data": bytes(range(256)), "empty": [a.EverythingEmpty()] * 3}),
        a.Everything(**{**plain, "f32v": 1.401298464324817e-45, "f64v": 0.1, "o_u64": 0,
                        "o_f64": -0.0, "o_char": "",
                        "items": [a.EverythingItems(id=1, label="x", note=0, sub=[
                            a.EverythingItemsSub(v=1, blob=b"\x00")])]}),
        # floats in exponent form, as json.dumps writes them: 1e+16, 1e-05 (signed, 2 digits)
        a.Everything(**{**plain, "f32v": 1e-07, "f64v": 1e16, "o_f64": 1e-05}),
        a.Everything(**{**plain, "f32v": -3e38, "f64v": 1.2345678901234568e+17,
                        "o_f64": -1.5e-300}),
        a.Everything(**{**plain, "f32v": 1e15, "f64v": 0.0001, "o_f64": 9999999999999998.0}),
    ]


def through_the_chain(alltypes: ModuleType, tools: dict[str, Tool], msg: Any) -> None:
    encoded = msg.encode()
    expected = python_answer(alltypes, encoded)
    assert expected["hex"] == encoded.hex()
    current = encoded
    for lang in CHAIN:
        answer = tools[lang].ask(current)
        assert answer == expected, f"{lang} after {current.hex()}"
        current = bytes.fromhex(answer["hex"])
    assert python_answer(alltypes, current) == expected


def test_boundary_messages_pass_the_chain_unchanged(alltypes: ModuleType,
                                                    tools: dict[str, Tool]) -> None:
    for msg in boundary_messages(alltypes):
        through_the_chain(alltypes, tools, msg)


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_random_messages_pass_the_chain_unchanged(alltypes: ModuleType, tools: dict[str, Tool],
                                                  data: st.DataObject) -> None:
    through_the_chain(alltypes, tools, data.draw(everything(alltypes)))


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_damaged_messages_get_the_same_answer_everywhere(alltypes: ModuleType,
                                                         tools: dict[str, Tool],
                                                         data: st.DataObject) -> None:
    encoded = bytearray(data.draw(everything(alltypes)).encode())
    if data.draw(st.booleans()):
        encoded = encoded[:data.draw(st.integers(0, len(encoded) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            encoded[data.draw(st.integers(0, len(encoded) - 1))] = data.draw(ints(8, False))
    damaged = bytes(encoded)
    expected = python_answer(alltypes, damaged)
    for lang in CHAIN:
        answer = tools[lang].ask(damaged)
        if "error" in expected:
            assert "error" in answer, f"{lang} decoded what Python refuses ({expected['error']})"
        else:
            assert answer == expected, f"{lang} on {damaged.hex()}"

"""Write alltypes-vectors.txt beside this file: messages of the all-types schema
(tests/compiler/cases/ok_all_types) and what the Python codecs answer for each, in the codec
tool's form (tests/compiler/test_cross_language.py), for AllTypesTest. Boundary messages,
random ones and damaged ones (cut short, bytes changed), drawn with a fixed seed.

Run from the repository root: .venv/bin/python runtime/java/codec/src/test/resources/seqbus/
codec/make_alltypes_vectors.py (it builds the Python codecs of the schema in a temporary
directory first). Each line: the message's hex, a tab, then the Python answer line, or
"error" when Python refuses the bytes (the other languages must refuse them too; the text may
differ).
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[8]
sys.path.insert(0, str(ROOT))

from seqc import compile_files, gen_python  # noqa: E402
from seqc.build import build  # noqa: E402


def answer_line(alltypes: Any, message: bytes) -> str:
    from tests.compiler.test_cross_language import python_answer
    from tests.compiler.vectors import canonical_json

    answer = python_answer(alltypes, message)
    if "error" in answer:
        return "error"
    value = alltypes.Everything.decode(message).to_dict()
    return ('{"name":"Everything","json":' + canonical_json(value) + ',"hex":"'
            + answer["hex"] + '"}')


def main() -> None:
    out_dir = Path(tempfile.mkdtemp(prefix="alltypes-py-"))
    (schema,) = compile_files([str(ROOT / "tests/compiler/cases/ok_all_types/input.idl")])
    gen_python.write(gen_python.generate(schema), str(out_dir))
    build(str(out_dir), optimize="-O0")
    sys.path.insert(0, str(out_dir))
    alltypes = importlib.import_module("alltypes")
    from tests.compiler.test_cross_language import boundary_messages
    from tests.compiler.test_properties import everything, ints

    messages: list[bytes] = [m.encode() for m in boundary_messages(alltypes)]

    @seed(31)
    @settings(max_examples=120, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        encoded = data.draw(everything(alltypes)).encode()
        messages.append(encoded)
        for _ in range(3):
            damaged = bytearray(encoded)
            if data.draw(st.booleans()):
                damaged = damaged[:data.draw(st.integers(0, len(damaged) - 1))]
            else:
                for _ in range(data.draw(st.integers(1, 4))):
                    damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(
                        ints(8, False))
            messages.append(bytes(damaged))

    draw()
    lines = [f"{m.hex()}\t{answer_line(alltypes, m)}" for m in messages]
    target = Path(__file__).with_name("alltypes-vectors.txt")
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} messages to {target}")


if __name__ == "__main__":
    main()

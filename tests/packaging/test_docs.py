"""The docs run from the wheel (issue 29, item 6): every code block of README.md and docs/*.md
is either run, in order, from the installed wheels in a fresh virtual environment outside the
checkout, or says why it is not.

The convention (docs/testing.md, "Docs that run"): a fenced block's info string says what it
is.

=================  ==========================================================================
info string        what the test does
=================  ==========================================================================
``sh``, ``bash``   runs it with ``bash -e -o pipefail``: commands, one per line, no prompts
``console``        a shell session: each ``$ `` line (with ``\\`` continuations) is a
                   command, run as an ``sh`` block is; the other lines are its output, shown
                   to the reader and not compared
``python``         runs it with the environment's ``python -`` (the block on stdin, the
                   working directory on ``sys.path``, as a user pasting it would)
``pycon``          an interactive session (``>>>``/``...`` and the output): run with
                   ``python -m doctest``, the output compared (``ELLIPSIS``,
                   ``NORMALIZE_WHITESPACE``)
``toml``, ``json`` data: parsed (a syntax error fails); not run
``idl``            a schema: not run by itself (a later block compiles it)
``java``, ``cpp``  sources of other languages, and build files (``cmake``: a
``cmake`` ``xml``  ``CMakeLists.txt``; ``xml``: a ``pom.xml``): not run by themselves; with
                   ``file=``, written for a later block to compile
``text``           output, diagrams, grammars, synopses with placeholders: never run
=================  ==========================================================================

A block with no info string, or one not listed, is an error: every block says what it is.

After the language, ``key=value`` words: ``file=PATH`` writes the block to PATH in the
document's working directory instead of running it (a configuration, a schema or a module a
later block uses: ``toml file=bus.toml``, ``python file=ponger.py``); ``timeout=S`` raises the
block's bound (default :data:`BLOCK_TIMEOUT_S`). ``<!-- not-run: REASON -->`` on the line
before a runnable block (blank lines between allowed) keeps it from running: the reason is
required, and says why (a command for a checkout, such as ``make``; a recipe needing a real
cluster; a fragment). Rendered Markdown shows neither the attributes nor the comment.

How a document runs: its blocks, in order, share one working directory (a temporary one,
outside the checkout) and one fresh virtual environment with the ``seqbus`` and ``seqc``
wheels installed, so a later block may use what an earlier one wrote. Every block runs in a
process group of its own with the environment's ``bin`` first on ``PATH`` and nothing of the
checkout's; what a block leaves running in the background (``seqbus sequencer -c bus.toml &``)
is killed, by its process group, when the block ends: a block that needs a bus starts it
itself, as a reader's terminal would. ``pip install`` works offline: ``PIP_NO_INDEX`` and
``PIP_FIND_LINKS`` point pip at the built wheels and at the third-party wheelhouse (``make
wheelhouse``), standing in for the package index. What the test provides besides (fixtures):

* ``dist/`` in every document's working directory: the wheels just built, as ``make wheels``
  leaves them;
* :data:`FIXTURES`: files of the repository a document tells its reader to take from it
  (``examples/rfq`` for docs/packaging.md);
* :data:`LINKED`: third-party distributions linked into a document's environment from the
  test's own instead of installed: PySpark (docs/spark.md) is a 400 MB sdist that the offline
  wheelhouse does not hold. pip then finds ``seqbus[spark]``'s requirements installed. Without
  Java the document is skipped, saying so.

pytest runs inside a network namespace (scripts/in-netns.sh), where multicast works, but
the docs' examples run on plain loopback (TCP, unicast) unless they say otherwise.

A document stops at its first failing block, reported as ``docs/x.md:LINE: ...`` with the
block's output (its background processes' included).

Each document runs once, on the CPython running pytest, from its wheel: what a document shows
does not depend on the Python version, and each interpreter's wheel is installed and run by
tests/packaging/test_wheels.py and test_new_project.py (running every document on a second
interpreter as well cost 4 minutes of CI and found nothing those did not). A document that
needs programs the machine lacks (:data:`TOOLS`: a JDK, CMake, a C++ compiler) is skipped,
saying which. On the 2-core build machine with other work running: about 6 minutes
(docs/spark.md 75 s, docs/quickstart.md 74 s, docs/languages.md 35 s: its environment 14 s,
compiling and running its C++ and Java 21 s), besides building the wheels (shared with the
other packaging tests).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.packaging.conftest import (
    RFQ, RUNNING, WHEELHOUSE, Venv, Wheels, make_venv, outside_checkout,
)

#: Every document the test reads: the README and docs/*.md, as they are when it is collected.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The bound of one block, unless its ``timeout=`` says otherwise.
BLOCK_TIMEOUT_S = 120.0
#: The most a block may ask for.
MAX_BLOCK_TIMEOUT_S = 600.0
#: Files of the repository copied into a document's working directory, at the path given.
FIXTURES: dict[str, dict[str, Path]] = {
    "docs/packaging.md": {"examples/rfq": RFQ},
}

#: Third-party distributions of the test's environment a document's environment gets as links.
LINKED: dict[str, tuple[str, ...]] = {
    "docs/spark.md": ("pyspark", "py4j", "pyarrow", "pandas", "numpy", "python-dateutil",
                      "pytz", "tzdata", "tqdm"),
}

#: Programs a document runs besides the environment's, by document.
TOOLS: dict[str, tuple[str, ...]] = {
    "docs/languages.md": ("java", "javac", "cmake", "c++", "make"),
}

RUN_KINDS = {"sh": "sh", "bash": "sh", "console": "console", "python": "python",
             "pycon": "pycon"}
DATA_KINDS = {"toml", "json", "idl", "java", "cpp", "cmake", "xml"}
TEXT_KINDS = {"text"}
ATTRIBUTES = {"file", "timeout"}
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(.*?)-->\s*$")
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Block:
    doc: str  #: the document, relative to the repository
    line: int  #: the line of its opening fence (1-based)
    kind: str  #: the info string's first word
    attrs: dict[str, str] = field(hash=False)
    text: str
    not_run: str | None  #: the reason given by ``<!-- not-run: ... -->``, or None
    problems: tuple[str, ...] = ()  #: what is wrong with how it is marked

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def runs(self) -> bool:
        """Whether the test runs it (as a command, or by writing its file)."""
        return self.not_run is None and (self.kind in RUN_KINDS or "file" in self.attrs)


def parse(path: Path, root: Path = ROOT) -> list[Block]:
    """The fenced blocks of a Markdown file, each with what is wrong with its marking."""
    doc = path.relative_to(root).as_posix()
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    pending: tuple[int, str] | None = None  # a not-run comment waiting for its block
    i = 0
    while i < len(lines):
        marker = NOT_RUN.match(lines[i])
        if marker:
            pending = (i + 1, marker.group(1).strip())
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if lines[i].strip() and pending is not None:
                blocks.append(Block(doc, pending[0], "", {}, "", pending[1],
                                    ("a not-run comment that no code block follows",)))
                pending = None
            i += 1
            continue
        indent, ticks, info = len(fence.group(1)), fence.group(2), fence.group(3).strip()
        start = i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(ticks[0] * len(ticks))
                                      and not lines[i].strip().strip(ticks[0])):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1  # the closing fence
        words = info.split()
        kind = words[0] if words else ""
        attrs: dict[str, str] = {}
        problems: list[str] = []
        for word in words[1:]:
            key, sep, value = word.partition("=")
            if not sep or key not in ATTRIBUTES:
                problems.append(f"unknown attribute {word!r} in the info string (known: "
                                f"{', '.join(f'{a}=' for a in sorted(ATTRIBUTES))})")
            else:
                attrs[key] = value
        reason = pending[1] if pending else None
        pending = None
        text = "\n".join(body) + "\n"
        problems.extend(_marking_problems(kind, attrs, text, reason))
        blocks.append(Block(doc, start, kind, attrs, text, reason, tuple(problems)))
    if pending is not None:
        blocks.append(Block(doc, pending[0], "", {}, "", pending[1],
                            ("a not-run comment that no code block follows",)))
    return blocks


def _marking_problems(kind: str, attrs: dict[str, str], text: str,
                      reason: str | None) -> list[str]:
    if not kind:
        return ["no info string: say what the block is (sh, console, python, pycon, toml, "
                "json, idl, java, cpp, cmake, xml; text for output and diagrams)"]
    known = RUN_KINDS.keys() | DATA_KINDS | TEXT_KINDS
    if kind not in known:
        return [f"info string {kind!r} is none of {', '.join(sorted(known))}"]
    problems = []
    if reason is not None and not reason:
        problems.append("not-run without a reason")
    if reason is not None and kind not in RUN_KINDS:
        problems.append(f"not-run on a {kind} block, which is never run")
    if "timeout" in attrs:
        try:
            bound = float(attrs["timeout"])
        except ValueError:
            bound = -1
        if not 0 < bound <= MAX_BLOCK_TIMEOUT_S:
            problems.append(f"timeout={attrs['timeout']}: seconds, at most {MAX_BLOCK_TIMEOUT_S}")
    if "file" in attrs:
        target = Path(attrs["file"])
        if not attrs["file"] or target.is_absolute() or ".." in target.parts:
            problems.append(f"file={attrs['file']}: a relative path inside the working "
                            "directory")
        if kind in TEXT_KINDS:
            problems.append("file= on a text block")
    if kind == "sh" and re.search(r"^\$ ", text, re.M):
        problems.append("an sh block holds commands only: drop the '$ ' prompts, or make it "
                        "a console block")
    if kind == "console" and not re.search(r"^\$ ", text, re.M):
        problems.append("a console block without a '$ ' command")
    if kind == "pycon" and ">>> " not in text:
        problems.append("a pycon block without a '>>> ' line")
    try:
        if kind == "toml":
            tomllib.loads(text)
        elif kind == "json":
            json.loads(text)
    except ValueError as exc:
        problems.append(f"not valid {kind}: {exc}")
    return problems


def console_commands(text: str) -> str:
    """The commands of a console block (``$ `` lines and their ``\\`` continuations), one
    per line."""
    out: list[str] = []
    continued = False
    for line in text.splitlines():
        if continued:
            out.append(line)
        elif line.startswith("$ "):
            out.append(line[2:])
        else:
            continue
        continued = line.endswith("\\")
    return "\n".join(out) + "\n"


ALL = {path.relative_to(ROOT).as_posix(): parse(path) for path in DOCS}
RUNNABLE = [doc for doc, blocks in ALL.items() if any(b.runs and b.kind in RUN_KINDS
                                                      for b in blocks)]


def test_every_block_says_what_it_is() -> None:
    problems = [f"{b.where}: {p}" for blocks in ALL.values() for b in blocks for p in b.problems]
    assert not problems, "\n".join(problems)


def test_the_parser_reads_the_convention(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("""\
text
```sh
echo a
```
<!-- not-run: needs a cluster -->

```python
import nothing
```
  ```toml file=bus.toml
  [bus]
  session = "X"
  ```
```
no info string
```
```console
$ echo b \\
  c
b c
```
```text
$ shown only
```
```python timeout=0 colour=red
```
```toml
a = = 1
```
<!-- not-run: -->
```sh
true
```
<!-- not-run: dangling -->
""")
    blocks = parse(doc, tmp_path)
    got = [(b.line, b.kind, b.attrs, b.not_run, b.runs, len(b.problems)) for b in blocks]
    assert got == [
        (2, "sh", {}, None, True, 0),
        (7, "python", {}, "needs a cluster", False, 0),
        (10, "toml", {"file": "bus.toml"}, None, True, 0),
        (14, "", {}, None, False, 1),
        (17, "console", {}, None, True, 0),
        (22, "text", {}, None, False, 0),
        (25, "python", {"timeout": "0"}, None, True, 2),
        (27, "toml", {}, None, False, 1),
        (31, "sh", {}, "", False, 1),
        (34, "", {}, "dangling", False, 1),
    ], got
    assert blocks[2].text == '[bus]\nsession = "X"\n'
    assert console_commands(blocks[4].text) == "echo b \\\n  c\n"


# --- running a document ---------------------------------------------------------------------

def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` runs (zombies do not count: an orphan's is its new
    parent's to reap)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we looked
        if fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group ``proc`` leads, SIGKILL what is left of it after 5 s; ``proc``
    itself is reaped (the rest, orphans, are their new parent's)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            if not _group_alive(proc.pid):
                return
            time.sleep(0.05)


@dataclass
class Run:
    """What running one document did: each block's place, kind and seconds."""

    ran: list[tuple[str, str, float]] = field(default_factory=list)


def run_block(block: Block, venv: Venv, work: Path, scratch: Path, env: dict[str, str]) -> float:
    """Run (or write) one block in ``work``; its seconds. Fails the test naming the block."""
    if "file" in block.attrs:
        target = work / block.attrs["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text)
        return 0.0
    name = f"{Path(block.doc).stem}-{block.line}"
    stdin: Path | None = None
    if block.kind in ("sh", "console"):
        script = scratch / f"{name}.sh"
        script.write_text(console_commands(block.text) if block.kind == "console"
                          else block.text)
        args = ["bash", "-e", "-o", "pipefail", str(script)]
        offset = "line N of the script is the block's line N"
    elif block.kind == "python":
        source = scratch / f"{name}.py"
        source.write_text(block.text)
        args = [venv.python, "-"]
        stdin = source
        offset = f"line N of <stdin> is {block.doc}:{block.line}+N"
    else:  # pycon
        session = scratch / f"{name}.txt"
        session.write_text(block.text)
        args = [venv.python, "-m", "doctest", "-o", "ELLIPSIS", "-o", "NORMALIZE_WHITESPACE",
                str(session)]
        offset = f"line N of {session.name} is {block.doc}:{block.line}+N"
    log_path = scratch / f"{name}.log"
    bound = float(block.attrs.get("timeout", BLOCK_TIMEOUT_S))
    started = time.monotonic()
    with open(log_path, "wb") as log, open(stdin or os.devnull, "rb") as given:
        proc = subprocess.Popen(args, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=given, start_new_session=True)
    try:
        status: int | None = proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        _kill_group(proc)  # what it left in the background ends with it
        if proc.poll() is None:
            proc.wait(timeout=10)
    took = time.monotonic() - started
    if status != 0:
        output = log_path.read_text(errors="replace")
        what = (f"did not finish within {bound:.0f} s" if status is None
                else f"exited with status {status}")
        pytest.fail(f"{block.where}: {block.kind} block {what} after {took:.1f} s "
                    f"({offset}; {' '.join(args[:3])} ...)\n--- the block ---\n{block.text}"
                    f"--- its output (last 6000 characters) ---\n{output[-6000:]}",
                    pytrace=False)
    return took


def link_distributions(venv: Venv, names: tuple[str, ...], cwd: Path) -> None:
    """Links the files of each distribution ``names`` (its packages and its ``.dist-info``)
    from this environment into ``venv``'s site-packages."""
    site = Path(venv.run([venv.python, "-c", "import sysconfig; "
                          "print(sysconfig.get_paths()['purelib'])"], cwd).strip())
    for name in names:
        dist = importlib.metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        assert tops, f"{name}: no files listed"
        for top in sorted(tops):
            if not (site / top).exists():
                (site / top).symlink_to(base / top)


def doc_env(venv: Venv, wheels: Wheels) -> dict[str, str]:
    env = venv.env
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=f"{wheels.dir} {WHEELHOUSE}",
               PYTHONUNBUFFERED="1")
    return env


@pytest.mark.slow
@pytest.mark.packaging
@pytest.mark.parametrize("doc", RUNNABLE)
def test_the_document_runs_from_the_wheels(doc: str, wheels: Wheels, tmp_path: Path) -> None:
    """Each document on the CPython running pytest, from its ``seqbus`` wheel."""
    blocks = [b for b in ALL[doc] if b.runs]
    assert not [b for b in ALL[doc] if b.problems], "see test_every_block_says_what_it_is"
    lacking = [tool for tool in TOOLS.get(doc, ()) if shutil.which(tool) is None]
    if lacking:
        pytest.skip(f"{doc} needs {', '.join(lacking)}, which this machine does not have")
    if doc in LINKED:
        from seqbus.spark import java_missing_reason

        if java_missing_reason() is not None:
            pytest.skip(f"{doc} runs Spark: {java_missing_reason()}")
    here = outside_checkout(tmp_path)
    work, scratch = here / "work", here / "blocks"
    work.mkdir()
    scratch.mkdir()
    started = time.monotonic()
    venv = make_venv(here / "venv", sys.executable)
    venv.pip_install(str(wheels.seqbus), str(wheels.seqc), cwd=here)
    link_distributions(venv, LINKED.get(doc, ()), here)
    (work / "dist").symlink_to(wheels.dir, target_is_directory=True)
    for dest, source in FIXTURES.get(doc, {}).items():
        shutil.copytree(source, work / dest, ignore=shutil.ignore_patterns(
            "build", "dist", "messages", "*.egg-info", "__pycache__", "journal", "*.ring"))
    env = doc_env(venv, wheels)
    setup = time.monotonic() - started
    run = Run()
    for block in blocks:
        run.ran.append((block.where, block.kind, run_block(block, venv, work, scratch, env)))
    total = time.monotonic() - started
    print(f"{doc} on CPython {RUNNING}: set-up {setup:.1f} s, blocks "
          f"{total - setup:.1f} s")
    for where, kind, took in run.ran:
        print(f"  {where} {kind} {took:.1f} s")



def test_a_failing_block_is_reported_at_its_place_and_its_processes_end(tmp_path: Path) -> None:
    """run_block on blocks that fail: the message names the document and line, holds the
    output; a block past its bound is stopped; what a block left running is killed."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    venv = Venv(tmp_path / "venv")
    work, scratch = tmp_path / "work", tmp_path / "blocks"
    work.mkdir()
    scratch.mkdir()
    doc = tmp_path / "x.md"
    doc.write_text("""\
```sh
echo started; sleep 300 & echo $! > bg.pid; exit 3
```
```pycon
>>> 1 + 1
3
```
```python timeout=2
import time; print("sleeping", flush=True); time.sleep(60)
```
```console
$ echo fine > out.txt
fine
```
""")
    sh, pycon, python, console = parse(doc, tmp_path)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with pytest.raises(pytest.fail.Exception) as failed:
        run_block(sh, venv, work, scratch, env)
    assert "x.md:1: sh block exited with status 3" in str(failed.value)
    assert "started" in str(failed.value)
    pid = int((work / "bg.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            break  # dead, not yet reaped by its new parent
        time.sleep(0.05)
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z", pid
    with pytest.raises(pytest.fail.Exception) as failed:
        run_block(pycon, venv, work, scratch, env)
    assert "x.md:4: pycon block exited with status 1" in str(failed.value)
    assert "Expected:\n    3\nGot:\n    2" in str(failed.value)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        run_block(python, venv, work, scratch, env)
    assert time.monotonic() - started < 30
    assert "x.md:8: python block did not finish within 2 s" in str(failed.value)
    assert "sleeping" in str(failed.value)
    run_block(console, venv, work, scratch, env)
    assert (work / "out.txt").read_text() == "fine\n"

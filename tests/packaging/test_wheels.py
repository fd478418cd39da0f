"""The ``seqbus`` and ``seqc`` wheels installed into a fresh virtual environment outside the
checkout (issue 17), for every CPython from 3.11 the machine has (issue 29: one seqbus wheel
per interpreter, each tested with its own interpreter; a version the machine lacks is skipped,
saying where it was looked for): each wheel holds what maturin alone would leave out (the
compiled Cython, the codec support's .pxd, the examples the demo runs, the Spark source's jar,
the node SDK for Java and C++) under a tag that matches its contents, ``manylinux_2_28`` or
older by ``auditwheel show``, and the jar's and the node SDK's native libraries need no newer
glibc either; ``seqbus sdk`` names the SDK in the installed wheel; seqc from the wheel generates and builds
a user schema whose nodes run against a sequencer; ``seqbus demo`` runs with nothing of the
repository; with the ``seqbus`` wheel alone (issue 19), ``import bus`` fails, ``seqbus admin``
operates a node, ``seqbus admin status`` reads a bus's configuration, and the archive writer
takes IR without seqc and says what an .idl needs."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

from tests.conftest import ROOT, VENV_BIN, Processes, free_tcp_port, free_udp_port
from scripts.wheels import BUILD_ENV
from tests.packaging.conftest import (
    RFQ, RUNNING, Venv, Wheels, ext_suffix, outside_checkout, rfq_config, run_rfq_desk,
)
from tests.transports.harness import udp_bound, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

#: The newest glibc a wheel may need: manylinux_2_28 (docs/packaging.md).
GLIBC_FLOOR = (2, 28)
#: The node SDK in the wheel (seqbus.sdk, docs/languages.md): library, headers, CMake package,
#: jars.
SDK_FILES = (
    "seqbus/sdk/lib/libseqbus_ffi.so", "seqbus/sdk/include/seqbus.h",
    "seqbus/sdk/include/seqbus/node.hpp", "seqbus/sdk/include/seqbus/codec/runtime.hpp",
    "seqbus/sdk/include/bus.hpp", "seqbus/sdk/lib/cmake/seqbus/seqbusConfig.cmake",
    "seqbus/sdk/lib/cmake/seqbus/seqbusConfigVersion.cmake",
    "seqbus/sdk/lib/cmake/seqbus/seqbusTargets.cmake",
    "seqbus/sdk/lib/cmake/seqbus/SeqbusGenerate.cmake",
    "seqbus/sdk/share/java/seqbus-codec-0.1.0.jar", "seqbus/sdk/share/java/seqbus-node-0.1.0.jar",
    "seqbus/sdk/share/java/seqbus-java-0.1.0.pom",
)
#: What the node library may need: glibc's libraries and libgcc (manylinux's policy).
SDK_LIBRARY_NEEDS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                     "libgcc_s.so.1", "ld-linux-x86-64.so.2"}


def glibc_needed(elf: bytes) -> tuple[int, int]:
    """The newest ``GLIBC_x.y`` symbol version a shared library asks for."""
    newest = (2, 0)
    for section in ELFFile(io.BytesIO(elf)).iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for _, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    if m := re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name):
                        newest = max(newest, (int(m.group(1)), int(m.group(2))))
    return newest


def needed_libraries(elf: bytes) -> list[str]:
    """The ``DT_NEEDED`` entries of a shared library."""
    out: list[str] = []
    for section in ELFFile(io.BytesIO(elf)).iter_sections():
        if isinstance(section, DynamicSection):
            out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return out


def test_glibc_needed_reads_the_newest_version_a_library_asks_for() -> None:
    # what is linked on this machine (glibc 2.36) asks for versions past the floor: the
    # reader sees them, so the floor checks below can fail
    assert glibc_needed(Path("/bin/ls").read_bytes()) >= (2, 34)
    assert glibc_needed(Path(os.path.realpath(sys.executable)).read_bytes()) > GLIBC_FLOOR
    assert "libc.so.6" in needed_libraries(Path("/bin/ls").read_bytes())
    core = next((ROOT / "runtime" / "seqbus").glob("_core*.so"), None)
    if core is not None:  # make setup's development build: linked without zig
        assert glibc_needed(core.read_bytes()) > GLIBC_FLOOR


def test_seqbus_wheel_holds_the_compiled_modules_under_a_matching_manylinux_tag(
    wheels: Wheels, python_version: str,
) -> None:
    wheel = wheels.by_python[python_version]
    suffix = ext_suffix(python_version)
    py = "cp" + python_version.replace(".", "")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        for line in record.splitlines():  # every file listed, with its own hash and size
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("/RECORD"):
                continue
            data = zf.read(name)
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={sha}", len(data)), name
        assert {line.rsplit(",", 2)[0] for line in record.splitlines()} == names
        for required in (
            "seqbus/_core.abi3.so", "seqbus/_core.pyi", "seqbus/py.typed",
            f"seqbus/_codec_support{suffix}", "seqbus/_codec_support.pxd",
            "seqbus/_codec_support.pyi",
            f"seqbus/bus/_codec{suffix}", "seqbus/bus/_codec.pyi", "seqbus/bus/bus.idl",
            "seqbus/examples/exchange/demo_nodes.py", "seqbus/examples/exchange/exchange.idl",
            f"seqbus/examples/exchange/messages/_codec{suffix}",
            f"seqbus/examples/pingpong/messages/_codec{suffix}",
            "seqbus/spark/jars/seqbus-spark.jar",  # built with the wheel, ignored by git
            *SDK_FILES,
        ):
            assert required in names, required
        assert not [n for n in names if n.endswith(".c")], "Cython's C left in the wheel"
        # only this interpreter's compiled modules (the core and the node library are for any)
        compiled = [n for n in names if n.endswith(".so") and n not in (
            "seqbus/_core.abi3.so", "seqbus/sdk/lib/libseqbus_ffi.so")]
        assert compiled and all(n.endswith(suffix) for n in compiled), compiled
        jar = zf.read("seqbus/spark/jars/seqbus-spark.jar")
        node_library = zf.read("seqbus/sdk/lib/libseqbus_ffi.so")
        config = zf.read("seqbus/sdk/lib/cmake/seqbus/seqbusTargets.cmake").decode()
        node_jar = zf.read("seqbus/sdk/share/java/seqbus-node-0.1.0.jar")
    # the node SDK: its library for the same glibc, needing nothing but glibc and libgcc; its
    # CMake package relocatable (no build path); each jar with its pom, for Maven users
    assert glibc_needed(node_library) <= GLIBC_FLOOR, glibc_needed(node_library)
    assert set(needed_libraries(node_library)) <= SDK_LIBRARY_NEEDS, needed_libraries(node_library)
    assert "${_IMPORT_PREFIX}/lib/libseqbus_ffi.so" in config and str(ROOT) not in config, config
    with zipfile.ZipFile(io.BytesIO(node_jar)) as node:
        assert {"seqbus/node/Native.class", "META-INF/maven/seqbus/seqbus-node/pom.xml"} <= set(
            node.namelist())
    with zipfile.ZipFile(io.BytesIO(jar)) as spark:
        classes = set(spark.namelist())
        for required in ("seqbus/spark/SeqbusSource.class", "seqbus/spark/Native.class",
                         "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister",
                         "seqbus/spark/native/libseqbus_spark.so"):
            assert required in classes, required
        native = spark.read("seqbus/spark/native/libseqbus_spark.so")
    # the JVM loads the jar's native half on the user's machine: auditwheel does not look
    # inside a jar, so its glibc is checked here
    assert glibc_needed(native) <= GLIBC_FLOOR, glibc_needed(native)
    _, _, wheel_py, abi, platform = wheel.name.removesuffix(".whl").split("-")
    assert (wheel_py, abi) == (py, py)  # Cython extensions are built for one Python
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", platform)
    assert m and (int(m.group(1)), int(m.group(2))) <= GLIBC_FLOOR, wheel.name
    # auditwheel reads every ELF file of the wheel, the Cython ones too (maturin checked only
    # the Rust core): the tag they need is the tag the wheel carries
    show = subprocess.run([str(VENV_BIN / "auditwheel"), "show", str(wheel)],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    assert f'is consistent with the following platform tag: "{platform}"' in " ".join(
        show.split()), show


def test_every_wheel_carries_the_one_rust_core_and_it_keeps_to_the_stable_abi(
    wheels: Wheels, tmp_path: Path
) -> None:
    """The core is built once and shared (scripts/wheels.py): it must use nothing outside
    Python 3.11's stable ABI. A Cython module, built for one interpreter, is the control:
    abi3audit finds its symbols outside the stable ABI."""
    cores, controls = set(), {}
    for version, wheel in wheels.by_python.items():
        with zipfile.ZipFile(wheel) as zf:
            cores.add(zf.read("seqbus/_core.abi3.so"))
            controls[version] = zf.read(f"seqbus/_codec_support{ext_suffix(version)}")
    assert len(cores) == 1, "the wheels carry different Rust cores"
    core, control = tmp_path / "_core.abi3.so", tmp_path / "_codec_support.abi3.so"
    core.write_bytes(cores.pop())
    control.write_bytes(controls[RUNNING])
    audit = BUILD_ENV / RUNNING / "bin" / "abi3audit"  # requirements-build.txt

    def report(path: Path) -> dict[str, object]:
        done = subprocess.run([str(audit), "--report", "--assume-minimum-abi3", "3.11",
                               str(path)], capture_output=True, text=True, timeout=120,
                              check=False, cwd=tmp_path)
        result: dict[str, object] = json.loads(done.stdout)["specs"][str(path)]["object"]["result"]
        assert (done.returncode == 0) == (result["is_abi3"] is True), done.stderr[-2000:]
        return result

    shared = report(core)
    assert shared["is_abi3"] and shared["non_abi3_symbols"] == [], shared
    assert shared["computed"] == "3.11", shared
    cython = report(control)
    assert not cython["is_abi3"] and "_PyBytes_Resize" in cython["non_abi3_symbols"], cython


def test_the_installed_seqbus_is_the_wheel_not_the_checkout(py_wheel_venv: Venv,
                                                            python_version: str,
                                                            tmp_path: Path) -> None:
    cwd = outside_checkout(tmp_path)
    site = py_wheel_venv.path.resolve()
    for module in ("seqbus", "seqbus._core", "seqbus._codec_support", "seqbus.bus._codec",
                   "seqbus.examples.exchange.messages._codec", "seqc"):
        assert py_wheel_venv.module_file(module, cwd).resolve().is_relative_to(site), module
    assert py_wheel_venv.module_file("seqbus.bus._codec", cwd).name == (
        "_codec" + ext_suffix(python_version))


def test_seqc_from_the_wheel_generates_and_builds_a_user_schema_whose_nodes_run(
    py_wheel_venv: Venv, python_version: str, tmp_path: Path, processes: Processes
) -> None:
    wheel_venv = py_wheel_venv
    app = outside_checkout(tmp_path / "app")
    (app / "rfq").mkdir(parents=True)
    for source in (RFQ / "src" / "rfq").glob("*.*"):
        if source.suffix in (".py", ".idl"):
            (app / "rfq" / source.name).write_bytes(source.read_bytes())
    wheel_venv.run([wheel_venv.bin("seqc"), "generate", "rfq/rfq.idl", "-o", ".", "--layout",
                    "flat", "--python-package", "rfq=rfq.messages"], app)
    assert (app / "rfq" / "messages" / f"_codec{ext_suffix(python_version)}").is_file()
    run_rfq_desk(wheel_venv, tmp_path, processes, [wheel_venv.python, "-m", "rfq.client"],
                 ["--path", str(app)], cwd=app)


def test_seqbus_sdk_answers_from_the_installed_wheel(wheel_venv: Venv, tmp_path: Path) -> None:
    """``seqbus sdk`` (and ``seqbus.sdk``) name the node SDK inside the environment, where the
    files are (the languages' own use of it: docs/languages.md, run by test_docs)."""
    cwd = outside_checkout(tmp_path)
    site = wheel_venv.path.resolve()

    def sdk(what: str) -> str:
        return wheel_venv.run([wheel_venv.bin("seqbus"), "sdk", what], cwd).strip()

    prefix, library = Path(sdk("prefix")), Path(sdk("library"))
    assert prefix.resolve().is_relative_to(site) and prefix.name == "sdk", prefix
    assert library == prefix / "lib" / "libseqbus_ffi.so" and library.is_file(), library
    assert Path(sdk("cmake-dir"), "seqbusConfig.cmake").is_file()
    assert Path(sdk("include"), "seqbus", "node.hpp").is_file()
    jars = sdk("classpath").split(":")
    assert [Path(j).name for j in jars] == ["seqbus-codec-0.1.0.jar", "seqbus-node-0.1.0.jar"]
    assert all(Path(j).is_file() and Path(j).parent == prefix / "share" / "java" for j in jars)
    api = wheel_venv.run([wheel_venv.python, "-c", "from seqbus import sdk; "
                          "print(sdk.classpath()); print(sdk.library())"], cwd).split()
    assert api == [":".join(jars), str(library)], api


def test_seqbus_demo_runs_from_the_wheel(py_wheel_venv: Venv, tmp_path: Path) -> None:
    wheel_venv = py_wheel_venv
    proc = subprocess.Popen([wheel_venv.bin("seqbus"), "demo", "--orders", "3000"],
                            cwd=outside_checkout(tmp_path), env=wheel_venv.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the demo did not finish within 300 s:\n{err[-3000:]}")
    assert proc.returncode == 0, out + err
    assert "3,000 sent, 3,000 answered, 0 lost" in out, out
    assert "all equal" in out, out
    # the wheel runs the examples it ships, and says what the Spark report would need
    assert "Spark report skipped: pyspark and pyarrow not installed" in out, out
    assert str(ROOT) not in out + err


def _fails(venv: Venv, code: str, cwd: Path) -> str:
    """What ``python -c code`` printed on stderr, after checking that it failed."""
    done = subprocess.run([venv.python, "-c", code], cwd=cwd, env=venv.env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stderr


def test_the_sdk_alone_has_no_top_level_bus_and_runs_seqbus_admin_and_status(
    py_sdk_venv: Venv, tmp_path: Path, processes: Processes
) -> None:
    sdk_venv = py_sdk_venv
    work = outside_checkout(tmp_path)
    assert "No module named 'seqc'" in _fails(sdk_venv, "import seqc", work)
    assert "No module named 'bus'" in _fails(sdk_venv, "import bus", work)
    assert sdk_venv.run([sdk_venv.python, "-c", "from seqbus import bus; "
                         "print(bus.__name__, bus.SCHEMA_ID)"], work).split() == ["seqbus.bus", "1"]

    # a bus of one sequencer (status endpoint on), a matching engine the wheel ships, and an
    # operator: every process from the venv, in a directory that is not the checkout
    engine_at, operator_at = f"127.0.0.1:{free_udp_port()}", f"127.0.0.1:{free_udp_port()}"
    config, upstream = rfq_config(work, [engine_at, operator_at])
    config.write_text(config.read_text().replace(
        "[sequencer]\n", f'[sequencer]\nstatus = "127.0.0.1:{free_tcp_port()}"\n'))
    env = sdk_venv.env
    seq = processes.start("sequencer", [sdk_venv.bin("seqbus"), "sequencer", "-c", str(config)],
                          env, cwd=work, inherit_env=False)
    assert wait_for(lambda: udp_bound(upstream), 60) and seq.poll() is None, processes.logs()
    engine = processes.start(
        "engine", [sdk_venv.bin("seqbus"), "node", "seqbus.examples.exchange.engine:MatchingEngine",
                   "-c", str(config), "--account", "ME", "--rewind", "--listen", engine_at],
        env, cwd=work, inherit_env=False)

    def admin(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sdk_venv.bin("seqbus"), "admin", *argv, "-c", str(config), "--listen", operator_at,
             "--timeout", str(timeout)],
            cwd=work, env=env, capture_output=True, text=True, timeout=timeout + 60, check=False)

    listing = admin("commands", "ME", timeout=2.0)
    for _ in range(30):  # the engine answers once it is up
        if listing.returncode == 0:
            break
        assert engine.poll() is None, processes.logs()
        listing = admin("commands", "ME", timeout=2.0)
    assert listing.returncode == 0, f"{listing.stderr}\n{processes.logs()}"
    assert "halt [SYMBOL] [REASON] - stop accepting new orders" in listing.stdout
    halted = admin("command", "ME", "halt", "AAPL", "--json", timeout=10.0)
    assert halted.returncode == 0, f"{halted.stderr}\n{processes.logs()}"
    reply = json.loads(halted.stdout)
    assert reply["status"] == "Ok" and reply["text"].startswith("halted AAPL at #"), reply

    # status finds the endpoint through the configuration, read by the processes' own parser
    shown = sdk_venv.run([sdk_venv.bin("seqbus"), "admin", "status", "-c", str(config),
                          "--json"], work)
    counters = json.loads(shown)
    assert counters["session"] == "RFQ0000001", counters
    assert counters["counters"]["messages_sequenced"] >= 4, counters  # the halt and its reply
    bad = work / "bad.toml"
    bad.write_text(config.read_text().replace("[sequencer]\n", "[sequencer]\nstatuss = 1\n"))
    refused = subprocess.run([sdk_venv.bin("seqbus"), "admin", "status", "-c", str(bad)], cwd=work,
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "sequencer.statuss" in refused.stderr, refused.stderr

    # the application's journal sealed with only the wheel (no seqc): the schema given as the
    # generated package, whose IR ships beside its code
    seq.send_signal(signal.SIGTERM)
    assert seq.wait(timeout=60) == 0, processes.logs()
    sealed = subprocess.run(
        [sdk_venv.bin("seqbus"), "archive", "seal", str(work / "journal"), str(work / "s.archive"),
         "--schema", "seqbus.examples.exchange.messages"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert sealed.returncode == 0, sealed.stderr
    assert re.search(r"s\.archive: sealed, [1-9]\d* records in 1 segments", sealed.stdout), (
        sealed.stdout)
    manifest = json.loads((work / "s.archive" / "archive.json").read_text())
    assert {(s["schema_id"], s["package"]) for s in manifest["schemas"]} >= {(7, "exchange")}


def test_the_sdk_alone_archives_from_ir_and_says_an_idl_needs_seqc(
    py_sdk_venv: Venv, tmp_path: Path
) -> None:
    sdk_venv = py_sdk_venv
    work = outside_checkout(tmp_path)
    ir = work / "bus.ir.json"  # IR as `seqc ir --json` writes it
    ir.write_bytes((ROOT / "rust" / "crates" / "archive" / "src" / "bus.ir.json").read_bytes())
    idl = work / "orders.idl"
    idl.write_text("package orders;\nschema 7 version 1;\n")
    out = sdk_venv.run([sdk_venv.python, "-c", f"""\
from seqbus.archive import ArchiveError, ArchiveWriter, load_ir
manifest = ArchiveWriter({str(work / "a.archive")!r}, "SDK0000001", load_ir([{str(ir)!r}])).seal()
print([(s["schema_id"], s["package"]) for s in manifest["schemas"]])
try:
    load_ir([{str(idl)!r}])
except ArchiveError as exc:
    print(exc)
# the IR of generated packages, shipped with them: what the demo's Spark report reads
print([ir[:2] for ir in load_ir(["seqbus.examples.pingpong.messages", "seqbus.bus"])])
from seqbus.spark.demo_report import _ir
print([_ir(p)[:2] for p in ("bus", "exchange", "pingpong")])
"""], work)
    assert out.splitlines() == [
        "[(1, 'bus')]",
        f"{idl}: compiling .idl needs seqc; give the package seqc generated from it "
        "(e.g. exchange.messages) or its IR JSON (seqc ir --json SCHEMA.idl > FILE) instead",
        "[(2, 'pingpong'), (1, 'bus')]",
        "[(1, 'bus'), (7, 'exchange'), (2, 'pingpong')]",
    ], out

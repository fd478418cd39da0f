"""The build backend of the ``seqbus`` wheel (PEP 517 / PEP 660): maturin, then the Cython.

maturin builds the Rust core (``seqbus._core``) and packs the Python sources of ``runtime/``,
but it does not compile Cython. This backend takes maturin's wheel and completes it:

1. maturin builds the core with zig as its C compiler and linker, against the symbols of glibc
   2.28 (``--zig --compatibility manylinux_2_28``), in ``build/wheel-target/`` (a development
   build's compiler settings differ, and one target directory for both would rebuild each
   other's artefacts). The core uses only Python's stable ABI (``abi3``), so one build serves
   every interpreter: with the setting ``seqbus.core-dir=DIR`` (scripts/wheels.py passes it),
   maturin's wheel is taken from DIR when one is there and left there when it was built;
2. the backend unpacks it into a staging directory;
3. adds the example applications ``seqbus demo`` runs (``examples/exchange``,
   ``examples/pingpong``: their sources, schemas and generated ``messages`` packages) as
   ``seqbus.examples``, so that an installed ``seqbus`` runs its demo without the repository,
   and the bus's own schema beside its generated package (``seqbus/bus/bus.idl``);
4. builds the Spark source ``seqbus/spark/jars/seqbus-spark.jar`` (rust/crates/spark/
   build-jar.sh: its native half with cargo-zigbuild for the same glibc, its JVM half with
   ``javac`` against Spark's jars from Maven); ``seqbus.spark-jar=skip`` leaves it out;
5. builds the node SDK ``seqbus/sdk/`` (``seqbus sdk``, docs/languages.md): an install prefix
   holding the node library ``lib/libseqbus_ffi.so`` (rust/crates/ffi, with cargo-zigbuild for
   the same glibc), the C/C++ headers and the relocatable CMake package ``lib/cmake/seqbus``
   (``cmake --install`` of runtime/cpp) and the Java jars ``share/java/`` (Maven, from
   runtime/java). It does not depend on the interpreter: it is built once into
   ``build/wheel-sdk/`` and reused while its inputs are unchanged; ``seqbus.node-sdk=skip``
   leaves it out;
6. compiles every Cython module there with ``seqc build`` (the repository's own
   ``compiler/``, with the C compiler of the machine: the C that Cython writes calls nothing
   of glibc newer than 2.14, which ``auditwheel show`` confirms), under its installed name:
   ``seqbus._codec_support`` (its ``.pxd`` ships beside it, for the code ``seqc`` generates
   for applications), ``seqbus.bus._codec`` and ``seqbus.examples.*.messages._codec`` (an
   extension compiled before from the same inputs is reused from ``build/wheel-cython/``);
7. strips the debug information of the shared libraries (the release profile keeps it for
   profiling; 19 MB → 3.5 MB for the core);
8. writes the wheel again: a new ``RECORD`` and the tag ``cpXY-cpXY-manylinux_2_28_x86_64``.
   maturin tags its wheel ``abi3``, but Cython extensions are built for one Python version
   (they use CPython's full API, see docs/packaging.md), so the wheel is for that version.

``build_editable`` (``pip install -e .``) is maturin's editable wheel, built as a development
build, with the Cython of ``runtime/seqbus`` compiled in place (what ``make setup`` does).
``build_sdist`` is maturin's sdist, which carries this backend, ``compiler/`` and the examples
too (``[tool.maturin] include``), so a wheel builds from it (without the Spark source and the
node SDK, whose crates and Java sources it does not carry). docs/packaging.md describes the result.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import maturin

ROOT = Path(__file__).resolve().parents[2]
#: The examples ``seqbus demo`` runs, shipped as ``seqbus.examples.<name>``.
EXAMPLES = ("exchange", "pingpong")
#: Files of an example that ship (its own code, schemas, generated package; not build products).
EXAMPLE_SUFFIXES = {".py", ".pyi", ".pyx", ".pxd", ".idl", ".typed", ".json"}
#: The oldest glibc the wheel runs with, and its platform tag (docs/packaging.md).
GLIBC = "2.28"
MANYLINUX = "manylinux_2_28"
#: Where the wheel's Rust code is built (the core by maturin, the Spark source's native half).
TARGET_DIR = ROOT / "build" / "wheel-target"
#: The Spark source's crate and build script (not in an sdist).
SPARK_CRATE = ROOT / "rust" / "crates" / "spark"
#: The node library's crate (not in an sdist), and where the node SDK is built and kept.
FFI_CRATE = ROOT / "rust" / "crates" / "ffi"
SDK_CACHE = ROOT / "build" / "wheel-sdk"
#: The Java runtime's sources the SDK's jars are built from (their tests and build outputs
#: left out): copied as they are into the Maven build's directory.
SDK_JAVA_INPUTS = (
    "runtime/java/pom.xml", "runtime/java/codec/pom.xml", "runtime/java/codec/src/main",
    "runtime/java/node/pom.xml", "runtime/java/node/src/main", "generated/java/seqbus/bus",
)
#: What the node SDK is made of besides the library: runtime/cpp's package and headers, the
#: C header and the bus codecs the node installs, and the Java sources.
SDK_INPUTS = (
    "runtime/cpp/CMakeLists.txt", "runtime/cpp/cmake", "runtime/cpp/include",
    "runtime/cpp/node/CMakeLists.txt", "generated/c/seqbus.h", "generated/cpp/bus.hpp",
    *SDK_JAVA_INPUTS,
)

get_requires_for_build_wheel = maturin.get_requires_for_build_wheel
get_requires_for_build_sdist = maturin.get_requires_for_build_sdist
get_requires_for_build_editable = maturin.get_requires_for_build_editable
prepare_metadata_for_build_wheel = maturin.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = maturin.prepare_metadata_for_build_editable
build_sdist = maturin.build_sdist

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


def _seqc_build() -> Any:
    """The module ``seqc.build`` of this checkout's compiler (the codec support ABI the
    runtime expects is the one this compiler generates for)."""
    sys.path.insert(0, str(ROOT / "compiler"))
    try:
        from seqc import build
    finally:
        sys.path.remove(str(ROOT / "compiler"))
    return build


def _compile_cython(package: Path) -> None:
    """``seqc build`` of every Cython module under ``package``, reusing an extension compiled
    before from the same inputs: ``build/wheel-cython/`` keeps each one under a hash of its
    module name, its .pyx, the .pxd files, Cython's version, seqc's build code and the
    interpreter's ABI (the exchange codec alone takes a minute to compile)."""
    import Cython

    seqc_build = _seqc_build()
    cache = ROOT / "build" / "wheel-cython"
    cache.mkdir(parents=True, exist_ok=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    common = hashlib.sha256(f"{Cython.__version__} {suffix} {sys.version}".encode())
    common.update(Path(seqc_build.__file__).read_bytes())
    for pxd in sorted(package.rglob("*.pxd")):
        common.update(pxd.read_bytes())
    keys = {}
    for pyx in sorted(package.rglob("*.pyx")):
        key = common.copy()
        key.update(seqc_build.module_name(pyx)[1].encode() + b"\0" + pyx.read_bytes())
        keys[pyx] = cache / f"{key.hexdigest()}{suffix}"
        if keys[pyx].exists():  # newer than its sources once copied: seqc build skips it
            shutil.copyfile(keys[pyx], pyx.with_name(pyx.stem + suffix))
    built = seqc_build.build([str(package)])
    for pyx in built:  # written whole under another name first: builds may run at once
        partial = keys[pyx].with_name(f"{keys[pyx].name}.{os.getpid()}.part")
        shutil.copyfile(pyx.with_name(pyx.stem + suffix), partial)
        os.replace(partial, keys[pyx])
    print(f"seqbus_build: {len(keys)} Cython modules, {len(built)} compiled, "
          f"{len(keys) - len(built)} from {cache}", flush=True)


def _maturin_settings(config_settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's settings, with ``--zig --compatibility manylinux_2_28`` unless they chose
    a tag."""
    args = maturin.get_maturin_pep517_args(config_settings)
    if "--compatibility" not in args and "--manylinux" not in args:
        args = [*args, "--zig", "--compatibility", MANYLINUX]
    return {**(config_settings or {}), "maturin.build-args": args}


@contextmanager
def _wheel_build_env() -> Iterator[None]:
    """The environment maturin, cargo-zigbuild and cargo run in for the wheel: this
    environment's commands first on ``PATH``, zig found through this interpreter (the
    ``ziglang`` package), the wheel's own cargo target directory."""
    saved = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])
    os.environ["CARGO_ZIGBUILD_PYTHON_PATH"] = sys.executable
    os.environ["CARGO_TARGET_DIR"] = str(TARGET_DIR)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _core_wheel(out: Path, config_settings: Mapping[str, Any] | None,
                metadata_directory: str | None) -> Path:
    """maturin's wheel of the Rust core and the runtime's Python sources, in ``out``: taken
    from the directory the setting ``seqbus.core-dir`` names when it holds one (the core is
    abi3: one build serves every interpreter), else built, and left there too."""
    setting = (config_settings or {}).get("seqbus.core-dir")
    shared = Path(setting) if setting else None
    if shared is not None:
        found = sorted(shared.glob("seqbus-*-abi3-*.whl"))
        if len(found) > 1:
            raise RuntimeError(f"seqbus.core-dir {shared} holds more than one core wheel: "
                               f"{', '.join(p.name for p in found)}")
        if found:
            print(f"seqbus_build: the Rust core from {found[0]}", flush=True)
            shutil.copy2(found[0], out / found[0].name)
            return out / found[0].name
    inner = maturin.build_wheel(str(out), _maturin_settings(config_settings), metadata_directory)
    if "-abi3-" not in inner:
        raise RuntimeError(f"maturin built {inner}, not an abi3 wheel: the core is expected to "
                           "use Python's stable ABI only (pyo3's abi3 feature)")
    if shared is not None:
        shared.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / inner, shared / inner)
    return out / inner


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    with tempfile.TemporaryDirectory(prefix="seqbus-wheel-") as tmp, _wheel_build_env():
        work = Path(tmp)
        (work / "maturin").mkdir()
        inner = _core_wheel(work / "maturin", config_settings, metadata_directory)
        stage = work / "stage"
        with zipfile.ZipFile(inner) as zf:
            zf.extractall(stage)
        _add_examples(stage / "seqbus" / "examples")
        shutil.copyfile(ROOT / "schemas" / "bus.idl", stage / "seqbus" / "bus" / "bus.idl")
        if (config_settings or {}).get("seqbus.spark-jar") == "skip":
            print("seqbus_build: seqbus.spark-jar=skip: the wheel has no Spark source "
                  "(seqbus.spark says so when asked for it)", flush=True)
        else:
            _build_spark_jar(stage / "seqbus" / "spark" / "jars", work)
        if (config_settings or {}).get("seqbus.node-sdk") == "skip":
            print("seqbus_build: seqbus.node-sdk=skip: the wheel has no node SDK (`seqbus sdk` "
                  "says so when asked for it)", flush=True)
        else:
            _add_node_sdk(stage / "seqbus" / "sdk", work)
        _compile_cython(stage / "seqbus")
        for leftover in [*stage.rglob("*.c"), *stage.rglob("*.html")]:
            leftover.unlink()
        _strip(stage)
        return _write_wheel(stage, Path(wheel_directory))


def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    name: str = maturin.build_editable(wheel_directory, config_settings, metadata_directory)
    _seqc_build().build([str(ROOT / "runtime" / "seqbus")])
    return name


def _add_examples(dest: Path) -> None:
    dest.mkdir()
    (dest / "__init__.py").write_text(
        '"""The example applications of the repository\'s examples/, shipped so that '
        '``seqbus demo`` runs\nwithout it: ``seqbus.examples.exchange`` and '
        '``seqbus.examples.pingpong``."""\n'
    )
    for name in EXAMPLES:
        src = ROOT / "examples" / name
        for path in sorted(src.rglob("*")):
            if path.is_file() and path.suffix in EXAMPLE_SUFFIXES and "__pycache__" not in path.parts:
                target = dest / name / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


def _build_spark_jar(dest: Path, work: Path) -> None:
    """The Spark source (``seqbus.spark.jar()``), built by rust/crates/spark/build-jar.sh: its
    native half for glibc 2.28 like the core, its JVM half against Spark's jars from Maven
    (a JDK 17 and Maven are needed; the script reuses a jar built before from the same
    inputs). An sdist does not carry the crate: then the wheel goes without it, and says so."""
    script = SPARK_CRATE / "build-jar.sh"
    if not script.exists():
        print(f"seqbus_build: {script.relative_to(ROOT)} is not here (an sdist): this wheel has "
              "no Spark source, and seqbus.spark says so when asked for it", flush=True)
        return
    missing = [tool for tool in ("javac", "jar", "mvn", "cargo-zigbuild") if not shutil.which(tool)]
    if missing:
        raise RuntimeError(
            f"building the Spark source into the wheel needs {', '.join(missing)} on PATH (a JDK "
            "17 or newer, Maven, and the cargo-zigbuild of requirements-build.txt); or build "
            "without it: -C seqbus.spark-jar=skip")
    jar = work / "seqbus-spark.jar"
    subprocess.run(["bash", str(script), str(jar)], check=True,
                   env={**os.environ, "SEQBUS_JAR_GLIBC": GLIBC})
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(jar, dest / jar.name)


def _sdk_key(library: Path) -> str:
    """A hash of what the node SDK is built from: the library and :data:`SDK_INPUTS`."""
    key = hashlib.sha256(f"glibc {GLIBC}\0".encode())
    key.update(library.read_bytes())
    for name in SDK_INPUTS:
        top = ROOT / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file():
                key.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
                key.update(path.read_bytes())
    return key.hexdigest()


def _quiet_run(cmd: list[str], what: str, **kwargs: Any) -> None:
    """Run ``cmd``; its output shown only when it fails, with ``what`` it was doing."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(cmd)} exited with status {done.returncode}\n"
                           f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")


def _build_sdk_prefix(library: Path, prefix: Path, work: Path) -> None:
    """The node SDK in ``prefix``: ``cmake --install`` of runtime/cpp with the library given
    (headers, ``lib/cmake/seqbus``, the library), then the jars Maven builds from a copy of
    runtime/java (the checkout's own ``target/`` directories are left alone) in
    ``share/java`` with the parent pom their poms name."""
    cmake_build = work / "sdk-cmake"
    _quiet_run(["cmake", "-S", str(ROOT / "runtime" / "cpp"), "-B", str(cmake_build),
                "-DSEQBUS_BUILD_TESTS=OFF", "-DSEQBUS_BUILD_NODE_TESTS=OFF",
                f"-DSEQBUS_FFI_DIR={library.parent}", "-DCMAKE_INSTALL_LIBDIR=lib",
                "-DCMAKE_INSTALL_INCLUDEDIR=include"], "configuring runtime/cpp")
    _quiet_run(["cmake", "--install", str(cmake_build), "--prefix", str(prefix)],
               "installing runtime/cpp")
    for needed in ("lib/libseqbus_ffi.so", "lib/cmake/seqbus/seqbusConfig.cmake",
                   "include/seqbus.h", "include/seqbus/node.hpp"):
        if not (prefix / needed).is_file():
            raise RuntimeError(f"cmake --install of runtime/cpp left no {needed} in {prefix}")
    leaked = [p.name for p in (prefix / "lib" / "cmake" / "seqbus").iterdir()
              if str(ROOT) in p.read_text() or str(work) in p.read_text()]
    if leaked:
        raise RuntimeError(f"the CMake package names build paths in {', '.join(leaked)}: it "
                           "would not work from another place")
    java = work / "sdk-java"
    for name in SDK_JAVA_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, java / name)
        else:
            (java / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, java / name)
    maven = ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(java / "runtime/java/pom.xml"),
             "-Pnodes", "-pl", "codec,node", "package", "-Dmaven.test.skip=true",
             "-Dexec.skip=true"]
    try:  # offline first: Maven's local repository usually has the plugins
        _quiet_run([*maven, "-o"], "Maven, offline")
    except RuntimeError:
        print("seqbus_build: Maven offline could not build the jars: again with the network",
              flush=True)
        _quiet_run(maven, "building runtime/java's jars with Maven")
    share = prefix / "share" / "java"
    share.mkdir(parents=True)
    version = "0.1.0"
    for module, artifact in (("codec", "seqbus-codec"), ("node", "seqbus-node")):
        (jar,) = (java / "runtime/java" / module / "target").glob(f"{artifact}-*.jar")
        version = jar.stem.removeprefix(f"{artifact}-")
        shutil.copyfile(jar, share / jar.name)
    shutil.copyfile(ROOT / "runtime/java/pom.xml", share / f"seqbus-java-{version}.pom")


def _add_node_sdk(dest: Path, work: Path) -> None:
    """The node SDK (``seqbus.sdk``) into ``dest``: the node library built with cargo-zigbuild
    for glibc 2.28, without its debug information, and the prefix :func:`_build_sdk_prefix`
    makes around it, taken from ``build/wheel-sdk/`` when built there before from the same
    inputs (the 3.11, 3.12 and 3.13 wheels share one build). An sdist does not carry the
    crate: then the wheel goes without it, and says so."""
    if not (FFI_CRATE / "Cargo.toml").exists() or not (ROOT / "runtime" / "java").is_dir():
        print(f"seqbus_build: {FFI_CRATE.relative_to(ROOT)} or runtime/java is not here (an "
              "sdist): this wheel has no node SDK, and `seqbus sdk` says so", flush=True)
        return
    missing = [tool for tool in ("cargo-zigbuild", "cmake", "mvn", "javac")
               if not shutil.which(tool)]
    if missing:
        raise RuntimeError(
            f"building the node SDK into the wheel needs {', '.join(missing)} on PATH (the "
            "cargo-zigbuild of requirements-build.txt, CMake 3.18 or newer, Maven, a JDK 17 or "
            "newer); or build without it: -C seqbus.node-sdk=skip")
    import fcntl

    SDK_CACHE.mkdir(parents=True, exist_ok=True)
    with open(SDK_CACHE / "lock", "w") as lock:  # one build at a time (wheels build at once)
        fcntl.flock(lock, fcntl.LOCK_EX)
        _quiet_run(["cargo-zigbuild", "zigbuild", "--release", "-q", "-p", "seqbus-ffi",
                    "--target", f"x86_64-unknown-linux-gnu.{GLIBC}"],
                   "building the node library (seqbus-ffi) with cargo-zigbuild",
                   cwd=ROOT / "rust")
        built = TARGET_DIR / "x86_64-unknown-linux-gnu" / "release" / "libseqbus_ffi.so"
        library = SDK_CACHE / "libseqbus_ffi.so"
        partial = SDK_CACHE / "part"  # stripped there, then moved in whole
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        shutil.copyfile(built, partial / library.name)
        _strip(partial)
        os.replace(partial / library.name, library)
        key = _sdk_key(library)
        prefix, stamp = SDK_CACHE / "prefix", SDK_CACHE / "inputs"
        if prefix.is_dir() and stamp.exists() and stamp.read_text() == key:
            print(f"seqbus_build: the node SDK from {prefix} (its inputs unchanged)", flush=True)
        else:
            print("seqbus_build: building the node SDK (CMake package, Maven jars)", flush=True)
            shutil.rmtree(prefix, ignore_errors=True)
            stamp.unlink(missing_ok=True)
            fresh = work / "sdk-prefix"
            _build_sdk_prefix(library, fresh, work)
            shutil.copytree(fresh, prefix)
            stamp.write_text(key)
        shutil.copytree(prefix, dest)


def _strip(stage: Path) -> None:
    """Strips the debug information of every shared library under ``stage``."""
    strip = shutil.which("strip")
    if strip is None:
        print("seqbus_build: no `strip` (binutils): shared libraries keep their debug "
              "information", flush=True)
        return
    for lib in stage.rglob("*.so"):
        subprocess.run([strip, "--strip-debug", str(lib)], check=True)


def _dist_info(stage: Path) -> Path:
    (info,) = stage.glob("*.dist-info")
    return info


def _retag(info: Path) -> str:
    """Rewrite the WHEEL file's tags for this interpreter's ABI; return the new tag."""
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    lines = (info / "WHEEL").read_text().splitlines()
    platforms = [ln.split(": ", 1)[1].split("-")[2] for ln in lines if ln.startswith("Tag: ")]
    if not platforms:
        raise RuntimeError(f"{info / 'WHEEL'} has no Tag line")
    kept = [ln for ln in lines if not ln.startswith("Tag: ")]
    kept += [f"Tag: {py}-{py}-{p}" for p in platforms]
    (info / "WHEEL").write_text("\n".join(kept) + "\n")
    return f"{py}-{py}-{'.'.join(platforms)}"


def _record_line(path: Path, arcname: str) -> str:
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(stage: Path, out_dir: Path) -> str:
    """Zip ``stage`` into a wheel in ``out_dir`` (dist-info last, RECORD regenerated)."""
    info = _dist_info(stage)
    tag = _retag(info)
    files = sorted(p for p in stage.rglob("*") if p.is_file() and info not in p.parents)
    # the dist-info last; it may have folders of its own (newer maturin writes sboms/)
    meta = sorted(p for p in info.rglob("*") if p.is_file() and p != info / "RECORD")
    record = info / "RECORD"
    lines = [_record_line(p, p.relative_to(stage).as_posix()) for p in [*files, *meta]]
    lines.append(f"{record.relative_to(stage).as_posix()},,")
    record.write_text("\n".join(lines) + "\n")
    name = f"{info.name.removesuffix('.dist-info')}-{tag}.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out_dir / name, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in [*files, *meta, record]:
            entry = zipfile.ZipInfo(path.relative_to(stage).as_posix(), (1980, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, path.read_bytes())
    return name

"""The build backend of the ``seqbus`` wheel (PEP 517 / PEP 660): maturin, then the Cython.

maturin builds the Rust core (``seqbus._core``) and packs the Python sources of ``runtime/``,
but it does not compile Cython. This backend takes maturin's wheel and completes it:

1. unpacks it into a staging directory;
2. adds the example applications ``seqbus demo`` runs (``examples/exchange``,
   ``examples/pingpong``: their sources, schemas and generated ``messages`` packages) as
   ``seqbus.examples``, so that an installed ``seqbus`` runs its demo without the repository,
   the bus's own schema beside its generated package (``seqbus/bus/bus.idl``) and the Spark
   source ``seqbus/spark/jars/seqbus-spark.jar`` that ``make setup`` builds (git ignores it, so
   maturin leaves it out);
3. compiles every Cython module there with ``seqc build`` (the repository's own
   ``compiler/``), under its installed name: ``seqbus._codec_support`` (its ``.pxd`` ships
   beside it, for the code ``seqc`` generates for applications), ``seqbus.bus._codec`` and
   ``seqbus.examples.*.messages._codec`` (an extension compiled before from the same inputs
   is reused from ``build/wheel-cython/``);
4. strips the debug information of the shared libraries (the release profile keeps it for
   profiling; 19 MB → 3.5 MB for the core);
5. writes the wheel again: a new ``RECORD`` and the tag ``cpXY-cpXY-<platform>``. maturin
   tags its wheel ``abi3`` (the Rust core uses only the stable ABI), but Cython extensions are
   built for one Python version. The platform tag is maturin's: the lowest ``manylinux`` the
   core is compatible with (``--compatibility pypi`` refuses a plain ``linux`` tag).

``build_editable`` (``pip install -e .``) is maturin's editable wheel, with the Cython of
``runtime/seqbus`` compiled in place (what ``make setup`` does). ``build_sdist`` is maturin's
sdist, which carries this backend, ``compiler/`` and the examples too (``[tool.maturin]
include``), so a wheel builds from it. docs/packaging.md describes the result.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import maturin

ROOT = Path(__file__).resolve().parents[2]
#: The examples ``seqbus demo`` runs, shipped as ``seqbus.examples.<name>``.
EXAMPLES = ("exchange", "pingpong")
#: Files of an example that ship (its own code, schemas, generated package; not build products).
EXAMPLE_SUFFIXES = {".py", ".pyi", ".pyx", ".pxd", ".idl", ".typed"}

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
    for pyx in built:
        shutil.copyfile(pyx.with_name(pyx.stem + suffix), keys[pyx])
    print(f"seqbus_build: {len(keys)} Cython modules, {len(built)} compiled, "
          f"{len(keys) - len(built)} from {cache}", flush=True)


def _maturin_settings(config_settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's settings, with ``--compatibility pypi`` unless they chose a tag."""
    args = maturin.get_maturin_pep517_args(config_settings)
    if "--compatibility" not in args and "--manylinux" not in args:
        args = [*args, "--compatibility", "pypi"]
    return {**(config_settings or {}), "maturin.build-args": args}


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    with tempfile.TemporaryDirectory(prefix="seqbus-wheel-") as tmp:
        work = Path(tmp)
        (work / "maturin").mkdir()
        inner = maturin.build_wheel(
            str(work / "maturin"), _maturin_settings(config_settings), metadata_directory
        )
        stage = work / "stage"
        with zipfile.ZipFile(work / "maturin" / inner) as zf:
            zf.extractall(stage)
        _add_examples(stage / "seqbus" / "examples")
        shutil.copyfile(ROOT / "schemas" / "bus.idl", stage / "seqbus" / "bus" / "bus.idl")
        _add_spark_jar(stage / "seqbus" / "spark" / "jars")
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


def _add_spark_jar(dest: Path) -> None:
    """The Spark source (``seqbus.spark.jar()``), which ``make setup`` builds into the
    runtime (it needs a JDK and pyspark's jars, rust/crates/spark/build-jar.sh); git ignores
    it, so maturin leaves it out."""
    jar = ROOT / "runtime" / "seqbus" / "spark" / "jars" / "seqbus-spark.jar"
    if not jar.exists():
        print(f"seqbus_build: {jar.relative_to(ROOT)} is missing (`make setup` builds it): this "
              "wheel's seqbus.spark will say so when asked for it", flush=True)
        return
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(jar, dest / jar.name)


def _strip(stage: Path) -> None:
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
    files = sorted(p for p in stage.rglob("*") if p.is_file() and p.parent != info)
    meta = sorted(p for p in info.iterdir() if p.name != "RECORD")
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

"""``seqbus new PATH``: a project to grow.

It writes an application that installs, tests and type-checks at once: a schema, a
``pyproject.toml`` whose build runs the seqc build hook (as seqbus's examples/rfq does), two
typed nodes (``Ledger``, stateful and deterministic, and ``Teller``), a test of them on the
deterministic harness (a hot backup, a late joiner, a sequencer failing over), a development
bus of one sequencer (``bus.toml``) and of three (``cluster.toml``), written by
:func:`seqbus.up.config_text`, and a README with the commands.

The files are made from the templates in ``seqbus/scaffold/template/`` (package data), where
``{{key}}`` stands for a value of the project.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import keyword
import logging
import re
import urllib.parse
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from seqbus.errors import SeqbusError
from seqbus.up import DEFAULT_NODES, DEFAULT_PORT_BASE, SLOTS_FROM, config_text

__all__ = ["add_command", "create", "main", "package_name"]

log = logging.getLogger("seqbus.new")

#: template → where it goes in the project (``{package}`` is the Python package's name).
FILES = {
    "README.md.tmpl": "README.md",
    "pyproject.toml.tmpl": "pyproject.toml",
    "gitignore.tmpl": ".gitignore",
    "schema.idl.tmpl": "src/{package}/{package}.idl",
    "init.py.tmpl": "src/{package}/__init__.py",
    "nodes.py.tmpl": "src/{package}/nodes.py",
    "test_nodes.py.tmpl": "tests/test_{package}.py",
}
#: The schema id of the project's messages (any of 2..65535 serves: 1 is the bus's own).
SCHEMA_ID = 100
#: Names a project's package cannot take: they are seqbus's own, or a test folder's.
RESERVED = frozenset({"seqbus", "seqc", "bus", "messages", "test", "tests"})
_PACKAGE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def package_name(name: str) -> str:
    """The Python package (and IDL package) of a project called ``name``: lower case, ``-``
    and ``.`` as ``_``. SeqbusError when that is not a usable name."""
    package = name.strip().lower().replace("-", "_").replace(".", "_")
    if not _PACKAGE.match(package) or keyword.iskeyword(package) or package in RESERVED:
        raise SeqbusError(
            f"{name!r} does not make a package name: give --name a lower-case name of letters, "
            "digits and single underscores, starting with a letter (not a Python keyword, nor "
            f"{', '.join(sorted(RESERVED))}), e.g. --name ledger"
        )
    return package


def _camel(package: str) -> str:
    """``my_ledger`` → ``MyLedger``: the generated node base is ``MyLedgerNode`` (seqc's
    naming: docs/idl.md)."""
    return "".join(part[:1].upper() + part[1:] for part in package.split("_") if part)


def wheels_dir() -> Path | None:
    """The directory the installed seqbus wheel came from, when pip recorded it (an install
    from a wheel file: ``direct_url.json``) and the seqc wheel is there too; else None."""
    try:
        text = importlib.metadata.distribution("seqbus").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        url = str(json.loads(text).get("url", ""))
    except ValueError:
        return None
    if not url.startswith("file://") or not url.endswith(".whl"):
        return None
    wheel = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
    if wheel.parent.is_dir() and any(wheel.parent.glob("seqc-*.whl")):
        return wheel.parent
    return None


def _render(text: str, values: dict[str, str], template: str) -> str:
    def value(m: re.Match[str]) -> str:
        try:
            return values[m.group(1)]
        except KeyError:
            raise SeqbusError(f"template {template}: no value for {{{{{m.group(1)}}}}}") from None

    return _PLACEHOLDER.sub(value, text)


def create(
    path: Path,
    name: str | None = None,
    *,
    port_base: int = DEFAULT_PORT_BASE,
    nodes: int = DEFAULT_NODES,
) -> list[Path]:
    """Write the project into ``path`` (a new or empty directory); the files written."""
    project = name or path.resolve().name
    package = package_name(project)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise SeqbusError(f"{path} exists and is not an empty directory: give a new PATH")
    if nodes < 3:
        raise SeqbusError(f"--nodes: at least 3 (the README's ledger, teller and backup), not "
                          f"{nodes}")
    slots = [f"127.0.0.1:{port_base + SLOTS_FROM + i}" for i in range(nodes)]
    wheels = wheels_dir()
    values = {
        "project": project,
        "package": package,
        "node_base": f"{_camel(package)}Node",
        "schema_id": str(SCHEMA_ID),
        "slots": f"{slots[0]} to {slots[-1]}",
        "wheels": str(wheels) if wheels else "DIR",
        "wheels_said": (f"`{wheels}`, where the installed seqbus came from" if wheels else
                        "DIR, the directory you installed seqbus from"),
    }
    session = package.replace("_", "").upper()[:10]
    written: list[Path] = []
    files = {dest.format(package=package): template for template, dest in FILES.items()}
    templates = resources.files("seqbus.scaffold") / "template"
    path.mkdir(parents=True, exist_ok=True)
    for dest, template in files.items():
        text = _render((templates / template).read_text(encoding="utf-8"), values, template)
        target = path / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    typed = path / "src" / package / "py.typed"
    typed.write_text("")
    written.append(typed)
    for config, cluster in (("bus.toml", False), ("cluster.toml", True)):
        target = path / config
        target.write_text(config_text(cluster=cluster, nodes=nodes, port_base=port_base,
                                      session=session))
        written.append(target)
    return written


def main(args: argparse.Namespace) -> int:
    path = Path(args.path)
    written = create(path, args.name, port_base=args.port_base, nodes=args.nodes)
    package = package_name(args.name or path.resolve().name)
    print(f"wrote {len(written)} files into {path}/ (package {package}):")
    for f in written:
        print(f"  {f.relative_to(path)}")
    wheels = wheels_dir()
    print(f"""
next (README.md says more):
  cd {path}
  pip install --find-links {wheels or 'DIR'} -e '.[dev]'{
      '' if wheels else '    # DIR: where the seqbus and seqc wheels are (not on PyPI)'}
  pytest && mypy --strict
  seqbus up""")
    return 0


def add_command(sub: Any) -> None:
    """``seqbus new`` in the CLI's subparsers."""
    p = sub.add_parser(
        "new",
        help="write a project to grow: a schema, two typed nodes, harness tests, a one- and a "
        "three-sequencer development bus, a README with the commands",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("path", metavar="PATH", help="the project's directory (new or empty)")
    p.add_argument("--name", help="the project's name (default: PATH's last part); its "
                   "package is the name in lower case, - as _")
    p.add_argument("--port-base", type=int, default=DEFAULT_PORT_BASE, metavar="PORT",
                   help=f"first port of its buses (default {DEFAULT_PORT_BASE}; they use the "
                   "next 100)")
    p.add_argument("--nodes", type=int, default=DEFAULT_NODES, metavar="N",
                   help=f"node slots its buses reserve (default {DEFAULT_NODES})")
    p.set_defaults(func=main)

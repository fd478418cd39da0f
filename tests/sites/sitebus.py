"""Configurations and helpers of the multi-site tests (docs/sites.md): a bus's sequencer, the
replayers that follow it (over multicast, or a tier below other replayers over SoupBinTCP),
and the journals they keep, compared byte for byte."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import free_tcp_port, free_udp_port

SESSION = "SITES00001"
USER, PASSWORD = "bridge", "s3cret"


@dataclass
class Site:
    """One site's bus configuration: its multicast group, where its sequencer (or bridge)
    takes commands and where its replayer answers. ``ip`` is the site's address the other site
    reaches (its end of the link), ``iface`` where its multicast runs."""

    workdir: Path
    name: str
    iface: str = "127.0.0.1"
    ip: str = "127.0.0.1"
    group: int = field(default_factory=free_udp_port)
    upstream: int = field(default_factory=free_udp_port)
    replayer: int = field(default_factory=free_udp_port)
    discovery: int = field(default_factory=free_udp_port)
    extra: str = ""
    #: The sequencer's idle clock (0: none, so that the stream ends with the last command).
    clock_tick_ms: int = 20
    #: ``downstream.key`` of the site (docs/sites.md, "Downstream authentication"); "" for none.
    downstream_key: str = ""

    @property
    def group_address(self) -> str:
        """The address of the site's multicast group."""
        return f"239.8.{1 if self.name == 'a' else 2}.1"

    def base(
        self,
        *,
        replayer_listen: int | None = None,
        journal: str = "journal",
        discovery: bool = True,
        replayers: list[int] | None = None,
    ) -> str:
        node = (
            f"replayers = {[f'{self.iface}:{p}' for p in replayers]!r}\n".replace("'", '"')
            if replayers
            else ""
        )
        disco = (
            f'[discovery]\ngroup = "239.8.{1 if self.name == "a" else 2}.2:{self.discovery}"\n'
            "interval_ms = 50\n"
            if discovery
            else ""
        )
        key = f'key = "{self.downstream_key}"\n' if self.downstream_key else ""
        return f"""\
[bus]
session = "{SESSION}"

[sequencer]
upstream = "{self.iface}:{self.upstream}"
journal_dir = "{self.workdir / journal}"
clock_tick_ms = {self.clock_tick_ms}

[downstream]
transport = "udp-multicast"
group = "{self.group_address}:{self.group}"
interface = "{self.iface}"
{key}
[replayer]
listen = "{self.iface}:{replayer_listen or self.replayer}"

[node]
retry_ms = 30
{node}
{disco}
[tcp]
credentials = [{{ username = "{USER}", password = "{PASSWORD}" }}]
username = "{USER}"
password = "{PASSWORD}"
heartbeat_ms = 200
timeout_ms = 2000
reconnect_ms = 20
reconnect_max_ms = 200
"""

    def write(self, name: str, text: str) -> Path:
        path = self.workdir / f"{name}.toml"
        path.write_text(text + self.extra)
        return path

    def bus(self) -> Path:
        """The sequencer's (and the nodes') configuration of this site."""
        return self.write(f"{self.name}-bus", self.base())

    def bridge(self, channels: list[str]) -> Path:
        """The configuration of this site's bus with a bridge reading ``channels`` (the
        other site's SoupBinTCP servers) into the journal ``journal-bridge``."""
        return self.write(
            f"{self.name}-bus",
            self.base()
            + f"""
[bridge]
channels = {channels!r}
journal_dir = "{self.workdir / "journal-bridge"}"
""".replace("'", '"'),
        )

    def follower(
        self, name: str, *, tcp: bool = True, follow_tcp: list[str] | None = None
    ) -> tuple[Path, int, int]:
        """A following replayer's configuration: (path, its UDP port, its SoupBinTCP port)."""
        udp, port = free_udp_port(), free_tcp_port()
        text = self.base(replayer_listen=udp).replace(
            "[replayer]\n",
            "[replayer]\nfollow = true\n"
            f'journal_dir = "{self.workdir / ("journal-" + name)}"\n'
            # its own gaps from the sequencer's replayer first: a replayer announced on
            # [discovery] may be one that holds nothing yet
            + (f'sources = ["{self.iface}:{self.replayer}"]\n' if not follow_tcp else "")
            + (f'tcp_listen = "{self.ip}:{port}"\n' if tcp else "")
            + (f"follow_tcp = {follow_tcp!r}\n".replace("'", '"') if follow_tcp else ""),
        )
        return self.write(name, text), udp, port


def tls_files(directory: Path, ip: str) -> str | None:
    """A CA and a server certificate it signed for ``ip`` (openssl), as a ``[tls]`` table
    every process of a site can share: the servers use cert and key, the links trust ca.
    None when openssl is missing."""
    if shutil.which("openssl") is None:
        return None
    d = directory / "tls"
    d.mkdir(exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=seqbus test CA",
    )
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=site")
    (d / "san.ext").write_text(f"subjectAltName=IP:{ip}\n")
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    return f"""
[tls]
cert = "{d / "server.pem"}"
key = "{d / "server.key"}"
ca = "{d / "ca.pem"}"
"""


def journal_bytes(directory: Path) -> bytes:
    """Every segment of a journal up to its written end, in order (segments of equal size hold
    the same records at the same offsets when their streams are the same). A live writer's
    segment runs on in zeros it reserved past its last record (docs/journal.md): not counted."""
    return b"".join(_written(p.read_bytes()) for p in sorted(directory.glob("*.seg")))


def _written(segment: bytes) -> bytes:
    at = 32  # segment header; then records: length u32, crc u32, sequence u64, message
    while at + 16 <= len(segment) and segment[at : at + 16] != bytes(16):
        at += 16 + int.from_bytes(segment[at : at + 4], "little")
    return segment[: min(at, len(segment))]


def wait_until(
    cond: Callable[[], bool], timeout: float, what: str, logs: Callable[[], str] = lambda: ""
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s\n{logs()}")
        time.sleep(0.02)


class Deadline:
    """Bounds a test's loop in time: ``check()`` fails the test once ``timeout`` s passed."""

    def __init__(self, timeout: float, what: str, logs: Callable[[], str] = lambda: "") -> None:
        self.end = time.monotonic() + timeout
        self.timeout = timeout
        self.what = what
        self.logs = logs

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise AssertionError(f"{self.what}: not within {self.timeout} s\n{self.logs()}")

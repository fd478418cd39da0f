"""Two sites on one machine: site A is the test's own network namespace, site B a second one,
joined by a veth pair (link-local addresses, nothing leaves the machine). nftables drops a
share of the link's packets in both directions, and of site B's own UDP."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

A_IP, B_IP = "169.254.77.1", "169.254.77.2"


def _run(*args: str) -> None:
    r = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")


@dataclass
class Link:
    ns: str
    a_dev: str
    b_dev: str

    def in_b(self) -> list[str]:
        """The command prefix that runs a process at site B."""
        return ["ip", "netns", "exec", self.ns]

    def nft(self, rules: str) -> None:
        """Loads nftables ``rules`` in site B's namespace."""
        r = subprocess.run(
            [*self.in_b(), "nft", "-f", "-"],
            input=rules,
            text=True,
            capture_output=True,
            check=False,
        )
        if r.returncode != 0:
            raise RuntimeError(f"nft: {r.stderr.strip()}")

    def drop_every(self, port: int, every: int) -> None:
        """Drops one in ``every`` of the UDP datagrams site B's processes send to ``port`` on
        its loopback (a deterministic loss: one datagram of each ``every``)."""
        rules = f"""
table inet sitesdrop {{
  chain in {{ type filter hook input priority 0;
    iifname "lo" udp dport {port} numgen inc mod {every} == {every - 1} drop
  }}
}}
"""
        self.nft(rules)

    def loss(self, link_pct: int, site_b_udp_pct: int, site_b_group: str, every: int = 40) -> None:
        """Drops ``link_pct`` % of the link's packets each way, and ``site_b_udp_pct`` % of
        the UDP datagrams site B's processes receive (its multicast, commands, gap fills), at
        random; and, so that a run has loss to fill at site B however few datagrams its
        batching makes, one in ``every`` of the datagrams sent to ``site_b_group`` (site B's
        multicast address) that the random rule let through."""
        rules = f"""
table inet sitesloss {{
  chain in {{ type filter hook input priority 0;
    iifname "{self.b_dev}" numgen random mod 100 < {link_pct} drop
    iifname "lo" meta l4proto udp numgen random mod 100 < {site_b_udp_pct} drop
    iifname "lo" ip daddr {site_b_group} meta l4proto udp numgen inc mod {every} == {every - 1} drop
  }}
  chain out {{ type filter hook output priority 0;
    oifname "{self.b_dev}" numgen random mod 100 < {link_pct} drop
  }}
}}
"""
        self.nft(rules)


def usable() -> str | None:
    """Why two sites cannot be made here, or None."""
    if os.geteuid() != 0:
        return "making a second network namespace and a veth pair needs root"
    if os.environ.get("SEQBUS_IN_NETNS") != "1":
        return "site A must be a private network namespace (run through scripts/in-netns.sh)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/system-deps.sh installs nftables)"
    return None


@contextmanager
def two_sites() -> Iterator[Link]:
    reason = usable()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 100000}"
    link = Link(ns=f"seqbus-b{tag}", a_dev=f"sqa{tag}", b_dev=f"sqb{tag}")
    try:
        _run("ip", "netns", "add", link.ns)
    except RuntimeError as exc:
        pytest.skip(f"cannot make a network namespace for site B: {exc}")
    try:
        _run(
            "ip",
            "link",
            "add",
            link.a_dev,
            "type",
            "veth",
            "peer",
            "name",
            link.b_dev,
            "netns",
            link.ns,
        )
        _run("ip", "addr", "add", f"{A_IP}/24", "dev", link.a_dev)
        _run("ip", "link", "set", link.a_dev, "up")
        _run(*link.in_b(), "ip", "addr", "add", f"{B_IP}/24", "dev", link.b_dev)
        _run(*link.in_b(), "ip", "link", "set", link.b_dev, "up")
        _run(*link.in_b(), "ip", "link", "set", "lo", "up")
        yield link
    finally:
        subprocess.run(["ip", "netns", "del", link.ns], capture_output=True, check=False)

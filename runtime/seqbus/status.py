"""``seqbus admin status`` and ``seqbus admin switchover``: the sequencers' status endpoints
(``[sequencer] status``, or each ``[cluster]`` member's ``status``; docs/configuration.md,
docs/ha.md). The configuration is read by the same parser the processes use
(``seqbus._core``)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from seqbus import _core
from seqbus.errors import ConfigError, TransportError

__all__ = ["Endpoint", "endpoints", "fetch_status", "format_status", "switchover"]


@dataclass(frozen=True)
class Endpoint:
    """One sequencer's status endpoint."""

    member: int
    base: str
    token: str | None


def endpoints(config: str) -> list[Endpoint]:
    """The status endpoints of every sequencer of the bus of ``config`` (those configured)."""
    found = [
        Endpoint(member, f"http://{address}", token)
        for member, address, token in _core.status_endpoints(config)
        if address
    ]
    if not found:
        raise ConfigError(
            f"{config}: no sequencer has a status endpoint (sequencer.status, or status of the "
            "[cluster] members)"
        )
    return found


def _request(
    endpoint: Endpoint, path: str, method: str = "GET", timeout: float = 5.0
) -> tuple[int, str]:
    request = urllib.request.Request(endpoint.base + path, method=method)
    if endpoint.token is not None:
        request.add_header("Authorization", f"Bearer {endpoint.token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
            return int(response.status), body.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        raise TransportError(
            f"{endpoint.base}{path}: {exc} (is sequencer {endpoint.member} running?)"
        ) from None


def fetch_status(config: str, path: str = "/status", timeout: float = 5.0) -> str:
    """The body of ``GET path`` from the first reachable status endpoint of the bus."""
    errors: list[str] = []
    for endpoint in endpoints(config):
        try:
            code, body = _request(endpoint, path, timeout=timeout)
        except TransportError as exc:
            errors.append(str(exc))
            continue
        if code != 200:
            raise TransportError(f"{endpoint.base}{path}: HTTP {code}: {body.strip()}")
        return body
    raise TransportError("; ".join(errors))


def member_statuses(
    config: str, timeout: float = 2.0
) -> list[tuple[Endpoint, dict[str, Any] | str]]:
    """Every sequencer's ``/status`` document, or why it could not be read."""
    out: list[tuple[Endpoint, dict[str, Any] | str]] = []
    for endpoint in endpoints(config):
        try:
            code, body = _request(endpoint, "/status", timeout=timeout)
        except TransportError as exc:
            out.append((endpoint, str(exc)))
            continue
        out.append((endpoint, json.loads(body) if code == 200 else f"HTTP {code}: {body}"))
    return out


def format_status(status: dict[str, Any]) -> str:
    """Readable lines of a ``/status`` document."""
    cluster = status.get("cluster")
    head = f"sequencer of session {status['session']}"
    if cluster:
        head += (
            f", member {cluster['member']}: {cluster['role']}, term {cluster['term']}, "
            f"leader {cluster['leader'] or 'unknown'}"
        )
    lines = [head]
    uptime = (int(status["now_ns"]) - int(status["started_ns"])) / 1e9
    lines.append(f"  {'up':28} {uptime:,.1f} s")
    if cluster:
        lines.append(f"  {'commit index':28} {cluster['commit_index']:,}")
        lines.append(f"  {'last index':28} {cluster['last_index']:,}")
        for standby in cluster["standbys"]:
            lines.append(
                f"  {'standby ' + str(standby['id']) + ' lag':28} {standby['lag']:,} messages"
            )
        last = cluster.get("last_takeover_ns")
        if last:
            ago = (int(status["now_ns"]) - int(last)) / 1e9
            lines.append(f"  {'last takeover':28} {ago:,.1f} s ago ({cluster['takeovers']} in all)")
    for name, value in status["counters"].items():
        lines.append(f"  {name:28} {value:,}")
    return "\n".join(lines)


def switchover(config: str, target: int | None, timeout: float = 5.0) -> dict[str, Any]:
    """Hands the leadership to ``target`` (None: the most up-to-date standby) and waits until
    the new leader leads: ``{"from", "to", "pause_ms"}``, the pause measured from the request
    to the first status that shows the new leader leading (an upper bound: the sequencers'
    own counters time the handover itself)."""
    leader: Endpoint | None = None
    for endpoint, status in member_statuses(config):
        if isinstance(status, dict) and (status.get("cluster") or {}).get("role") == "leader":
            leader = endpoint
    if leader is None:
        raise TransportError(f"{config}: no sequencer reports that it leads the bus")
    path = "/switchover" if target is None else f"/switchover?to={target}"
    started = time.perf_counter()
    code, body = _request(leader, path, method="POST", timeout=timeout)
    answer = json.loads(body) if body.startswith("{") else {"ok": False, "error": body}
    if code != 200 or not answer.get("ok"):
        raise TransportError(f"switchover refused by member {leader.member}: {answer.get('error')}")
    to = int(answer["target"])
    deadline = started + timeout
    while time.perf_counter() < deadline:
        for endpoint, status in member_statuses(config, timeout=1.0):
            cluster = status.get("cluster") if isinstance(status, dict) else None
            if endpoint.member == to and cluster and cluster.get("role") == "leader":
                pause_ms = (time.perf_counter() - started) * 1e3
                return {"from": leader.member, "to": to, "pause_ms": pause_ms}
        time.sleep(0.001)
    raise TransportError(f"member {to} did not take over within {timeout} s")


#: Exit status of ``seqbus admin status`` when some sequencers answered and some did not
#: (what they said and why the others did not is printed); none answering is an error (1).
EXIT_SOME_UNREACHABLE = 5


def member_metrics(config: str, timeout: float = 2.0) -> list[tuple[Endpoint, str | None, str]]:
    """Every sequencer's ``/metrics`` text (None and why, when it could not be read)."""
    out: list[tuple[Endpoint, str | None, str]] = []
    for endpoint in endpoints(config):
        try:
            code, body = _request(endpoint, "/metrics", timeout=timeout)
        except TransportError as exc:
            out.append((endpoint, None, str(exc)))
            continue
        out.append((endpoint, body, "") if code == 200 else (endpoint, None, f"HTTP {code}"))
    return out


def main(config: str, as_json: bool, metrics: bool) -> int:
    if metrics:
        texts = member_metrics(config)
        if all(text is None for _, text, _ in texts):
            raise TransportError("; ".join(why for _, _, why in texts))
        for endpoint, text, why in texts:
            # each member's text after a comment naming it (a scraper reads each endpoint)
            print(f"# sequencer {endpoint.member}: {endpoint.base}/metrics")
            print(text if text is not None else f"# not read: {why}\n", end="")
        return 0 if all(text is not None for _, text, _ in texts) else EXIT_SOME_UNREACHABLE
    statuses = member_statuses(config)
    failed = [f"sequencer {e.member}: {s}" for e, s in statuses if not isinstance(s, dict)]
    if len(failed) == len(statuses):
        raise TransportError("; ".join(failed))
    code = EXIT_SOME_UNREACHABLE if failed else 0
    if as_json:
        # one sequencer: its document; a cluster: every member's, by id (an error as text)
        if len(statuses) == 1:
            print(json.dumps(statuses[0][1]))
        else:
            print(json.dumps({str(e.member): s for e, s in statuses}))
        return code
    for endpoint, status in statuses:
        print(
            format_status(status)
            if isinstance(status, dict)
            else f"sequencer {endpoint.member}: {status}"
        )
    return code

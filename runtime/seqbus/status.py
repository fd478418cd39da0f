"""``seqbus admin status``: the sequencer's counters from its HTTP status endpoint
(``[sequencer] status``, docs/configuration.md)."""

from __future__ import annotations

import json
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from seqbus.errors import ConfigError, TransportError

__all__ = ["fetch_status", "format_status"]


def _endpoint(config: str) -> tuple[str, str | None]:
    try:
        doc = tomllib.loads(Path(config).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{config}: {exc}") from None
    sequencer = doc.get("sequencer", {})
    address = sequencer.get("status")
    if not address:
        raise ConfigError(
            f"{config}: sequencer.status is not set: the sequencer has no status endpoint"
        )
    token = sequencer.get("status_token")
    return f"http://{address}", token if isinstance(token, str) else None


def fetch_status(config: str, path: str = "/status", timeout: float = 5.0) -> str:
    """The body of ``GET path`` from the status endpoint of the bus of ``config``."""
    base, token = _endpoint(config)
    request = urllib.request.Request(base + path)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        reason = exc.read().decode().strip()
        raise TransportError(f"{base}{path}: HTTP {exc.code}: {reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise TransportError(f"{base}{path}: {exc} (is the sequencer running?)") from None
    return body.decode()


def format_status(status: dict[str, Any]) -> str:
    """Readable lines of a ``/status`` document."""
    lines = [f"sequencer of session {status['session']}"]
    uptime = (int(status["now_ns"]) - int(status["started_ns"])) / 1e9
    lines.append(f"  {'up':24} {uptime:,.1f} s")
    for name, value in status["counters"].items():
        lines.append(f"  {name:24} {value:,}")
    return "\n".join(lines)


def main(config: str, as_json: bool, metrics: bool) -> int:
    if metrics:
        print(fetch_status(config, "/metrics"), end="")
        return 0
    text = fetch_status(config)
    print(text if as_json else format_status(json.loads(text)))
    return 0

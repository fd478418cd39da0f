"""A sender for the sites tests: ``python -m tests.sites.burst_sender CONFIG ACCOUNT N`` sends
N Pings as fast as its window allows, reads the stream until all N are in it (its own
messages, counted), and prints its client's stats and the seconds that took as one JSON line. Bounded: gives up after
120 s with a non-zero exit."""

from __future__ import annotations

import json
import sys
import time

from examples.pingpong.messages import Ping
from seqbus import _core
from seqbus.batch import RECORD_HEADER, RECORD_MESSAGE
from seqbus.errors import BackPressureError


def main() -> int:
    config, account, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    key = account.encode().ljust(8, b"\0")
    client = _core.NodeClient(config, account, 1, start="live")
    deadline = time.monotonic() + 120
    sent = seen = 0
    try:
        while not client.is_ready():
            if time.monotonic() > deadline:
                print("not ready", file=sys.stderr)
                return 2
            client.poll(1024, 0.05)
        started = time.monotonic()
        while seen < count:
            if time.monotonic() > deadline:
                print(f"sent {sent}, seen {seen} of {count}: {client.stats()}", file=sys.stderr)
                return 3
            while sent < count:
                try:
                    client.send(Ping(id=sent + 1, sent_at_ns=0).encode())
                except BackPressureError:
                    break
                sent += 1
            data = client.poll(4096, 0.05)
            offset = 0
            while offset < len(data):
                length, kind, _seq, _ts, _cmd, who = RECORD_HEADER.unpack_from(data, offset)[:6]
                if kind == RECORD_MESSAGE and who == key:
                    seen += 1
                offset += length
        print(json.dumps({**client.stats(), "elapsed_s": time.monotonic() - started}))
        return 0
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())

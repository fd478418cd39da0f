"""A sender for the sites tests: ``python -m tests.sites.burst_sender CONFIG ACCOUNT N`` sends
N tagged bodies as fast as its window allows (``tests.ha.cluster.Stream``), reads the stream
until all N are in it, and prints its client's stats and the seconds that took as one JSON
line. Bounded: gives up after 120 s with a non-zero exit."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.ha.cluster import Stream


def main() -> int:
    config, account, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    sender = Stream(config, account, start="live")
    deadline = time.monotonic() + 120
    try:
        while not sender.client.is_ready():
            if time.monotonic() > deadline:
                print("not ready", file=sys.stderr)
                return 2
            sender.poll(0.05)
        started = time.monotonic()
        while len(sender.from_tag(account)) < count:
            if time.monotonic() > deadline:
                seen = len(sender.from_tag(account))
                print(f"sent {sender.sent}, seen {seen} of {count}: {sender.client.stats()}",
                      file=sys.stderr)
                return 3
            sender.send_upto(count)
            sender.poll(0.05)
        print(json.dumps({**sender.client.stats(), "elapsed_s": time.monotonic() - started}))
        return 0
    finally:
        sender.client.close()


if __name__ == "__main__":
    sys.exit(main())

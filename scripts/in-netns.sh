#!/usr/bin/env bash
# Runs a command inside a private network namespace with its own loopback, where UDP
# multicast works and nothing can leave the machine. Falls back to running it as it is,
# with SEQBUS_NO_NETNS=1 so that multicast tests skip with a reason.
set -uo pipefail
if [ "${SEQBUS_IN_NETNS:-}" = 1 ]; then exec "$@"; fi
if [ "$(id -u)" = 0 ]; then flags=(-n); else flags=(-r -n); fi
if unshare "${flags[@]}" true 2>/dev/null; then
  exec unshare "${flags[@]}" -- env SEQBUS_IN_NETNS=1 bash -c 'ip link set lo up && exec "$@"' _ "$@"
fi
echo "in-netns: cannot create a network namespace here; multicast tests will skip" >&2
exec env SEQBUS_NO_NETNS=1 "$@"

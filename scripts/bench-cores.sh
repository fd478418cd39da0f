#!/usr/bin/env bash
# `seqbus-bench --shape` in one call: on every core this process may use, then pinned to
# cores 0 and 1 (`taskset -c 0,1`), each with the sequencer on one thread and pipelined
# (BENCH_PIPELINE=off, then on); each table under its own heading (docs/benchmarks.md,
# "Rust core": the shape of the bus).
#
#   scripts/bench-cores.sh [BINARY] [ARGS...]
#
# BINARY: a built seqbus-bench (default rust/target/release/seqbus-bench; a stripped copy
# carried to another machine works alone). ARGS go to both runs (--messages N, --samples N,
# --rounds N). Needs `unshare` and `taskset` (util-linux), not `ip`: the binary brings the
# namespace's loopback up itself. The bench's per-node statistics go to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/rust/target/release/seqbus-bench"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  bin="$1"
  shift
fi
if [ ! -x "$bin" ]; then
  echo "bench-cores: no seqbus-bench binary at $bin (cargo build --release -p seqbus-bench)" >&2
  exit 2
fi
for tool in taskset unshare; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench-cores: \`$tool\` not found (util-linux)" >&2
    exit 2
  fi
done
allowed="$(taskset -pc $$ | sed 's/.*: //')"
# the sequencer on one thread, then pipelined (sequencer.pipeline); BENCH_PIPELINE set by the
# caller runs that one alone
modes="${BENCH_PIPELINE:-off on}"
for mode in $modes; do
  echo "## all cores, sequencer.pipeline = \"$mode\": CPUs $allowed allowed, $(getconf _NPROCESSORS_ONLN) online; $(uname -srm)"
  echo
  BENCH_PIPELINE="$mode" "$bin" --shape "$@"
  echo
done
for mode in $modes; do
  echo "## pinned: taskset -c 0,1, sequencer.pipeline = \"$mode\""
  echo
  BENCH_PIPELINE="$mode" taskset -c 0,1 "$bin" --shape "$@"
  echo
done

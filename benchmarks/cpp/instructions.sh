#!/usr/bin/env bash
# Instructions per operation of each benchmark (after make bench-cpp built it), counted by
# valgrind (lackey) on `codec_bench --loop OP N` at N and 2N runs: the difference over N is one
# operation and the loop around it (a few instructions, the same for both codecs). Unlike time,
# the count does not depend on the machine's load.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=var/build/cpp-bench/codec_bench
N=${N:-2000}
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 1; }
[ -x "$BIN" ] || { echo "instructions.sh: run make bench-cpp first ($BIN)" >&2; exit 1; }
count() {
  valgrind --tool=lackey --basic-counts=yes "$BIN" --loop "$1" "$2" 2>&1 >/dev/null |
    awk '/guest instrs:/ {gsub(",", "", $NF); print $NF; exit}'
}
names=(EncodeNewOrder_seqbus EncodeNewOrder_SBE DecodeNewOrder_seqbus DecodeNewOrder_SBE
       EncodeBookUpdate_seqbus EncodeBookUpdate_SBE DecodeBookUpdate_seqbus DecodeBookUpdate_SBE)
for op in 0 1 2 3 4 5 6 7; do
  a=$(count "$op" "$N")
  b=$(count "$op" $((2 * N)))
  echo "${names[$op]} $(((b - a) / N)) instructions"
done

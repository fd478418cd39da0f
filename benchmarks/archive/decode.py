"""Archive decode rate into Arrow, per core, beside a plain Parquet read of the same data in the
same run (docs/benchmarks.md, "Archive decode"). Not a test: it prints what it measures.

    python -m benchmarks.archive.decode [--messages N] [--json]

Rates are rows per CPU-second of this process (one decoding thread: the Rust decoder runs one
slice at a time with the GIL released, so CPU time is one core's time).
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENVELOPE = struct.Struct("<QQ8sHBBI")
T0 = 1_763_780_000_000_000_000


def _ir(name: str) -> str:
    import subprocess

    from scripts.generate import idl

    root = Path(__file__).resolve().parents[2]
    seqc = Path(sys.executable).parent / "seqc"
    return subprocess.run([str(seqc), "ir", "--json", str(idl(name))],
                          check=True, capture_output=True, text=True, cwd=root).stdout


def build(path: Path, n: int) -> None:
    """``n`` messages: Pings (small bodies, like most of a real stream) with every 10th a
    NewOrder of the SPEC §3 example (legs, fills, optionals, strings)."""
    import examples.exchange.messages as x
    import examples.pingpong.messages as pingpong

    from seqbus.archive import ArchiveWriter

    orders = [x.NewOrder(order_id=i, client_id=i, symbol="AAPL", side=x.Side.Buy,
                         price=x.Price(mantissa=100 + i, exponent=-2), quantity=10, stop_price=None,
                         inst=x.ExecInst.PostOnly, expire_at=i,
                         legs=[x.NewOrderLegs(symbol="L", ratio=1, side=x.Side.Sell,
                                              fills=[x.NewOrderLegsFills(qty=1, price=2)])],
                         account="acct", memo=b"m").encode() for i in range(64)]
    pings = [pingpong.Ping(id=i, sent_at_ns=i).encode() for i in range(64)]
    schemas = [(json.loads(t)["schema_id"], p, t) for p, t in
               ((p, _ir(p)) for p in ("bus", "pingpong", "exchange"))]
    chunk = 65536
    with ArchiveWriter(path, "BENCH", schemas, segment_bytes=256 << 20) as w:
        seq = 1
        while seq <= n:
            buf = bytearray()
            for s in range(seq, min(seq + chunk, n + 1)):
                body = orders[s % 64] if s % 10 == 0 else pings[s % 64]
                acct = b"GW" if s % 10 == 0 else b"PINGER"
                buf += struct.pack("<I", 32 + len(body))
                buf += ENVELOPE.pack(T0 + s * 1000, s, acct.ljust(8, b"\0"), 1, 1, 0, len(body))
                buf += body
            seq += w.append_many(seq, bytes(buf))


def cpu_rate(rows: int, fn: Callable[[], Any], repeat: int = 3) -> dict[str, float]:
    """Best of ``repeat``: rows per CPU-second and per wall-second."""
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        c1, w1 = time.process_time(), time.perf_counter()
        assert out == rows, (out, rows)
        best_cpu, best_wall = min(best_cpu, c1 - c0), min(best_wall, w1 - w0)
    return {"rows_per_cpu_s": rows / best_cpu, "rows_per_wall_s": rows / best_wall,
            "cpu_s": best_cpu}


def run(n: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from seqbus.archive import Archive

    tmp = Path(tempfile.mkdtemp(prefix="seqbus-bench-archive-"))
    try:
        t0 = time.perf_counter()
        build(tmp / "a", n)
        a = Archive(tmp / "a")
        slices = a.slices(max_rows=1 << 20)
        env = a.envelope_table()
        orders = a.table("exchange.NewOrder")
        for name, t in (("envelope", env), ("orders", orders)):
            pq.write_table(t, tmp / f"{name}.parquet", compression="none")
            pq.write_table(t, tmp / f"{name}.snappy.parquet", compression="snappy")
        setup_s = time.perf_counter() - t0
        n_orders = orders.num_rows

        def envelope() -> int:
            return sum(b.num_rows for b in a.envelope_batches(slices))

        def typed() -> int:
            return sum(b.num_rows for b in a.typed_batches("exchange.NewOrder", slices))

        def parquet(name: str) -> Callable[[], int]:
            return lambda: pq.read_table(tmp / name, use_threads=False).num_rows

        res = {
            "messages": n,
            "archive_bytes": sum(Path(s.seg).stat().st_size for s in a.segments()),
            "setup_s": round(setup_s, 1),
            "envelope_decode": cpu_rate(n, envelope),
            "envelope_parquet_uncompressed_read": cpu_rate(n, parquet("envelope.parquet")),
            "envelope_parquet_snappy_read": cpu_rate(n, parquet("envelope.snappy.parquet")),
            "new_order_rows": n_orders,
            "new_order_decode": cpu_rate(n_orders, typed),
            "new_order_parquet_uncompressed_read": cpu_rate(n_orders, parquet("orders.parquet")),
            "new_order_parquet_snappy_read": cpu_rate(n_orders, parquet("orders.snappy.parquet")),
            "pyarrow": pa.__version__,
        }
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--messages", type=int, default=4_000_000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    res = run(args.messages)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"{res['messages']} messages ({res['archive_bytes'] / 1e6:.0f} MB archive), "
          f"{res['new_order_rows']} of them NewOrder; setup {res['setup_s']} s")
    for k, v in res.items():
        if isinstance(v, dict):
            print(f"  {k:40s} {v['rows_per_cpu_s'] / 1e6:7.2f} M rows/CPU-s   "
                  f"{v['rows_per_wall_s'] / 1e6:7.2f} M rows/s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())

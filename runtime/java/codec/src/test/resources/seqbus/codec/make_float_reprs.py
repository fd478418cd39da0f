"""Write python-float-repr.txt beside this file: doubles (their bits in hex) and how Python's
json.dumps writes each (repr), for JsonTest. Run from anywhere: python3 make_float_reprs.py."""

import json
import math
import random
import struct
from pathlib import Path


def bits(v: float) -> int:
    return int.from_bytes(struct.pack("<d", v), "little")


def main() -> None:
    rnd = random.Random(31)
    values = [0.1, 0.2, 0.3, 1 / 3, 2 / 3, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 0.00012345,
              5e-324, 1e-323, 2.2250738585072014e-308, 2.225073858507201e-308,
              1.7976931348623157e308, 123456789012345678.0, 0.5, 100.0, 1e22, 1e23, 1e21,
              9007199254740993.0, 4.35, 0.3 - 0.1, 1.5, -2.5, 3.4028234663852886e38,
              1.401298464324817e-45, 1.1754943508222875e-38, 123.456, -0.0001, 1e100, 1e-100]
    values += [math.ldexp(1.0, e) for e in range(-1074, 1024, 3)]
    values += [math.ldexp(1.0, e) * 1.0000000000000002 for e in range(-1000, 1000, 37)]
    values += [float(n) for n in (1, 7, 10, 99, 1000, 12345678, 2**53, 2**63, 2**64)]
    while len(values) < 2500:
        v = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(v):
            values.append(v)
    while len(values) < 3500:  # f32 values, as a reader widens them
        v = struct.unpack("<f", rnd.getrandbits(32).to_bytes(4, "little"))[0]
        if math.isfinite(v):
            values.append(v)
    while len(values) < 4000:  # decimal-looking values
        values.append(round(rnd.uniform(-1e6, 1e6), rnd.randrange(0, 8)))
    out = ["# doubles as bits (hex) and Python's json.dumps of each; made by make_float_reprs.py"]
    for v in values:
        for x in (v, -v):
            out.append(f"{bits(x):016x} {json.dumps(x)}")
    Path(__file__).with_name("python-float-repr.txt").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

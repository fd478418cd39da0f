"""``python -m seqbus.spark.pack OUT.tar.gz``: the installed ``seqbus`` package — its Rust
extension and compiled codecs included — as one archive for executors that do not have it::

    spark-submit --archives OUT.tar.gz#seqbus-py --conf spark.executorEnv.PYTHONPATH=seqbus-py ...

Spark unpacks it in each executor's working directory; Python code that runs there (UDFs,
``mapInPandas``, offline replay per partition) then imports ``seqbus``. The executors' Python
must be the same version on the same platform (the extension is built for it). Reading
archives needs no Python on executors at all: that is seqbus-spark.jar (``--jars``).
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path


def pack(out: str | Path) -> Path:
    """Writes the installed seqbus package to ``out`` (gzipped tar, ``seqbus/…`` inside)."""
    import seqbus

    root = Path(seqbus.__file__).resolve().parent

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        if "__pycache__" in parts or parts[1:3] == ("spark", "jars"):
            return None  # bytecode, and the jar (it travels with --jars)
        return info

    out = Path(out)
    with tarfile.open(out, "w:gz") as t:
        t.add(root, arcname="seqbus", filter=keep)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m seqbus.spark.pack OUT.tar.gz", file=sys.stderr)
        sys.exit(2)
    print(pack(sys.argv[1]))

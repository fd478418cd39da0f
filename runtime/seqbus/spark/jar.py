"""``python -m seqbus.spark.jar``: prints the path of seqbus-spark.jar, for
``spark-submit --jars "$(python -m seqbus.spark.jar)"``."""

from __future__ import annotations

import sys

from seqbus.archive.errors import ArchiveError
from seqbus.spark import jar

if __name__ == "__main__":
    try:
        print(jar())
    except ArchiveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)

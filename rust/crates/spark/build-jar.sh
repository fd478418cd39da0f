#!/usr/bin/env bash
# Builds seqbus-spark.jar: the JVM half of the Spark source (java/) compiled against the
# Spark jars of the pyspark installation, with the native half (this crate, built release)
# inside it. Usage: build-jar.sh PYTHON OUT.jar   (make setup runs it).
set -euo pipefail
py=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
target=${CARGO_TARGET_DIR:-$here/../../target}
jars=$("$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
  echo "build-jar: javac and jar (a JDK 17 or newer) are needed to build the Spark source" >&2
  exit 1
fi
(cd "$here/../.." && cargo build --release -q -p seqbus-spark)
work=$target/spark-jar
rm -rf "$work"
mkdir -p "$work/classes/seqbus/spark/native" "$work/classes/META-INF/services"
javac --release 17 -Xlint:all,-serial,-processing,-options,-path -Werror -cp "$jars/*" \
  -d "$work/classes" $(find "$here/java" -name '*.java')
cp "$here/java/META-INF/services/"* "$work/classes/META-INF/services/"
# the library without its debug information (10 MB with it)
objcopy --strip-debug "$target/release/libseqbus_spark.so" "$work/classes/seqbus/spark/native/libseqbus_spark.so" 2>/dev/null \
  || cp "$target/release/libseqbus_spark.so" "$work/classes/seqbus/spark/native/libseqbus_spark.so"
mkdir -p "$(dirname "$out")"
jar --create --file "$out.tmp" -C "$work/classes" .
mv "$out.tmp" "$out"
echo "built $out"

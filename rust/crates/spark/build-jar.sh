#!/usr/bin/env bash
# Builds seqbus-spark.jar: the JVM half of the Spark source (java/) compiled against Spark's
# jars, with the native half (this crate, built release) inside it.
#
#   build-jar.sh OUT.jar [PYTHON]   build the jar (make setup: with PYTHON; the wheel: without)
#   build-jar.sh --resolve          fetch Spark's jars from Maven into its local repository
#
# Spark's jars: with PYTHON, those of its pyspark installation (make setup: the development
# environment has them); without, spark-sql of the version requirements-dev.txt pins for pyspark,
# and what it depends on, from Maven Central through `mvn` (a first run downloads about 300 MB
# into ~/.m2; later ones work offline). SEQBUS_JAR_GLIBC=2.28 builds the native half with
# cargo-zigbuild against that glibc's symbols (the wheel's, scripts/backend/seqbus_build.py);
# unset, with cargo and the machine's linker. A jar built before from the same inputs (the
# Java sources, the native library, Spark's version) is reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/rust/target}
work=$target/spark-jar
spark=$(sed -n 's/^pyspark==\([0-9.]*\).*/\1/p' "$root/requirements-dev.txt")
[[ -n $spark ]] || { echo "build-jar: no pyspark==VERSION line in requirements-dev.txt" >&2; exit 1; }

# Spark's compile classpath from Maven (offline first: the local repository usually has it)
maven_classpath() {
  command -v mvn >/dev/null 2>&1 || { echo "build-jar: mvn (Maven) is needed to fetch Spark's jars" >&2; return 1; }
  mkdir -p "$work/maven"
  cat > "$work/maven/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>seqbus</groupId>
  <artifactId>seqbus-spark-classpath</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql_2.13</artifactId>
      <version>$spark</version>
    </dependency>
  </dependencies>
</project>
EOF
  local goal=(org.apache.maven.plugins:maven-dependency-plugin:3.8.1:build-classpath
              -Dmdep.outputFile="$work/maven/classpath" -Dmdep.includeScope=compile)
  rm -f "$work/maven/classpath"
  if ! mvn -q -B -o -Dstyle.color=never -f "$work/maven/pom.xml" "${goal[@]}" >"$work/maven/log" 2>&1; then
    echo "build-jar: Spark $spark's jars are not all in Maven's local repository: fetching them" >&2
    mvn -q -B -Dstyle.color=never -f "$work/maven/pom.xml" "${goal[@]}" >"$work/maven/log" 2>&1 \
      || { cat "$work/maven/log" >&2; echo "build-jar: mvn could not resolve spark-sql_2.13:$spark" >&2; return 1; }
  fi
  cat "$work/maven/classpath"
}

if [[ ${1:-} == --resolve ]]; then
  maven_classpath >/dev/null
  echo "build-jar: Spark $spark's jars are in Maven's local repository"
  exit 0
fi
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: build-jar.sh OUT.jar [PYTHON] | build-jar.sh --resolve" >&2; exit 2; }
out=$1
py=${2:-}
if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
  echo "build-jar: javac and jar (a JDK 17 or newer) are needed to build the Spark source" >&2
  exit 1
fi

if [[ -n ${SEQBUS_JAR_GLIBC:-} ]]; then
  command -v cargo-zigbuild >/dev/null 2>&1 \
    || { echo "build-jar: SEQBUS_JAR_GLIBC needs cargo-zigbuild (requirements-build.txt)" >&2; exit 1; }
  (cd "$root/rust" && cargo-zigbuild zigbuild --release -q -p seqbus-spark \
     --target "x86_64-unknown-linux-gnu.$SEQBUS_JAR_GLIBC")
  lib=$target/x86_64-unknown-linux-gnu/release/libseqbus_spark.so
else
  (cd "$root/rust" && cargo build --release -q -p seqbus-spark)
  lib=$target/release/libseqbus_spark.so
fi

mkdir -p "$work"
# one build at a time in this work directory (two wheel builds may run at once)
exec 9>"$work.lock"
flock 9
# what the jar is made of: reuse the last one when nothing changed
inputs=$( { echo "spark $spark glibc ${SEQBUS_JAR_GLIBC:-host} classpath-from ${py:+pyspark}";
            cd "$here" && find java -type f | LC_ALL=C sort | xargs sha256sum;
            sha256sum "$lib"; } | sha256sum | cut -d' ' -f1)
if [[ -f $work/seqbus-spark.jar && $(cat "$work/inputs" 2>/dev/null) == "$inputs" ]]; then
  mkdir -p "$(dirname "$out")"
  cp "$work/seqbus-spark.jar" "$out.tmp" && mv "$out.tmp" "$out"
  echo "build-jar: $out (unchanged since the last build)"
  exit 0
fi

if [[ -n $py ]]; then
  jars=$("$py" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  classpath="$jars/*"
else
  classpath=$(maven_classpath)
fi
rm -rf "$work/classes" "$work/seqbus-spark.jar" "$work/inputs"
mkdir -p "$work/classes/seqbus/spark/native" "$work/classes/META-INF/services"
javac --release 17 -Xlint:all,-serial,-processing,-options,-path -Werror -cp "$classpath" \
  -d "$work/classes" $(find "$here/java" -name '*.java')
cp "$here/java/META-INF/services/"* "$work/classes/META-INF/services/"
# the library without its debug information (10 MB with it)
objcopy --strip-debug "$lib" "$work/classes/seqbus/spark/native/libseqbus_spark.so" 2>/dev/null \
  || cp "$lib" "$work/classes/seqbus/spark/native/libseqbus_spark.so"
jar --create --file "$work/seqbus-spark.jar" -C "$work/classes" .
echo "$inputs" > "$work/inputs"
mkdir -p "$(dirname "$out")"
cp "$work/seqbus-spark.jar" "$out.tmp" && mv "$out.tmp" "$out"
echo "built $out"

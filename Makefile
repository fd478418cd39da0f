# seqbus developer commands. `make help` lists them. The README's two commands are
# `make demo` and `make test`; each does its own set-up.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3.11
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
export CARGO_TARGET_DIR := $(CURDIR)/rust/target
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)
CARGO := cargo
SITE = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

.PHONY: test-java java-tool bench-java
.PHONY: test-cpp cpp-tool fuzz-cpp bench-cpp
.PHONY: build-nodes test-nodes
.PHONY: help fuzz setup venv ext spark-jar generate generated-build check-generated system-deps fmt lint \
        test test-rust test-python typecheck bench demo clean wheels wheelhouse stress

help: ## list every target
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

setup: venv ext generated-build spark-jar ## everything a fresh machine needs: .venv, Rust extension, compiled generated code, the Spark source

venv: $(VENV)/.deps-stamp
$(VENV)/.deps-stamp: requirements-dev.txt compiler/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-build-isolation -e compiler
	@touch $@

ext: venv ## build the Rust core into the venv (seqbus._core)
	cd $(CURDIR) && $(VENV)/bin/maturin develop --release -q

spark-jar: venv ## build the Spark source (JVM + its native decoder) into runtime/seqbus/spark/jars/
	bash rust/crates/spark/build-jar.sh runtime/seqbus/spark/jars/seqbus-spark.jar $(PY)

generate: venv ## regenerate every generated file (table in scripts/generate.py): seqbus.bus, the examples' messages, generated/rust
	$(PY) scripts/generate.py

# Cython modules compiled in place: the codec support and bus schema inside seqbus, the examples'
CYTHON_DIRS := runtime/seqbus examples

generated-build: venv ## compile the committed Cython (seqbus.bus, examples/*/messages) in place
	$(VENV)/bin/seqc build $(CYTHON_DIRS)
	@rm -f "$(SITE)/seqbus-generated.pth"  # older checkouts put generated/python on the path

check-generated: venv ## fail if any generated file differs from what seqc makes today
	$(PY) scripts/generate.py --check

system-deps: ## Debian packages the tests use (tshark, nftables), when missing and we are root
	@bash scripts/system-deps.sh

fmt: venv ## format Rust and Python
	cd rust && $(CARGO) fmt --all
	$(VENV)/bin/ruff format runtime compiler tests benchmarks

lint: venv ## ruff, rustfmt --check, clippy -D warnings, mypy --strict
	$(VENV)/bin/ruff check runtime compiler tests benchmarks examples
	cd rust && $(CARGO) fmt --all -- --check
	cd rust && $(CARGO) clippy --workspace --all-targets -- -D warnings
	$(MAKE) typecheck

typecheck: setup ## mypy --strict on the SDK, the compiler and the examples; stubtest: _core.pyi against the built extension
	$(VENV)/bin/mypy --strict runtime/seqbus compiler/seqc examples
	$(VENV)/bin/python -m mypy.stubtest seqbus._core

test-rust: ## cargo test of every crate
	cd rust && $(CARGO) test --workspace --exclude seqbus-py -q
	cd rust && $(CARGO) test -p seqbus-py --lib -q

test-python: setup system-deps wheelhouse ## pytest (inside a private network namespace, for multicast)
	bash scripts/in-netns.sh $(PY) -m pytest -q --durations=20

# The set-up `test` did once: its steps are not run again by each step of the recipe (-o)
SET_UP := -o setup -o venv -o ext -o generated-build -o spark-jar -o system-deps
test: setup system-deps ## every test: cargo test, generated-code check, mypy, pytest
	@date -u '+test: set up at %T'
	$(MAKE) $(SET_UP) test-rust
	@date -u '+test: test-rust done at %T'
	$(MAKE) $(SET_UP) check-generated
	$(MAKE) $(SET_UP) test-java
	@date -u '+test: test-java done at %T'
	$(MAKE) $(SET_UP) test-cpp
	@date -u '+test: test-cpp done at %T'
	$(MAKE) $(SET_UP) test-nodes NODES_ALONE=0  # seqbus-ffi's cargo tests ran in test-rust, tests/languages runs in test-python
	@date -u '+test: test-nodes done at %T'
	$(MAKE) $(SET_UP) typecheck
	@date -u '+test: typecheck done at %T'
	$(MAKE) $(SET_UP) test-python
	@date -u '+test: test-python done at %T'

# Maven, quiet and non-interactive; its downloads go to ~/.m2 (offline once they are there)
MVN ?= mvn -q -B -Dstyle.color=never
test-java: venv ## the Java codecs (runtime/java, Maven): compile generated/java, test vectors, malformed input, evolution; install seqbus-codec into ~/.m2
	$(MVN) -f runtime/java/pom.xml install

java-tool: venv ## build the Java codec tool (no tests); run: java -cp runtime/java/codec/target/classes:runtime/java/codec/target/test-classes seqbus.codec.tool.CodecTool PACKAGE
	$(MVN) -f runtime/java/pom.xml test-compile

# The C++ package (runtime/cpp, CMake) built with its tests under ASan/UBSan in var/build/cpp
CPP_BUILD := $(CURDIR)/var/build/cpp
CPP_CONFIGURE = cmake -S runtime/cpp -B $(CPP_BUILD) -DSEQBUS_SEQC=$(VENV)/bin/seqc >/dev/null
test-cpp: venv system-deps ## the C++ codecs (runtime/cpp, CMake, ASan/UBSan): GoogleTest (vectors, malformed input, evolution), the codec tool, a short fuzz run, find_package(seqbus) from an install prefix
	$(CPP_CONFIGURE)
	cmake --build $(CPP_BUILD) -j 2
	cd $(CPP_BUILD) && ctest --output-on-failure

# Nodes in C++ and Java (issue 31): the node library (rust/crates/ffi, a C ABI and the JNI
# functions over the Rust node client), the C++ node (runtime/cpp/node) with its tests, the
# seqbus package installed into a prefix, and the exchange examples built against it
NODES_BUILD := $(CURDIR)/var/build/nodes
build-nodes: venv ## the node library (libseqbus_ffi), the C++ node and its tests, the C++ and Java exchange examples (var/build/nodes)
	cd rust && $(CARGO) build --release -q -p seqbus-ffi
	cd rust && $(CARGO) build --release -q -p seqbus-net --bins
	cmake -S runtime/cpp -B $(NODES_BUILD)/cpp -DSEQBUS_BUILD_TESTS=OFF -DSEQBUS_BUILD_NODE_TESTS=ON \
		-DSEQBUS_SEQC=$(VENV)/bin/seqc -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(NODES_BUILD)/cpp -j 2
	cmake --install $(NODES_BUILD)/cpp --prefix $(NODES_BUILD)/prefix >/dev/null
	@# seqbus_generate reruns seqc when the .idl changes, not when seqc does: generate afresh
	rm -rf $(NODES_BUILD)/examples-cpp/exchange_messages
	cmake -S examples/exchange/cpp -B $(NODES_BUILD)/examples-cpp -DCMAKE_PREFIX_PATH=$(NODES_BUILD)/prefix \
		-DSEQBUS_SEQC=$(VENV)/bin/seqc -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(NODES_BUILD)/examples-cpp -j 2
	$(MVN) -f runtime/java/pom.xml -pl codec install -Dmaven.test.skip=true
	$(MVN) -f runtime/java/pom.xml -Pnodes -pl node install -DskipTests
	$(MVN) -f examples/exchange/java/pom.xml package -Dseqc=$(VENV)/bin/seqc
	echo "$(CURDIR)/examples/exchange/java/target/exchange-java-0.1.0.jar:$$(cat examples/exchange/java/target/classpath.txt)" \
		> $(NODES_BUILD)/java.classpath

NODES_ALONE ?= 1
test-nodes: build-nodes system-deps ## nodes in C++ and Java: the C ABI's tests, the C++ node's (GoogleTest) and the Java node's (JUnit) on a real bus, and tests/languages (Python, C++ and Java market-data instances on one bus); NODES_ALONE=0 leaves the C ABI's tests and tests/languages to test-rust and test-python
ifeq ($(NODES_ALONE),1)
	cd rust && $(CARGO) test -q -p seqbus-ffi
endif
	cd $(NODES_BUILD)/cpp/node && ctest --output-on-failure
	$(MVN) -f runtime/java/pom.xml -Pnodes -pl node test
ifeq ($(NODES_ALONE),1)
	bash scripts/in-netns.sh $(PY) -m pytest -q tests/languages
endif

cpp-tool: venv ## build the C++ codec tool (no tests); run: var/build/cpp/codec/seqbus-cpp-codec PACKAGE
	$(CPP_CONFIGURE)
	cmake --build $(CPP_BUILD) --target seqbus-cpp-codec -j 2

fuzz-cpp: venv ## fuzz the C++ decoders under ASan/UBSan with FUZZ_INPUTS inputs (FUZZ_SEED; not part of `make test`)
	$(CPP_CONFIGURE)
	cmake --build $(CPP_BUILD) --target seqbus-cpp-fuzz -j 2
	$(CPP_BUILD)/codec/seqbus-cpp-fuzz --vectors schemas/vectors --inputs $(FUZZ_INPUTS) --seed $(FUZZ_SEED)

BENCH_ROUNDS ?= 5
bench-java: venv ## JMH: the Java codecs beside SBE's in the same run, then by thread CPU time (benchmarks/java; BENCH_ROUNDS=5, BENCH_JVM=path/to/java; not part of `make test`)
	$(MVN) -f runtime/java/pom.xml install -DskipTests
	$(MVN) -f benchmarks/java/pom.xml package
	$(MVN) -f benchmarks/java/pom.xml exec:exec@bench -Dbench.args="$(BENCH_ROUNDS)" -Dbench.jvm="$(BENCH_JVM)"
	$(MVN) -f benchmarks/java/pom.xml exec:exec@cputime

bench-cpp: venv system-deps ## the C++ codecs beside SBE's C++ codecs in the same run (Google Benchmark; benchmarks/cpp, BENCH_REPETITIONS; not part of `make test`)
	bash benchmarks/cpp/run.sh

stress: ## `make test` 3 times in a row under two busy loops per core: PASS/FAIL per run (STRESS_RUNS, STRESS_LOAD; docs/testing.md)
	bash scripts/stress.sh

WHEELS ?= $(CURDIR)/dist
# The wheels are built in environments of their own, one per interpreter (.venv-build/3.X,
# requirements-build.txt), not in .venv: `make wheels` needs Rust, a C compiler, a JDK and Maven.
BUILD_ENV := $(CURDIR)/.venv-build
wheels: build-env ## the seqbus wheel of each CPython 3.11+ found and the seqc wheel into dist/ (WHEELS=DIR; docs/packaging.md)
	$(PYTHON) scripts/wheels.py build $(WHEELS)

build-env: $(BUILD_ENV)/.stamp ## the wheels' build environments (.venv-build/) and Spark's jars in Maven's local repository
$(BUILD_ENV)/.stamp: requirements-build.txt requirements-dev.txt scripts/wheels.py rust/crates/spark/build-jar.sh
	$(PYTHON) scripts/wheels.py env $(BUILD_ENV)
	@touch $@

WHEELHOUSE := $(CURDIR)/var/wheelhouse
export SEQBUS_WHEELHOUSE := $(WHEELHOUSE)
wheelhouse: $(WHEELHOUSE)/.stamp ## third-party wheels (and the build environments) the packaging tests use offline (pytest has no network)
$(WHEELHOUSE)/.stamp: requirements-dev.txt scripts/wheels.py $(BUILD_ENV)/.stamp
	$(PYTHON) scripts/wheels.py deps $(WHEELHOUSE)
	@touch $@

FUZZ_INPUTS ?= 1000000
FUZZ_SEED ?= 1
fuzz: ## every wire, journal and SoupBinTCP parser fuzzed with FUZZ_INPUTS inputs each (not part of `make test`)
	cd rust && SEQBUS_FUZZ_INPUTS=$(FUZZ_INPUTS) $(CARGO) test --release -p seqbus-wire --test fuzz -- --nocapture
	cd rust && SEQBUS_FUZZ_INPUTS=$(FUZZ_INPUTS) $(CARGO) test --release -p seqbus-journal --test journal -- --nocapture record_
	cd rust && SEQBUS_FUZZ_INPUTS=$(FUZZ_INPUTS) $(CARGO) test --release -p seqbus-transport --test fuzz_soupbin -- --nocapture

bench: setup ## every benchmark (not part of `make test`)
	bash scripts/in-netns.sh $(PY) -m benchmarks $(ARGS)

demo: setup ## the main job
	$(VENV)/bin/seqbus demo

clean: ## remove build products and the venv
	rm -rf $(VENV) $(BUILD_ENV) rust/target build dist var/wheelhouse compiler/build

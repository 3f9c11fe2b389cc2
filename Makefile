# Intents only; the build is CMake (CMakePresets.json). Every target that builds runs `deps`
# first, so `make demo` and `make test` work on a fresh Debian 12 machine as root.
SHELL := /bin/bash
.DEFAULT_GOAL := build

# Debian 12 packages the build, tests and benchmarks need (docs/DEPENDENCIES.md says why).
DEBIAN_PACKAGES := g++ cmake ninja-build ccache pkg-config clang libclang-rt-14-dev \
  libboost-dev libssl-dev openssl libsimdjson-dev nlohmann-json3-dev libcli11-dev \
  libfmt-dev libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev \
  zlib1g-dev libzstd-dev liburing-dev gzip zstd chromium

# Node.js and npm (Debian's, when the machine has no Node.js of its own: a Node.js from elsewhere
# brings its own npm, which Debian's npm package would conflict with). npm installs the report's
# charting library and the browser driver of its tests from package-lock.json into node_modules/.
NODE_PACKAGES := nodejs npm

# Only `make bench` needs these (docs/DEPENDENCIES.md): jq reads summary.json, time measures the
# client's CPU time and peak memory. nginx (optional: its figure is skipped when it cannot be
# installed) serves a prerendered stream; RUNLEVEL=1 keeps its package from starting the system
# service, since scripts/bench.sh runs its own nginx on loopback from a temporary folder.
BENCH_PACKAGES := jq time
BENCH_OPTIONAL_PACKAGES := nginx

JOBS ?= $(shell nproc)
# The sanitizer suite runs half again as many tests at once as there are cores: its tests
# wait on sockets, deadlines and child processes for about a quarter of their time (at -j 2 on 2
# cores they used 72% of the CPU), and none of them is wall-clock-sensitive (those are label timing).
ASAN_TEST_JOBS ?= $(shell echo $$(( $(JOBS) + ($(JOBS) + 1) / 2 )))
FUZZ_SECONDS ?= 10

.PHONY: deps bench-deps build demo test unit-test asan tsan fuzz bench format lint clean

deps:
	@missing=$$(for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root to install packages" >&2; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@if ! command -v npm >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root to install $(NODE_PACKAGES)" >&2; exit 1; fi; \
	  echo "make deps: installing $(NODE_PACKAGES)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(NODE_PACKAGES); \
	fi
	@if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
	  echo "make deps: npm ci (package-lock.json)"; npm ci --no-audit --no-fund --loglevel=error; \
	fi

build: deps
	cmake --preset release >/dev/null
	cmake --build build/release -j $(JOBS)

demo: build
	scripts/demo.sh build/release/bakeoff

# The whole suite, each test once. The sanitizer build (ASan+UBSan, clang) runs every test but
# the wall-clock-sensitive ones (label timing), which mean something only on an optimised,
# uninstrumented binary: those, the report pages in a browser and the schema checks run in the
# release build, which builds just what they need (release_suite). Last, a short fuzz run of the
# libFuzzer harnesses, which the sanitizer build compiles with the rest.
RELEASE_LABELS := ^(timing|browser|schema)$$
test: deps
	cmake --preset release >/dev/null
	cmake --build build/release -j $(JOBS) --target release_suite
	ctest --test-dir build/release --output-on-failure -j $(JOBS) -L '$(RELEASE_LABELS)'
	$(MAKE) --no-print-directory asan
	scripts/run_fuzzers.sh build/asan $(FUZZ_SECONDS)

# Every test in the release build alone (a quick check while working on a change).
unit-test: build
	ctest --test-dir build/release --output-on-failure -j $(JOBS)

# The sanitizer tree is configured afresh when it was made with another compiler (it was GCC
# before it was clang): CMake cannot switch a configured tree's compiler.
CONFIGURE_ASAN := grep -qs 'CMAKE_CXX_COMPILER:.*clang' build/asan/CMakeCache.txt || rm -rf build/asan; \
  cmake --preset asan >/dev/null

asan: deps
	@$(CONFIGURE_ASAN)
	cmake --build build/asan -j $(JOBS)
	ctest --test-dir build/asan --output-on-failure -j $(ASAN_TEST_JOBS) -LE '^timing$$'

tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build build/tsan -j $(JOBS)
	ctest --test-dir build/tsan --output-on-failure -j $(JOBS)

fuzz: deps
	@$(CONFIGURE_ASAN)
	cmake --build build/asan --target fuzzers -j $(JOBS)
	scripts/run_fuzzers.sh build/asan $(FUZZ_SECONDS)

bench-deps: deps
	@missing() { for p in "$$@"; do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done; }; \
	need=$$(missing $(BENCH_PACKAGES)); want=$$(missing $(BENCH_OPTIONAL_PACKAGES)); \
	if [ -n "$$need$$want" ] && [ "$$(id -u)" != 0 ]; then \
	  if [ -n "$$need" ]; then echo "make bench-deps: run as root to install" $$need >&2; exit 1; fi; \
	  echo "make bench-deps: not root, so $$want stays missing; its figures are skipped" >&2; exit 0; \
	fi; \
	export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1; \
	if [ -n "$$need$$want" ]; then echo "make bench-deps: installing" $$need $$want; apt-get update -qq; fi; \
	if [ -n "$$need" ]; then apt-get install -y -qq --no-install-recommends $$need || exit 1; fi; \
	if [ -n "$$want" ]; then apt-get install -y -qq --no-install-recommends $$want || \
	  echo "make bench-deps: $$want not installed; its figures are skipped" >&2; fi

# Micro-benchmarks, loopback macro-benchmarks, workload import, the emulated engine's simulator
# and server, report pages, and the client-memory soak (BENCH_SOAK_SECONDS, default 1800): the
# scenarios and text are bench/benchmarks.yaml, the measured facts docs/benchmarks.json, rendered
# into docs/BENCHMARKS.md (about 15 minutes plus the soak). One section: BENCH_ONLY=soak etc.
# (scripts/bench.sh) replaces only that section's results.
bench: build bench-deps
	scripts/bench.sh build/release

format:
	find src tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

# clang-tidy reads each source's own compile command, so its tree compiles file by file.
lint: deps
	cmake --preset release -B build/lint -DBAKEOFF_UNITY_BUILD=OFF >/dev/null
	run-clang-tidy -p build/lint -quiet src/ 2>/dev/null || clang-tidy -p build/lint $$(find src -name '*.cc')

clean:
	rm -rf build

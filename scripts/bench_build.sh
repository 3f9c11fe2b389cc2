#!/usr/bin/env bash
# scripts/bench_build.sh: the build section of `make bench`, run only when BENCH_ONLY names it
# (about 40 minutes, and it needs the machine to itself: every other job's CPU is the build's
# loss). Owns two figures of what a contributor and CI wait for:
#   cold  `make test` on a fresh clone of HEAD with an empty ccache;
#   warm  `make test` again in that clone after a one-line change in src/core/result.h (included,
#         directly or not, by nearly every source), with the ccache the cold run filled. The line
#         is a declaration, not a comment: a comment leaves every source's preprocessed text as it
#         was, so ccache would find it all cached, which no real change to a header allows.
# And where each run's time went: the compile span of each tree from ninja's log (.ninja_log: the
# first job's start to the last one's end), the CPU seconds its compiles took, and the test time
# ctest reports for each label set. Facts build.*. Checks: both runs exit 0 (a failing suite is a
# failure line, never a figure). The clone and the cache are temporary folders under TMPDIR.
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=build
root=$(cd "$(dirname "$0")/.." && pwd)
section_begin "$section"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clone=$work/clone
export CCACHE_DIR=$work/ccache
git clone --quiet --no-hardlinks "$root" "$clone"
fact_text "$section" build.commit "$(git -C "$clone" rev-parse --short HEAD)"
fact "$section" build.cold_command "git clone REPO CLONE && cd CLONE && CCACHE_DIR=\$(mktemp -d) make test"
fact "$section" build.warm_command "echo 'inline constexpr int kTouchedByBenchBuild = 1;' >> src/core/result.h && make test   (same clone, same CCACHE_DIR)"

# ninja_span TREE: the seconds from the first compile's start to the last one's end, and the sum
# of every job's duration, over the lines .ninja_log gained since it had SKIP lines.
ninja_span() {
  awk -v skip="$2" 'NR > skip && !/^#/ {
      if (first == "" || $1 < first) first = $1
      if ($2 > last) last = $2
      sum += $2 - $1
    } END { printf "%.0f %.0f\n", (last - first) / 1000, sum / 1000 }' "$clone/build/$1/.ninja_log"
}
log_lines() { [ -f "$clone/build/$1/.ninja_log" ] && wc -l <"$clone/build/$1/.ninja_log" || echo 0; }

# run_suite KIND: `make test` in the clone, timed; its facts are build.KIND_*.
run_suite() {
  local kind=$1 release_skip asan_skip started rc=0
  release_skip=$(log_lines release)
  asan_skip=$(log_lines asan)
  started=$(date +%s.%N)
  (cd "$clone" && make test) >"$work/$kind.log" 2>&1 || rc=$?
  fact "$section" "build.${kind}_s" "$(calc '%.0f' "$(date +%s.%N) - $started")"
  if [ "$rc" -ne 0 ]; then
    failure "$section" "$kind make test exited $rc: $(grep -m3 -E 'FAILED|Error|error:' "$work/$kind.log" | tr '\n' ' ')"
    return 1
  fi
  read -r span cpu < <(ninja_span release "$release_skip")
  fact "$section" "build.${kind}_release_compile_s" "$span"
  fact "$section" "build.${kind}_release_compile_cpu_s" "$cpu"
  read -r span cpu < <(ninja_span asan "$asan_skip")
  fact "$section" "build.${kind}_asan_compile_s" "$span"
  fact "$section" "build.${kind}_asan_compile_cpu_s" "$cpu"
  # ctest's "Total Test time (real)": the release labels first, then the sanitizer suite.
  mapfile -t test_times < <(sed -n 's/^Total Test time (real) = *\([0-9.]*\) sec.*/\1/p' "$work/$kind.log")
  fact "$section" "build.${kind}_release_tests_s" "${test_times[0]:-0}"
  fact "$section" "build.${kind}_asan_tests_s" "${test_times[1]:-0}"
  fact "$section" "build.${kind}_tests" "$(grep -c ' Passed ' "$work/$kind.log" || true)"
}

if run_suite cold; then
  echo 'inline constexpr int kTouchedByBenchBuild = 1;' >>"$clone/src/core/result.h"
  run_suite warm || true
fi
section_end "$section"
exit 0
}

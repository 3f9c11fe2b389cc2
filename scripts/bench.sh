#!/usr/bin/env bash
# scripts/bench.sh: `make bench`. Owns running the benchmark sections and rendering their results:
# each section's script measures and writes fact lines (scripts/bench_lib.sh); bakeoff_bench_doc
# then merges them into docs/benchmarks.json (a section that ran replaces its old results, the
# others stay) and renders docs/BENCHMARKS.md from bench/benchmarks.yaml, where the scenarios,
# targets, tables and prose live (benchdoc/benchmarks_doc.h). The sections:
#   micro    Google Benchmark micro-benchmarks (bench/, bakeoff_micro_bench)    scripts/bench_micro.sh
#   macro    `bakeoff bench` against `bakeoff emulate` and nginx on loopback     scripts/bench_macro.sh
#   workload `bakeoff fingerprint` on 2 and 10 million generated trace rows     scripts/bench_workload.sh
#   emulator the simulator and the real-time emulated engine                    scripts/bench_emulator.sh
#   report   report pages of a 1,000,000-request run against 10,000             scripts/bench_report.sh
#   soak     the client's memory over a long open loop                          scripts/bench_soak.sh
#   twin     calibrate + validate against BENCH_TWIN_URL and the emulator (only   scripts/bench_twin.sh
#            when BENCH_ONLY names it)
#   build    `make test` on a clean clone, cold and after a header change (only   scripts/bench_build.sh
#            when BENCH_ONLY names it: ~40 min with the machine to itself)
# Every figure is checked before it is reported (all requests ok, the expected token counts, the
# expected fingerprint...); a failed check is a failure line in the document and exit status 1.
# Everything listens on 127.0.0.1 and every run is bounded by a timeout.
#
# Usage: scripts/bench.sh [BUILD_DIR]   (default build/release)
# Environment: BENCH_ONLY (sections, comma-separated; default all), BAKEOFF_BENCH_DOC (default
#   docs/BENCHMARKS.md) and BAKEOFF_BENCH_RESULTS (default benchmarks.json beside the document,
#   started from docs/benchmarks.json when absent), BAKEOFF_BENCH_SECONDS (measurement window of
#   the closed-loop macro runs, default 8), BAKEOFF_BENCH_REPEAT (runs of each repeated figure,
#   default 3), BAKEOFF_BENCH_KEEP=1 (keep the work folder), BENCH_REPORT_REQUESTS (default
#   1,000,000), BENCH_SOAK_SECONDS (default 1800), BENCH_SOAK_SAMPLE_SECONDS (default 5), BENCH_TWIN_URL (twin:
#   a server on loopback), BENCH_TWIN_WHAT (twin: the engine's build, model and flags, in words),
#   BENCH_BASELINE_BAKEOFF (macro: an earlier commit's bakeoff binary, whose client (b) runs in
#   turn with this one's; the note under (b) in docs/BENCHMARKS.md says how to build one) and
#   BENCH_BASELINE_WHAT (macro: that commit, in words).
# Time and disk: micro + macro ~4 min; workload ~2.5 min and ~1.7 GB under TMPDIR; emulator ~2 min;
#   report ~5 min and ~3 GB; twin ~15 min; soak BENCH_SOAK_SECONDS plus a minute and ~0.8 KB per request. To try
#   one section: BENCH_ONLY=workload BAKEOFF_BENCH_DOC=/tmp/b.md scripts/bench.sh build/release
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{

build=${1:-build/release}
root=$(cd "$(dirname "$0")/.." && pwd)
all_sections="macro micro workload emulator report soak twin build"
# twin needs an engine the user started (BENCH_TWIN_URL), and build the machine to itself for
# ~40 minutes, so only BENCH_ONLY=twin / BENCH_ONLY=build runs them.
default_sections="macro micro workload emulator report soak"
only=${BENCH_ONLY:-${default_sections// /,}}
# The macro section's notes quote the micro-benchmarks' figures of the same run.
case ",$only," in *,macro,*) only="$only,micro" ;; esac
for section in ${only//,/ }; do
  case " $all_sections " in *" $section "*) ;; *)
    echo "bench: BENCH_ONLY: unknown section '$section' ($all_sections)" >&2; exit 2 ;;
  esac
done
for tool in jq /usr/bin/time timeout awk; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make bench-deps installs it)" >&2; exit 1; }
done
for file in "$build/bakeoff" "$build/bench/bakeoff_micro_bench" "$build/bench/bakeoff_sim_bench" "$build/bench/bakeoff_bench_doc"; do
  [ -x "$file" ] || { echo "bench: $file not built (make build)" >&2; exit 1; }
done

doc=${BAKEOFF_BENCH_DOC:-docs/BENCHMARKS.md}
results=${BAKEOFF_BENCH_RESULTS:-$(dirname "$doc")/benchmarks.json}
[ -f "$results" ] || [ ! -f "$root/docs/benchmarks.json" ] || cp "$root/docs/benchmarks.json" "$results"

work=$(mktemp -d "${TMPDIR:-/tmp}/bakeoff-bench.XXXXXX")
merged=0
cleanup() {
  # What was measured is never lost: facts not yet merged into the results are kept beside them.
  if [ "$merged" = 0 ] && [ -s "$work/facts.jsonl" ]; then
    cp "$work/facts.jsonl" "$results.unmerged.jsonl" && echo "bench: the facts measured so far are in $results.unmerged.jsonl" >&2
  fi
  if [ "${BAKEOFF_BENCH_KEEP:-0}" = 1 ]; then echo "bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Run copies, so a rebuild of the shared build folder during the run cannot swap the binaries; the
# commands in the document name the build folder's paths, which is where they came from.
mkdir -p "$work/bin"
for tool in bakeoff bench/bakeoff_micro_bench bench/bakeoff_sim_bench bench/bakeoff_bench_doc; do cp "$build/$tool" "$work/bin/"; done
export BAKEOFF_BENCH_FACTS=$work/facts.jsonl BAKEOFF_BENCH_SPEC=$root/bench/benchmarks.yaml
export BAKEOFF_BENCH_DOC_TOOL=$work/bin/bakeoff_bench_doc BAKEOFF_BENCH_BUILD=$build BAKEOFF_BENCH_BIN=$work/bin
: >"$BAKEOFF_BENCH_FACTS"
# 10,000 open streams need 10,000 descriptors in the client and as many in the emulator.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

status=0
for section in $all_sections; do
  case ",$only," in *",$section,"*) ;; *) continue ;; esac
  echo "bench: section $section (scripts/bench_$section.sh)" >&2
  mkdir -p "$work/$section"
  rc=0
  TMPDIR=$work/$section "$root/scripts/bench_$section.sh" || rc=$?
  if [ "$rc" != 0 ]; then
    # A script that died still leaves a section in the results, saying so (never the old figures).
    status=1
    grep -q "\"section\":\"$section\"" "$BAKEOFF_BENCH_FACTS" ||
      jq -nc --arg s "$section" '{section: $s, key: "run.bench_only", value: "died"}' >>"$BAKEOFF_BENCH_FACTS"
    jq -nc --arg s "$section" --arg m "scripts/bench_$section.sh exited $rc (its stderr is above)" \
      '{section: $s, failure: $m}' >>"$BAKEOFF_BENCH_FACTS"
  fi
done

rendered=0
"$work/bin/bakeoff_bench_doc" render "$BAKEOFF_BENCH_SPEC" "$results" "$doc" --add "$BAKEOFF_BENCH_FACTS" || rendered=$?
case $rendered in
  0) merged=1 ;;
  3) merged=1; echo "bench: $doc has holes the results could not fill (above)" >&2; status=1 ;;
  4) merged=1; echo "bench: figures moved beyond bench/benchmarks.yaml's moved_tolerance from docs/benchmarks.json (above)" >&2; status=1 ;;
  *) echo "bench: could not render $doc" >&2; exit 1 ;;
esac
echo "bench: wrote $doc and $results" >&2
exit "$status"
}

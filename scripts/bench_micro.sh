#!/usr/bin/env bash
# scripts/bench_micro.sh: the micro section of `make bench` (scripts/bench.sh runs it). Owns
# running bakeoff_micro_bench (Google Benchmark, bench/) once and recording the median aggregate of
# each field bench/benchmarks.yaml's `fields` scenario names as a fact; a benchmark that computed a
# wrong answer (error_occurred) or reported no median is a failure.
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=micro
scenarios "$section"
section_begin "$section"
micro=$BAKEOFF_BENCH_BIN/bakeoff_micro_bench
work=$(mktemp -d)
# shellcheck disable=SC2154,SC2086  # args and fields come from the spec; args split on purpose
fact "$section" micro.command "$BAKEOFF_BENCH_BUILD/bench/bakeoff_micro_bench $args --benchmark_out=micro.json --benchmark_out_format=json"
# shellcheck disable=SC2086
if ! "$micro" $args --benchmark_out="$work/micro.json" --benchmark_out_format=json >"$work/micro.txt" 2>&1; then
  failure "$section" "bakeoff_micro_bench exited non-zero ($(tail -n 3 "$work/micro.txt" | tr '\n' ' '))"
else
  errors=$(jq -r '[.benchmarks[] | select(.error_occurred == true) | "\(.name): \(.error_message)"] | join("; ")' "$work/micro.json")
  [ -z "$errors" ] || failure "$section" "a micro-benchmark answered wrong: $errors"
  # Each `fact=BENCHMARK:FIELD` of the spec: the median aggregate's field (rates use CPU time).
  for spec in $fields; do
    key=${spec%%=*} rest=${spec#*=}
    value=$(jq -r --arg n "${rest%:*}_median" --arg f "${rest##*:}" '.benchmarks[] | select(.name == $n) | .[$f]' "$work/micro.json")
    if [ -z "$value" ] || [ "$value" = null ]; then
      failure "$section" "micro-benchmark ${rest%:*} reported no median ${rest##*:}"
    else
      fact "$section" "micro.$key" "$value"
    fi
  done
fi
rm -rf "$work"
section_end "$section"
exit 0
}

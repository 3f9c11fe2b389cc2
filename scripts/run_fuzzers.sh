#!/usr/bin/env bash
# Runs every libFuzzer harness built in $1 for $2 seconds each on its seed corpus (a copy, so the
# checked-in corpus only changes on purpose). Any crash fails the run.
set -euo pipefail
build_dir=$1
seconds=${2:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
shopt -s nullglob
ran=0
for harness in "$build_dir"/tests/fuzz/fuzz_*; do
  [ -x "$harness" ] || continue
  name=$(basename "$harness")
  name=${name#fuzz_}
  work=$(mktemp -d)
  if [ -d "$root/tests/fuzz/corpus/$name" ]; then cp -r "$root/tests/fuzz/corpus/$name/." "$work/"; fi
  echo "fuzz: $name for ${seconds}s"
  "$harness" -max_total_time="$seconds" -print_final_stats=0 "$work" 2>&1 | tail -n 2
  rm -rf "$work"
  ran=$((ran + 1))
done
echo "fuzz: $ran harnesses ran without a crash"

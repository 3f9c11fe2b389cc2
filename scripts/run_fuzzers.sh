#!/usr/bin/env bash
# Runs every libFuzzer harness built in $1 for $2 seconds each on its seed corpus (a copy, so the
# checked-in corpus only changes on purpose), $3 harnesses at a time (default: the machine's
# cores). Any crash fails the run, with the harness's output.
set -euo pipefail
build_dir=$1
seconds=${2:-10}
parallel=${3:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

fuzz_one() {
  local harness=$1 name work rc=0
  name=$(basename "$harness")
  name=${name#fuzz_}
  work=$(mktemp -d)
  if [ -d "$root/tests/fuzz/corpus/$name" ]; then cp -r "$root/tests/fuzz/corpus/$name/." "$work/"; fi
  "$harness" -max_total_time="$seconds" -print_final_stats=0 "$work" >"$logs/$name.log" 2>&1 || rc=$?
  rm -rf "$work"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $name FAILED (exit $rc):"
    tail -n 40 "$logs/$name.log"
    return 1
  fi
  echo "fuzz: $name for ${seconds}s: $(tail -n 1 "$logs/$name.log")"
}

shopt -s nullglob
harnesses=()
for harness in "$build_dir"/tests/fuzz/fuzz_*; do
  [ -x "$harness" ] && harnesses+=("$harness")
done
running=0 failed=0
for harness in "${harnesses[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$harness" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
[ "$failed" -eq 0 ] || { echo "fuzz: a harness crashed (above)"; exit 1; }
echo "fuzz: ${#harnesses[@]} harnesses ran without a crash"

#!/usr/bin/env bash
# The report pages in a real browser: makes one page of each kind with the built binary (a
# simulate sweep, a bench against `bakeoff emulate` on 127.0.0.1 with its metrics scraped, a
# compare of two runs, the demo study's bundle and the pooling example's), then opens each in headless Chromium with
# networking off (check_pages.mjs). Screenshots stay in OUT/screenshots. Everything is bounded:
# the emulator is stopped on exit and every command has a timeout.
# Usage: report_pages_test.sh BAKEOFF SOURCE_DIR OUT
set -euo pipefail
bakeoff=$1 src=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
emulator_pid=
cleanup() { if [ -n "$emulator_pid" ]; then kill "$emulator_pid" 2>/dev/null || true; wait "$emulator_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT

sim() { timeout 120 "$bakeoff" simulate --requests 300 --prompt-tokens 400 --output-tokens 80 --rate 3,6,12 \
          --slo ttft_p99=500ms,tpot_p99=40ms --seed 3 "$@" >/dev/null; }
sim --preset continuous-paged --out "$out/sim-old"
sim --preset radix-lpm --out "$out/sim-new"
sim --preset continuous-paged --keep summary --out "$out/sim-summary-only"
status=0
timeout 60 "$bakeoff" compare "$out/sim-old" "$out/sim-new" --out "$out/compare" >/dev/null || status=$?
[ "$status" -eq 0 ] || [ "$status" -eq 4 ] || { echo "compare exited $status" >&2; exit 1; }

timeout 60 "$bakeoff" emulate --port 0 --host 127.0.0.1 >"$out/emulate.log" 2>&1 &
emulator_pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/emulate.log" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "the emulator did not start: $(cat "$out/emulate.log")" >&2; exit 1; }
timeout 120 "$bakeoff" bench --url "$url" --rate 20,40 --requests 60 --prompt-tokens 200 --output-tokens 40 \
  --metrics-interval 200ms --out "$out/bench" >/dev/null
cleanup
emulator_pid=

(cd "$src" && DEMO_OUT="$out/study" timeout 300 scripts/demo.sh "$bakeoff" >"$out/study.log" 2>&1) ||
  { echo "the demo study failed: $(tail -5 "$out/study.log")" >&2; exit 1; }
timeout 120 "$bakeoff" run "$src/examples/pooling/study.yaml" --out "$out/pooling" >"$out/pooling.log" 2>&1 ||
  { echo "the pooling study failed: $(tail -5 "$out/pooling.log")" >&2; exit 1; }

cd "$src"
timeout 180 node tests/browser/check_pages.mjs "$out/screenshots" \
  "$out/sim-old/report.html=simulate" "$out/bench/report.html=bench" \
  "$out/sim-summary-only/report.html=simulate-summary-only" \
  "$out/compare/compare.html=compare" "$out/study/report.html=study" \
  "$out/pooling/report.html=pooling-study"

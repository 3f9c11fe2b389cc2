#!/usr/bin/env bash
# `make demo`: starts the emulated engine on a free loopback port, runs a short open-loop rate
# sweep against it with `bakeoff bench`, prints the table and the output folder, and stops the
# emulator. Then it asks the simulator the same question on the virtual clock, and a what-if:
# twice the rate on two replicas. Everything stays on 127.0.0.1 and ends by itself.
set -euo pipefail
bakeoff=${1:-build/release/bakeoff}
out=${DEMO_OUT:-out/demo}
log=$(mktemp)
cleanup() {
  if [ -n "${emulator_pid:-}" ]; then kill -INT "$emulator_pid" 2>/dev/null || true; wait "$emulator_pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT

"$bakeoff" emulate --host 127.0.0.1 --port 0 --preset continuous-paged >"$log" 2>&1 &
emulator_pid=$!
url=""
for _ in $(seq 1 100); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -n 1 || true)
  [ -n "$url" ] && break
  kill -0 "$emulator_pid" 2>/dev/null || { cat "$log" >&2; echo "demo: emulator exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$log" >&2; echo "demo: emulator did not start" >&2; exit 1; }
echo "demo: emulated engine at $url"

rm -rf "$out"
"$bakeoff" bench --url "$url" --rate 4,8,16 --duration 5s --warmup 1s \
  --prompt-tokens 256 --output-tokens 64 --slo ttft_p99=500ms,tpot_p99=60ms --out "$out"
echo "demo: output folder $out (summary.json, records.jsonl)"

echo
echo "demo: the same sweep on the virtual clock (bakeoff simulate, same preset and seed)"
"$bakeoff" simulate --preset continuous-paged --rate 4,8,16 --duration 5s --warmup 1s \
  --prompt-tokens 256 --output-tokens 64 --slo ttft_p99=500ms,tpot_p99=60ms --out "$out-simulated"
echo
echo "demo: what if the traffic doubled and we ran two replicas behind least-outstanding routing?"
"$bakeoff" simulate --preset continuous-paged --replicas 2 --router least-outstanding --rate 8,16,32 \
  --duration 5s --warmup 1s --prompt-tokens 256 --output-tokens 64 --slo ttft_p99=500ms,tpot_p99=60ms \
  --out "$out-two-replicas"

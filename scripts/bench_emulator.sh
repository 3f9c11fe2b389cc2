#!/usr/bin/env bash
# scripts/bench_emulator.sh: the "emulated engine" section of `make bench` (scripts/bench.sh runs
# it and includes what it writes). Owns two benchmarks of issue 3:
#   (e1) the virtual-clock simulator on one core: bakeoff_sim_bench, 1,000,000 requests of about
#        500 prompt and 200 output tokens at 70% of the preset's measured capacity; baseline in
#        the same run: only making those requests;
#   (e2) the real-time emulator on one core (taskset), with `bakeoff bench` on the other core:
#        concurrent streams, token events per second, the server's CPU share and its own step lag
#        (bakeoff_emulate_step_lag_seconds from /metrics), at a realistic preset and at step costs
#        small enough that the emulator's own work is the limit.
# Everything listens on 127.0.0.1 and stops by itself (timeouts on every run).
# Usage: scripts/bench_emulator.sh BUILD_DIR BAKEOFF_BINARY OUT_MARKDOWN_FRAGMENT
# Exit status 1 when a figure failed its checks (the fragment says which).
set -euo pipefail
build=$1
bakeoff=$2
fragment=$3
root=$(cd "$(dirname "$0")/.." && pwd)
sim_bench=$build/bench/bakeoff_sim_bench
preset=$root/examples/engines/continuous-paged.yaml
work=$(mktemp -d "${TMPDIR:-/tmp}/bakeoff-bench-emulator.XXXXXX")
server_pid=""
failed=0
rows=()
notes=()
cleanup() {
  if [ -n "$server_pid" ]; then kill -INT "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
log() { echo "bench(emulator): $*" >&2; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# (e1) ------------------------------------------------------------------------------------------
sim_cmd="$sim_bench --requests 1000000 --load 0.7 --preset examples/engines/continuous-paged.yaml"
log "$sim_cmd"
if out=$(timeout 300 "$sim_bench" --requests 1000000 --load 0.7 --preset "$preset"); then
  cpu=$(jq -r .cpu_s <<<"$out")
  status=$(awk -v c="$cpu" 'BEGIN { print (c < 30) ? "met" : "**short**" }')
  rows+=("| (e1) simulator: 1,000,000 requests (450-550 in, 150-250 out), one core | < 30 CPU-s | $(calc %.1f "$cpu") CPU-s, $(jq -r .requests_per_cpu_s <<<"$out") requests/CPU-s | $(jq -r .ratio_to_baseline <<<"$out")x making the requests alone ($(jq -r .baseline_make_only_cpu_s <<<"$out") CPU-s) | $status | \`$sim_cmd\` |")
  notes+=("**(e1) simulator.** Preset \`$(jq -r .preset <<<"$out")\`; its capacity, measured first by a closed loop of 20,000 requests at max_num_seqs, is $(jq -r .capacity_per_s <<<"$out") requests per simulated second, so the open loop ran Poisson at $(jq -r .rate_per_s <<<"$out")/s and covered $(jq -r .simulated_s <<<"$out") simulated seconds: $(jq -r .speedup_over_real_time <<<"$out")x faster than real time. Checked: all $(jq -r .finished <<<"$out") requests finished with their max_tokens. Token instants are not kept (\`keep_token_times = false\`); \`bakeoff simulate\` keeps them for its records, so it is slower and its memory grows with the tokens (docs/simulator.md).")
else
  failed=1
  rows+=("| (e1) simulator | < 30 CPU-s | FAILED | | FAILED | \`$sim_cmd\` |")
fi

# (e2) ------------------------------------------------------------------------------------------
# Starts `bakeoff emulate` pinned to CPU 0 with the given extra flags; sets url and server_pid.
start_server() {
  "$@" >"$work/server.log" 2>&1 &
  server_pid=$!
  url=""
  for _ in $(seq 1 100); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/server.log" | head -n 1 || true)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  return 1
}
stop_server() {
  kill -INT "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
# GET /metrics over bash's /dev/tcp (no HTTP client needed); HTTP/1.0, so the server closes.
fetch_metrics() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  timeout 10 cat <&3
  exec 3<&-
}
# Upper bound of the q-quantile of a Prometheus histogram in ms: the first `le` whose cumulative
# count reaches q of the total.
histogram_quantile_ms() {
  local metrics=$1 name=$2 q=$3
  awk -v name="$name" -v q="$q" '
    $0 ~ "^"name"_bucket" { match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); n++; les[n] = le; counts[n] = $NF }
    $0 ~ "^"name"_count" { total = $NF }
    END { for (i = 1; i <= n; i++) if (counts[i] >= q * total) { if (les[i] == "+Inf") print "inf"; else printf "%.2f", les[i] * 1000; exit } }' "$metrics"
}

run_e2() {
  local label=$1 concurrency=$2 requests=$3 output=$4
  shift 4
  local server_cmd=("$@")
  if ! start_server taskset -c 0 "$bakeoff" emulate --port 0 "${server_cmd[@]}"; then
    failed=1; rows+=("| (e2) $label | | FAILED: the emulator did not start | | FAILED | |"); stop_server; return
  fi
  local ticks0 t0 ticks1 t1
  ticks0=$(cpu_ticks "$server_pid"); t0=$(date +%s.%N)
  local bench_cmd=(taskset -c 1 "$bakeoff" bench --url "$url" --concurrency "$concurrency" --requests "$requests"
                   --prompt-tokens 64 --output-tokens "$output" --ignore-eos --no-calibrate --out "$work/e2")
  if ! timeout 240 "${bench_cmd[@]}" >"$work/bench.log" 2>&1; then
    failed=1; rows+=("| (e2) $label | | FAILED: bench exited non-zero | | FAILED | |"); stop_server; return
  fi
  ticks1=$(cpu_ticks "$server_pid"); t1=$(date +%s.%N)
  fetch_metrics "${url##*:}" >"$work/metrics.txt"
  stop_server
  local summary=$work/e2/summary.json
  local ok tokens_per_s lag_p50 lag_p99 cpu_share tpot_p50
  ok=$(jq -r '.steps[0].requests.outcomes.ok // 0' "$summary")
  tokens_per_s=$(jq -r '.steps[0].throughput.output_tokens_per_s' "$summary")
  tpot_p50=$(jq -r '.steps[0].latency.tpot_ms.p50.value' "$summary")
  lag_p50=$(histogram_quantile_ms "$work/metrics.txt" bakeoff_emulate_step_lag_seconds 0.5)
  lag_p99=$(histogram_quantile_ms "$work/metrics.txt" bakeoff_emulate_step_lag_seconds 0.99)
  cpu_share=$(awk -v a="$ticks0" -v b="$ticks1" -v t0="$t0" -v t1="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / (t1 - t0) }')
  # Keeping the schedule: step lag p99 within 5 ms (the generator-limited threshold bench uses).
  local check
  check=$(awk -v l="$lag_p99" 'BEGIN { print (l != "inf" && l + 0 <= 5) ? "met" : "**short**" }')
  [ "$ok" = "$requests" ] || { check="FAILED ($ok of $requests ok)"; failed=1; }
  rows+=("| (e2) real-time emulator, $label: $concurrency streams | keeps its step schedule (step lag p99 <= 5 ms) | $(calc %.0f "$tokens_per_s") token events/s; step lag p50 <= $lag_p50 ms, p99 <= $lag_p99 ms; TPOT p50 $(calc %.2f "$tpot_p50") ms | server used $cpu_share% of its core | $check | \`bakeoff emulate --port 0 ${server_cmd[*]}\` on CPU 0; \`bakeoff bench --concurrency $concurrency --requests $requests --prompt-tokens 64 --output-tokens $output --ignore-eos --no-calibrate\` on CPU 1 |")
}

log "(e2) real-time emulator"
run_e2 "preset continuous-paged" 1024 2048 64 --preset continuous-paged --max-num-seqs 1024
run_e2 "step costs near zero" 1024 4096 128 --preset continuous-paged --max-num-seqs 1024 --base-ms 0.2 \
  --prefill-ms-per-token 0 --decode-ms-per-seq 0 --kv-ms-per-1k-tokens 0
notes+=("**(e2) real-time emulator.** One \`bakeoff emulate\` pinned to CPU 0 serves every stream; the client is pinned to CPU 1. Step lag is the server's own \`bakeoff_emulate_step_lag_seconds\` (how late each step's tokens left against the step's planned end, timer wake-up and writes included); its quantiles are bucket upper bounds. With the realistic preset a step of 1,024 decodes lasts tens of milliseconds, and the emulator spends a small share of its core writing the tokens; with near-zero step costs the steps are as short as the emulator can make them, so the token rate there is the emulator's ceiling on one core and the lag shows it falling behind its schedule.")

{
  echo "## Emulated engine: simulator and real-time server"
  echo
  echo "*Emulated*: these figures measure bakeoff's engine model and its server, never a real engine."
  echo
  echo "| figure | target | measured | against | status | command |"
  echo "|---|---|---|---|---|---|"
  for row in "${rows[@]}"; do echo "$row"; done
  echo
  echo "### Notes"
  echo
  for note in "${notes[@]}"; do echo "- $note"; echo; done
} >"$fragment"
exit "$failed"

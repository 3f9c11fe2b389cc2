#!/usr/bin/env bash
# scripts/bench_emulator.sh: the emulator section of `make bench` (scripts/bench.sh runs it). Owns
# two benchmarks of the emulated engine, with their parameters from bench/benchmarks.yaml:
#   (e1) the virtual-clock simulator on one core: bakeoff_sim_bench, 1,000,000 requests of about
#        500 prompt and 200 output tokens at 70% of the preset's measured capacity; its baseline in
#        the same run is only making those requests. Facts sim.*: every field it prints;
#   (e3) the same on a fleet of replicas (fleet_args: --replicas, --router). Facts fleet.*;
#   (e4) `bakeoff simulate` through the CLI, as a user runs it (simcli_args), records as its
#        default keeps them: wall and CPU time, peak memory, what it wrote. Facts cli.*;
#   (e2) the real-time emulator on one core (taskset), with `bakeoff bench` on the other core:
#        token events per second, the server's CPU share and its own step lag
#        (bakeoff_emulate_step_lag_seconds from /metrics), at a realistic preset (e2real) and at
#        step costs small enough that the emulator's own work is the limit (e2fast); and the
#        realistic preset again with the step's writes on two threads over both cores, the
#        client's core included (e2wide); and the realistic preset served on a Unix-domain socket
#        instead of TCP (e2unix), whose writes skip the TCP stack. e2realsys and e2unixsys are
#        e2real and e2unix with each step's sends one sendmsg a stream (--no-io-uring), the
#        baseline of the io_uring batches in the same invocation.
# Everything listens on 127.0.0.1 and stops by itself (timeouts on every run).
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=emulator
scenarios "$section"
section_begin "$section"
bakeoff=$BAKEOFF_BENCH_BIN/bakeoff
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT
log() { echo "bench(emulator): $*" >&2; }

# (e1) and (e3) -------------------------------------------------------------------------------
# One bakeoff_sim_bench run: its command as fact KEY.command, every field it prints as KEY.*.
sim_bench() {
  local key=$1 label=$2 args=$3
  fact "$section" "$key.command" "$BAKEOFF_BENCH_BUILD/bench/bakeoff_sim_bench $args"
  log "bakeoff_sim_bench $args"
  local out
  # shellcheck disable=SC2086  # the scenario's args split on purpose
  if out=$(cd "$root" && timeout 300 "$BAKEOFF_BENCH_BIN/bakeoff_sim_bench" $args); then
    jq -c --arg s "$section" --arg k "$key." 'to_entries[] | {section: $s, key: ($k + .key), value}' <<<"$out" \
      >>"$BAKEOFF_BENCH_FACTS"
  else
    failure "$section" "$label bakeoff_sim_bench exited non-zero"
  fi
}
# shellcheck disable=SC2154  # the scenarios come from the spec
sim_bench sim "(e1)" "$sim_args"
# shellcheck disable=SC2154
sim_bench fleet "(e3) on a fleet," "$fleet_args"

# (e4) ------------------------------------------------------------------------------------------
# `bakeoff simulate` as a user runs it, records as its default keeps them, timed by /usr/bin/time;
# checked: every request ok and the run labelled emulated.
simulate_cli() {
  local out=$work/e4
  fact "$section" "cli.command" "$BAKEOFF_BENCH_BUILD/bakeoff simulate $simcli_args --out DIR"
  log "bakeoff simulate $simcli_args"
  # shellcheck disable=SC2086  # the scenario's args split on purpose
  if ! (cd "$root" && /usr/bin/time -f "%e %U %S %M" -o "$work/e4.time" timeout 300 "$bakeoff" simulate $simcli_args \
    --out "$out" >"$work/e4.log" 2>&1); then
    failure "$section" "(e4) bakeoff simulate exited non-zero ($(tail -n 3 "$work/e4.log" | tr '\n' ' ' | cut -c1-300))"
    return
  fi
  local wall user sys rss_kb ok planned
  read -r wall user sys rss_kb <"$work/e4.time"
  ok=$(jq -r '.steps[0].requests.outcomes.ok // 0' "$out/summary.json")
  planned=$(grep -o -- '--requests [0-9]*' <<<"$simcli_args" | cut -d' ' -f2)
  if [ "$ok" != "$planned" ]; then failure "$section" "(e4) $ok of $planned requests ok"; return; fi
  if [ "$(jq -r '.target.emulated' "$out/summary.json")" != true ]; then
    failure "$section" "(e4) summary.json does not say emulated"; return
  fi
  fact "$section" "cli.requests" "$ok"
  fact "$section" "cli.wall_s" "$wall"
  fact "$section" "cli.cpu_s" "$(calc "%.2f" "$user + $sys")"
  fact "$section" "cli.peak_rss_mib" "$(calc "%.0f" "$rss_kb / 1024")"
  fact "$section" "cli.disk_mb" "$(calc "%.0f" "$(du -sb "$out" | cut -f1) / 1e6")"
  fact "$section" "cli.records_mode" "$(jq -r '.records_kept.mode' "$out/summary.json")"
  fact "$section" "cli.records_kept" "$(jq -r '[.records_kept.steps[].records] | add' "$out/summary.json")"
  rm -rf "$out"
}
simulate_cli

# (e2) ------------------------------------------------------------------------------------------
# GET /metrics from the server at URL: over bash's /dev/tcp (no HTTP client needed; HTTP/1.0, so
# the server closes), or on a Unix socket with Node's http module (a build dependency).
fetch_metrics() {
  if [[ $1 == http+unix://* ]]; then
    local encoded=${1#http+unix://} socket
    socket=$(printf '%b' "${encoded//%/\\x}")  # percent-decoded
    timeout 10 node -e 'require("http").get({socketPath: process.argv[1], path: "/metrics"}, (r) => r.pipe(process.stdout)).on("error", () => process.exit(1))' "$socket"
    return
  fi
  exec 3<>"/dev/tcp/127.0.0.1/${1##*:}"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  timeout 10 cat <&3
  exec 3<&-
}
# Upper bound of the q-quantile of a Prometheus histogram in ms: the first `le` whose cumulative
# count reaches q of the total ("inf" past the last finite bucket).
histogram_quantile_ms() {
  awk -v name="$2" -v q="$3" '
    $0 ~ "^"name"_bucket" { match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); n++; les[n] = le; counts[n] = $NF }
    $0 ~ "^"name"_count" { total = $NF }
    END { for (i = 1; i <= n; i++) if (counts[i] >= q * total) { if (les[i] == "+Inf") print "inf"; else printf "%.2f", les[i] * 1000; exit } }' "$1"
}

# run_e2 KEY SERVER_CPUS CONCURRENCY REQUESTS OUTPUT_TOKENS SERVER-ARGS...: the server listens on
# an ephemeral 127.0.0.1 port, or where SERVER-ARGS' --unix-socket says. Facts KEY.server_args,
# KEY.server_cpus, KEY.writes (io_uring batches or sendmsg, and why), KEY.client_args,
# KEY.output_tokens_per_s, KEY.tpot_p50_ms, KEY.step_lag_p50_ms / _p99_ms (bucket upper bounds;
# "inf" past the last), KEY.step_lag_mean_ms, KEY.server_cpu_pct
# (of one core) and KEY.server_cpu_ms_per_step / KEY.client_cpu_ms_per_step (CPU time over the
# server's steps; the client's whole run, start-up and report included); a failure unless every
# request was ok. The client runs on CPU 1.
run_e2() {
  local key=$1 cpus=$2 concurrency=$3 requests=$4 output=$5
  shift 5
  local listen=(--port 0)
  [[ " $* " == *" --unix-socket "* ]] && listen=()
  taskset -c "$cpus" "$bakeoff" emulate "${listen[@]}" "$@" >"$work/server.log" 2>&1 &
  server_pid=$!
  local url
  url=$(wait_for_url "$work/server.log" "$server_pid")
  if [ -z "$url" ]; then failure "$section" "($key) the emulator did not start"; stop_server; return; fi
  local client_args="--concurrency $concurrency --requests $requests --prompt-tokens 64 --output-tokens $output --ignore-eos --no-calibrate"
  local ticks0 t0 ticks1 t1
  ticks0=$(process_ticks "$server_pid"); t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # split on purpose
  if ! /usr/bin/time -f "%U %S" -o "$work/client_time.txt" timeout 240 taskset -c 1 "$bakeoff" bench --url "$url" $client_args --out "$work/$key" >"$work/bench.log" 2>&1; then
    failure "$section" "($key) bench exited non-zero ($(tail -n 3 "$work/bench.log" | tr '\n' ' ' | cut -c1-300))"; stop_server; return
  fi
  ticks1=$(process_ticks "$server_pid"); t1=$(date +%s.%N)
  if ! fetch_metrics "$url" >"$work/metrics.txt"; then
    failure "$section" "($key) GET /metrics failed"; stop_server; return
  fi
  stop_server
  local summary=$work/$key/summary.json ok
  ok=$(jq -r '.steps[0].requests.outcomes.ok // 0' "$summary")
  if [ "$ok" != "$requests" ]; then failure "$section" "($key) $ok of $requests requests ok"; return; fi
  fact "$section" "$key.server_args" "${*//$work\//}"
  fact "$section" "$key.server_cpus" "$cpus"
  # How the steps' sends went: the server says so after its listening line when not in batches.
  local writes="io_uring batches"
  if [[ " $* " == *" --no-io-uring "* ]]; then
    writes="one sendmsg a stream"
  elif grep -q "writes go one sendmsg each" "$work/server.log"; then
    writes="one sendmsg a stream: $(grep -o 'each ([^)]*)' "$work/server.log" | head -n 1)"
  fi
  fact "$section" "$key.writes" "$writes"
  fact "$section" "$key.client_args" "$client_args"
  fact "$section" "$key.concurrency" "$concurrency"
  fact "$section" "$key.output_tokens_per_s" "$(jq -r '.steps[0].throughput.output_tokens_per_s' "$summary")"
  fact "$section" "$key.tpot_p50_ms" "$(jq -r '.steps[0].latency.tpot_ms.p50.value' "$summary")"
  fact "$section" "$key.step_lag_p50_ms" "$(histogram_quantile_ms "$work/metrics.txt" bakeoff_emulate_step_lag_seconds 0.5)"
  fact "$section" "$key.step_lag_p99_ms" "$(histogram_quantile_ms "$work/metrics.txt" bakeoff_emulate_step_lag_seconds 0.99)"
  fact "$section" "$key.step_lag_mean_ms" "$(awk '/^bakeoff_emulate_step_lag_seconds_sum/ { s = $NF } /^bakeoff_emulate_step_lag_seconds_count/ { n = $NF } END { if (n > 0) printf "%.2f", 1000 * s / n }' "$work/metrics.txt")"
  local steps client_cpu_s
  steps=$(awk '/^bakeoff_emulate_step_lag_seconds_count/ { print $NF }' "$work/metrics.txt")
  client_cpu_s=$(awk '{ print $1 + $2 }' "$work/client_time.txt")
  fact "$section" "$key.server_cpu_ms_per_step" "$(calc "%.2f" "1000 * ($ticks1 - $ticks0) / $clk_tck / $steps")"
  fact "$section" "$key.client_cpu_ms_per_step" "$(calc "%.2f" "1000 * $client_cpu_s / $steps")"
  fact "$section" "$key.server_cpu_pct" "$(calc "%.0f" "100 * ($ticks1 - $ticks0) / $clk_tck / ($t1 - $t0)")"
}

log "(e2) real-time emulator"
# shellcheck disable=SC2086
run_e2 e2real 0 $e2real_load $e2real_server
# shellcheck disable=SC2086  # the baseline: one sendmsg a stream instead of io_uring batches
run_e2 e2realsys 0 $e2real_load $e2real_server --no-io-uring
# shellcheck disable=SC2086
run_e2 e2wide 0,1 $e2real_load $e2real_server --write-threads 2
# shellcheck disable=SC2086
run_e2 e2unix 0 $e2real_load $e2real_server --unix-socket "$work/e2.sock"
# shellcheck disable=SC2086
run_e2 e2unixsys 0 $e2real_load $e2real_server --unix-socket "$work/e2.sock" --no-io-uring
# shellcheck disable=SC2086
run_e2 e2fast 0 $e2fast_load $e2fast_server
section_end "$section"
exit 0
}

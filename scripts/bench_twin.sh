#!/usr/bin/env bash
# scripts/bench_twin.sh: the twin section of `make bench`, run only when asked (BENCH_ONLY=twin).
# Owns how close the calibrated twin comes to a real engine: `bakeoff calibrate` and then
# `bakeoff calibrate --validate` against the server at BENCH_TWIN_URL (one the user started
# themselves, on loopback; this script never builds or launches an engine), and the same against
# `bakeoff emulate` running known settings, in the same invocation, as the floor of the method's
# own error. Facts twin.engine.* and twin.emulated.*: what calibration found, the error of the
# preset's capacity and, per held-out load, the prediction error of throughput and median TTFT and
# TPOT. Without BENCH_TWIN_URL the engine's half is a failure (the emulated half still runs).
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=twin
scenarios "$section"
section_begin "$section"
bakeoff=$BAKEOFF_BENCH_BIN/bakeoff
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT
# shellcheck disable=SC2154  # calibrate_args, validate_args and baseline_server come from the spec
fact "$section" twin.calibrate "$BAKEOFF_BENCH_BUILD/bakeoff calibrate --url URL --out preset.yaml $calibrate_args"
fact "$section" twin.validate "$BAKEOFF_BENCH_BUILD/bakeoff calibrate --url URL --validate preset.yaml --out DIR $validate_args"

# twin KEY URL: calibrate, then validate; facts twin.KEY.*.
twin() {
  local key=$1 url=$2 dir=$work/$1
  mkdir -p "$dir"
  echo "bench(twin): calibrate $url" >&2
  # shellcheck disable=SC2086  # split on purpose
  if ! timeout 900 "$bakeoff" calibrate --url "$url" --out "$dir/preset.yaml" $calibrate_args >"$dir/calibrate.log" 2>&1; then
    failure "$section" "calibrate of $url failed ($(tail -n 2 "$dir/calibrate.log" | tr '\n' ' '))"
    return 1
  fi
  fact "$section" "twin.$key.engine" "$(grep -m1 -o 'engine: .*(' "$dir/calibrate.log" | sed 's/^engine: //; s/ ($//' || echo unknown)"
  local fit setting
  for fit in prefill decode; do
    fact "$section" "twin.$key.$fit" "$(grep -m1 "^$fit " "$dir/calibrate.log" | sed 's/  */ /g')"
  done
  for setting in max_num_seqs prefix_caching chunked_prefill kv_capacity; do
    fact "$section" "twin.$key.$setting" "$(grep -m1 "^$setting " "$dir/calibrate.log" | sed "s/^$setting *//")"
  done
  echo "bench(twin): validate against $url" >&2
  # shellcheck disable=SC2086
  if ! timeout 1200 "$bakeoff" calibrate --url "$url" --validate "$dir/preset.yaml" --out "$dir/val" $validate_args >"$dir/validate.log" 2>&1; then
    failure "$section" "validation against $url failed ($(tail -n 2 "$dir/validate.log" | tr '\n' ' '))"
    return 1
  fi
  local v=$dir/val/validation.json i metric
  fact "$section" "twin.$key.capacity_per_s" "$(jq '.capacity.requests_per_s' "$v")"
  # The preset's own capacity, the same closed loop on the simulator: its error in %.
  fact "$section" "twin.$key.capacity_error" "$(jq '.capacity.error * 100' "$v")"
  for i in 0 1 2 3; do
    fact "$section" "twin.$key.s$i.label" "$(jq -r ".steps[$i].label" "$v")"
    for metric in requests_per_s ttft_p50_ms tpot_p50_ms; do
      fact "$section" "twin.$key.s$i.$metric" "$(jq ".steps[$i].metrics.$metric.error * 100" "$v")"
    done
    # The lone request just before the load, and the load's error beyond it (run/validate.h).
    for metric in ttft_p50_ms tpot_p50_ms; do
      fact "$section" "twin.$key.s$i.lone_$metric" "$(jq ".steps[$i].lone_request.$metric.error * 100" "$v")"
      fact "$section" "twin.$key.s$i.beyond_$metric" "$(jq ".steps[$i].error_beyond_lone_request.$metric * 100" "$v")"
    done
  done
}

server_log=$work/emulate.log
# shellcheck disable=SC2086  # split on purpose
"$bakeoff" emulate --port 0 $baseline_server >"$server_log" 2>&1 &
server_pid=$!
url=$(wait_for_url "$server_log" "$server_pid")
if [ -z "$url" ]; then
  failure "$section" "bakeoff emulate did not start ($(tail -n 2 "$server_log" | tr '\n' ' '))"
else
  fact "$section" twin.emulated.server "$baseline_server"
  twin emulated "$url" || true
fi
stop_server

if [ -z "${BENCH_TWIN_URL:-}" ]; then
  failure "$section" "BENCH_TWIN_URL is not set: start an engine on loopback and name it (docs/engines/llama.cpp.md)"
else
  case "$BENCH_TWIN_URL" in
    http://127.0.0.1:*|http://localhost:*|http://\[::1\]:*) ;;
    *) echo "bench(twin): BENCH_TWIN_URL must be on loopback" >&2; exit 2 ;;
  esac
  fact "$section" twin.engine.url "$BENCH_TWIN_URL"
  fact "$section" twin.engine.what "${BENCH_TWIN_WHAT:-not said (BENCH_TWIN_WHAT)}"
  twin engine "$BENCH_TWIN_URL" || true
fi
section_end "$section"
exit 0
}

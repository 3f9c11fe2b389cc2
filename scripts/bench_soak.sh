#!/usr/bin/env bash
# scripts/bench_soak.sh: the soak section of `make bench` (scripts/bench.sh runs it). Owns one
# benchmark: (s) the client's memory over a long open loop, `bakeoff bench --workers 1` at the
# spec's rate against `bakeoff emulate --instant` for BENCH_SOAK_SECONDS (default 1800), its
# resident set size (VmRSS in /proc/PID/status) sampled every BENCH_SOAK_SAMPLE_SECONDS (default
# 5) with the number of finished requests (lines of records.jsonl, counted incrementally). Facts
# soak.*: the samples at the start of the load, at 1 minute and at the end (the last one taken
# while requests were still finishing), the peak (VmHWM, and /usr/bin/time's maximum RSS, which
# also sees the final analysis), a minute-by-minute timeline and the summary's figures.
# Checks: the client exits 0, every measured request is ok with the expected output tokens, the
# offered rate is within 5%. Everything listens on 127.0.0.1; the client is stopped with SIGINT
# (then SIGKILL) if it outlives its window by two minutes. records.jsonl grows by about 0.8 KB per
# request (1.4 GB an hour at 2,000/s) in a temporary folder; the script checks the free space first.
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=soak
scenarios "$section"
section_begin "$section"
bakeoff=$BAKEOFF_BENCH_BIN/bakeoff
shown=$BAKEOFF_BENCH_BUILD/bakeoff
seconds=${BENCH_SOAK_SECONDS:-1800}
interval=${BENCH_SOAK_SAMPLE_SECONDS:-5}
# shellcheck disable=SC2154  # rate and tokens come from the spec
fact "$section" soak.seconds "$seconds"
fact "$section" soak.interval_s "$interval"
fact "$section" soak.rate "$rate"
fact "$section" soak.tokens "$tokens"
work=$(mktemp -d)
server_pid=""
client_pid=""  # the `bakeoff bench` process (a child of /usr/bin/time, whose pid is time_pid)
time_pid=""
cleanup() {
  [ -z "$client_pid" ] || kill -INT "$client_pid" 2>/dev/null || true
  [ -z "$time_pid" ] || wait "$time_pid" 2>/dev/null || true
  [ -z "$server_pid" ] || { kill -INT "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "bench(soak): $*" >&2; }
give_up() { failure "$section" "$1"; section_end "$section"; exit 1; }
status_kb() { awk -v k="$2" '$1 == k ":" { print $2; exit }' "/proc/$1/status" 2>/dev/null || true; }

need_kb=$((rate * (seconds + 60) * 9 / 10))  # ~0.9 KB a request, with margin
free_kb=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -ge "$need_kb" ] ||
  give_up "needs about $((need_kb / 1048576)) GiB free for records.jsonl in ${TMPDIR:-/tmp}, has $((free_kb / 1048576)) GiB"

"$bakeoff" emulate --host 127.0.0.1 --port 0 --instant >"$work/server.log" 2>&1 &
server_pid=$!
url=$(wait_for_url "$work/server.log" "$server_pid")
[ -n "$url" ] || give_up "the emulator did not start"
fact "$section" soak.server "$shown emulate --host 127.0.0.1 --port 0 --instant"

out=$work/soak
records=$out/records.jsonl
client_args=(--workers 1 --no-calibrate --rate "$rate" --prompt-tokens 8 --output-tokens "$tokens" --warmup 1s --duration "${seconds}s")
fact "$section" soak.command "$shown bench --url $url --out \$WORK/soak ${client_args[*]}"
log "client for ${seconds}s at ${rate}/s against $url (samples every ${interval}s)"
/usr/bin/time -f '%M' -o "$work/client.time" "$bakeoff" bench --url "$url" --out "$out" "${client_args[@]}" \
  >"$work/client.stdout" 2>"$work/client.stderr" &
time_pid=$!
start=$(date +%s.%N)
for _ in $(seq 1 100); do
  client_pid=$(first_child "$time_pid")
  [ -z "$client_pid" ] || break
  sleep 0.05
done
[ -n "$client_pid" ] || give_up "the client did not start"
deadline=$((seconds + 120))
offset=0 lines=0 peak_kb=0
: >"$work/samples"
while kill -0 "$time_pid" 2>/dev/null; do
  sleep "$interval"
  rss=$(status_kb "$client_pid" VmRSS)
  hwm=$(status_kb "$client_pid" VmHWM)
  [ -n "$rss" ] || break
  [ -z "$hwm" ] || [ "$hwm" -le "$peak_kb" ] || peak_kb=$hwm
  size=$(stat -c %s "$records" 2>/dev/null || echo 0)
  if [ "$size" -gt "$offset" ]; then
    new=$(tail -c +"$((offset + 1))" "$records" | head -c "$((size - offset))" | tr -cd '\n' | wc -c) || true
    lines=$((lines + new))
    offset=$size
  fi
  elapsed=$(calc "%.1f" "$(date +%s.%N) - $start")
  echo "$elapsed $rss $lines" >>"$work/samples"
  if awk -v e="$elapsed" -v d="$deadline" 'BEGIN { exit !(e > d) }'; then
    log "the client outlived its window by 2 minutes: SIGINT"
    kill -INT "$client_pid" 2>/dev/null || true
    sleep 15
    kill -KILL "$client_pid" 2>/dev/null || true
  fi
done
rc=0
wait "$time_pid" || rc=$?
client_pid="" time_pid=""
time_kb=$(tail -n 1 "$work/client.time" 2>/dev/null || echo 0)
[ "$time_kb" -le "$peak_kb" ] 2>/dev/null || peak_kb=$time_kb
kill -INT "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=""
summary=$out/summary.json
[ "$rc" = 0 ] && [ -f "$summary" ] ||
  give_up "bakeoff bench exited $rc ($(tail -n 3 "$work/client.stderr" | tr '\n' ' ' | cut -c1-300))"

# Checks, as bench_macro.sh's run_client.
read -r measured ok min_tokens max_tokens offered < <(jq -r '.steps[0] | "\(.requests.measured) \(.requests.outcomes.ok // 0) \(.tokens.output.min // 0) \(.tokens.output.max // 0) \(.throughput.offered_requests_per_s)"' "$summary")
[ "$measured" != 0 ] && [ "$ok" = "$measured" ] ||
  failure "$section" "$ok of $measured requests ok ($(jq -c '.steps[0].requests.outcomes' "$summary"))"
[ "$min_tokens" = "$tokens" ] && [ "$max_tokens" = "$tokens" ] ||
  failure "$section" "output tokens per request $min_tokens..$max_tokens, expected $tokens"
! awk -v o="$offered" -v r="$rate" 'BEGIN { exit !(o < 0.95 * r || o > 1.05 * r) }' ||
  failure "$section" "offered $offered requests/s, expected $rate +- 5%"

# The samples: start = first with finished requests; at 1 min (or half the run when it is shorter
# than 2 minutes); end = the last one inside the load's window (elapsed <= its duration), so the
# drain and the final analysis after it never count as growth (they show in the peak).
mark=60
[ "$seconds" -ge 120 ] || mark=$((seconds / 2))
read -r t_start rss_start n_start < <(awk '$3 > 0 { print; exit }' "$work/samples") || true
read -r t_mark rss_mark n_mark < <(awk -v m="$mark" '$1 >= m && $3 > 0 { print; exit }' "$work/samples") || true
read -r t_end rss_end n_end < <(awk -v d="$seconds" '$1 <= d && $3 > 0 { last = $0 } END { print last }' "$work/samples") || true
if [ -z "${t_start:-}" ] || [ -z "${t_mark:-}" ] || [ -z "${t_end:-}" ] || [ "$n_end" -le "$n_mark" ]; then
  give_up "too few samples (run of $seconds s, samples every $interval s)"
fi
for name in t_start rss_start n_start t_mark rss_mark n_mark t_end rss_end n_end peak_kb offered measured; do
  fact "$section" "soak.$name" "${!name}"
done
fact "$section" soak.finished_requests "$(wc -l <"$records")"
fact "$section" soak.records_bytes "$(stat -c %s "$records")"
fact "$section" soak.percentiles "$(jq -r '[.steps[0].latency | to_entries[] | select(.value.count > 0) | "\(.key) \(if .value.percentiles_exact then "exact" else "approximate" end)"] | join(", ")' "$summary")"
# A minute-by-minute timeline (every sample for runs of 3 minutes or less).
step=60
[ "$seconds" -gt 180 ] || step=$interval
awk -v s="$step" '$1 >= next_t { print; next_t = $1 + 0.9 * s }' "$work/samples" >"$work/timeline"
cut -d' ' -f1 "$work/timeline" | fact_lines "$section" soak.timeline_s
cut -d' ' -f2 "$work/timeline" | fact_lines "$section" soak.timeline_rss_kib
cut -d' ' -f3 "$work/timeline" | fact_lines "$section" soak.timeline_requests
log "RSS $rss_start -> $rss_mark -> $rss_end KiB, peak $peak_kb KiB"
section_end "$section"
exit 0
}

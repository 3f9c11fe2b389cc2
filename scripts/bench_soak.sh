#!/usr/bin/env bash
# scripts/bench_soak.sh: the "soak" section of `make bench` (scripts/bench.sh runs it when
# BENCH_ONLY includes soak, and by default, and includes what it writes). Owns one benchmark:
#   (s) the client's memory over a long open loop: `bakeoff bench --workers 1 --rate 2000` with
#       32-token answers against `bakeoff emulate --instant`, for BENCH_SOAK_SECONDS (default
#       1800), its resident set size (VmRSS in /proc/PID/status) sampled every
#       BENCH_SOAK_SAMPLE_SECONDS (default 5) with the number of finished requests (lines of
#       records.jsonl, counted incrementally), reported at the start of the load, at 1 minute and
#       at the end, with its peak (VmHWM, and /usr/bin/time's maximum RSS, which also sees the
#       final analysis) and the growth per 1,000 finished requests from 1 minute to the end.
# Checks: the client exits 0, every measured request is ok with 32 output tokens, the offered rate
# is 2,000/s +- 5%. Everything listens on 127.0.0.1; the client is stopped with SIGINT (then
# SIGKILL) if it outlives its window by two minutes. records.jsonl grows by about 0.8 KB per request
# (1.4 GB an hour at this rate) in a temporary folder that is removed at the end; the script checks
# the free space first.
# Usage: scripts/bench_soak.sh BAKEOFF_BINARY OUT_MARKDOWN_FRAGMENT [BINARY_AS_SHOWN]
# Exit status 1 when the figure failed its checks (the fragment says which).
set -euo pipefail
bakeoff=$1
fragment=$2
shown=${3:-$1}
seconds=${BENCH_SOAK_SECONDS:-1800}
interval=${BENCH_SOAK_SAMPLE_SECONDS:-5}
rate=2000
tokens=32
work=$(mktemp -d "${TMPDIR:-/tmp}/bakeoff-bench-soak.XXXXXX")
server_pid=""
client_pid=""  # the `bakeoff bench` process (a child of /usr/bin/time, whose pid is time_pid)
time_pid=""
failed=0
cleanup() {
  [ -z "$client_pid" ] || kill -INT "$client_pid" 2>/dev/null || true
  [ -z "$time_pid" ] || wait "$time_pid" 2>/dev/null || true
  [ -z "$server_pid" ] || { kill -INT "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
  if [ "${BAKEOFF_BENCH_KEEP:-0}" = 1 ]; then echo "bench(soak): kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "bench(soak): $*" >&2; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
commas() {
  awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); n = "";
    while (length(s) > 3) { n = "," substr(s, length(s) - 2) n; s = substr(s, 1, length(s) - 3) }
    print s n }'
}
mib() { calc "%.1f" "$1 / 1024"; }
status_kb() { awk -v k="$2" '$1 == k ":" { print $2; exit }' "/proc/$1/status" 2>/dev/null || true; }

write_fragment() {  # write_fragment ROW [NOTE...]
  local row=$1
  shift
  {
    echo "## Client memory over a soak (open loop, 2,000 requests/s)"
    echo
    echo "\`bakeoff bench --workers 1\` at $(commas "$rate") requests/s (Poisson) with $tokens-token answers against"
    echo "\`bakeoff emulate --instant\` (*emulated*) for $seconds s, the client's resident set size (VmRSS from"
    echo "\`/proc/PID/status\`) sampled every $interval s together with the number of finished requests"
    echo "(lines of records.jsonl). **Before** (the client kept every finished request's record until the"
    echo "end of the step): a 120 s run at this rate grew the client from 31 MB to 303 MB, about 850 bytes"
    echo "per finished request, so a day-long soak would have needed ~150 GB. **Now** each worker keeps only"
    echo "counts and one quantile sketch per figure (exact up to 65,536 samples, then within 0.39%,"
    echo "docs/TERMINOLOGY.md \"Percentiles\"); the records go to records.jsonl as they finish."
    echo
    echo "| figure | target | measured | status | command |"
    echo "|---|---|---|---|---|"
    echo "$row"
    echo
    echo "### Notes"
    echo
    local note
    for note in "$@"; do echo "- $note"; echo; done
  } >"$fragment"
}

fail_fragment() {
  failed=1
  write_fragment "| (s) client RSS growth per 1,000 finished requests, 1 min to end | < 10 KB (was ~850 KB) | FAILED: $1 | FAILED | \`$client_shown\` |"
}

# A command that fails unexpectedly (set -e) still leaves a fragment saying so.
trap 'fail_fragment "scripts/bench_soak.sh failed at line $LINENO"' ERR

need_kb=$((rate * (seconds + 60) * 9 / 10))  # ~0.9 KB a request, with margin
free_kb=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
client_shown="$shown bench --url URL --workers 1 --no-calibrate --out \$WORK/soak --rate $rate --prompt-tokens 8 --output-tokens $tokens --warmup 1s --duration ${seconds}s"
if [ "$free_kb" -lt "$need_kb" ]; then
  fail_fragment "needs about $(mib "$((need_kb / 1024))") GiB free for records.jsonl in ${TMPDIR:-/tmp}, has $(mib "$((free_kb / 1024))") GiB"
  exit 1
fi

"$bakeoff" emulate --host 127.0.0.1 --port 0 --instant >"$work/server.log" 2>&1 &
server_pid=$!
url=""
for _ in $(seq 1 100); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/server.log" | head -n 1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { fail_fragment "the emulator did not start"; exit 1; }
server_shown="$shown emulate --host 127.0.0.1 --port 0 --instant"

out=$work/soak
records=$out/records.jsonl
log "client for ${seconds}s at ${rate}/s against $url (samples every ${interval}s)"
# /usr/bin/time for the peak over the whole life, the final analysis included; its child is the client.
/usr/bin/time -f '%M' -o "$work/client.time" "$bakeoff" bench --url "$url" --workers 1 --no-calibrate \
  --out "$out" --rate "$rate" --prompt-tokens 8 --output-tokens "$tokens" --warmup 1s --duration "${seconds}s" \
  >"$work/client.stdout" 2>"$work/client.stderr" &
time_pid=$!
start=$(date +%s.%N)
for _ in $(seq 1 100); do
  { read -r client_pid _ <"/proc/$time_pid/task/$time_pid/children"; } 2>/dev/null || true
  [ -z "$client_pid" ] || break
  sleep 0.05
done
[ -n "$client_pid" ] || { fail_fragment "the client did not start"; exit 1; }
deadline=$((seconds + 120))
offset=0 lines=0 peak_kb=0
: >"$work/samples"
while kill -0 "$time_pid" 2>/dev/null; do
  sleep "$interval"
  rss=$(status_kb "$client_pid" VmRSS)
  hwm=$(status_kb "$client_pid" VmHWM)
  [ -n "$rss" ] || break
  [ -z "$hwm" ] || [ "$hwm" -le "$peak_kb" ] || peak_kb=$hwm
  # Newlines in the bytes written since the last sample (tail seeks; no re-reading of the file).
  size=$(stat -c %s "$records" 2>/dev/null || echo 0)
  if [ "$size" -gt "$offset" ]; then
    # (tail dies of SIGPIPE when the file grew meanwhile: expected, hence the `|| true`.)
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
if [ "$rc" != 0 ] || [ ! -f "$summary" ]; then
  fail_fragment "bakeoff bench exited $rc ($(tail -n 3 "$work/client.stderr" | tr '\n' ' ' | cut -c1-300))"
  exit 1
fi
client_shown=${client_shown/URL/$url}

# Checks, as scripts/bench.sh's check_all_ok.
s() { jq -r "$1" "$summary"; }
measured=$(s '.steps[0].requests.measured')
ok=$(s '.steps[0].requests.outcomes.ok // 0')
min_tokens=$(s '.steps[0].tokens.output.min // 0')
max_tokens=$(s '.steps[0].tokens.output.max // 0')
offered=$(s '.steps[0].throughput.offered_requests_per_s')
problems=()
[ "$measured" != 0 ] && [ "$ok" = "$measured" ] || problems+=("$ok of $measured requests ok ($(s '.steps[0].requests.outcomes | tostring'))")
[ "$min_tokens" = "$tokens" ] && [ "$max_tokens" = "$tokens" ] || problems+=("output tokens per request $min_tokens..$max_tokens, expected $tokens")
awk -v o="$offered" -v r="$rate" 'BEGIN { exit !(o < 0.95 * r || o > 1.05 * r) }' && problems+=("offered $offered requests/s, expected $rate +- 5%")
total_lines=$(wc -l <"$records")

# The samples: start = first with finished requests; at 1 min (or half the run when it is
# shorter than 2 minutes); end = the last one taken while requests were still finishing.
mark=60
[ "$seconds" -ge 120 ] || mark=$((seconds / 2))
t_start="" t_mark="" t_end=""
read -r t_start rss_start n_start < <(awk '$3 > 0 { print; exit }' "$work/samples") || true
read -r t_mark rss_mark n_mark < <(awk -v m="$mark" '$1 >= m && $3 > 0 { print; exit }' "$work/samples") || true
read -r t_end rss_end n_end < <(awk 'prev != "" && $3 > prevn { last = $0 } { prev = $0; prevn = $3 } END { print last }' "$work/samples") || true
if [ -z "$t_start" ] || [ -z "$t_mark" ] || [ -z "$t_end" ] || [ "$n_end" -le "$n_mark" ]; then
  fail_fragment "too few samples (run of $seconds s, samples every $interval s)"
  exit 1
fi
growth_b=$(calc "%.0f" "($rss_end - $rss_mark) * 1024 * 1000 / ($n_end - $n_mark)")
target_b=10240
status=$(awk -v g="$growth_b" -v t="$target_b" 'BEGIN { print (g < t) ? "met" : "**short**" }')
if [ "${#problems[@]}" -gt 0 ]; then
  failed=1
  status="FAILED: ${problems[*]}"
fi
exact=$(s '[.steps[0].latency | to_entries[] | select(.value.count > 0) | "\(.key) \(if .value.percentiles_exact then "exact" else "approximate" end)"] | join(", ")')
# A minute-by-minute timeline (every sample for runs of 3 minutes or less).
step=60
[ "$seconds" -gt 180 ] || step=$interval
timeline=$(awk -v s="$step" '$1 >= next_t { printf "%s%.0f s: %.1f MiB (%d requests)", sep, $1, $2 / 1024, $3; sep = "; "; next_t = $1 + 0.9 * s }' "$work/samples")

row="| (s) client RSS growth per 1,000 finished requests, from $t_mark s to the end ($t_end s) | < 10 KB (flat; was ~850 KB) | $(commas "$growth_b") B per 1,000 requests; RSS $(mib "$rss_start") MiB at $t_start s (start of the load), $(mib "$rss_mark") MiB at $t_mark s, $(mib "$rss_end") MiB at $t_end s, peak $(mib "$peak_kb") MiB (the final analysis included); $(commas "$n_end") requests finished by then, $(commas "$total_lines") in all | $status | \`$client_shown\` |"
notes=(
  "**(s) soak.** Server: \`$server_shown\`. Growth = (RSS at the end - RSS at $t_mark s) / (requests finished between them) x 1,000; the end is the last sample taken while requests were still finishing, so the final analysis (which sorts a copy of each figure still under its cap) shows only in the peak. Offered $(calc "%.1f" "$offered") requests/s, $(commas "$measured") measured requests, all checked ok with $tokens output tokens. Summary percentiles: $exact (a figure passes its 65,536-sample cap after ~33 s at this rate, ~1 s for per-token ITL)."
  "**RSS timeline** (elapsed: VmRSS, finished requests): $timeline."
  "**What remains proportional to the run.** Nothing in memory: the open-loop schedule is generated as the run walks it (load/plan.h \`OpenLoopGenerator\`), never held. records.jsonl grows on disk ($(mib "$(( $(stat -c %s "$records") / 1024 ))") MiB here)."
)
write_fragment "$row" "${notes[@]}"
log "growth $growth_b B per 1,000 requests; RSS $rss_start -> $rss_mark -> $rss_end KiB, peak $peak_kb KiB"
exit "$failed"

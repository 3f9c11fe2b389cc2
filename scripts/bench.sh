#!/usr/bin/env bash
# scripts/bench.sh: `make bench`. Owns running every benchmark and writing docs/BENCHMARKS.md:
# the Google Benchmark micro-benchmarks (build/.../bench/bakeoff_micro_bench) and the loopback
# macro-benchmarks, which run the built `bakeoff` binary against `bakeoff emulate` (and against
# nginx serving a prerendered stream, when nginx is installed) and read summary.json and
# records.jsonl with jq, and the workload import benchmarks, which time `bakeoff fingerprint` on
# traces of 2 and 10 million rows that the script generates itself (awk, fixed seeds), and the
# emulated engine's simulator and real-time server (scripts/bench_emulator.sh), and the client's
# memory over a long open-loop soak (scripts/bench_soak.sh). Every run
# checks its answer (all requests ok, the expected token counts, the expected number of streams
# open at once, the expected request count and token totals of a fingerprint); a wrong answer is
# reported as FAILED and the script exits 1 after writing the document. Everything listens on
# 127.0.0.1, every client run is bounded by `timeout`, and the servers this script starts are
# stopped by the EXIT trap, which also removes the work folder with the generated traces.
#
# Usage: scripts/bench.sh [BUILD_DIR]   (default build/release)
# Environment: BAKEOFF_BENCH_SECONDS (measurement window per run, default 8),
#   BAKEOFF_BENCH_REPEAT (runs of each throughput figure, median reported, default 3),
#   BAKEOFF_BENCH_DOC (output, default docs/BENCHMARKS.md), BAKEOFF_BENCH_KEEP=1 (keep the work
#   folder with every summary.json, records.jsonl and log),
#   BENCH_ONLY (sections to run, comma-separated, default all: micro, macro, workload, emulator,
#   report (scripts/bench_report.sh: about 5 minutes and ~3 GB of disk under TMPDIR for its
#   1,000,000-request run; BENCH_REPORT_REQUESTS sets the count), soak;
#   macro also runs micro, whose figures its notes quote). A partial run writes a document with only
#   those sections, so point BAKEOFF_BENCH_DOC elsewhere to try one section, e.g.
#   BENCH_ONLY=workload BAKEOFF_BENCH_DOC=/tmp/b.md scripts/bench.sh build/release
#   (the workload section alone takes about 2.5 minutes and ~1.7 GB of disk under TMPDIR),
#   BENCH_SOAK_SECONDS (length of the soak, default 1800: the soak section takes that long plus
#   about a minute, and ~0.8 KB of disk per request, 2.6 GB at the default, under TMPDIR),
#   BENCH_SOAK_SAMPLE_SECONDS (how often the soak samples the client's RSS, default 5), e.g.
#   BENCH_ONLY=soak BENCH_SOAK_SECONDS=120 BAKEOFF_BENCH_DOC=/tmp/b.md scripts/bench.sh build/release
set -euo pipefail

build=${1:-build/release}
bakeoff=$build/bakeoff
micro=$build/bench/bakeoff_micro_bench
doc=${BAKEOFF_BENCH_DOC:-docs/BENCHMARKS.md}
seconds=${BAKEOFF_BENCH_SECONDS:-8}
repeat=${BAKEOFF_BENCH_REPEAT:-3}

only=${BENCH_ONLY:-micro,macro,workload,emulator,report,soak}
only=${only// /,}
case ",$only," in *,macro,*) only="$only,micro" ;; esac
for section in ${only//,/ }; do
  case $section in
    micro | macro | workload | emulator | report | soak) ;;
    *) echo "bench: BENCH_ONLY: unknown section '$section' (micro, macro, workload, emulator, report, soak)" >&2; exit 2 ;;
  esac
done
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

for tool in jq /usr/bin/time timeout awk; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make bench-deps installs it)" >&2; exit 1; }
done
for file in "$bakeoff" "$micro"; do
  [ "$file" != "$micro" ] || want micro || continue
  [ -x "$file" ] || { echo "bench: $file not built (make build)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/bakeoff-bench.XXXXXX")
# Run copies, so a rebuild of the shared build folder during the run cannot swap the binaries;
# the commands in the document name the build folder's paths, which is where they came from.
mkdir -p "$work/bin"
cp "$bakeoff" "$work/bin/bakeoff"
! want micro || cp "$micro" "$work/bin/bakeoff_micro_bench"
bakeoff_shown=$bakeoff micro_shown=$micro
bakeoff=$work/bin/bakeoff micro=$work/bin/bakeoff_micro_bench
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "${BAKEOFF_BENCH_KEEP:-0}" = 1 ]; then echo "bench: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 10,000 open streams need 10,000 descriptors in the client and as many in the emulator.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fd_limit=$(ulimit -n)

failures=()
fail() { failures+=("$1"); echo "bench: FAILED: $1" >&2; }
log() { echo "bench: $*" >&2; }

# --- small helpers -------------------------------------------------------------------------------

# 1234567.8 -> 1,234,568
commas() {
  awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); n = "";
    while (length(s) > 3) { n = "," substr(s, length(s) - 2) n; s = substr(s, 1, length(s) - 3) }
    print s n }'
}
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
# Median and range of the numbers given as arguments: "median (min-max)" is built by callers.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
minimum() { printf '%s\n' "$@" | sort -g | head -n 1; }
maximum() { printf '%s\n' "$@" | sort -g | tail -n 1; }
# CPU time (user + system, all threads) a live process has used so far, in clock ticks; 0 when
# it is gone. Bash builtins only, as the client sampler calls it five times a second.
clk_tck=$(getconf CLK_TCK)
process_ticks() {
  local line
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || { echo 0; return; }
  line=${line##*) }
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $line
  echo $(( ${12} + ${13} ))
}
# The first child of a live process (Linux's /proc/PID/task/PID/children), or nothing.
first_child() {
  local child=""
  { read -r child _ <"/proc/$1/task/$1/children"; } 2>/dev/null || true
  echo "$child"
}
cpu_seconds() { calc "%.3f" "$(process_ticks "$1") / $clk_tck"; }

# "TOTAL IDLE" jiffies of all CPUs together (/proc/stat), for how busy the machine was.
machine_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $5 + $6 }' /proc/stat; }

# --- servers -------------------------------------------------------------------------------------

# Starts `bakeoff emulate` on an ephemeral loopback port; sets server_pid, server_url, server_cmd.
start_emulator() {
  local log_file=$work/emulator.$RANDOM.log
  "$bakeoff" emulate --host 127.0.0.1 --port 0 "$@" >"$log_file" 2>&1 &
  server_pid=$!
  server_cmd="$bakeoff_shown emulate --host 127.0.0.1 --port 0 $*"
  server_url=""
  for _ in $(seq 1 100); do
    server_url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log_file" | head -n 1 || true)
    [ -n "$server_url" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log_file" >&2
  echo "bench: the emulator did not start" >&2
  exit 1
}

stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# --- the client ----------------------------------------------------------------------------------

# run_client NAME BENCH-ARGS...: one `bakeoff bench` against server_url with one client thread.
# Sets out (its folder), summary, client_cmd, client_cpu_s (user + system CPU seconds of the whole
# client process), client_load_cpu_s (its CPU seconds up to the last record written),
# client_cpu_pct (of one core, over its wall time), client_rss_kb, server_cpu_pct,
# and others_cpu_pct: CPU used meanwhile by every other process on the machine (% of one core).
run_client() {
  local name=$1
  shift
  out=$work/$name
  summary=$out/summary.json
  local cmd=("$bakeoff" bench --url "$server_url" --workers 1 --no-calibrate --out "$out" "$@")
  client_cmd="${cmd[*]}"
  client_cmd=${client_cmd/#$bakeoff/$bakeoff_shown}
  client_cmd=${client_cmd//$work/\$WORK}
  local server_cpu_before wall_before wall_after stat_before stat_after rc=0
  server_cpu_before=$(cpu_seconds "$server_pid")
  stat_before=$(machine_ticks)
  wall_before=$(date +%s.%N)
  /usr/bin/time -f '%e %U %S %M' -o "$out.time" \
    timeout --signal=INT --kill-after=15 "$((seconds * 3 + 90))" "${cmd[@]}" \
    >"$out.stdout" 2>"$out.stderr" &
  local time_pid=$! client_pid="" timeout_pid="" size last_size=-1 ticks=0
  # While it runs, note the client's CPU time whenever records.jsonl grows: the CPU at the last
  # growth is what the load itself cost, without the analysis that follows (summarising every
  # figure would otherwise be charged to the events).
  client_load_ticks=0
  while kill -0 "$time_pid" 2>/dev/null; do
    if [ -z "$client_pid" ]; then
      timeout_pid=$(first_child "$time_pid")
      [ -z "$timeout_pid" ] || client_pid=$(first_child "$timeout_pid")
    fi
    if [ -n "$client_pid" ]; then
      size=$(stat -c %s "$out/records.jsonl" 2>/dev/null || echo 0)
      ticks=$(process_ticks "$client_pid")
      if [ "$size" != "$last_size" ] && [ "$ticks" -gt 0 ]; then
        last_size=$size
        client_load_ticks=$ticks
      fi
    fi
    sleep 0.2
  done
  wait "$time_pid" || rc=$?
  wall_after=$(date +%s.%N)
  stat_after=$(machine_ticks)
  if [ "$rc" != 0 ] || [ ! -f "$summary" ]; then
    fail "$name: bakeoff bench exited $rc ($(tail -n 4 "$out.stderr" "$out.stdout" | tr '\n' ' ' | cut -c1-400))"
    return 1
  fi
  local elapsed user sys rss
  read -r elapsed user sys rss < <(tail -n 1 "$out.time")
  client_cpu_s=$(calc "%.3f" "$user + $sys")
  client_load_cpu_s=$(calc "%.3f" "$client_load_ticks / $clk_tck")
  # A run too short for the sampler to see falls back to the whole process.
  [ "$client_load_ticks" -gt 0 ] || client_load_cpu_s=$client_cpu_s
  client_cpu_pct=$(calc "%.0f" "100 * ($user + $sys) / $elapsed")
  client_rss_kb=$rss
  server_cpu_pct=$(calc "%.0f" "100 * ($(cpu_seconds "$server_pid") - $server_cpu_before) / ($wall_after - $wall_before)")
  local busy_pct
  busy_pct=$(echo "$stat_before $stat_after" | awk -v n="$(nproc)" '{ print 100 * n * (($3 - $1) - ($4 - $2)) / ($3 - $1) }')
  others_cpu_pct=$(calc "%.0f" "$busy_pct - $client_cpu_pct - $server_cpu_pct")
  [ "$others_cpu_pct" -ge 0 ] 2>/dev/null || others_cpu_pct=0
}

# jq over the last run's summary.json.
s() { jq -r "$1" "$summary"; }

# Fails the figure unless every request of step 0 was ok and each produced `tokens` output tokens.
check_all_ok() {
  local name=$1 tokens=$2
  local measured ok min max estimated
  measured=$(s '.steps[0].requests.measured')
  ok=$(s '.steps[0].requests.outcomes.ok // 0')
  min=$(s '.steps[0].tokens.output.min // 0')
  max=$(s '.steps[0].tokens.output.max // 0')
  estimated=$(s '.steps[0].throughput.output_tokens_estimated')
  if [ "$measured" = 0 ] || [ "$ok" != "$measured" ]; then
    fail "$name: $ok of $measured requests ok ($(s '.steps[0].requests.outcomes | tostring'))"
    return 1
  fi
  if [ "$min" != "$tokens" ] || [ "$max" != "$tokens" ] || [ "$estimated" != false ]; then
    fail "$name: output tokens per request $min..$max (estimated: $estimated), expected $tokens"
    return 1
  fi
}

# Token events the client itself parsed and recorded (counted_tokens in records.jsonl), checked
# against the server's usage counts line by line. Prints "MEASURED ALL": the events of measured ok
# requests, and of every ok request (warm-up included, for the events per client CPU-second).
counted_events() {
  awk '/"outcome":"ok"/ {
         if (!match($0, /"counted_tokens":[0-9]+/)) { bad++; next }
         c = substr($0, RSTART + 17, RLENGTH - 17) + 0
         if (!match($0, /"usage_completion_tokens":[0-9]+/)) { bad++; next }
         u = substr($0, RSTART + 26, RLENGTH - 26) + 0
         if (c != u) bad++
         all += c
         if ($0 ~ /"phase":"measure"/) measured += c
       }
       END { if (bad) print "mismatch"; else print measured + 0, all + 0 }' "$out/records.jsonl"
}

# --- the document's parts ------------------------------------------------------------------------

rows=()   # macro table rows
notes=()  # per-figure notes (markdown)
status() {  # status MEASURED TARGET higher|lower
  if [ "$3" = higher ]; then
    awk -v m="$1" -v t="$2" 'BEGIN { print (m >= t) ? "met" : "**short**" }'
  else
    awk -v m="$1" -v t="$2" 'BEGIN { print (m < t) ? "met" : "**short**" }'
  fi
}

machine_load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
bench_start_s=$SECONDS

# =================================================================================================
# Micro-benchmarks
# =================================================================================================
# (These sections are not indented under their `if want ...`, to keep them readable.)
if want micro; then
log "micro-benchmarks ($micro)"
micro_cmd="$micro_shown --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.3 --benchmark_out=micro.json --benchmark_out_format=json"
micro_ok=1
"$micro" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.3 \
  --benchmark_out="$work/micro.json" --benchmark_out_format=json >"$work/micro.txt" 2>&1 ||
  { fail "micro-benchmarks exited non-zero ($(tail -n 3 "$work/micro.txt" | tr '\n' ' '))"; micro_ok=0; }
if [ "$micro_ok" = 1 ]; then
  errors=$(jq -r '[.benchmarks[] | select(.error_occurred == true) | "\(.name): \(.error_message)"] | join("; ")' "$work/micro.json")
  [ -z "$errors" ] || { fail "micro-benchmark answered wrong: $errors"; micro_ok=0; }
fi
# m NAME FIELD: the median aggregate's field (items_per_second and bytes_per_second use CPU time).
m() {
  local v
  v=$(jq -r --arg n "$1_median" --arg f "$2" '.benchmarks[] | select(.name == $n) | .[$f]' "$work/micro.json" 2>/dev/null || true)
  if [ -z "$v" ] || [ "$v" = null ]; then
    [ "$micro_ok" = 0 ] || { fail "micro-benchmark $1 reported no median"; micro_ok=0; }
    echo 0
  else
    echo "$v"
  fi
}
memchr_bps=$(m BM_Baseline_MemchrLineEnds bytes_per_second)
framing_eps=$(m BM_SseFraming items_per_second)
framing_bps=$(m BM_SseFraming bytes_per_second)
simdjson_eps=$(m BM_Baseline_SimdjsonParse items_per_second)
decode_eps=$(m BM_OpenAiChunkDecoding items_per_second)
both_eps=$(m BM_SseFramingAndDecoding items_per_second)
events_per_stream=$(m BM_SseFraming events_per_stream)
micro_rows=()
if [ "$micro_ok" = 1 ]; then
  micro_rows+=("| SSE framing (\`net::SseDecoder\`, 64 KiB reads) | $(commas "$framing_eps") events/s ($(calc "%.0f" "$framing_bps / 1048576") MiB/s) | memchr over the same bytes: $(calc "%.0f" "$memchr_bps / 1048576") MiB/s | framing runs at $(calc "%.1f" "100 * $framing_bps / $memchr_bps")% of memchr's byte rate |")
  micro_rows+=("| OpenAI chunk decoding (\`dialect::OpenAiStreamDecoder\`) | $(commas "$decode_eps") chunks/s ($(calc "%.0f" "1e9 / $decode_eps") ns/chunk) | bare simdjson DOM parse of the same payloads: $(commas "$simdjson_eps")/s ($(calc "%.0f" "1e9 / $simdjson_eps") ns) | decoding costs $(calc "%.2f" "$simdjson_eps / $decode_eps")x the bare parse |")
  micro_rows+=("| framing + decoding per event (as \`load::Exchange\` chains them) | $(commas "$both_eps") events/s ($(calc "%.0f" "1e9 / $both_eps") ns/event) | framing alone + decoding alone: $(calc "%.0f" "1e9 / $framing_eps + 1e9 / $decode_eps") ns | chained cost is $(calc "%.2f" "(1e9 / $both_eps) / (1e9 / $framing_eps + 1e9 / $decode_eps)")x the sum of the parts |")
  for n in 1 256 2000; do
    rec_ns=$(m "BM_RecordToJsonLine/$n" cpu_time)
    fmt_ns=$(m "BM_Baseline_FmtIntegers/$n" cpu_time)
    chars_ns=$(m "BM_Baseline_ToCharsIntegers/$n" cpu_time)
    [ "$n" != 2000 ] || rec2000_ns=$rec_ns
    line_bytes=$(m "BM_RecordToJsonLine/$n" line_bytes)
    micro_rows+=("| \`measure::RecordToJsonLine\`, $n token event(s) ($(commas "$line_bytes") B line) | $(commas "$rec_ns") ns/record ($(commas "$(calc "%.0f" "1e9 / $rec_ns")") records/s; $(calc "%.0f" "$rec_ns / ($n + 12)") ns per integer) | the same $((n + 12)) integers with \`fmt::format_to\`: $(commas "$fmt_ns") ns; with \`std::to_chars\`: $(commas "$chars_ns") ns | $(calc "%.2f" "$rec_ns / $fmt_ns")x fmt, $(calc "%.1f" "$rec_ns / $chars_ns")x to_chars |")
  done
  decoder_heap=$(m "BM_OpenAiDecoderHeapBytes/iterations:20" heap_bytes_per_decoder)
  micro_rows+=("| heap one \`OpenAiStreamDecoder\` keeps after its first chunk (one per open stream) | $(commas "$decoder_heap") B | - | - |")
  sum_ms=$(m BM_Summarize1e6 cpu_time)
  sort_ms=$(m BM_Baseline_CopyAndSort1e6 cpu_time)
  micro_rows+=("| \`stats::Summarize\` on 1e6 values | $(calc "%.1f" "$sum_ms") ms | copy + \`std::sort\` of the same values: $(calc "%.1f" "$sort_ms") ms | $(calc "%.2f" "$sum_ms / $sort_ms")x the baseline |")
  sketch_ms=$(m BM_QuantileSketch1e6 cpu_time)
  micro_rows+=("| \`stats::QuantileSketch\`: 1e6 values added one at a time (past its 65,536-sample cap) and summarised | $(calc "%.1f" "$sketch_ms") ms ($(calc "%.1f" "$sketch_ms * 1e6 / 1000000") ns per value) | \`stats::Summarize\` of the same values: $(calc "%.1f" "$sum_ms") ms | $(calc "%.2f" "$sketch_ms / $sum_ms")x the baseline |")
fi

fi  # want micro

# =================================================================================================
# Macro-benchmarks against `bakeoff emulate --instant`
# =================================================================================================
if want macro; then
start_emulator --instant
log "emulator (instant) at $server_url"

# (a) Streaming token events parsed and recorded per second, one client thread. -------------------
a_values=() a_per_cpu=() a_client=() a_server=() a_others=() a_lag=() a_limited=()
for r in $(seq 1 "$repeat"); do
  log "(a) token events/s, run $r/$repeat"
  run_client "a$r" --concurrency 64 --prompt-tokens 8 --output-tokens 2000 --warmup 1s \
    --duration "${seconds}s" || continue
  check_all_ok "(a) run $r" 2000 || continue
  read -r events all_events < <(counted_events)
  [ "$events" != mismatch ] || { fail "(a) run $r: counted token events differ from usage"; continue; }
  duration=$(s '.steps[0].duration_s')
  a_values+=("$(calc "%.0f" "$events / $duration")")
  a_per_cpu+=("$(calc "%.0f" "$all_events / $client_load_cpu_s")")
  a_client+=("$client_cpu_pct") a_server+=("$server_cpu_pct") a_others+=("$others_cpu_pct")
  a_lag+=("$(s '.steps[0].latency.event_loop_lag_ms.p99.value')")
  a_limited+=("$(s '.steps[0].generator_limited.limited')")
  a_cmd=$client_cmd
done
if [ "${#a_values[@]}" -gt 0 ]; then
  a_med=$(median "${a_values[@]}")
  a_cpu_med=$(median "${a_per_cpu[@]}")
  rows+=("| (a) streaming token events parsed and recorded per second, one client thread | >= 1,000,000/s | $(commas "$a_med")/s (median of ${#a_values[@]}; $(commas "$(minimum "${a_values[@]}")")-$(commas "$(maximum "${a_values[@]}")")) | $(commas "$a_cpu_med") | $(status "$a_med" 1000000 higher) | \`$a_cmd\` |")
  notes+=("**(a) token events/s** (*emulated* server). Server: \`$server_cmd\`. Events are the \`counted_tokens\` of every measured ok request in records.jsonl (each checked equal to the server's usage, so every event was parsed and recorded), divided by the step's measurement window. CPU during the runs, in % of one core: client ${a_client[*]}, emulator ${a_server[*]}, other processes on the machine ${a_others[*]} (of $(( $(nproc) * 100 )) available). Events per client CPU-second (all ok events, warm-up included, over the client's CPU time up to its last record, start-up included, the final analysis not): $(for v in "${a_per_cpu[@]}"; do printf '%s ' "$(commas "$v")"; done| sed 's/ $//'). In the micro-benchmark framing + decoding alone runs at $(commas "$both_eps") events per CPU-second, so parsing is about $(calc "%.0f" "100 * $a_cpu_med / $both_eps")% of the client's per-event CPU; the rest is socket reads, HTTP chunk decoding, timestamps, the record's token events, the step recorder's two sketch additions per event (per-event and per-token ITL, about $(calc "%.0f" "${sketch_ms:-0}") ns each, see the micro-benchmarks) and its records.jsonl line (\`RecordToJsonLine\` alone costs about $(calc "%.0f" "${rec2000_ns:-0} / 2000") ns per token event). Event-loop lag p99 ${a_lag[*]} ms, generator-limited flag ${a_limited[*]}: 64 streams that always have data keep the loop parsing, so its 10 ms tick runs late; that is expected in this saturation test and does not distort a closed loop's sends. The emulator's own figure comes out of the same runs: it wrote $(commas "$a_med") token events/s in \`--instant\` mode, about $(commas "$(calc "%.0f" "$a_med * 100 / ($(median "${a_server[@]}") + 0.001)")") per emulator CPU-second. Limit: the client spends about $(calc "%.0f" "1e9 / $a_cpu_med") ns of CPU per event, $(calc "%.0f" "1e9 / $both_eps") ns of it in framing + decoding (a bare simdjson parse of the payload alone is $(calc "%.0f" "1e9 / $simdjson_eps") ns), so one thread with a core to itself would reach about $(commas "$a_cpu_med") events/s, $(awk -v v="$a_cpu_med" 'BEGIN { print (v >= 1000000) ? "above" : "below" }') the target; in these runs it got only $(median "${a_client[@]}")% of a core, because the emulator and other processes shared the $(nproc) cores, which is why the wall-clock figure is lower still. CPU time itself is inflated on a machine this busy (shared caches), so the per-CPU-second figure is a conservative estimate.")
fi

# (b) Completed short streaming requests per second, one client thread. ----------------------------
b_values=() b_per_cpu=() b_client=() b_server=() b_others=() b_lag=()
for r in $(seq 1 "$repeat"); do
  log "(b) short requests/s, run $r/$repeat"
  run_client "b$r" --concurrency 128 --prompt-tokens 8 --output-tokens 1 --warmup 1s \
    --duration "${seconds}s" || continue
  check_all_ok "(b) run $r" 1 || continue
  b_values+=("$(s '.steps[0].throughput.requests_per_s | floor')")
  b_per_cpu+=("$(calc "%.0f" "$(s '.steps[0].requests | .measured + .warmup') / $client_load_cpu_s")")
  b_client+=("$client_cpu_pct") b_server+=("$server_cpu_pct") b_others+=("$others_cpu_pct")
  b_lag+=("$(s '.steps[0].latency.event_loop_lag_ms.p99.value')")
  b_cmd=$client_cmd
done
if [ "${#b_values[@]}" -gt 0 ]; then
  b_med=$(median "${b_values[@]}")
  b_cpu_med=$(median "${b_per_cpu[@]}")
  rows+=("| (b) completed short streaming requests per second, one client thread | >= 20,000/s | $(commas "$b_med")/s (median of ${#b_values[@]}; $(commas "$(minimum "${b_values[@]}")")-$(commas "$(maximum "${b_values[@]}")")) | $(commas "$b_cpu_med") | $(status "$b_med" 20000 higher) | \`$b_cmd\` |")
  notes+=("**(b) short requests/s** (*emulated* server). Server: \`$server_cmd\`. Every request is a whole HTTP/1.1 exchange on a kept-alive connection whose SSE response has 4 events (role, one token, usage, [DONE]); all were checked ok with exactly one output token. CPU during the runs, in % of one core: client ${b_client[*]}, emulator ${b_server[*]}, other processes ${b_others[*]} (of $(( $(nproc) * 100 )) available). Requests per client CPU-second (all requests, warm-up included, over the client's CPU time up to its last record): $(for v in "${b_per_cpu[@]}"; do printf '%s ' "$(commas "$v")"; done | sed 's/ $//'). Event-loop lag p99 ${b_lag[*]} ms. Limit: the client spends about $(calc "%.1f" "1e6 / $b_cpu_med") us of CPU per request, so one thread with a core to itself would complete about $(commas "$b_cpu_med") requests/s, $(awk -v v="$b_cpu_med" 'BEGIN { print (v >= 20000) ? "above" : "below" }') the target; in these runs it got only $(median "${b_client[@]}")% of a core: the emulator (which does a full HTTP exchange per request too, on one I/O thread) and other processes shared the $(nproc) cores.")
fi

# (d) Send lag p99 at 2,000 requests/s, open loop. -------------------------------------------------
d_values=() d_loop=() d_client=() d_server=() d_others=()
for r in $(seq 1 "$repeat"); do
  log "(d) send lag at 2,000 requests/s, run $r/$repeat"
  run_client "d$r" --rate 2000 --prompt-tokens 8 --output-tokens 16 --warmup 1s --duration 10s || continue
  check_all_ok "(d) run $r" 16 || continue
  offered=$(s '.steps[0].throughput.offered_requests_per_s')
  if awk -v o="$offered" 'BEGIN { exit !(o < 1900 || o > 2100) }'; then
    fail "(d) run $r: offered $offered requests/s, expected 2,000 +- 5%"
    continue
  fi
  d_values+=("$(s '.steps[0].latency.send_lag_ms.p99.value')")
  d_loop+=("$(s '.steps[0].latency.event_loop_lag_ms.p99.value')")
  d_client+=("$client_cpu_pct") d_server+=("$server_cpu_pct") d_others+=("$others_cpu_pct")
  d_p50=$(s '.steps[0].latency.send_lag_ms.p50.value')
  d_cmd=$client_cmd
done
if [ "${#d_values[@]}" -gt 0 ]; then
  d_med=$(median "${d_values[@]}")
  rows+=("| (d) send lag p99 at 2,000 requests/s, open loop (Poisson) | < 1 ms | $(calc "%.3f" "$d_med") ms (median of ${#d_values[@]}; runs: ${d_values[*]}) | - | $(status "$d_med" 1 lower) | \`$d_cmd\` |")
  notes+=("**(d) send lag.** Server: \`$server_cmd\`. Send lag = send start - intended send (docs/TERMINOLOGY.md), p99 by nearest rank over ~20,000 measured requests; p50 of the last run $d_p50 ms. Event-loop lag p99 (the worker's 10 ms tick, which does not depend on sending): ${d_loop[*]} ms. CPU in % of one core: client ${d_client[*]}, emulator ${d_server[*]}, other processes ${d_others[*]} (of $(( $(nproc) * 100 )) available). Limit: the client thread is mostly idle at this rate, so a late send is a late wake-up: its timer can only fire when the kernel runs the thread, and here it competes for $(nproc) cores with the emulator (which serves every request) and with other jobs. That the event-loop lag shows a tail of the same size points at scheduling delay rather than at the send path (send lag p50 $d_p50 ms).")
fi

# (e) Client-made TTFT against a server that costs nothing, concurrency 256. -----------------------
e_values=() e_rps=() e_client=()
for r in $(seq 1 "$repeat"); do
  log "(e) TTFT at concurrency 256 against the instant emulator, run $r/$repeat"
  run_client "e$r" --concurrency 256 --prompt-tokens 8 --output-tokens 16 --warmup 1s \
    --duration "${seconds}s" || continue
  check_all_ok "(e) run $r" 16 || continue
  e_values+=("$(s '.steps[0].latency.ttft_ms.mean')")
  e_rps+=("$(s '.steps[0].throughput.requests_per_s')")
  e_client+=("$client_cpu_pct")
  e_server=$server_cpu_pct e_others=$others_cpu_pct
  e_cmd=$client_cmd
done
log "(e) baseline: TTFT at concurrency 1"
e1_ttft="" e1_cmd=""
if run_client e_c1 --concurrency 1 --prompt-tokens 8 --output-tokens 16 --warmup 1s \
  --duration "${seconds}s" && check_all_ok "(e) concurrency 1" 16; then
  e1_ttft=$(s '.steps[0].latency.ttft_ms.mean')
  e1_p99=$(s '.steps[0].latency.ttft_ms.p99.value')
  e1_cmd=$client_cmd
fi
if [ "${#e_values[@]}" -gt 0 ]; then
  e_med=$(median "${e_values[@]}")
  e_rps_med=$(median "${e_rps[@]}")
  rows+=("| (e) TTFT mean, concurrency 256, against \`emulate --instant\` | < 1 ms | $(calc "%.2f" "$e_med") ms (median of ${#e_values[@]}; runs: $(printf '%.2f ' "${e_values[@]}" | sed 's/ $//')) | - | $(status "$e_med" 1 lower) | \`$e_cmd\` |")
  [ -z "$e1_ttft" ] || rows+=("| (e) baseline: TTFT mean, concurrency 1, against \`emulate --instant\` | (reference) | $(calc "%.3f" "$e1_ttft") ms (p99 $(calc "%.3f" "$e1_p99") ms) | - | - | \`$e1_cmd\` |")
  notes+=("**(e) TTFT against the instant emulator.** Server: \`$server_cmd\`. At concurrency 256 the client completed $(commas "$e_rps_med") requests/s (runs: $(printf '%.0f ' "${e_rps[@]}" | sed 's/ $//')), so by Little's law each request spends on average 256 / $(commas "$e_rps_med") = $(calc "%.1f" "256000 / $e_rps_med") ms in the system; with 16-token answers almost all of that is before the first token, in the server's and the client's queues. TTFT < 1 ms mean at concurrency 256 would need more than 256,000 requests/s, far above (b). The concurrency-1 run is the client-made TTFT without queueing: $( [ -n "$e1_ttft" ] && calc "%.3f" "$e1_ttft" || echo "n/a") ms mean, which includes the emulator's own request handling. CPU at 256 in % of one core: client ${e_client[*]}, emulator ${e_server:-?}, other processes ${e_others:-?} (last run).")
fi
stop_server

# (e') The same against nginx serving a prerendered stream. ----------------------------------------
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$nginx_bin" ]; then
  nginx_dir=$work/nginx
  mkdir -p "$nginx_dir/www/v1/chat" "$nginx_dir/tmp"
  # nginx's workers drop root for an unprivileged user, who must be able to reach the file.
  chmod o+x "$work" "$nginx_dir"
  # The emulator's own wire shape for a 16-token chat answer (role, 16 tokens, usage, [DONE]).
  {
    chunk='{"id":"chatcmpl-prerendered","object":"chat.completion.chunk","created":1717000000,"model":"prerendered","choices":[{"index":0,"delta":'
    printf 'data: %s{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n' "$chunk"
    for i in $(seq 1 16); do
      finish=null
      [ "$i" = 16 ] && finish='"length"'
      printf 'data: %s{"content":"tok%d "},"logprobs":null,"finish_reason":%s}]}\n\n' "$chunk" "$i" "$finish"
    done
    printf 'data: {"id":"chatcmpl-prerendered","object":"chat.completion.chunk","created":1717000000,"model":"prerendered","choices":[],"usage":{"prompt_tokens":8,"total_tokens":24,"completion_tokens":16}}\n\n'
    printf 'data: [DONE]\n\n'
  } >"$nginx_dir/www/v1/chat/completions"
  chmod -R o+rX "$nginx_dir/www"
  nginx_port=""
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 12000))  # below the ephemeral range, so no client port collides
    cat >"$nginx_dir/nginx.conf" <<EOF
# Generated by scripts/bench.sh; serves one prerendered SSE response on loopback.
daemon off;
master_process off;  # one process, so its CPU time is the server's CPU time
worker_processes 1;
pid $nginx_dir/nginx.pid;
error_log $nginx_dir/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $nginx_dir/tmp;
  proxy_temp_path $nginx_dir/tmp;
  fastcgi_temp_path $nginx_dir/tmp;
  uwsgi_temp_path $nginx_dir/tmp;
  scgi_temp_path $nginx_dir/tmp;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    root $nginx_dir/www;
    location = /v1/models {
      default_type application/json;
      return 200 '{"object":"list","data":[{"id":"prerendered","object":"model","owned_by":"nginx"}]}';
    }
    # The static module answers POST with 405; turn that into the file itself.
    location = /v1/chat/completions {
      default_type text/event-stream;
      error_page 405 =200 \$uri;
    }
  }
}
EOF
    "$nginx_bin" -p "$nginx_dir" -e "$nginx_dir/error.log" -c "$nginx_dir/nginx.conf" >"$nginx_dir/stdout" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 50); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then nginx_port=$port; break; fi
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    [ -n "$nginx_port" ] && break
    stop_server
  done
  if [ -n "$nginx_port" ]; then
    server_url=http://127.0.0.1:$nginx_port
    server_cmd="$nginx_bin -p TMPDIR -e TMPDIR/error.log -c TMPDIR/nginx.conf  (one process: master_process off; the config is written by scripts/bench.sh)"
    n_values=() n_rps=() n_client=()
    for r in $(seq 1 "$repeat"); do
      log "(e) TTFT at concurrency 256 against nginx, run $r/$repeat"
      run_client "n$r" --model prerendered --concurrency 256 --prompt-tokens 8 --output-tokens 16 \
        --warmup 1s --duration "${seconds}s" || continue
      check_all_ok "(e) nginx run $r" 16 || continue
      n_values+=("$(s '.steps[0].latency.ttft_ms.mean')")
      n_rps+=("$(s '.steps[0].throughput.requests_per_s')")
      n_client+=("$client_cpu_pct")
      n_server=$server_cpu_pct n_others=$others_cpu_pct
      n_cmd=$client_cmd
    done
    if [ "${#n_values[@]}" -gt 0 ]; then
      n_med=$(median "${n_values[@]}")
      n_rps_med=$(median "${n_rps[@]}")
      rows+=("| (e) TTFT mean, concurrency 256, against nginx serving a prerendered stream | < 1 ms | $(calc "%.2f" "$n_med") ms (median of ${#n_values[@]}; runs: $(printf '%.2f ' "${n_values[@]}" | sed 's/ $//')) | - | $(status "$n_med" 1 lower) | \`$n_cmd\` |")
      notes+=("**(e) TTFT against nginx.** Server: \`$server_cmd\`, serving a 16-token chat stream (the emulator's shape) as a static file with \`Content-Type: text/event-stream\` (\`error_page 405 =200 \$uri\` turns the static module's 405 for POST into the file). The client completed $(commas "$n_rps_med") requests/s (runs: $(printf '%.0f ' "${n_rps[@]}" | sed 's/ $//')), so Little's law gives 256 / $(commas "$n_rps_med") = $(calc "%.1f" "256000 / $n_rps_med") ms per request; the whole response arrives in one read, so TTFT is nearly the whole request. CPU in % of one core: client ${n_client[*]}, nginx ${n_server:-?}, other processes ${n_others:-?} (last run). Same limit as above: in a closed loop of 256, mean TTFT is set by throughput, not by the client's per-event cost.")
    fi
    stop_server
  else
    notes+=("**(e) TTFT against nginx:** not measured, nginx did not start ($(tail -n 2 "$nginx_dir/error.log" 2>/dev/null | tr '\n' ' ')).")
  fi
else
  notes+=("**(e) TTFT against nginx:** not measured, nginx is not installed (\`make bench-deps\` installs it from Debian when it can).")
fi

# (c) 10,000 concurrent open streams, client memory per stream. -----------------------------------
# A slow, flat cost model (250 ms per engine step, nothing per token or sequence) keeps every stream
# open for several seconds; the engine admits all of them at once.
c_streams=10000
c_tokens=16
slow_engine=(--max-num-seqs 16384 --max-batched-tokens 262144 --base-ms 250
  --prefill-ms-per-token 0 --decode-ms-per-seq 0 --kv-ms-per-1k-tokens 0)
if [ "$fd_limit" -lt $((c_streams + 200)) ]; then
  rows+=("| (c) concurrent open streams held, one client thread | 10,000 | not run | - | **short** | - |")
  notes+=("**(c) open streams:** not run, the open-file limit is $fd_limit (needs $((c_streams + 200)) in each process; raise the hard limit).")
else
  start_emulator "${slow_engine[@]}"
  log "(c) baseline: 100 streams"
  c_base_rss=""
  if run_client c_base --concurrency 100 --requests 100 --prompt-tokens 8 --output-tokens "$c_tokens" \
    --connect-timeout 60s && check_all_ok "(c) baseline" "$c_tokens"; then
    c_base_rss=$client_rss_kb
  fi
  log "(c) $c_streams streams"
  if run_client c_10k --concurrency "$c_streams" --requests "$c_streams" --prompt-tokens 8 \
    --output-tokens "$c_tokens" --connect-timeout 60s && check_all_ok "(c) $c_streams streams" "$c_tokens"; then
    # All streams were open at once if the last one to get its first token got it before the
    # first one finished.
    read -r c_n c_last_first c_first_end < <(jq -rn '[inputs | select(.phase == "measure")]
      | "\(length) \(map(.first_token_ns) | max) \(map(.finished_ns) | min)"' "$out/records.jsonl")
    c_open_s=$(calc "%.2f" "($c_first_end - $c_last_first) / 1e9")
    if [ "$c_n" != "$c_streams" ] || [ "$c_last_first" -ge "$c_first_end" ]; then
      fail "(c): $c_n streams; last first token at ${c_last_first} ns is not before the first finish at ${c_first_end} ns, so they were never all open"
    elif [ -z "$c_base_rss" ]; then
      rows+=("| (c) concurrent open streams held, one client thread | 10,000 | $(commas "$c_streams") held together for $c_open_s s; client peak RSS $(commas "$((client_rss_kb / 1024))") MiB (no baseline, so no per-stream figure) | - | met | \`$client_cmd\` |")
    else
      c_per_stream=$(calc "%.1f" "($client_rss_kb - $c_base_rss) * 1024 / ($c_streams - 100) / 1024")
      rows+=("| (c) concurrent open streams held, one client thread | 10,000 | $(commas "$c_streams") held together for $c_open_s s; client peak RSS $(commas "$((client_rss_kb / 1024))") MiB, **$c_per_stream KiB per stream** | - | met | \`$client_cmd\` |")
      notes+=("**(c) open streams.** Server: \`$server_cmd\` (open-file limit $fd_limit for both processes). Proof that the streams were open at the same time: every one of the $(commas "$c_n") requests got its first token before any of them finished (last first token at $(calc "%.2f" "$c_last_first / 1e9") s, first finish at $(calc "%.2f" "$c_first_end / 1e9") s after t0), and all were ok. Memory per stream = (peak RSS of the client with $(commas "$c_streams") streams - peak RSS with 100 streams, $(commas "$c_base_rss") KiB) / $(commas "$((c_streams - 100))"), peak RSS from \`/usr/bin/time -f %M\`; it includes each connection's user-space buffers and parser state, each request's record with its $c_tokens token events and the summary's working memory, so it is an upper bound on the per-stream state (kernel socket buffers are not in RSS). Of it, each stream's \`dialect::OpenAiStreamDecoder\` keeps $(commas "${decoder_heap:-0}") B of heap after its first chunk (micro-benchmark \`BM_OpenAiDecoderHeapBytes\`; the decoders of one thread share one simdjson parser), about $(calc "%.0f" "100 * ${decoder_heap:-0} / 1024 / $c_per_stream")% of the figure. TTFT p50 $(calc "%.0f" "$(s '.steps[0].latency.ttft_ms.p50.value')") ms (10,000 connections opened at once) and TPOT p50 $(calc "%.0f" "$(s '.steps[0].latency.tpot_ms.p50.value')") ms (the cost model asks for 250 ms steps; the rest is the emulator writing $(commas "$c_streams") streams per step on one thread). CPU in % of one core: client $client_cpu_pct, emulator $server_cpu_pct, other processes $others_cpu_pct.")
    fi
  fi
  stop_server
fi

fi  # want macro

# =================================================================================================
# Workload import and fingerprint: `bakeoff fingerprint` on generated traces
# =================================================================================================
# The traces are made here by awk from fixed-seed LCGs, so every run times the same bytes; each
# generator also writes what the fingerprint must report (request count, token totals, prefix
# cache figures), which every run is checked against. The files live in $work (removed by the
# EXIT trap); each is deleted once measured, so at most ~450 MB are on disk at a time.
wl_rows=()   # workload table rows
wl_notes=()  # workload notes
if want workload; then

# LCG shared by the generators: 32-bit state (exact in awk's doubles), the high 16 bits returned.
wl_awk_lcg='function r() { x = (1664525 * x + 1013904223) % 4294967296; return int(x / 65536) }'

# wl_gen_azure FILE ROWS CHECKPOINT: an Azure-format CSV (TIMESTAMP,ContextTokens,GeneratedTokens)
# with Poisson arrivals (mean gap 10 ms) from 2023-11-16 00:00:00, input 1..4096 and output
# 1..1000 tokens, uniform. Writes "rows input_total output_total" to FILE.expected after
# CHECKPOINT rows (for `head`) and after all ROWS.
wl_gen_azure() {
  awk -v n="$2" -v m="$3" -v expect="$1.expected" "$wl_awk_lcg"'
    BEGIN {
      x = 20231116; t = 0; tin = 0; tout = 0  # t: ticks of 100 ns since the first day 00:00
      print "TIMESTAMP,ContextTokens,GeneratedTokens"
      for (i = 1; i <= n; i++) {
        x = (1664525 * x + 1013904223) % 4294967296
        t += int(-log((x + 1) / 4294967297) * 100000)
        it = 1 + r() % 4096; ot = 1 + r() % 1000; tin += it; tout += ot
        s = int(t / 10000000)
        printf "2023-11-%02d %02d:%02d:%02d.%07d,%d,%d\n", 16 + int(s / 86400), int(s / 3600) % 24,
          int(s / 60) % 60, s % 60, t - s * 10000000, it, ot
        if (i == m || i == n) printf "%d %.0f %.0f\n", i, tin, tout > expect
      }
    }' >"$1"
}

# wl_gen_mooncake FILE ROWS GROUPS SHARED FRESH [CHECKPOINT]: Mooncake-style JSONL, timestamps in
# ms (gaps 0..19). FRESH = -1: no hash_ids, input 1..16384 tokens. Otherwise every row has
# SHARED + FRESH ids and 512 x (SHARED + FRESH - 1) + 1 .. 512 x (SHARED + FRESH) input tokens:
# the SHARED ids are the chain of one of GROUPS groups, the FRESH ones are new. Writes "rows
# input_total output_total served_tokens distinct_blocks" to FILE.expected after CHECKPOINT rows
# (for `head`) and after all ROWS, served tokens by the ideal prefix cache of docs/workloads.md (a
# group's chain is matched from its second row on).
wl_gen_mooncake() {
  awk -v n="$2" -v groups="$3" -v shared="$4" -v fresh="$5" -v m="${6:-0}" -v expect="$1.expected" "$wl_awk_lcg"'
    BEGIN {
      x = 512; ts = 0; tin = 0; tout = 0; served = 0; next_id = groups * shared; used = 0
      for (i = 1; i <= n; i++) {
        ts += r() % 20
        if (fresh < 0) {
          it = 1 + r() % 16384; ot = 1 + r() % 1000; tin += it; tout += ot
          printf "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d}\n", ts, it, ot
          if (i == m || i == n) printf "%d %.0f %.0f\n", i, tin, tout > expect
          continue
        }
        it = 512 * (shared + fresh - 1) + 1 + r() % 512; ot = 1 + r() % 1000; g = r() % groups
        tin += it; tout += ot
        if (g in chain) served += (it < 512 * shared) ? it : 512 * shared
        else {
          s = ""
          for (k = 0; k < shared; k++) s = s (k ? ", " : "") (g * shared + k)
          chain[g] = s; used++
        }
        ids = chain[g]
        for (k = 0; k < fresh; k++) { ids = ids (ids == "" ? "" : ", ") next_id; next_id++ }
        printf "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%s]}\n", ts, it, ot, ids
        if (i == m || i == n) printf "%d %.0f %.0f %.0f %.0f\n", i, tin, tout, served, used * shared + i * fresh > expect
      }
    }' >"$1"
}

# wl_time NAME COMMAND...: runs COMMAND under /usr/bin/time; sets wl_wall, wl_cpu (user + system
# seconds, children included), wl_rss_kb and wl_others_pct (CPU of every other process meanwhile,
# % of one core). Returns the command's exit status.
wl_time() {
  local name=$1 rc=0 stat_before stat_after elapsed user sys busy_pct
  shift
  stat_before=$(machine_ticks)
  /usr/bin/time -f '%e %U %S %M' -o "$work/$name.time" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" || rc=$?
  stat_after=$(machine_ticks)
  read -r elapsed user sys wl_rss_kb < <(tail -n 1 "$work/$name.time")
  wl_wall=$elapsed
  wl_cpu=$(calc "%.2f" "$user + $sys")
  busy_pct=$(echo "$stat_before $stat_after" | awk -v n="$(nproc)" '{ d = $3 - $1; print (d > 0) ? 100 * n * (d - ($4 - $2)) / d : 0 }')
  wl_others_pct=$(calc "%.0f" "$busy_pct - 100 * $wl_cpu / ($elapsed > 0 ? $elapsed : 0.01)")
  [ "$wl_others_pct" -ge 0 ] 2>/dev/null || wl_others_pct=0
  return "$rc"
}

# wl_measure LABEL FILE FORMAT: $repeat timed `bakeoff fingerprint` runs over FILE, each checked
# against FILE.expected (request count, token totals; prefix cache served tokens and distinct
# blocks when it has them). Sets wl_n (runs that passed), wl_cpu_rate / wl_wall_rate (median rows
# per CPU-second / per wall second), wl_cpu_rates / wl_wall_rates / wl_others (every run),
# wl_cpu_med (median CPU seconds), wl_rss_max (KiB), wl_cmd and wl_json (a passing run's
# fingerprint.json, kept). Also times the `wc -l` baseline over FILE: wc_cpu / wc_wall (seconds
# per pass, of wc_passes passes run back to back so that /usr/bin/time's 10 ms resolution does
# not matter) and wl_bytes.
wl_measure() {
  local label=$1 file=$2 format=$3 r out rows tin tout served distinct got want_v
  read -r rows tin tout served distinct <"$file.expected"
  wl_rows_expected=$rows
  wl_bytes=$(stat -c %s "$file")
  wl_cpu_rates=() wl_wall_rates=() wl_others=() wl_n=0 wl_rss_max=0
  local cpus=()
  for r in $(seq 1 "$repeat"); do
    out=$work/fp-$(basename "$file")-$r
    log "($label) bakeoff fingerprint $(basename "$file"), run $r/$repeat"
    wl_cmd="$bakeoff_shown fingerprint \$WORK/$(basename "$file") --format $format --out \$WORK/fp"
    if ! wl_time "fp-$(basename "$file")-$r" timeout 600 "$bakeoff" fingerprint "$file" --format "$format" --out "$out" ||
      [ ! -f "$out/fingerprint.json" ]; then
      fail "($label) run $r: bakeoff fingerprint exited non-zero ($(tail -n 3 "$work/fp-$(basename "$file")-$r.stderr" | tr '\n' ' ' | cut -c1-300))"
      continue
    fi
    got=$(jq -r '"\(.requests) \(.input_tokens.total) \(.output_tokens.total)"' "$out/fingerprint.json")
    want_v="$rows $tin $tout"
    if [ -n "$served" ]; then
      got="$got $(jq -r '"\(.prefix_reuse.served_tokens) \(.prefix_reuse.distinct_blocks)"' "$out/fingerprint.json")"
      want_v="$want_v $served $distinct"
    fi
    if [ "$got" != "$want_v" ]; then
      fail "($label) run $r: fingerprint.json reports requests / input total / output total${served:+ / served tokens / distinct blocks} $got, the generator wrote $want_v"
      continue
    fi
    wl_n=$((wl_n + 1))
    cpus+=("$wl_cpu")
    wl_cpu_rates+=("$(calc "%.0f" "$rows / ($wl_cpu > 0 ? $wl_cpu : 0.01)")")
    wl_wall_rates+=("$(calc "%.0f" "$rows / ($wl_wall > 0 ? $wl_wall : 0.01)")")
    wl_others+=("$wl_others_pct")
    [ "$wl_rss_kb" -le "$wl_rss_max" ] || wl_rss_max=$wl_rss_kb
    wl_json=$out/fingerprint.json
  done
  [ "$wl_n" -gt 0 ] || return 1
  wl_cpu_rate=$(median "${wl_cpu_rates[@]}")
  wl_wall_rate=$(median "${wl_wall_rates[@]}")
  wl_cpu_med=$(median "${cpus[@]}")
  # Baseline: a plain line count of the same file (in the page cache, as the fingerprint's was).
  wc_passes=$(( (2000000000 + wl_bytes - 1) / wl_bytes ))
  [ "$wc_passes" -ge 3 ] || wc_passes=3
  # shellcheck disable=SC2016  # expanded by the inner bash
  wl_time "wc-$(basename "$file")" bash -c 'for _ in $(seq 1 "$1"); do wc -l <"$2" >/dev/null; done' _ "$wc_passes" "$file" ||
    fail "($label) baseline: wc -l exited non-zero"
  wc_cpu=$(calc "%.5f" "($wl_cpu > 0 ? $wl_cpu : 0.01) / $wc_passes")
  wc_wall=$(calc "%.5f" "($wl_wall > 0 ? $wl_wall : 0.01) / $wc_passes")
}

# "1,234,567 (1,200,000-1,300,000)": median and range of the runs of a figure.
wl_range() { echo "$(commas "$1") ($(commas "$(minimum "${@:2}")")-$(commas "$(maximum "${@:2}")"))"; }
mib() { calc "%.0f" "$1 / 1024"; }  # KiB -> MiB
# One line about the last wl_measure for the notes.
wl_detail() {
  echo "File $(commas "$(calc "%.0f" "$wl_bytes / 1048576")") MiB ($(calc "%.0f" "$wl_bytes / $wl_rows_expected") B per row), $(calc "%.0f" "$wl_bytes / 1048576 / $wl_cpu_med") MiB per CPU-second; rows per CPU-second of each run $(for v in "${wl_cpu_rates[@]}"; do printf '%s ' "$(commas "$v")"; done | sed 's/ $//'); other processes used ${wl_others[*]}% of one core during the runs (of $(( $(nproc) * 100 ))%); baseline \`wc -l\` over the same file: $(calc "%.3f" "$wc_cpu") CPU-s and $(calc "%.3f" "$wc_wall") s wall per pass ($wc_passes passes), so the fingerprint costs **$(calc "%.0f" "$wl_cpu_med / ($wc_cpu > 0 ? $wc_cpu : 0.001)")x a plain line count** in CPU"
}

wl_seconds_start=$SECONDS
wl_target=1000000

# (w1) and (w3): one 10,000,000-row Azure CSV; its first 2,000,000 rows are (w1)'s file. ------------
log "(w) generating a 10,000,000-row Azure CSV"
gen_start=$SECONDS
wl_gen_s=0  # seconds spent generating traces
wl_gen_azure "$work/azure-10m.csv" 10000000 2000000
head -n 2000001 "$work/azure-10m.csv" >"$work/azure-2m.csv"
head -n 1 "$work/azure-10m.csv.expected" >"$work/azure-2m.csv.expected"
tail -n 1 "$work/azure-10m.csv.expected" >"$work/azure-10m.csv.expected.tmp"
mv "$work/azure-10m.csv.expected.tmp" "$work/azure-10m.csv.expected"
wl_gen_azure_s=$((SECONDS - gen_start))
wl_gen_s=$wl_gen_azure_s
gen_desc="generated by scripts/bench.sh (awk, fixed-seed LCG): Poisson arrivals with a 10 ms mean gap from \`2023-11-16 00:00:00\` (timestamps like \`2023-11-16 05:33:30.6599291\`), input 1..4,096 and output 1..1,000 tokens, uniform"
if wl_measure w1 "$work/azure-2m.csv" azure-csv; then
  wl_rows+=("| (w1) import + fingerprint, Azure CSV, 2,000,000 rows | >= 1,000,000 rows/s per core | $(wl_range "$wl_cpu_rate" "${wl_cpu_rates[@]}") rows/CPU-s | $(wl_range "$wl_wall_rate" "${wl_wall_rates[@]}") rows/s | $(mib "$wl_rss_max") MiB | $(status "$wl_cpu_rate" "$wl_target" higher) | \`$wl_cmd\` |")
  w1_rate=$wl_cpu_rate w1_rss=$wl_rss_max w1_ns=$(calc "%.0f" "1e9 / $wl_cpu_rate")
  wl_notes+=("**(w1) Azure CSV.** \`TIMESTAMP,ContextTokens,GeneratedTokens\`, $gen_desc. Each run was checked: exit 0, and fingerprint.json's \`requests\`, \`input_tokens.total\` and \`output_tokens.total\` equal to the generator's. $(wl_detail). Limit: about $w1_ns ns of CPU per row: the import splits each CSV line and parses its wall-clock timestamp and two integers, the fingerprint sorts the arrival times (for the gaps and peak windows) and summarizes the length columns; one thread, so the per-CPU-second figure is what one core does.")
fi
rm -f "$work/azure-2m.csv"
if wl_measure w3 "$work/azure-10m.csv" azure-csv; then
  wl_rows+=("| (w3) peak RSS of import + fingerprint, Azure CSV, 10,000,000 rows | < 1.5 GiB | $(mib "$wl_rss_max") MiB ($(calc "%.0f" "$wl_rss_max * 1024 / $wl_rows_expected") B per row; largest of $wl_n runs) | - | $(mib "$wl_rss_max") MiB | $(status "$wl_rss_max" $((1536 * 1024)) lower) | \`$wl_cmd\` |")
  wl_rows+=("| (w3) import + fingerprint, Azure CSV, 10,000,000 rows | >= 1,000,000 rows/s per core | $(wl_range "$wl_cpu_rate" "${wl_cpu_rates[@]}") rows/CPU-s | $(wl_range "$wl_wall_rate" "${wl_wall_rates[@]}") rows/s | $(mib "$wl_rss_max") MiB | $(status "$wl_cpu_rate" "$wl_target" higher) | \`$wl_cmd\` |")
  wl_notes+=("**(w3) 10,000,000 rows.** The same generator, 10,000,000 rows (about $(calc "%.1f" "$(jq -r '.arrivals.duration_s' "$wl_json") / 3600") hours of arrivals, so the diurnal figures are computed too); (w1)'s file is its first 2,000,000 rows. Checked like (w1). Peak RSS from \`/usr/bin/time -f %M\`: $(mib "$wl_rss_max") MiB, $(calc "%.0f" "$wl_rss_max * 1024 / $wl_rows_expected") bytes per row, against the 16 bytes per request the fingerprint keeps (docs/workloads.md; $(calc "%.0f" "16 * $wl_rows_expected / 1048576") MiB here): the rest is the copies its length and gap summaries sort, the import's buffers and the binary itself.$( [ -z "${w1_rss:-}" ] || echo " Between (w1)'s 2,000,000 rows ($(mib "$w1_rss") MiB) and these 10,000,000 the peak grows by $(calc "%.1f" "($wl_rss_max - $w1_rss) * 1024 / ($wl_rows_expected - 2000000)") bytes per row, so 1.5 GiB would be reached near $(commas "$(calc "%.0f" "(2000000 + (1572864 - $w1_rss) / (($wl_rss_max - $w1_rss) / ($wl_rows_expected - 2000000))) / 1e6")") million rows of this shape.") $(wl_detail). Rows per CPU-second against (w1)'s 2,000,000 rows: $(calc "%.2f" "$wl_cpu_rate / ${w1_rate:-$wl_cpu_rate}")x.")
fi
rm -f "$work/azure-10m.csv"

# (w2) Mooncake-style JSONL, 2,000,000 rows: no ids, 8 shared-heavy ids, 8 cache-resident ids. ----
log "(w) generating 2,000,000-row Mooncake JSONL without hash_ids"
gen_start=$SECONDS
wl_gen_mooncake "$work/mooncake-noids-2m.jsonl" 2000000 1 0 -1
wl_gen_s=$((wl_gen_s + SECONDS - gen_start))
if wl_measure "w2 no ids" "$work/mooncake-noids-2m.jsonl" mooncake; then
  w2a_rate=$wl_cpu_rate
  wl_rows+=("| (w2) import + fingerprint, Mooncake JSONL without \`hash_ids\`, 2,000,000 rows | >= 1,000,000 rows/s per core | $(wl_range "$wl_cpu_rate" "${wl_cpu_rates[@]}") rows/CPU-s | $(wl_range "$wl_wall_rate" "${wl_wall_rates[@]}") rows/s | $(mib "$wl_rss_max") MiB | $(status "$wl_cpu_rate" "$wl_target" higher) | \`$wl_cmd\` |")
  wl_notes+=("**(w2) Mooncake JSONL without ids.** Rows \`{\"timestamp\": ms, \"input_length\": n, \"output_length\": m}\`, timestamps rising by 0..19 ms, input 1..16,384 and output 1..1,000 tokens, uniform. Checked like (w1). $(wl_detail). Limit: about $(calc "%.0f" "1e9 / $wl_cpu_rate") ns of CPU per row: each line is read by the importer's fast path for plain Mooncake rows (any other line goes through the simdjson DOM parser, which gives the same row or the same message), plus the same summaries as (w1).")
fi
rm -f "$work/mooncake-noids-2m.jsonl"

# (w2) and (w3) with ids: one 10,000,000-row Mooncake JSONL with 8 ids a row; its first 2,000,000
# rows are (w2)'s file.
log "(w) generating a 10,000,000-row Mooncake JSONL with 8 hash_ids a row"
gen_start=$SECONDS
wl_gen_mooncake "$work/mooncake-ids-10m.jsonl" 10000000 4096 6 2 2000000
head -n 2000000 "$work/mooncake-ids-10m.jsonl" >"$work/mooncake-ids-2m.jsonl"
head -n 1 "$work/mooncake-ids-10m.jsonl.expected" >"$work/mooncake-ids-2m.jsonl.expected"
tail -n 1 "$work/mooncake-ids-10m.jsonl.expected" >"$work/mooncake-ids-10m.jsonl.expected.tmp"
mv "$work/mooncake-ids-10m.jsonl.expected.tmp" "$work/mooncake-ids-10m.jsonl.expected"
wl_gen_ids_s=$((SECONDS - gen_start))
wl_gen_s=$((wl_gen_s + wl_gen_ids_s))
ids_desc="6 shared by one of 4,096 groups + 2 new"
if wl_measure "w2 ids" "$work/mooncake-ids-2m.jsonl" mooncake; then
  w2b_rate=$wl_cpu_rate w2b_rss=$wl_rss_max
  w2b_share=$(jq -r '.prefix_reuse.share * 100' "$wl_json")
  w2b_distinct=$(jq -r '.prefix_reuse.distinct_blocks' "$wl_json")
  wl_rows+=("| (w2) import + fingerprint, Mooncake JSONL with 8 \`hash_ids\` a row ($ids_desc), 2,000,000 rows | >= 1,000,000 rows/s per core | $(wl_range "$wl_cpu_rate" "${wl_cpu_rates[@]}") rows/CPU-s | $(wl_range "$wl_wall_rate" "${wl_wall_rates[@]}") rows/s | $(mib "$wl_rss_max") MiB | $(status "$wl_cpu_rate" "$wl_target" higher) | \`$wl_cmd\` |")
  w2b_detail=$(wl_detail)
fi
rm -f "$work/mooncake-ids-2m.jsonl"
if wl_measure "w3 ids" "$work/mooncake-ids-10m.jsonl" mooncake; then
  w3b_distinct=$(jq -r '.prefix_reuse.distinct_blocks' "$wl_json")
  wl_rows+=("| (w3) peak RSS of import + fingerprint, Mooncake JSONL with 8 \`hash_ids\` a row ($ids_desc), 10,000,000 rows | < 1.5 GiB | $(mib "$wl_rss_max") MiB ($(calc "%.0f" "$wl_rss_max * 1024 / $wl_rows_expected") B per row; largest of $wl_n runs) | - | $(mib "$wl_rss_max") MiB | $(status "$wl_rss_max" $((1536 * 1024)) lower) | \`$wl_cmd\` |")
  wl_rows+=("| (w3) import + fingerprint, Mooncake JSONL with 8 \`hash_ids\` a row, 10,000,000 rows | >= 1,000,000 rows/s per core | $(wl_range "$wl_cpu_rate" "${wl_cpu_rates[@]}") rows/CPU-s | $(wl_range "$wl_wall_rate" "${wl_wall_rates[@]}") rows/s | $(mib "$wl_rss_max") MiB | $(status "$wl_cpu_rate" "$wl_target" higher) | \`$wl_cmd\` |")
  # The chain table (docs/workloads.md): 8-byte slots, a power of two from 1,024, at most 70% full;
  # while it doubles, the old table is held too. Its size for these distinct blocks, and the most
  # distinct blocks whose table (with its predecessor) and 16 bytes per request fit in 1.5 GiB.
  # And the table for as many rows each bringing 15 new blocks, as the real Mooncake trace's do
  # (182,790 distinct blocks in 12,031 requests, docs/workloads.md).
  read -r w3b_slots w3b_max_distinct w3b_real_distinct w3b_real_gib < <(awk -v d="$w3b_distinct" -v rows="$wl_rows_expected" 'BEGIN {
    s = 1024; while (s * 0.7 < d) s *= 2
    m = 1024; while (1.5 * 8 * (2 * m) + 16 * rows <= 1.5 * 1073741824) m *= 2
    r = 15 * rows; t = 1024; while (t * 0.7 < r) t *= 2
    printf "%d %d %d %g\n", s, m * 0.7, r, t * 8 / 1073741824 }')
  wl_notes+=("**(w3) Mooncake JSONL with ids, 10,000,000 rows.** The same generator as (w2) with ids, 10,000,000 rows; (w2)'s file is its first 2,000,000 rows. Checked like (w2): $(commas "$w3b_distinct") distinct chain blocks. Peak RSS from \`/usr/bin/time -f %M\`: $(mib "$wl_rss_max") MiB, $(calc "%.0f" "$wl_rss_max * 1024 / $wl_rows_expected") bytes per row. The chain table for these blocks has $(commas "$w3b_slots") slots of 8 bytes ($(calc "%.0f" "$w3b_slots * 8 / 1048576") MiB), and while it doubled to that size the old one was held too ($(calc "%.0f" "$w3b_slots * 4 / 1048576") MiB more); the fingerprint keeps 16 bytes per request ($(calc "%.0f" "16 * $wl_rows_expected / 1048576") MiB); the rest is the import's buffers, the summaries' sort buffers and the binary.$( [ -z "${w2b_rss:-}" ] || echo " Between (w2)'s 2,000,000 rows ($(mib "$w2b_rss") MiB) and these 10,000,000 the peak grows by $(calc "%.1f" "($wl_rss_max - $w2b_rss) * 1024 / ($wl_rows_expected - 2000000)") bytes per row (the table's doublings make it a staircase, not a line).") What bounds the memory is the number of distinct chain blocks, not of rows: at 10,000,000 rows the table and its predecessor fit in 1.5 GiB up to about $(commas "$w3b_max_distinct") distinct blocks; a trace whose rows each bring 15 new blocks, as the real Mooncake trace's do (docs/workloads.md), would have $(commas "$w3b_real_distinct") at $(commas "$wl_rows_expected") rows and need a $w3b_real_gib GiB table ($(calc "%g" "1.5 * $w3b_real_gib") GiB while doubling): over the limit. $(wl_detail). Rows per CPU-second against (w2)'s 2,000,000 rows: $(calc "%.2f" "$wl_cpu_rate / ${w2b_rate:-$wl_cpu_rate}")x.")
fi
rm -f "$work/mooncake-ids-10m.jsonl"

log "(w) generating 2,000,000-row Mooncake JSONL with 8 hash_ids a row from 64 chains"
gen_start=$SECONDS
wl_gen_mooncake "$work/mooncake-hot-2m.jsonl" 2000000 64 8 0
wl_gen_s=$((wl_gen_s + SECONDS - gen_start))
if wl_measure "w2 reference" "$work/mooncake-hot-2m.jsonl" mooncake; then
  w2c_rate=$wl_cpu_rate
  wl_rows+=("| (w2) reference: the same with every row's 8 ids one of 64 chains (512 distinct blocks: the chain table stays in cache) | (reference) | $(wl_range "$wl_cpu_rate" "${wl_cpu_rates[@]}") rows/CPU-s | $(wl_range "$wl_wall_rate" "${wl_wall_rates[@]}") rows/s | $(mib "$wl_rss_max") MiB | - | \`$wl_cmd\` |")
  w2c_detail=$(wl_detail)
fi
rm -f "$work/mooncake-hot-2m.jsonl"
if [ -n "${w2b_rate:-}" ]; then
  note="**(w2) Mooncake JSONL with ids.** Rows as above plus \`\"hash_ids\": [...]\` of 8 ids and 3,585..4,096 input tokens (8 blocks of 512, the last partial): the first 6 ids are the chain of one of 4,096 groups (drawn uniformly), the last 2 are new, so an ideal prefix cache serves 6 of 8 blocks of every row after its group's first: share $(calc "%.1f" "$w2b_share")%, $(commas "$w2b_distinct") distinct chain blocks. Each run was checked as (w1) and also for \`prefix_reuse.served_tokens\` and \`distinct_blocks\` equal to the generator's own count. $w2b_detail; peak RSS $(mib "$w2b_rss") MiB."
  if [ -n "${w2a_rate:-}" ] && [ -n "${w2c_rate:-}" ]; then
    ids_ns=$(calc "%.0f" "(1e9 / $w2b_rate - 1e9 / $w2a_rate) / 8")
    hot_ns=$(calc "%.0f" "(1e9 / $w2c_rate - 1e9 / $w2a_rate) / 8")
    note="$note Where the time goes: a row costs $(calc "%.0f" "1e9 / $w2b_rate") ns of CPU against $(calc "%.0f" "1e9 / $w2a_rate") ns without ids, about $ids_ns ns per id. The reference run, whose rows have the same 8 ids (parsed the same way, and as many chain lookups) but only 512 distinct blocks, costs $(calc "%.0f" "1e9 / $w2c_rate") ns per row, $hot_ns ns per id (${w2c_detail,}). So of the ids' cost about $(calc "%.0f" "($ids_ns > $hot_ns) ? 100 * ($ids_ns - $hot_ns) / $ids_ns : 0")% is the chain table's growth to $(commas "$w2b_distinct") entries and its lookups going to memory, and the rest parsing the ids and hashing their chains. The lookups overlap: each row's chain hashes are computed before any lookup and their table slots prefetched, and a row is counted only once 64 ids of later rows are in flight behind it (docs/workloads.md, \"Speed and memory\"). Limit: rows per second scale with the ids a row carries; real Mooncake rows carry one id per 512 prompt tokens (24 a row on average in the real trace, of which 15 are new blocks), so ids per CPU-second ($(commas "$(calc "%.0f" "8 * $w2b_rate")") here) is the rate to scale by."
  fi
  wl_notes+=("$note")
fi
wl_seconds=$((SECONDS - wl_seconds_start))
wl_notes+=("**Time.** The section took $wl_seconds s, of which generating the traces with awk $wl_gen_s s (the 10,000,000-row CSV $wl_gen_azure_s s, the 10,000,000-row Mooncake JSONL with ids ${wl_gen_ids_s:-0} s); the files lived in the script's temporary folder and were deleted after use.")
fi  # want workload

# =================================================================================================
# Emulated engine: the simulator and the real-time server (scripts/bench_emulator.sh)
# =================================================================================================
if want emulator; then
  log "emulated engine (scripts/bench_emulator.sh)"
  "$(dirname "$0")/bench_emulator.sh" "$build" "$bakeoff" "$work/emulator.md" ||
    fail "emulated engine: a figure failed its checks (see its section)"
fi

# =================================================================================================
# Report pages for a large run against a small one (scripts/bench_report.sh)
# =================================================================================================
if want report; then
  log "report pages: a ${BENCH_REPORT_REQUESTS:-1000000}-request run against a 10,000-request one (scripts/bench_report.sh)"
  "$(dirname "$0")/bench_report.sh" "$bakeoff" "$work/report.md" "$bakeoff_shown" ||
    fail "report pages: a figure failed its checks (see its section)"
fi

# =================================================================================================
# Client memory over a long open loop (scripts/bench_soak.sh)
# =================================================================================================
if want soak; then
  log "soak: client memory over ${BENCH_SOAK_SECONDS:-1800} s at 2,000 requests/s (scripts/bench_soak.sh)"
  "$(dirname "$0")/bench_soak.sh" "$bakeoff" "$work/soak.md" "$bakeoff_shown" ||
    fail "soak: the figure failed its checks (see its section)"
fi

# =================================================================================================
# docs/BENCHMARKS.md
# =================================================================================================
finished=$(date -u +%Y-%m-%dT%H:%M:%SZ)
machine_load_end=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mem_total=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
compiler=$(grep -m1 '^CMAKE_CXX_COMPILER:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)
compiler_version=$("${compiler:-c++}" --version 2>/dev/null | head -n 1)
build_type=$(grep -m1 '^CMAKE_BUILD_TYPE:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
mkdir -p "$(dirname "$doc")"
# A section regenerated alone may be pasted into a document whose Machine table is older: it says
# when and where it ran (nothing on a full run). `ran_alone_note blank` ends it with a blank line.
ran_alone_note() {
  [ -n "${BENCH_ONLY:-}" ] || return 0
  echo "This section ran alone (\`BENCH_ONLY=$BENCH_ONLY\`) from $started to $finished on $(nproc) CPUs ($cpu_model),"
  echo "load average $machine_load_start at its start and $machine_load_end at its end."
  if [ "${1:-}" = blank ]; then echo; fi
}
{
  echo "# Benchmarks"
  echo
  echo "Generated by \`make bench\` (scripts/bench.sh); every run overwrites this file. Each figure is"
  echo "checked before it is reported: a run whose requests were not all ok, whose token counts differ"
  echo "from what the server sent, whose micro-benchmark computed a wrong answer, or whose fingerprint"
  echo "disagrees with the trace the script generated for it is listed as FAILED."
  echo "Everything ran on 127.0.0.1. Figures marked *emulated* come from bakeoff's emulated engine and"
  echo "describe the client and the emulator, never a real engine."
  echo
  echo "## Machine"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date (UTC) | $started to $finished ($((SECONDS - bench_start_s)) s) |"
  echo "| CPUs (nproc) | $(nproc) |"
  echo "| CPU model | ${cpu_model:-unknown} |"
  echo "| memory | $mem_total |"
  echo "| kernel | $(uname -r) |"
  echo "| compiler | ${compiler_version:-unknown} ($build_type, \`cmake --preset release\`) |"
  echo "| commit | $commit |"
  echo "| load average at start / end | $machine_load_start / $machine_load_end |"
  echo "| open-file limit | $fd_limit |"
  echo
  echo "The machine is shared (the load average above counts other jobs), so absolute times are noisy;"
  echo "the micro-benchmarks are quoted against a baseline measured in the same binary and run, and"
  echo "every macro figure is the median of $repeat runs with its range."
  echo
  if [ -n "${BENCH_ONLY:-}" ]; then
    echo "**Partial run** (\`BENCH_ONLY=$BENCH_ONLY\`): only these sections ran: ${only//,/, }."
    echo
  fi
  if want macro; then
  echo "## Loopback macro-benchmarks (one client thread)"
  echo
  echo "\`bakeoff bench --workers 1\` against \`bakeoff emulate\` (*emulated*) and nginx, read from each"
  echo "run's summary.json and records.jsonl. The server command of each figure is in its note."
  echo
  echo "| figure | target | measured (wall clock) | per client CPU-second | status | command |"
  echo "|---|---|---|---|---|---|"
  for row in "${rows[@]}"; do echo "$row"; done
  echo
  echo "### Notes and limits"
  echo
  for note in "${notes[@]}"; do echo "- $note"; echo; done
  fi  # want macro
  if want micro; then
  echo "## Micro-benchmarks"
  echo
  echo "Google Benchmark, \`bakeoff_micro_bench\`: median of 3 repetitions, per-CPU-time rates (the"
  echo "wall time on a shared machine includes waiting for a core). Input: one OpenAI chat stream of"
  echo "$(commas "${events_per_stream%.*}") SSE events in vLLM's shape (bench/chat_stream.cc), fed in 64 KiB reads."
  echo
  echo "Command: \`$micro_cmd\`"
  echo
  echo "| benchmark | measured | baseline (same binary, same run) | ratio |"
  echo "|---|---|---|---|"
  for row in "${micro_rows[@]}"; do echo "$row"; done
  [ "${#micro_rows[@]}" -gt 0 ] || echo "| (micro-benchmarks failed) | | | |"
  echo
  fi  # want micro
  if want workload; then
    echo "## Workload import and fingerprint"
    echo
    echo "\`bakeoff fingerprint\` (docs/workloads.md) importing and describing traces that the script"
    echo "generates (awk, fixed seeds, so every run reads the same bytes) in its temporary folder \`\$WORK\`."
    echo "One thread: rows per CPU-second (user + system) is the rate per core; the wall-clock rate on"
    echo "this shared machine also counts waiting for a core. Each figure is the median of $repeat runs with"
    echo "its range, and every run is checked: exit status 0 and fingerprint.json's request count and token"
    echo "totals (and, for rows with \`hash_ids\`, the prefix cache's served tokens and distinct blocks)"
    echo "equal to what the generator wrote."
    ran_alone_note
    echo
    echo "| figure | target | measured (per core) | wall clock | peak RSS | status | command |"
    echo "|---|---|---|---|---|---|---|"
    for row in "${wl_rows[@]}"; do echo "$row"; done
    [ "${#wl_rows[@]}" -gt 0 ] || echo "| (every workload run failed) | | | | | | |"
    echo
    echo "### Notes and limits"
    echo
    for note in "${wl_notes[@]}"; do echo "- $note"; echo; done
  fi
  if want emulator && [ -f "$work/emulator.md" ]; then
    sed "s|$work/bin/bakeoff|$bakeoff_shown|g" "$work/emulator.md"
    echo
  fi
  if want report && [ -f "$work/report.md" ]; then
    cat "$work/report.md"
    ran_alone_note blank
  fi
  if want soak && [ -f "$work/soak.md" ]; then
    cat "$work/soak.md"
    ran_alone_note blank
  fi
  if [ "${#failures[@]}" -gt 0 ]; then
    echo "## FAILED"
    echo
    for f in "${failures[@]}"; do echo "- $f"; done
    echo
  fi
} >"$doc"
log "wrote $doc"
cat "$doc"
[ "${#failures[@]}" = 0 ] || exit 1

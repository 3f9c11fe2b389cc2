#!/usr/bin/env bash
# scripts/bench_macro.sh: the macro section of `make bench` (scripts/bench.sh runs it). Owns the
# loopback macro-benchmarks: `bakeoff bench --workers 1` against `bakeoff emulate --instant`, a
# slow emulator holding 10,000 streams, and nginx serving a prerendered stream (when installed).
# Each run's figures are facts (scripts/bench_lib.sh) keyed by the figure: (a) token events/s,
# (b) short requests/s, (d) send lag at 2,000/s, (e) TTFT at 256 (and e1, its concurrency-1
# baseline; n, the same against nginx), (c) 10,000 open streams (c_base: 100), and, when
# BENCH_BASELINE_BAKEOFF names an earlier commit's binary (BENCH_BASELINE_WHAT: which, in words),
# b_base: (b) with that client, its runs taken in turn with (b)'s on the same server, so a fall of
# the client is told from the machine's speed, which moves by a third between runs. The run parameters
# are the section's scenarios in bench/benchmarks.yaml. Every run is checked (all requests ok with
# the expected output tokens; (d) its offered rate; (c) every stream open at once); a run that
# fails a check is a failure and records no figures.
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=macro
scenarios "$section"
section_begin "$section"
seconds=${BAKEOFF_BENCH_SECONDS:-8}
repeat=${BAKEOFF_BENCH_REPEAT:-3}
fact "$section" macro.repeat "$repeat"
bakeoff=$BAKEOFF_BENCH_BIN/bakeoff
shown=$BAKEOFF_BENCH_BUILD/bakeoff
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT
log() { echo "bench(macro): $*" >&2; }

# start_emulator KEY ARGS...: `bakeoff emulate` on an ephemeral loopback port; sets server_url and
# records its command as the fact KEY.
start_emulator() {
  local key=$1 log_file=$work/emulator.$RANDOM.log
  shift
  "$bakeoff" emulate --host 127.0.0.1 --port 0 "$@" >"$log_file" 2>&1 &
  server_pid=$!
  server_url=$(wait_for_url "$log_file" "$server_pid")
  [ -n "$server_url" ] || { cat "$log_file" >&2; failure "$section" "the emulator did not start"; exit 1; }
  fact "$section" "$key" "$shown emulate --host 127.0.0.1 --port 0 $*"
}

# run_client FIGURE EXPECTED_TOKENS BENCH-ARGS...: one `bakeoff bench` (the binary in `client`,
# shown in commands as `client_shown`) against server_url with one client thread, checked (every
# request ok with EXPECTED_TOKENS output tokens); returns 1 (after recording a failure) otherwise.
# Sets out, summary, and what record_client records.
client=$bakeoff
client_shown=$shown
run_client() {
  local figure=$1 tokens=$2
  shift 2
  out=$work/$figure.$RANDOM
  summary=$out/summary.json
  local cmd=("$client" bench --url "$server_url" --workers 1 --no-calibrate --out "$out" "$@")
  shown_cmd="${cmd[*]}"
  shown_cmd=${shown_cmd/#$client/$client_shown}
  shown_cmd=${shown_cmd//$out/\$WORK/$figure}
  local server_before wall_before wall_after stat_before stat_after rc=0
  server_before=$(cpu_seconds "$server_pid")
  stat_before=$(machine_ticks)
  wall_before=$(date +%s.%N)
  /usr/bin/time -f '%e %U %S %M' -o "$out.time" \
    timeout --signal=INT --kill-after=15 "$((seconds * 3 + 90))" "${cmd[@]}" >"$out.stdout" 2>"$out.stderr" &
  local time_pid=$! client_pid="" timeout_pid="" size last_size=-1 ticks=0 load_ticks=0
  # While it runs, note the client's CPU time whenever records.jsonl grows: the CPU at the last
  # growth is what the load itself cost, without the analysis that follows.
  while kill -0 "$time_pid" 2>/dev/null; do
    if [ -z "$client_pid" ]; then
      timeout_pid=$(first_child "$time_pid")
      [ -z "$timeout_pid" ] || client_pid=$(first_child "$timeout_pid")
    fi
    if [ -n "$client_pid" ]; then
      size=$(stat -c %s "$out/records.jsonl" 2>/dev/null || echo 0)
      ticks=$(process_ticks "$client_pid")
      if [ "$size" != "$last_size" ] && [ "$ticks" -gt 0 ]; then last_size=$size load_ticks=$ticks; fi
    fi
    sleep 0.2
  done
  wait "$time_pid" || rc=$?
  wall_after=$(date +%s.%N)
  stat_after=$(machine_ticks)
  if [ "$rc" != 0 ] || [ ! -f "$summary" ]; then
    failure "$section" "($figure) bakeoff bench exited $rc ($(tail -n 4 "$out.stderr" "$out.stdout" | tr '\n' ' ' | cut -c1-400))"
    return 1
  fi
  local measured ok min max estimated
  read -r measured ok min max estimated < <(jq -r '.steps[0] | "\(.requests.measured) \(.requests.outcomes.ok // 0) \(.tokens.output.min // 0) \(.tokens.output.max // 0) \(.throughput.output_tokens_estimated)"' "$summary")
  if [ "$measured" = 0 ] || [ "$ok" != "$measured" ]; then
    failure "$section" "($figure) $ok of $measured requests ok ($(jq -c '.steps[0].requests.outcomes' "$summary"))"
    return 1
  fi
  if [ "$min" != "$tokens" ] || [ "$max" != "$tokens" ] || [ "$estimated" != false ]; then
    failure "$section" "($figure) output tokens per request $min..$max (estimated: $estimated), expected $tokens"
    return 1
  fi
  local elapsed user sys busy_pct
  read -r elapsed user sys client_rss_kib < <(tail -n 1 "$out.time")
  load_cpu_s=$(calc "%.3f" "$load_ticks / $clk_tck")
  # A run too short for the sampler to see falls back to the whole process.
  [ "$load_ticks" -gt 0 ] || load_cpu_s=$(calc "%.3f" "$user + $sys")
  client_pct=$(calc "%.0f" "100 * ($user + $sys) / $elapsed")
  server_pct=$(calc "%.0f" "100 * ($(cpu_seconds "$server_pid") - $server_before) / ($wall_after - $wall_before)")
  busy_pct=$(echo "$stat_before $stat_after" | awk -v n="$(nproc)" '{ print 100 * n * (($3 - $1) - ($4 - $2)) / ($3 - $1) }')
  others_pct=$(calc "%.0f" "$busy_pct - $client_pct - $server_pct")
  [ "$others_pct" -ge 0 ] 2>/dev/null || others_pct=0
}

# record_client FIGURE: the last run's facts FIGURE.*: its command; the CPU of the client, the
# server and every other process meanwhile (% of one core); the client's CPU seconds up to its last
# record (load_cpu_s: the load without the final analysis) and its peak RSS; and the summary's
# request counts, throughput and latency figures.
record_client() {
  local figure=$1
  fact "$section" "$figure.command" "$shown_cmd"
  fact "$section" "$figure.client_cpu_pct" "$client_pct"
  fact "$section" "$figure.server_cpu_pct" "$server_pct"
  fact "$section" "$figure.others_cpu_pct" "$others_pct"
  fact "$section" "$figure.load_cpu_s" "$load_cpu_s"
  fact "$section" "$figure.client_rss_kib" "$client_rss_kib"
  jq -c --arg s "$section" --arg f "$figure" '.steps[0] | {
      requests: .requests.measured, warmup_requests: .requests.warmup, duration_s,
      requests_per_s: .throughput.requests_per_s, offered_per_s: .throughput.offered_requests_per_s,
      ttft_mean_ms: .latency.ttft_ms.mean, ttft_p50_ms: .latency.ttft_ms.p50.value,
      ttft_p99_ms: .latency.ttft_ms.p99.value, tpot_p50_ms: .latency.tpot_ms.p50.value,
      send_lag_p50_ms: .latency.send_lag_ms.p50.value, send_lag_p99_ms: .latency.send_lag_ms.p99.value,
      loop_lag_p99_ms: .latency.event_loop_lag_ms.p99.value,
      generator_limited: (.generator_limited.limited | tostring)}
    | to_entries[] | select(.value != null) | {section: $s, key: ($f + "." + .key), value}' "$summary" >>"$BAKEOFF_BENCH_FACTS"
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

# --- Against `bakeoff emulate --instant` ----------------------------------------------------------
# shellcheck disable=SC2154,SC2086  # the *_args and *_tokens come from the spec; args split on purpose
start_emulator macro.server_instant --instant
for r in $(seq 1 "$repeat"); do
  log "(a) token events/s, run $r/$repeat"
  run_client a "$a_tokens" $a_args --duration "${seconds}s" || continue
  read -r events all_events < <(counted_events)
  if [ "$events" = mismatch ]; then failure "$section" "(a) run $r: counted token events differ from usage"; continue; fi
  record_client a
  fact "$section" a.events "$events"
  fact "$section" a.all_events "$all_events"
done
baseline=${BENCH_BASELINE_BAKEOFF:-}
if [ -n "$baseline" ]; then
  [ -x "$baseline" ] || { failure "$section" "BENCH_BASELINE_BAKEOFF=$baseline is not an executable"; exit 1; }
  fact_text "$section" macro.baseline_what "${BENCH_BASELINE_WHAT:-$baseline}"
fi
for r in $(seq 1 "$repeat"); do
  log "(b) short requests/s, run $r/$repeat"
  if run_client b "$b_tokens" $b_args --duration "${seconds}s"; then record_client b; fi
  [ -n "$baseline" ] || continue
  log "(b) short requests/s with the baseline client, run $r/$repeat"
  client=$baseline client_shown=BASELINE
  if run_client b_base "$b_tokens" $b_args --duration "${seconds}s"; then record_client b_base; fi
  client=$bakeoff client_shown=$shown
done
for r in $(seq 1 "$repeat"); do
  log "(d) send lag at $d_rate requests/s, run $r/$repeat"
  # The offered rate is checked before the run's facts count: a generator that fell behind
  # would make its send lag meaningless.
  run_client d "$d_tokens" $d_args || continue
  offered=$(jq -r '.steps[0].throughput.offered_requests_per_s' "$summary")
  if awk -v o="$offered" -v r="$d_rate" 'BEGIN { exit !(o < 0.95 * r || o > 1.05 * r) }'; then
    failure "$section" "(d) run $r: offered $offered requests/s, expected $d_rate +- 5%"
    continue
  fi
  record_client d
done
for r in $(seq 1 "$repeat"); do
  log "(e) TTFT at concurrency 256 against the instant emulator, run $r/$repeat"
  if run_client e "$e_tokens" $e_args --duration "${seconds}s"; then record_client e; fi
done
log "(e) baseline: TTFT at concurrency 1"
if run_client e1 "$e_tokens" $e1_args --duration "${seconds}s"; then record_client e1; fi
stop_server

# --- (c) 10,000 concurrent open streams, client memory per stream -----------------------------------
# A slow, flat cost model (c_engine) keeps every stream open for several seconds; the engine admits
# all of them at once.
if [ "$(ulimit -n)" -lt $((c_streams + 200)) ]; then
  failure "$section" "(c) not run: the open-file limit is $(ulimit -n) (needs $((c_streams + 200)) in each process; raise the hard limit)"
else
  start_emulator macro.server_slow $c_engine
  log "(c) baseline: 100 streams"
  if run_client c_base "$c_tokens" --concurrency 100 --requests 100 --prompt-tokens 8 \
    --output-tokens "$c_tokens" --connect-timeout 60s; then record_client c_base; fi
  log "(c) $c_streams streams"
  if run_client c "$c_tokens" --concurrency "$c_streams" --requests "$c_streams" --prompt-tokens 8 \
    --output-tokens "$c_tokens" --connect-timeout 60s; then
    # All streams were open at once if the last one to get its first token got it before the
    # first one finished.
    read -r c_n c_last_first c_first_end < <(jq -rn '[inputs | select(.phase == "measure")]
      | "\(length) \(map(.first_token_ns) | max) \(map(.finished_ns) | min)"' "$out/records.jsonl")
    if [ "$c_n" != "$c_streams" ] || [ "$c_last_first" -ge "$c_first_end" ]; then
      failure "$section" "(c) $c_n streams; last first token at ${c_last_first} ns is not before the first finish at ${c_first_end} ns, so they were never all open"
    else
      record_client c
      fact "$section" c.streams "$c_n"
      fact "$section" c.last_first_token_ns "$c_last_first"
      fact "$section" c.first_finish_ns "$c_first_end"
    fi
  fi
  stop_server
fi

# --- (e) against nginx serving a prerendered stream -----------------------------------------------
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$nginx_bin" ]; then
  fact "$section" n.not_run "nginx is not installed (\`make bench-deps\` installs it from Debian when it can)"
else
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
    cat >"$nginx_dir/nginx.conf" <<CONF
# Generated by scripts/bench_macro.sh; serves one prerendered SSE response on loopback.
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
CONF
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
  if [ -z "$nginx_port" ]; then
    fact "$section" n.not_run "nginx did not start ($(tail -n 2 "$nginx_dir/error.log" 2>/dev/null | tr '\n' ' '))"
  else
    server_url=http://127.0.0.1:$nginx_port
    fact "$section" macro.server_nginx "$nginx_bin -p TMPDIR -e TMPDIR/error.log -c TMPDIR/nginx.conf"
    for r in $(seq 1 "$repeat"); do
      log "(e) TTFT at concurrency 256 against nginx, run $r/$repeat"
      if run_client n "$e_tokens" --model prerendered $e_args --duration "${seconds}s"; then record_client n; fi
    done
    stop_server
  fi
fi
section_end "$section"
exit 0
}

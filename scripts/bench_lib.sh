# scripts/bench_lib.sh: sourced by scripts/bench*.sh. Owns how a benchmark script reports what it
# measured: fact lines in $BAKEOFF_BENCH_FACTS ({"section", "key", "value"} or {"section",
# "failure"}, benchdoc/benchmarks_doc.h), which bakeoff_bench_doc merges into docs/benchmarks.json and
# renders into docs/BENCHMARKS.md through bench/benchmarks.yaml. A script records each run's raw
# figures; medians, ratios and prose live in the spec. Also the helpers every script measures with.
# Needs: jq, awk; BAKEOFF_BENCH_FACTS (a file) and BAKEOFF_BENCH_SPEC (bench/benchmarks.yaml) set.

# fact SECTION KEY VALUE...: one fact line per value (a run's figure; repeated keys make a list).
# A value written as a decimal number (1, -2.5, 3e9) is a number, anything else ("inf", a command)
# a string.
number_or_text='if test("^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$") then tonumber else . end'
fact() {
  local section=$1 key=$2 value
  shift 2
  for value in "$@"; do
    jq -nc --arg s "$section" --arg k "$key" --arg v "$value" \
      "{section: \$s, key: \$k, value: (\$v | $number_or_text)}" >>"$BAKEOFF_BENCH_FACTS"
  done
}

# fact_text SECTION KEY VALUE: one fact whose value stays a string even where it reads as a
# number (a short commit hash such as 490e862 is 490 x 10^862 to jq).
fact_text() {
  jq -nc --arg s "$1" --arg k "$2" --arg v "$3" '{section: $s, key: $k, value: $v}' >>"$BAKEOFF_BENCH_FACTS"
}

# fact_lines SECTION KEY < LINES: one fact per input line (a long list, e.g. a soak's samples).
fact_lines() {
  jq -Rc --arg s "$1" --arg k "$2" "{section: \$s, key: \$k, value: (. | $number_or_text)}" >>"$BAKEOFF_BENCH_FACTS"
}

# failure SECTION MESSAGE: a check that failed (the document lists it under FAILED).
failure() {
  jq -nc --arg s "$1" --arg m "$2" '{section: $s, failure: $m}' >>"$BAKEOFF_BENCH_FACTS"
  echo "bench: FAILED: $1: $2" >&2
}

# scenarios SECTION: sets the section's scenarios (bench/benchmarks.yaml) as shell variables.
scenarios() {
  local assignments
  assignments=$("$BAKEOFF_BENCH_DOC_TOOL" scenarios "$BAKEOFF_BENCH_SPEC" "$1") || exit 2
  eval "$assignments"
}

# section_begin SECTION / section_end SECTION: when and where the section ran (its run.* facts).
section_begin() {
  local commit compiler compiler_version build_type
  commit=$(git -C "$(dirname "$BAKEOFF_BENCH_SPEC")" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$(dirname "$BAKEOFF_BENCH_SPEC")" diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
  compiler=$(grep -m1 '^CMAKE_CXX_COMPILER:' "${BAKEOFF_BENCH_BUILD:-build/release}/CMakeCache.txt" 2>/dev/null | cut -d= -f2 || true)
  compiler_version=$("${compiler:-c++}" --version 2>/dev/null | head -n 1 || true)
  build_type=$(grep -m1 '^CMAKE_BUILD_TYPE:' "${BAKEOFF_BENCH_BUILD:-build/release}/CMakeCache.txt" 2>/dev/null | cut -d= -f2 || true)
  fact "$1" run.started "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  fact "$1" run.started_s "$(date +%s)"
  fact "$1" run.load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
  fact_text "$1" run.commit "$commit"
  fact "$1" run.cpus "$(nproc)"
  fact "$1" run.cpu_model "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
  fact "$1" run.memory_gib "$(awk '/^MemTotal/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)"
  fact "$1" run.kernel "$(uname -r)"
  fact "$1" run.compiler "${compiler_version:-unknown} (${build_type:-unknown})"
  fact "$1" run.open_files "$(ulimit -n)"
  fact "$1" run.bench_only "${BENCH_ONLY:-all}"
}
section_end() {
  fact "$1" run.finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  fact "$1" run.finished_s "$(date +%s)"
  fact "$1" run.load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# CPU time (user + system, all threads) a live process has used so far, in clock ticks; 0 when
# it is gone. Bash builtins only, as the client sampler calls it five times a second.
process_ticks() {
  local line
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || { echo 0; return; }
  line=${line##*) }
  # shellcheck disable=SC2086  # split the fields on purpose
  set -- $line
  echo $(( ${12} + ${13} ))
}
clk_tck=$(getconf CLK_TCK)
cpu_seconds() { calc "%.3f" "$(process_ticks "$1") / $clk_tck"; }

# The first child of a live process (Linux's /proc/PID/task/PID/children), or nothing.
first_child() {
  local child=""
  { read -r child _ <"/proc/$1/task/$1/children"; } 2>/dev/null || true
  echo "$child"
}

# "TOTAL IDLE" jiffies of all CPUs together (/proc/stat), for how busy the machine was.
machine_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $5 + $6 }' /proc/stat; }

# The server a section started (server_pid): stop_server ends it with SIGTERM, which `bakeoff
# emulate` and nginx both take as "stop now", and waits for it.
server_pid=""
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# wait_for_url LOG PID: the http://127.0.0.1:PORT (or http+unix://SOCKET) a server printed in LOG,
# within 10 s; empty when it died or never said.
wait_for_url() {
  local url="" _
  for _ in $(seq 1 100); do
    url=$(grep -oE 'http://127\.0\.0\.1:[0-9]+|http\+unix://[^ ]+' "$1" | head -n 1 || true)
    [ -n "$url" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$url"
}

#!/usr/bin/env bash
# scripts/compare_clients.sh: bakeoff clients side by side on one running server, to judge a
# change of the client's per-request cost against an earlier commit's binary in the same
# invocation (figures move by a third between runs on a shared VM; docs/BENCHMARKS.md, (b)).
# Each repetition runs every binary in turn with (b)'s command of scripts/bench_macro.sh (short
# streaming requests, one worker, concurrency 128, 8 s) and prints its requests/s, ok requests and
# requests per client CPU-second (user + system, start-up included).
# Usage: compare_clients.sh URL REPEATS BAKEOFF...   (URL on loopback, e.g. of
#   `bakeoff emulate --host 127.0.0.1 --port 0 --instant`)
# An earlier commit's binary: git worktree add /tmp/old REV && cmake --preset release -B /tmp/old/build \
#   -S /tmp/old -DBAKEOFF_BUILD_TESTS=OFF -DBAKEOFF_BUILD_BENCH=OFF && ninja -C /tmp/old/build bakeoff
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 URL REPEATS BAKEOFF..." >&2; exit 2; }
url=$1 repeats=$2
shift 2
case $url in
  http://127.0.0.1:* | http://localhost:* | http://\[::1\]:*) ;;
  *) echo "compare_clients.sh: $url is not on loopback" >&2; exit 2 ;;
esac
for repeat in $(seq 1 "$repeats"); do
  for bin in "$@"; do
    out=$(mktemp -d)
    /usr/bin/time -f "%U %S" -o "$out/cpu" timeout 60 "$bin" bench --url "$url" --workers 1 --no-calibrate \
      --out "$out/run" --concurrency 128 --prompt-tokens 8 --output-tokens 1 --warmup 1s --duration 8s \
      >/dev/null 2>"$out/stderr" || { echo "$bin failed: $(tail -3 "$out/stderr")" >&2; rm -rf "$out"; exit 1; }
    rps=$(jq -r '.steps[0].throughput.requests_per_s' "$out/run/summary.json")
    ok=$(jq -r '.steps[0].requests.outcomes.ok // 0' "$out/run/summary.json")
    records=$(wc -l <"$out/run/records.jsonl")
    awk -v r="$repeat" -v b="$bin" -v rps="$rps" -v ok="$ok" -v n="$records" \
      '{ cpu = $1 + $2; printf "%s %s: %.0f requests/s, %d ok, %.0f requests per client CPU-second\n", r, b, rps, ok, n / cpu }' \
      "$out/cpu"
    rm -rf "$out"
  done
done

#!/usr/bin/env bash
# scripts/bench_report.sh: the report section of `make bench` (scripts/bench.sh runs it). Owns what
# a report page costs for a large run against a small one, in the same invocation: a simulate run
# of BENCH_REPORT_REQUESTS requests (default 1,000,000) and a baseline of 10,000, each then drawn
# again with `bakeoff report` (wall and CPU time, peak RSS, page size) and opened in headless
# Chromium (tests/browser/check_pages.mjs: the time until the page has drawn, and that it drew
# without an error). Facts report.large.* and report.small.*; a page that fails its browser check
# is a failure. Everything is local (simulate is the virtual clock; the browser has networking off).
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=report
scenarios "$section"
section_begin "$section"
bakeoff=$BAKEOFF_BENCH_BIN/bakeoff
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2154  # simulate_args comes from the spec
fact "$section" report.simulate "$BAKEOFF_BENCH_BUILD/bakeoff simulate $simulate_args --requests N --out DIR"
fact "$section" report.command "$BAKEOFF_BENCH_BUILD/bakeoff report DIR"

# measure KEY N: simulate N requests, draw the page again, open it in Chromium; facts report.KEY.*.
measure() {
  local key=$1 n=$2 dir=$work/run-$2
  echo "bench(report): simulate and draw $n requests" >&2
  # shellcheck disable=SC2086  # split on purpose
  if ! timeout 1200 "$bakeoff" simulate $simulate_args --requests "$n" --out "$dir" >"$work/sim-$n.log" 2>&1; then
    failure "$section" "simulate of $n requests failed ($(tail -n 2 "$work/sim-$n.log" | tr '\n' ' '))"
    return 1
  fi
  if ! /usr/bin/time -f '%e %U %S %M' -o "$work/time-$n" timeout 600 "$bakeoff" report "$dir" >/dev/null; then
    failure "$section" "bakeoff report of $n requests failed"
    return 1
  fi
  local wall user sys rss_kib
  read -r wall user sys rss_kib <"$work/time-$n"
  fact "$section" "report.$key.requests" "$n"
  fact "$section" "report.$key.records_bytes" "$(stat -c %s "$dir/records.jsonl")"
  fact "$section" "report.$key.wall_s" "$wall"
  fact "$section" "report.$key.cpu_s" "$(calc "%.2f" "$user + $sys")"
  fact "$section" "report.$key.rss_kib" "$rss_kib"
  fact "$section" "report.$key.page_bytes" "$(stat -c %s "$dir/report.html")"
  if ! (cd "$src" && timeout 300 node tests/browser/check_pages.mjs "$work/shots" "$dir/report.html=run-$n") >"$work/browser-$n.log" 2>&1; then
    failure "$section" "the page of $n requests failed its browser check: $(tr '\n' ' ' <"$work/browser-$n.log" | cut -c1-400)"
    return 1
  fi
  fact "$section" "report.$key.drawn_ms" "$(grep -o 'drawn in [0-9]* ms' "$work/browser-$n.log" | grep -o '[0-9]*')"
}

measure small 10000 || true
measure large "${BENCH_REPORT_REQUESTS:-1000000}" || true
section_end "$section"
exit 0
}

#!/usr/bin/env bash
# scripts/bench_report.sh: the report section of `make bench` (called by scripts/bench.sh).
# Owns: what a report page costs for a large run against a small one, in the same invocation: a
# simulate run of BENCH_REPORT_REQUESTS requests (default 1,000,000) and a baseline of 10,000, each
# then drawn again with `bakeoff report` (wall and CPU time, peak RSS, page size) and opened in
# headless Chromium (tests/browser/check_pages.mjs: the time until the page has drawn, and that it
# drew without an error). Checks: both pages pass the browser check, and the large page is no more
# than twice the small one's size (a page embeds downsampled series, never records).
# Everything is local (simulate is the virtual clock; the browser has networking off).
# Usage: scripts/bench_report.sh BAKEOFF OUT_MD BAKEOFF_SHOWN
set -euo pipefail
bakeoff=$1 out_md=$2 shown=$3
requests=${BENCH_REPORT_REQUESTS:-1000000}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/bakeoff-bench-report.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
rows=() notes=()
commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

# One run of n requests: simulate it, draw its page again, open the page in Chromium.
measure() {
  local n=$1 dir=$work/run-$1
  # --keep all: every record with its token instants, the most a report may have to read.
  local sim_cmd=("$bakeoff" simulate --preset continuous-paged --requests "$n" --prompt-tokens 500
                 --output-tokens 200 --ignore-eos --rate 17.6 --keep all --out "$dir")
  timeout 1200 "${sim_cmd[@]}" >"$work/sim-$n.log" 2>&1 || { echo "simulate of $n requests failed" >&2; return 1; }
  local records_mib
  records_mib=$(du -m "$dir/records.jsonl" | cut -f1)
  /usr/bin/time -f '%e %U %S %M' -o "$work/time-$n" timeout 600 "$bakeoff" report "$dir" >/dev/null ||
    { echo "bakeoff report of $n requests failed" >&2; return 1; }
  read -r wall user sys rss_kib <"$work/time-$n"
  local page_kib
  page_kib=$(( $(stat -c %s "$dir/report.html") / 1024 ))
  local drawn browser=passed
  # This runs in $(...): a failure is reported in the output's last field, not in a variable.
  (cd "$src" && timeout 300 node tests/browser/check_pages.mjs "$work/shots" "$dir/report.html=run-$n") >"$work/browser-$n.log" 2>&1 ||
    { echo "the page of $n requests failed its browser check: $(cat "$work/browser-$n.log")" >&2; browser=failed; }
  drawn=$(grep -o 'drawn in [0-9]* ms' "$work/browser-$n.log" | grep -o '[0-9]*' || echo "?")
  echo "$n $records_mib $wall $user $sys $rss_kib $page_kib $drawn $browser"
}

small=$(measure 10000) || exit 1
large=$(measure "$requests") || exit 1
read -r s_n s_mib s_wall s_user s_sys s_rss s_page s_drawn s_browser <<<"$small"
read -r l_n l_mib l_wall l_user l_sys l_rss l_page l_drawn l_browser <<<"$large"
[ "$s_browser" = passed ] && [ "$l_browser" = passed ] || status=1
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
size_status=met
[ "$l_page" -le $((2 * s_page)) ] || { size_status="**FAILED**"; status=1; }
draw_status=met
[ "$l_drawn" != "?" ] && [ "$l_drawn" -lt 2000 ] || { draw_status="**short**"; }
[ "$l_browser" = passed ] || draw_status="**FAILED** (the browser check)"

{
  echo "## Report pages"
  echo
  echo "\`bakeoff report\` drawing report.html again from a simulate run's folder, and the page opened in"
  echo "headless Chromium (Debian's, networking off, tests/browser/check_pages.mjs). The baseline is a"
  echo "10,000-request run in the same invocation. Runs: \`$shown simulate --preset continuous-paged"
  echo "--requests N --prompt-tokens 500 --output-tokens 200 --ignore-eos --rate 17.6 --keep all --out DIR\`"
  echo "(*emulated*, virtual clock), then \`$shown report DIR\`."
  echo
  echo "| figure | target | $(commas "$l_n") requests | baseline: $(commas "$s_n") requests | ratio | status |"
  echo "|---|---|---|---|---|---|"
  echo "| records.jsonl read | - | $(commas "$l_mib") MiB | $(commas "$s_mib") MiB | $(ratio "$l_mib" "$s_mib") | - |"
  echo "| \`bakeoff report\` wall time | - | ${l_wall} s | ${s_wall} s | $(ratio "$l_wall" "$s_wall") | - |"
  echo "| \`bakeoff report\` CPU time (user + sys) | - | $(awk -v u="$l_user" -v s="$l_sys" 'BEGIN{printf "%.2f", u+s}') s | $(awk -v u="$s_user" -v s="$s_sys" 'BEGIN{printf "%.2f", u+s}') s | $(ratio "$(awk -v u="$l_user" -v s="$l_sys" 'BEGIN{print u+s}')" "$(awk -v u="$s_user" -v s="$s_sys" 'BEGIN{print u+s}')") | - |"
  echo "| \`bakeoff report\` peak RSS | - | $(commas $((l_rss / 1024))) MiB | $(commas $((s_rss / 1024))) MiB | $(ratio "$l_rss" "$s_rss") | - |"
  echo "| report.html size | at most 2x the baseline | $(commas "$l_page") KiB | $(commas "$s_page") KiB | $(ratio "$l_page" "$s_page") | $size_status |"
  echo "| page drawn in Chromium (navigation to every chart drawn) | < 2 s | ${l_drawn} ms | ${s_drawn} ms | $(ratio "$l_drawn" "$s_drawn") | $draw_status |"
  echo
  echo "The page's size and drawing time do not grow with the run: it embeds 161 points per latency"
  echo "curve and step, at most 2,000 points per time series and 60 sampled request timelines"
  echo "(docs/formats/report.md). Reading the records is one streaming pass (simdjson per line) whose"
  echo "memory is the quantile sketches' (exact up to 65,536 samples per figure, then a histogram)."
  echo
} >"$out_md"
exit "$status"

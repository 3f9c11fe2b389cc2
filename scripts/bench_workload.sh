#!/usr/bin/env bash
# scripts/bench_workload.sh: the workload section of `make bench` (scripts/bench.sh runs it). Owns
# timing `bakeoff fingerprint` on traces this script generates (awk, fixed-seed LCGs, so every run
# reads the same bytes): an Azure CSV of 10,000,000 rows and its first 2,000,000 (w3, w1), and
# Mooncake JSONL of 2,000,000 rows without ids (w2noids), with 8 ids a row of which 6 are shared
# (w2ids, and its 10,000,000-row file w3ids), and with 8 ids from only 64 chains (w2hot). Each
# generator also writes what the fingerprint must report (request count, token totals, prefix
# cache figures), which every run is checked against. Facts per trace: rows, bytes, command, and
# per run cpu_s / wall_s / rss_kib / others_pct, and a `wc -l` baseline over the same file. The
# files live in the script's temporary folder; each is deleted once measured (~450 MB at a time).
set -euo pipefail
# Read whole before it runs (one block that ends in exit), so editing this file mid-run cannot
# change what the run does.
{
# shellcheck source=scripts/bench_lib.sh
source "$(dirname "$0")/bench_lib.sh"
section=workload
section_begin "$section"
repeat=${BAKEOFF_BENCH_REPEAT:-3}
bakeoff=$BAKEOFF_BENCH_BIN/bakeoff
shown=$BAKEOFF_BENCH_BUILD/bakeoff
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log() { echo "bench(workload): $*" >&2; }
section_start_s=$SECONDS

# LCG shared by the generators: 32-bit state (exact in awk's doubles), the high 16 bits returned.
lcg='function r() { x = (1664525 * x + 1013904223) % 4294967296; return int(x / 65536) }'

# gen_azure FILE ROWS CHECKPOINT: an Azure-format CSV (TIMESTAMP,ContextTokens,GeneratedTokens)
# with Poisson arrivals (mean gap 10 ms) from 2023-11-16 00:00:00, input 1..4096 and output
# 1..1000 tokens, uniform. Writes "rows input_total output_total" to FILE.expected after
# CHECKPOINT rows (for `head`) and after all ROWS.
gen_azure() {
  awk -v n="$2" -v m="$3" -v expect="$1.expected" "$lcg"'
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

# gen_mooncake FILE ROWS GROUPS SHARED FRESH [CHECKPOINT]: Mooncake-style JSONL, timestamps in ms
# (gaps 0..19). FRESH = -1: no hash_ids, input 1..16384 tokens. Otherwise every row has SHARED +
# FRESH ids and 512 x (SHARED + FRESH - 1) + 1 .. 512 x (SHARED + FRESH) input tokens: the SHARED
# ids are the chain of one of GROUPS groups, the FRESH ones are new. Writes "rows input_total
# output_total served_tokens distinct_blocks" to FILE.expected after CHECKPOINT rows (for `head`)
# and after all ROWS, served tokens by the ideal prefix cache of docs/workloads.md (a group's chain
# is matched from its second row on).
gen_mooncake() {
  awk -v n="$2" -v groups="$3" -v shared="$4" -v fresh="$5" -v m="${6:-0}" -v expect="$1.expected" "$lcg"'
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

# split_head BIG SMALL ROWS HEADER_LINES: SMALL is BIG's first ROWS rows (plus its header), and
# each .expected keeps its own line (the checkpoint for SMALL, the end for BIG).
split_head() {
  head -n "$(($3 + $4))" "$1" >"$2"
  head -n 1 "$1.expected" >"$2.expected"
  tail -n 1 "$1.expected" >"$1.expected.tmp"
  mv "$1.expected.tmp" "$1.expected"
}

# timed NAME COMMAND...: COMMAND under /usr/bin/time; sets t_wall, t_cpu (user + system seconds,
# children included), t_rss_kib and t_others_pct (CPU of every other process meanwhile, % of one
# core). Returns the command's exit status.
timed() {
  local name=$1 rc=0 stat_before stat_after user sys busy_pct
  shift
  stat_before=$(machine_ticks)
  /usr/bin/time -f '%e %U %S %M' -o "$work/$name.time" "$@" >"$work/$name.stdout" 2>"$work/$name.stderr" || rc=$?
  stat_after=$(machine_ticks)
  read -r t_wall user sys t_rss_kib < <(tail -n 1 "$work/$name.time")
  t_cpu=$(calc "%.2f" "$user + $sys")
  busy_pct=$(echo "$stat_before $stat_after" | awk -v n="$(nproc)" '{ d = $3 - $1; print (d > 0) ? 100 * n * (d - ($4 - $2)) / d : 0 }')
  t_others_pct=$(calc "%.0f" "$busy_pct - 100 * $t_cpu / ($t_wall > 0 ? $t_wall : 0.01)")
  [ "$t_others_pct" -ge 0 ] 2>/dev/null || t_others_pct=0
  return "$rc"
}

# measure KEY FILE FORMAT: $repeat timed `bakeoff fingerprint` runs over FILE, each checked against
# FILE.expected; records KEY.rows, KEY.bytes, KEY.command, per passing run KEY.cpu_s, KEY.wall_s,
# KEY.rss_kib, KEY.others_pct, and from a passing run's fingerprint.json KEY.arrival_s,
# KEY.prefix_share and KEY.distinct_blocks. Then a plain `wc -l` baseline over the same file (in the
# page cache, as the fingerprint's was), run back to back until about 2 GB were read so that
# /usr/bin/time's 10 ms resolution does not matter: KEY.wc_passes, and KEY.wc_cpu_s / KEY.wc_wall_s
# per pass. Sets measured_json (a passing run's fingerprint.json); returns 1 when no run passed.
measure() {
  local key=$1 file=$2 format=$3 r out rows tin tout served distinct got want passed=0
  read -r rows tin tout served distinct <"$file.expected"
  local bytes name
  bytes=$(stat -c %s "$file")
  name=$(basename "$file")
  fact "$section" "$key.rows" "$rows"
  fact "$section" "$key.bytes" "$bytes"
  fact "$section" "$key.command" "$shown fingerprint \$WORK/$name --format $format --out \$WORK/fp"
  for r in $(seq 1 "$repeat"); do
    out=$work/fp-$name-$r
    log "($key) bakeoff fingerprint $name, run $r/$repeat"
    if ! timed "fp-$name-$r" timeout 600 "$bakeoff" fingerprint "$file" --format "$format" --out "$out" ||
      [ ! -f "$out/fingerprint.json" ]; then
      failure "$section" "($key) run $r: bakeoff fingerprint exited non-zero ($(tail -n 3 "$work/fp-$name-$r.stderr" | tr '\n' ' ' | cut -c1-300))"
      continue
    fi
    got=$(jq -r '"\(.requests) \(.input_tokens.total) \(.output_tokens.total)"' "$out/fingerprint.json")
    want="$rows $tin $tout"
    if [ -n "$served" ]; then
      got="$got $(jq -r '"\(.prefix_reuse.served_tokens) \(.prefix_reuse.distinct_blocks)"' "$out/fingerprint.json")"
      want="$want $served $distinct"
    fi
    if [ "$got" != "$want" ]; then
      failure "$section" "($key) run $r: fingerprint.json reports requests / input total / output total${served:+ / served tokens / distinct blocks} $got, the generator wrote $want"
      continue
    fi
    passed=$((passed + 1))
    fact "$section" "$key.cpu_s" "$t_cpu"
    fact "$section" "$key.wall_s" "$t_wall"
    fact "$section" "$key.rss_kib" "$t_rss_kib"
    fact "$section" "$key.others_pct" "$t_others_pct"
    measured_json=$out/fingerprint.json
  done
  [ "$passed" -gt 0 ] || return 1
  jq -c --arg s "$section" --arg k "$key" '{arrival_s: .arrivals.duration_s, prefix_share: .prefix_reuse.share,
      distinct_blocks: .prefix_reuse.distinct_blocks} | to_entries[] | select(.value != null)
    | {section: $s, key: ($k + "." + .key), value}' "$measured_json" >>"$BAKEOFF_BENCH_FACTS"
  local passes=$(( (2000000000 + bytes - 1) / bytes ))
  [ "$passes" -ge 3 ] || passes=3
  # shellcheck disable=SC2016  # expanded by the inner bash
  if timed "wc-$name" bash -c 'for _ in $(seq 1 "$1"); do wc -l <"$2" >/dev/null; done' _ "$passes" "$file"; then
    fact "$section" "$key.wc_passes" "$passes"
    fact "$section" "$key.wc_cpu_s" "$(calc "%.5f" "$t_cpu / $passes")"
    fact "$section" "$key.wc_wall_s" "$(calc "%.5f" "$t_wall / $passes")"
  else
    failure "$section" "($key) baseline: wc -l exited non-zero"
  fi
}

# (w1) and (w3): one 10,000,000-row Azure CSV; its first 2,000,000 rows are (w1)'s file. ----------
log "generating a 10,000,000-row Azure CSV"
gen_start=$SECONDS
gen_azure "$work/azure-10m.csv" 10000000 2000000
split_head "$work/azure-10m.csv" "$work/azure-2m.csv" 2000000 1
fact "$section" wl.gen_azure_s $((SECONDS - gen_start))
measure w1 "$work/azure-2m.csv" azure-csv || true
rm -f "$work/azure-2m.csv"
measure w3 "$work/azure-10m.csv" azure-csv || true
rm -f "$work/azure-10m.csv"

# (w2) Mooncake-style JSONL: no ids; 8 ids with 6 shared (and its 10,000,000 rows); 8 cache-resident.
log "generating 2,000,000-row Mooncake JSONL without hash_ids"
gen_start=$SECONDS
gen_mooncake "$work/mooncake-noids-2m.jsonl" 2000000 1 0 -1
gen_other_s=$((SECONDS - gen_start))
measure w2noids "$work/mooncake-noids-2m.jsonl" mooncake || true
rm -f "$work/mooncake-noids-2m.jsonl"

log "generating a 10,000,000-row Mooncake JSONL with 8 hash_ids a row"
gen_start=$SECONDS
gen_mooncake "$work/mooncake-ids-10m.jsonl" 10000000 4096 6 2 2000000
split_head "$work/mooncake-ids-10m.jsonl" "$work/mooncake-ids-2m.jsonl" 2000000 0
fact "$section" wl.gen_ids_s $((SECONDS - gen_start))
measure w2ids "$work/mooncake-ids-2m.jsonl" mooncake || true
rm -f "$work/mooncake-ids-2m.jsonl"
if measure w3ids "$work/mooncake-ids-10m.jsonl" mooncake; then
  # The chain table (docs/workloads.md): 8-byte slots, a power of two from 1,024, at most 70% full;
  # while it doubles, the old table is held too. Its slots for these distinct blocks; the most
  # distinct blocks whose table (with its predecessor) and 16 bytes per request fit in 1.5 GiB; and
  # the table for as many rows each bringing 15 new blocks, as the real Mooncake trace's do
  # (182,790 distinct blocks in 12,031 requests, docs/workloads.md).
  distinct=$(jq -r '.prefix_reuse.distinct_blocks' "$measured_json")
  read -r slots max_distinct real_distinct real_slots < <(awk -v d="$distinct" -v rows=10000000 'BEGIN {
    s = 1024; while (s * 0.7 < d) s *= 2
    m = 1024; while (1.5 * 8 * (2 * m) + 16 * rows <= 1.5 * 1073741824) m *= 2
    r = 15 * rows; t = 1024; while (t * 0.7 < r) t *= 2
    printf "%d %d %d %d\n", s, m * 0.7, r, t }')
  fact "$section" w3ids.table_slots "$slots"
  fact "$section" w3ids.max_distinct_in_limit "$max_distinct"
  fact "$section" w3ids.real_trace_distinct "$real_distinct"
  fact "$section" w3ids.real_trace_slots "$real_slots"
fi
rm -f "$work/mooncake-ids-10m.jsonl"

log "generating 2,000,000-row Mooncake JSONL with 8 hash_ids a row from 64 chains"
gen_start=$SECONDS
gen_mooncake "$work/mooncake-hot-2m.jsonl" 2000000 64 8 0
fact "$section" wl.gen_other_s $((gen_other_s + SECONDS - gen_start))
measure w2hot "$work/mooncake-hot-2m.jsonl" mooncake || true
rm -f "$work/mooncake-hot-2m.jsonl"
fact "$section" wl.seconds $((SECONDS - section_start_s))
section_end "$section"
exit 0
}

#!/usr/bin/env bash
# The load Job's own script and collect commands, run here: `bakeoff k8s load-job` writes a 2-shard
# Job against `bakeoff emulate` on 127.0.0.1; each pod's script (the Job's container command) runs
# as a local process with JOB_COMPLETION_INDEX set, its stdout kept as that pod's log; the collect
# pipeline written in the Job's comments unpacks each shard's folder from its log. Together the
# shards measured the whole load: every request once, the ids of one process's schedule.
# Bounded: every process has a timeout and the emulator is stopped on exit.
# Usage: load_job_test.sh BAKEOFF SOURCE_DIR OUT
set -euo pipefail
{
bakeoff=$1 src=$2 out=$3
rm -rf "$out" && mkdir -p "$out/bin" "$out/collected"
ln -s "$bakeoff" "$out/bin/bakeoff"
emulator_pid=
cleanup() { if [ -n "$emulator_pid" ]; then kill "$emulator_pid" 2>/dev/null || true; wait "$emulator_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
timeout 120 "$bakeoff" emulate --port 0 --host 127.0.0.1 --instant >"$out/emulate.log" 2>&1 &
emulator_pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/emulate.log" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "the emulator did not start" >&2; exit 1; }

start=$(( $(date +%s) + 5 ))
"$bakeoff" k8s load-job --image local --shards 2 --start-at "$start" -- --url "$url" --rate 40 --requests 60 \
  --prompt-tokens 16 --output-tokens 4 --seed 3 --no-calibrate --metrics-interval 0 >"$out/job.yaml"
# The pod's script, with its results folder moved under OUT (a pod writes /tmp/results).
(cd "$src" && node -e 'const { parse } = require("yaml");
  const job = parse(require("fs").readFileSync(process.argv[1], "utf8"));
  process.stdout.write(job.spec.template.spec.containers[0].command[2]);' "$out/job.yaml") |
  sed "s|/tmp/results|$out/results|g" >"$out/script.sh"
for i in 0 1; do
  JOB_COMPLETION_INDEX=$i PATH="$out/bin:$PATH" timeout 90 sh "$out/script.sh" >"$out/log-$i" &
  eval "shard_$i=\$!"
done
wait "$shard_0" || { echo "shard 0 failed: $(cat "$out"/results/shard-0/bench.stderr)" >&2; exit 1; }
wait "$shard_1" || { echo "shard 1 failed: $(cat "$out"/results/shard-1/bench.stderr)" >&2; exit 1; }

# The collect pipeline as the Job's comments write it, reading each log instead of `kubectl logs`.
pipeline=$(grep -o '| sed -n .*| tar -xz' "$out/job.yaml" | sed 's/^| //')
[ -n "$pipeline" ] || { echo "no collect pipeline in the Job's comments" >&2; exit 1; }
for i in 0 1; do (cd "$out/collected" && eval "$pipeline" <"$out/log-$i"); done
# Checked with node (jq is only a `make bench` dependency).
(cd "$src" && node -e 'const fs = require("fs");
  const dir = process.argv[1];
  let measured = 0; const ids = [];
  for (const i of [0, 1]) {
    const summary = JSON.parse(fs.readFileSync(`${dir}/shard-${i}/summary.json`, "utf8"));
    if (summary.config.shard !== `${i}/2`) throw new Error(`shard ${i}: config.shard is ${summary.config.shard}`);
    measured += summary.steps[0].requests.measured;
    for (const line of fs.readFileSync(`${dir}/shard-${i}/records.jsonl`, "utf8").split("\n")) {
      if (line) ids.push(JSON.parse(line).id);
    }
  }
  ids.sort((a, b) => a - b);
  if (measured !== 60) throw new Error(`the shards measured ${measured} requests, the load was 60`);
  if (ids.join() !== [...Array(60).keys()].join()) throw new Error(`the ids are not 0..59, the one-process load: ${ids}`);' \
  "$out/collected")
# The merge command as the Job's comments write it: one run of the whole load.
merge=$(grep -o '#   bakeoff merge .*' "$out/job.yaml" | sed 's/^#   //')
[ -n "$merge" ] || { echo "no merge command in the Job's comments" >&2; exit 1; }
(cd "$out/collected" && export PATH="$out/bin:$PATH" && eval "$merge" >"$out/merge.log" 2>&1) ||
  { echo "the merge failed: $(cat "$out/merge.log")" >&2; exit 1; }
(cd "$src" && node -e 'const summary = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const measured = summary.steps[0].requests.measured;
  if (measured !== 60) throw new Error(`the merged run measured ${measured} requests, the load was 60`);
  if (summary.merged.shards.length !== 2) throw new Error("the merged run does not list its 2 shards");' \
  "$out/collected/merged/summary.json")
echo "load-job: 2 shards, 60 requests, ids 0..59, collected from their logs and merged into one run"
exit 0
}

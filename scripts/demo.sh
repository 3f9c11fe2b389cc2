#!/usr/bin/env bash
# `make demo`: the selection study of examples/demo/study.yaml end to end on bakeoff's emulated
# engine: five candidates, a synthesized workload with shared prefixes and bursts, the
# hard-constraint gate, probes against real-time emulators on loopback, the load phases and the
# capacity search on the virtual clock, and the verdict with its rollback, written as a results
# bundle. Everything stays on 127.0.0.1 and ends by itself (about 30 s on 2 cores; the study's
# budget is 4 minutes).
set -euo pipefail
bakeoff=${1:-build/release/bakeoff}
out=${DEMO_OUT:-out/demo}
status=0
"$bakeoff" run examples/demo/study.yaml --out "$out" --fresh || status=$?
if [ "$status" -ne 0 ]; then
  echo "demo: the study exited $status (docs/formats/study.md lists the exit codes)" >&2
  exit "$status"
fi
echo
echo "demo: the decision record is $out/report.md; the verdict $out/verdict.json"
echo "demo: open the report in a browser (it works offline): $out/report.html"

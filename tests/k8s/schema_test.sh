#!/usr/bin/env bash
# The rendered manifests against the Kubernetes API schemas: the deploy unit tests write what
# `bakeoff k8s render` makes for every engine with a serve command (both variants) and the load
# Jobs of `bakeoff k8s load-job` into OUT, and
# validate_manifests.mjs checks each built-in kind there, the golden rendering and the hand-written
# good manifests; a manifest broken on purpose must be found invalid (so the check can fail).
# Usage: schema_test.sh DEPLOY_TEST_BINARY SOURCE_DIR OUT
set -euo pipefail
test_binary=$1 src=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
BAKEOFF_K8S_RENDER_DIR=$out timeout 120 "$test_binary" \
  --gtest_filter='ManifestRenderTest.EveryEngineWithAServeCommandPassesTheChecklist:LoadJobTest.*' >"$out/unit.log" 2>&1 ||
  { cat "$out/unit.log"; exit 1; }
rendered=("$out"/*.yaml)
[ "${#rendered[@]}" -ge 18 ] || { echo "expected 18 renderings in $out, found ${#rendered[@]}" >&2; exit 1; }
cd "$src"
timeout 120 node tests/k8s/validate_manifests.mjs "${rendered[@]}" tests/testdata/k8s/rendered-vllm.yaml \
  tests/testdata/k8s/good.yaml
timeout 60 node tests/k8s/validate_manifests.mjs --expect-invalid tests/testdata/k8s/schema-invalid.yaml

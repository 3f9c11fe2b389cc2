// deploy/load_job.cc: the Indexed Job of a sharded load (load_job.h).
#include "deploy/load_job.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "deploy/manifest_render.h"

namespace bakeoff::deploy {
namespace {

// A word for sh, quoted so that nothing in it is expanded.
std::string ShellWord(std::string_view word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The flag a bench argument sets ("--out" of "--out=DIR" too); empty for a value.
std::string_view FlagOf(std::string_view arg) {
  if (!arg.starts_with("--")) return {};
  return arg.substr(0, arg.find('='));
}

}  // namespace

Result<std::string> RenderLoadJob(const LoadJobInputs& in) {
  auto invalid = [](std::string message) { return MakeError(ErrorCode::kInvalidInput, std::move(message)); };
  if (in.image.empty()) return invalid("--image: the image with the bakeoff binary each shard runs");
  if (in.shards < 1 || in.shards > 1000) return invalid("--shards: between 1 and 1000");
  if (in.start_at.empty()) return invalid("--start-at: the instant every shard starts the load at (UTC)");
  bool has_url = false;
  for (const std::string& arg : in.bench_args) {
    const std::string_view flag = FlagOf(arg);
    if (flag == "--shard" || flag == "--start-at" || flag == "--out") {
      return invalid(fmt::format("{}: the Job sets it for every shard; leave it out of the bench flags", flag));
    }
    has_url = has_url || flag == "--url";
  }
  if (!has_url) return invalid("the bench flags (after --) need --url, the engine every shard loads");

  const std::string name = DnsLabel(in.name);
  const bool to_volume = !in.claim.empty();
  const std::string root = to_volume ? "/results" : "/tmp/results";
  std::string bench = "bakeoff bench";
  for (const std::string& arg : in.bench_args) bench += " " + ShellWord(arg);
  bench += fmt::format(" --shard \"$JOB_COMPLETION_INDEX/{}\" --start-at {} --out \"$out\"", in.shards,
                       ShellWord(in.start_at));
  std::string script = fmt::format("out={}/shard-$JOB_COMPLETION_INDEX\nmkdir -p \"$out\"\n", root);
  script += bench + " >\"$out/bench.stdout\" 2>\"$out/bench.stderr\"\nrc=$?\n";
  if (!to_volume) {
    script += fmt::format("echo {}\ntar -C {} -cz \"shard-$JOB_COMPLETION_INDEX\" | base64\necho {}\n", kResultsBegin,
                          root, kResultsEnd);
  }
  script += "exit $rc\n";

  std::string yaml = fmt::format(
      "# One load from {0} pods, written by `bakeoff k8s load-job`: pod I runs shard I/{0} of the same schedule\n"
      "# (`bakeoff bench --shard`), all starting at {1} by their own clocks; each records its clock's offset\n"
      "# against the target in summary.json (clock). Apply it early enough for every pod to be running before\n"
      "# the start: a shard started late refuses to run.\n",
      in.shards, in.start_at);
  const std::string selector = fmt::format("batch.kubernetes.io/job-name={}", name);
  if (to_volume) {
    yaml += fmt::format("# Results: /results/shard-I on the claim {}; the claim must be ReadWriteMany for pods on several\n"
                        "# nodes. Collect its shard-* folders when `kubectl wait --for=condition=complete job/{}` returns.\n",
                        in.claim, name);
  } else {
    yaml += fmt::format(
        "# Results: each pod prints its folder as a base64 tarball between {0} and {1} on stdout. Only for\n"
        "# small runs: the kubelet rotates container logs (containerLogMaxSize, 10Mi by default) and a rotated\n"
        "# log loses the start of the tarball; use --claim for long loads. Collect, once the Job completes:\n"
        "#   kubectl wait --for=condition=complete job/{2} --timeout=24h\n"
        "#   for i in $(seq 0 {3}); do\n"
        "#     kubectl logs -l {4},batch.kubernetes.io/job-completion-index=$i --tail=-1 \\\n"
        "#       | sed -n '/^{0}$/,/^{1}$/p' | sed '1d;$d' | base64 -d | tar -xz\n"
        "#   done\n",
        kResultsBegin, kResultsEnd, name, in.shards - 1, selector);
  }
  yaml += "# Then merge the shards into one run (every percentile from all their records, their clocks' skew reported):\n"
          "#   bakeoff merge shard-* --out merged\n";
  yaml += "apiVersion: batch/v1\nkind: Job\nmetadata:\n";
  yaml += fmt::format("  name: {}\n", name);
  if (!in.namespace_name.empty()) yaml += fmt::format("  namespace: {}\n", DnsLabel(in.namespace_name));
  yaml += fmt::format("  labels: {{app.kubernetes.io/name: {}, app.kubernetes.io/managed-by: bakeoff}}\n", name);
  yaml += fmt::format(
      "spec:\n"
      "  completionMode: Indexed  # each pod gets its shard index\n"
      "  completions: {0}\n"
      "  parallelism: {0}  # every shard at once: they share one start instant\n"
      "  backoffLimit: 0  # never retried: a retried shard would start after the others\n"
      "  ttlSecondsAfterFinished: 86400\n"
      "  template:\n"
      "    metadata:\n"
      "      labels: {{app.kubernetes.io/name: {1}}}\n"
      "    spec:\n"
      "      restartPolicy: Never\n"
      "      affinity:  # shards on different nodes where it can, so no two share a machine's CPUs and NIC\n"
      "        podAntiAffinity:\n"
      "          preferredDuringSchedulingIgnoredDuringExecution:\n"
      "            - weight: 100\n"
      "              podAffinityTerm:\n"
      "                topologyKey: kubernetes.io/hostname\n"
      "                labelSelector: {{matchLabels: {{app.kubernetes.io/name: {1}}}}}\n"
      "      containers:\n"
      "        - name: shard\n"
      "          image: {2}\n"
      "          env:\n"
      "            - name: JOB_COMPLETION_INDEX\n"
      "              valueFrom: {{fieldRef: {{fieldPath: \"metadata.annotations['batch.kubernetes.io/job-completion-index']\"}}}}\n"
      "          command: [sh, -c, {3}]\n"
      "          resources:  # a shard's client threads need their cores to themselves (docs/BENCHMARKS.md)\n"
      "            requests: {{cpu: \"{4}\", memory: {5}}}\n"
      "            limits: {{cpu: \"{4}\", memory: {5}}}\n",
      in.shards, name, nlohmann::json(in.image).dump(), nlohmann::json(script).dump(), in.cpu, in.memory);
  if (to_volume) {
    yaml += "          volumeMounts: [{name: results, mountPath: /results}]\n";
    yaml += fmt::format("      volumes: [{{name: results, persistentVolumeClaim: {{claimName: {}}}}}]\n", in.claim);
  }
  return yaml;
}

}  // namespace bakeoff::deploy

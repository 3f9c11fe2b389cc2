// deploy/load_job.h
//
// Owns: `bakeoff k8s load-job`: the Kubernetes Indexed Job that runs one load from many pods, each
// pod one shard (`bakeoff bench --shard $(JOB_COMPLETION_INDEX)/N --start-at T`, the same flags
// otherwise), spread over nodes, never retried (a retried shard would start after the others), with
// its results either printed as a base64 tarball between marker lines on stdout (for `kubectl logs`)
// or written to a shared volume; and the shell commands that collect them, in comments.
// Does not own: what a shard does (run/bench.h, load/runner.h sharding), merging shards.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace bakeoff::deploy {

struct LoadJobInputs {
  std::string name = "bakeoff-load";
  std::string namespace_name;    // empty: none written
  std::string image;             // an image with the bakeoff binary (and sh, tar, base64 for stdout results)
  std::uint32_t shards = 2;
  std::string start_at;          // as bench --start-at takes it, the same for every shard
  std::vector<std::string> bench_args;  // bench's flags; --shard, --start-at and --out are the Job's
  std::string claim;             // a PersistentVolumeClaim for the results; empty: stdout
  std::string cpu = "2";         // per shard, requested and limited
  std::string memory = "2Gi";
};

// Markers around a shard's results in its log (stdout mode).
inline constexpr std::string_view kResultsBegin = "BAKEOFF-RESULTS-BEGIN";
inline constexpr std::string_view kResultsEnd = "BAKEOFF-RESULTS-END";

// Errors (kInvalidInput): no image, no --url among the flags, a flag the Job sets itself, shards
// outside 1..1000, no start instant.
Result<std::string> RenderLoadJob(const LoadJobInputs& inputs);

}  // namespace bakeoff::deploy

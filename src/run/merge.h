// run/merge.h
//
// Owns: `bakeoff merge`: the folders of one sharded load (bench --shard I/N, each with its
// summary.json and records.jsonl) made into one run folder, as one process sending the whole
// schedule would have written it. It checks that the folders are every shard of one load (one
// schedule sha256, one start instant, one model; each index once: a missing or doubled shard is
// refused by its index), re-analyses the union of their records (every percentile from every
// request, never an average of the shards'), and writes <out>/records.jsonl (every shard's
// records) and <out>/summary.json: the steps, the shards with their clocks' offsets against the
// target and the spread between them, and what only one client process can measure (its
// event-loop lag, its busiest thread) as the worst shard's (docs/formats/summary.md "merged").
// Does not own: the step analysis (analyze/step_analysis.h), the record format (measure/record.h),
// or the table and report page (cli/).
//
// Thread-safety: MergeShards blocks and shares nothing.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "run/bench.h"

namespace bakeoff::run {

struct MergeConfig {
  std::vector<std::filesystem::path> shard_dirs;  // bench --out folders, in any order
  std::filesystem::path out_dir;
};

// kInvalidInput: a folder is not a shard of the same load as the others, a shard is missing or
// given twice, or a record is unreadable before a shard's last line (the message names the folder,
// the index or the file:line); kIo: the merged folder could not be written. A shard's last line
// cut by a killed run is left out and said in the notes.
Result<BenchOutcome> MergeShards(const MergeConfig& config, const std::function<void(const std::string&)>& log);

}  // namespace bakeoff::run

// cli/merge_command.cc
//
// Owns: `bakeoff merge SHARD_DIR... --out DIR`: the folders of one sharded load (bench --shard I/N)
// made into one run folder by run::MergeShards, then the same table, summary and report page as a
// bench run. Exit codes: 0 merged (and most requests succeeded); 2 the folders are not every shard
// of one load, or one is unreadable (the message names the folder, shard or file:line); 1 the
// merged folder could not be written, or the load itself failed (cli/table.h).
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/table.h"
#include "run/merge.h"

namespace bakeoff::cli {

void AddMergeCommand(CLI::App& app, int* exit_code) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* c = app.add_subcommand(
      "merge",
      "Merge the shards of one load (bench --shard I/N, each its own --out folder) into one run: every percentile from "
      "the union of their records, the shards' clock offsets reported.\n"
      "Exit: 0 merged, 2 not every shard of one load (the missing or foreign one named), 1 not written or the load failed.");
  c->add_option("dirs", *dirs, "Every shard's folder (bench --out), in any order")->required();
  c->add_option("--out", *out, "Folder for the merged summary.json, records.jsonl and report.html")->required();
  c->callback([dirs, out, exit_code] {
    run::MergeConfig config;
    for (const std::string& dir : *dirs) config.shard_dirs.emplace_back(dir);
    config.out_dir = *out;
    auto log = [](const std::string& line) { fmt::print(stderr, "bakeoff merge: {}\n", line); };
    Result<run::BenchOutcome> merged = run::MergeShards(config, log);
    if (!merged.ok()) {
      fmt::print(stderr, "bakeoff merge: {}\n", merged.error().message);
      *exit_code = merged.error().code == ErrorCode::kInvalidInput ? kExitUsage : kExitFailure;
      return;
    }
    for (const std::string& note : merged->notes) log(note);
    *exit_code = ReportRun(merged.value(), kExitFailure);
  });
}

}  // namespace bakeoff::cli

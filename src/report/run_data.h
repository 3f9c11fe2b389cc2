// report/run_data.h
//
// Owns: what a report draws of one bench or simulate run, read back from its results folder
// (summary.json, records.jsonl, metrics.jsonl): per step the percentiles and the latency quantile
// curves from summary.json (TTFT, TPOT, ITL per token, E2E over every measured request, at the
// grid of analyze::LatencyCurveNines; from the records for an older summary without them), and
// from the records downsampled series small enough for a page however long the run was: send lag
// over time, arrivals per
// second, prompt and output length histograms, and a sample of requests' timelines (send lag,
// waiting for the first token, decoding); from metrics.jsonl the engine's gauges over time with
// the load steps marked. A records.jsonl cut by a killed run is read up to what is there; every
// line that could not be read is counted, and the first one is named.
// Does not own: drawing (report/html_page.h), the figures' definitions (docs/TERMINOLOGY.md).
//
// Thread-safety: pure functions over files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace bakeoff::report {

struct RunDataOptions {
  std::size_t timeline_requests = 60;  // requests drawn in the per-request timeline
  std::size_t histogram_bins = 40;
  double series_bin_s = 1;  // arrivals and send lag are binned per this many seconds
  std::size_t max_series_points = 2'000;  // longer series are re-binned to stay under this
  // false: records.jsonl is not read when summary.json holds every step's latency curves (a
  // caller that needs only those); arrivals, lengths and timelines are then empty.
  bool read_records = true;
};

// The page data of one run folder (docs/formats/report.md, "Run data"). kInvalidInput (one line
// saying why): the folder has no summary.json, or it is not a bakeoff run summary of schema 1.
Result<nlohmann::json> ReadRunData(const std::filesystem::path& dir, const RunDataOptions& options = {});

// A workload given as arrival instants (seconds) and lengths, as the page draws it: {arrivals
// (per-second rate over time), prompt_tokens and output_tokens (histograms)}.
nlohmann::json WorkloadSeries(const std::vector<double>& arrival_s, std::vector<std::int64_t> prompt_tokens,
                              std::vector<std::int64_t> output_tokens, const RunDataOptions& options = {});

}  // namespace bakeoff::report

// workload/fingerprint.h
//
// Owns: the workload fingerprint (docs/workloads.md): the figures that describe a trace's shape
// (arrival rate and burstiness, length distributions, prefix reuse, sessions, the structured-output
// and model mix, the diurnal shape) and a classification in the seeds' terms (decode-heavy,
// prefill-heavy, prefix-heavy, bursty online, offline batch) with the figures that justify it.
// The builder keeps compact columns (16 bytes a request, plus the prefix table), never the rows'
// text, so a 10-million-row trace fits in a few hundred MB. A fingerprint contains no prompt text.
// Its arrival figures include the rate over time (a profile of at most kMaxRateBins bins) and
// the sizes of same-instant batches, which synthesis replays (synthesis.h).
// Does not own: reading files (importers.h) or synthesis from a fingerprint.
//
// Thread-safety: a FingerprintBuilder is single-threaded; a Fingerprint is a plain value.
// Units: seconds, requests per second, tokens.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.h"
#include "stats/quantile.h"
#include "workload/importers.h"
#include "workload/prefix_reuse.h"
#include "workload/trace.h"

namespace bakeoff::workload {

// Classification thresholds (docs/workloads.md explains each).
inline constexpr double kDecodeHeavyOutputRatio = 0.5;   // output tokens / input tokens >= this
inline constexpr double kPrefillHeavyOutputRatio = 0.1;  // output tokens / input tokens <= this
inline constexpr double kPrefixHeavyReuse = 0.3;         // ideal prefix-cache share >= this
inline constexpr double kBurstyGapCv = 1.5;              // inter-arrival CV >= this (Poisson: 1)
inline constexpr double kOfflineFrontShare = 0.5;        // this share arrives in the first 1%
inline constexpr std::size_t kMaxRateBins = 1440;        // most bins of the rate profile (but see rate_bin_s)
// The probabilities at which a fingerprint records the quantiles of the non-zero gaps.
inline constexpr std::array<double, 11> kNonzeroGapQuantiles = {0.001, 0.01, 0.05, 0.1,  0.25, 0.5,
                                                                0.75,  0.9,  0.95, 0.99, 0.999};

struct LengthDistribution {
  stats::Summary summary;
  std::uint64_t total = 0;
  // log2_counts[0]: value 0; log2_counts[b] for b >= 1: values in [2^(b-1), 2^b).
  std::vector<std::uint64_t> log2_counts;
};

struct RateWindow {
  double window_s = 0;
  double peak_rps = 0;      // most arrivals in any window of this length starting at an arrival
  double peak_to_mean = 0;  // peak_rps / mean_rps
};

struct ClassLabel {
  std::string label;    // "decode-heavy", "prefill-heavy", "balanced", "prefix-heavy",
                        // "bursty online", "steady online", "offline batch"
  std::string because;  // the figures that justify it, in words
};

struct Fingerprint {
  std::string source;
  std::string format;
  std::uint64_t requests = 0;
  bool arrivals_known = true;
  std::optional<std::int64_t> origin_unix_ns;  // wall-clock time of the first arrival, when known

  // Arrivals (zero when !arrivals_known).
  double duration_s = 0;  // last arrival - first arrival
  double mean_rps = 0;    // requests / duration_s
  std::vector<RateWindow> rate_windows;
  stats::Summary gap_s;                   // inter-arrival gaps
  double gap_cv = 0;                      // stddev / mean of the gaps
  std::optional<double> gamma_shape;      // moment fit k = 1 / cv^2 (Poisson: 1)
  double tied_share = 0;                  // share of gaps that are exactly 0
  // Batches: requests that arrive at the same instant. (batch size, number of such instants), by
  // size ascending; [(1, requests)] when no two arrivals tie. Empty in fingerprint.json files
  // written before it existed.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> batch_sizes;
  // The non-zero gaps' quantiles (nearest rank) at kNonzeroGapQuantiles, as (probability, gap):
  // the shape of the gaps inside bursts, which the percentiles of all gaps (zero ones included,
  // none below the median) do not show. Empty when no gap is non-zero, and in fingerprint.json
  // files written before it existed.
  std::vector<std::pair<double, double>> nonzero_gap_quantiles;
  double first_percent_share = 0;         // share of requests in the first 1% of the duration
  // Rate over time: requests per bin of rate_bin_s seconds from the first arrival (bin k counts
  // [k * bin, (k + 1) * bin); the last bin ends at the last arrival, which it counts, and may be
  // shorter). The bin is the smallest of 1, 10, 60, 600, 3600, 86400 s that needs at most
  // kMaxRateBins bins, or past that the fewest whole days that do. Empty when the duration is 0
  // (or in older fingerprint.json files).
  double rate_bin_s = 0;
  std::vector<std::uint64_t> rate_bins;

  LengthDistribution input, output;
  double output_input_ratio = 0;  // total output tokens / total input tokens
  double pearson = 0;             // correlation of input and output lengths
  double pearson_log = 0;         // the same over log(1 + tokens)

  // Prefix reuse (prefix_reuse.h); absent when no row carries block ids.
  std::uint32_t block_tokens = 0;
  std::uint64_t requests_with_blocks = 0;
  std::uint64_t prompt_tokens = 0;  // of all requests
  std::uint64_t served_tokens = 0;  // an ideal prefix cache would serve
  std::uint64_t distinct_blocks = 0;
  std::optional<double> prefix_reuse;  // served_tokens / prompt_tokens
  bool prefix_from_text = false;       // ids derived from text (importers.h TextBlockIds)

  // Sessions; turns and think time only over requests with a session id.
  std::uint64_t sessions = 0;
  std::uint64_t requests_in_sessions = 0;
  stats::Summary turns_per_session;
  stats::Summary think_time_s;
  std::string think_time_source;  // "trace", "inter-turn arrival gap", or "" when none

  std::uint64_t structured_output = 0;
  std::vector<std::pair<std::string, std::uint64_t>> models;  // most requests first
  std::uint64_t prefix_groups = 0;
  std::uint64_t requests_in_groups = 0;

  // Diurnal shape: requests per hour of day, when the trace spans at least 24 hours.
  std::optional<std::array<std::uint64_t, 24>> hourly;
  std::string hourly_basis;  // "UTC hour of day" or "hours since the first arrival, mod 24"
  std::optional<double> hourly_peak_to_trough;

  std::vector<ClassLabel> classification;
  std::uint64_t tokens_estimated = 0;  // requests whose lengths were estimated from text
  std::vector<std::string> notes;      // from the import: skipped rows, ordering, estimates
};

class FingerprintBuilder {
 public:
  FingerprintBuilder();
  FingerprintBuilder(const FingerprintBuilder&) = delete;
  FingerprintBuilder& operator=(const FingerprintBuilder&) = delete;

  // Adds one request; order does not matter except for prefix reuse and sessions, which take the
  // requests in the order given (the file's). `block_tokens` is the size of its prefix blocks.
  // REQUIRES: the same block_tokens for every request with block ids.
  void Add(const TraceRequest& request, std::uint32_t block_tokens);

  // Computes the figures. `report` supplies the source, format, clock origin and notes.
  Fingerprint Finish(const ImportReport& report);

 private:
  struct SessionState {
    std::uint32_t turns = 0;
    double last_arrival_s = 0;
  };
  std::vector<double> arrival_s_;
  std::vector<std::uint32_t> input_;
  std::vector<std::uint32_t> output_;
  std::unique_ptr<PrefixReuseCounter> prefix_;
  std::uint64_t requests_with_blocks_ = 0;
  std::unordered_map<std::uint64_t, SessionState> sessions_;  // by hash of the session id
  std::vector<double> think_time_s_;
  bool think_from_trace_ = false;
  std::unordered_map<std::string, std::uint64_t> models_;
  std::unordered_map<std::string, std::uint64_t> groups_;
  std::uint64_t requests_in_groups_ = 0;
  std::uint64_t structured_ = 0;
  std::uint64_t estimated_ = 0;
};

// Imports `path` and fingerprints it in one pass.
Result<Fingerprint> FingerprintFile(const std::filesystem::path& path, const ImportOptions& options,
                                    ImportReport* report = nullptr);

// fingerprint.json (docs/workloads.md lists the fields), pretty-printed.
std::string FingerprintJson(const Fingerprint& fingerprint);

// Reads fingerprint.json back (for synthesis). Accepts what FingerprintJson writes, schema_version 1;
// fields it does not know are ignored, absent optional ones left unset. Percentile confidence bounds
// are not in the file and read back as the value itself. Errors are kInvalidInput and name the field.
Result<Fingerprint> ParseFingerprintJson(std::string_view json);

// The readable table `bakeoff fingerprint` prints.
std::string FormatFingerprintTable(const Fingerprint& fingerprint);

}  // namespace bakeoff::workload

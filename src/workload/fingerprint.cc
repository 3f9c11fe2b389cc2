// workload/fingerprint.cc
//
// Owns: the fingerprint computations and their two renderings. Every figure is computed from the
// compact columns after the import; definitions are in docs/workloads.md, whose worked examples
// are produced by this file.
#include "workload/fingerprint.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_dump.h"

namespace bakeoff::workload {

namespace {

constexpr std::size_t kMaxDistinctNames = 1000;  // model and group names kept before "(other)"
constexpr double kRateWindowsS[] = {1, 10, 60, 600, 3600};
constexpr double kRateBinLadderS[] = {1, 10, 60, 600, 3600, 86400};
constexpr double kDiurnalMinimumS = 86400;

// Sorts `keys` ascending: an LSD radix sort, 8 bits a pass, that skips the passes whose digit is
// the same in every key. Several times faster than std::sort on millions of lengths or gaps.
template <typename Key>
void RadixSort(std::vector<Key>& keys) {
  constexpr std::size_t kPasses = sizeof(Key);
  const std::size_t n = keys.size();
  if (n < 2) return;
  std::vector<std::array<std::size_t, 256>> counts(kPasses);
  for (const Key k : keys) {
    for (std::size_t p = 0; p < kPasses; ++p) ++counts[p][(k >> (8 * p)) & 0xff];
  }
  std::vector<Key> scratch(n);
  for (std::size_t p = 0; p < kPasses; ++p) {
    if (counts[p][(keys[0] >> (8 * p)) & 0xff] == n) continue;  // every key has this digit
    std::size_t offset = 0;
    for (std::size_t& c : counts[p]) offset += std::exchange(c, offset);
    for (const Key k : keys) scratch[counts[p][(k >> (8 * p)) & 0xff]++] = k;
    keys.swap(scratch);
  }
}

// stats::Summarize of an already sorted sample, computed the same way (sum and squares in sorted
// order, the same quantile estimates), so the figures are bit for bit those of stats::Summarize
// (fingerprint_test checks it) without its second sort.
stats::Summary SummarizeSorted(const std::vector<double>& sorted) {
  stats::Summary s;
  s.count = sorted.size();
  if (sorted.empty()) return s;
  const double n = static_cast<double>(sorted.size());
  s.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  if (sorted.size() > 1) {
    double squares = 0;
    for (const double v : sorted) squares += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(squares / (n - 1));
  }
  s.min = sorted.front();
  s.max = sorted.back();
  s.p50 = stats::EstimateQuantile(sorted, 0.50);
  s.p90 = stats::EstimateQuantile(sorted, 0.90);
  s.p95 = stats::EstimateQuantile(sorted, 0.95);
  s.p99 = stats::EstimateQuantile(sorted, 0.99);
  s.p999 = stats::EstimateQuantile(sorted, 0.999);
  return s;
}

// Sorts the column in place (it is not needed afterwards), so the summary costs one double per
// value on top of it.
LengthDistribution Lengths(std::vector<std::uint32_t> sorted) {
  LengthDistribution d;
  RadixSort(sorted);
  for (const std::uint32_t v : sorted) {
    d.total += v;
    const std::size_t bucket = v == 0 ? 0 : static_cast<std::size_t>(std::bit_width(v));
    if (d.log2_counts.size() <= bucket) d.log2_counts.resize(bucket + 1, 0);
    ++d.log2_counts[bucket];
  }
  const std::vector<double> as_double(sorted.begin(), sorted.end());
  std::vector<std::uint32_t>().swap(sorted);
  d.summary = SummarizeSorted(as_double);
  return d;
}

// log(1 + v) of token counts, from a table for the common lengths (the same values std::log1p
// gives, computed once each instead of four times a request).
class Log1pOfCounts {
 public:
  static constexpr std::uint32_t kTableSize = 1 << 17;
  explicit Log1pOfCounts(std::uint32_t max_value) : table_(std::min(max_value, kTableSize - 1) + 1) {
    for (std::size_t v = 0; v < table_.size(); ++v) table_[v] = std::log1p(static_cast<double>(v));
  }
  double operator()(std::uint32_t v) const { return v < table_.size() ? table_[v] : std::log1p(static_cast<double>(v)); }

 private:
  std::vector<double> table_;
};

template <typename F>
double Pearson(const std::vector<std::uint32_t>& x, const std::vector<std::uint32_t>& y, const F& f) {
  const std::size_t n = x.size();
  if (n < 2) return 0;
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mx += f(x[i]);
    my += f(y[i]);
  }
  mx /= static_cast<double>(n);
  my /= static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double dx = f(x[i]) - mx, dy = f(y[i]) - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx <= 0 || syy <= 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<std::pair<std::string, std::uint64_t>> ByCount(const std::unordered_map<std::string, std::uint64_t>& m) {
  std::vector<std::pair<std::string, std::uint64_t>> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return v;
}

void CountName(std::unordered_map<std::string, std::uint64_t>& m, const std::string& name) {
  auto it = m.find(name);
  if (it != m.end()) {
    ++it->second;
  } else if (m.size() < kMaxDistinctNames) {
    m.emplace(name, 1);
  } else {
    ++m["(other)"];
  }
}

std::string Percent(double share) { return fmt::format("{:.1f}%", 100 * share); }

void Classify(Fingerprint& f) {
  const double r = f.output_input_ratio;
  if (f.input.total == 0 && f.output.total == 0) {
    // nothing to say about lengths
  } else if (r >= kDecodeHeavyOutputRatio) {
    f.classification.push_back({"decode-heavy",
        fmt::format("output tokens are {} of input tokens (>= {}; median input {} / output {}): short in, long "
                    "out stresses decode and KV-cache capacity",
                    Percent(r), Percent(kDecodeHeavyOutputRatio), f.input.summary.p50.value, f.output.summary.p50.value)});
  } else if (r <= kPrefillHeavyOutputRatio) {
    f.classification.push_back({"prefill-heavy",
        fmt::format("output tokens are {} of input tokens (<= {}; median input {} / output {}): long in, short "
                    "out puts prefill, chunking and queueing first",
                    Percent(r), Percent(kPrefillHeavyOutputRatio), f.input.summary.p50.value, f.output.summary.p50.value)});
  } else {
    f.classification.push_back({"balanced",
        fmt::format("output tokens are {} of input tokens (between {} and {}; median input {} / output {}): "
                    "neither prefill nor decode dominates",
                    Percent(r), Percent(kPrefillHeavyOutputRatio), Percent(kDecodeHeavyOutputRatio),
                    f.input.summary.p50.value, f.output.summary.p50.value)});
  }
  if (f.prefix_reuse && *f.prefix_reuse >= kPrefixHeavyReuse) {
    f.classification.push_back({"prefix-heavy",
        fmt::format("an ideal prefix cache would serve {} of prompt tokens (>= {}, {}-token blocks): prefix "
                    "caching changes the result",
                    Percent(*f.prefix_reuse), Percent(kPrefixHeavyReuse), f.block_tokens)});
  }
  if (!f.arrivals_known || f.requests < 2) return;
  if (f.duration_s == 0 || f.first_percent_share >= kOfflineFrontShare) {
    f.classification.push_back({"offline batch",
        fmt::format("{} of requests arrive in the first 1% of the trace's {:.3g} s (>= {}): submitted as a "
                    "batch, throughput matters more than latency",
                    Percent(f.first_percent_share), f.duration_s, Percent(kOfflineFrontShare))});
  } else if (f.gap_cv >= kBurstyGapCv) {
    f.classification.push_back({"bursty online",
        fmt::format("inter-arrival CV {:.2f} (>= {}; Poisson is 1; Gamma shape {:.2f}); peak-to-mean {:.1f} "
                    "over {} s windows: bursts decide tail latency",
                    f.gap_cv, kBurstyGapCv, f.gamma_shape.value_or(0),
                    f.rate_windows.empty() ? 0.0 : f.rate_windows.front().peak_to_mean,
                    f.rate_windows.empty() ? 0.0 : f.rate_windows.front().window_s)});
  } else {
    f.classification.push_back({"steady online",
        fmt::format("inter-arrival CV {:.2f} (< {}; Poisson is 1): online traffic without strong bursts",
                    f.gap_cv, kBurstyGapCv)});
  }
}

nlohmann::json SummaryJson(const stats::Summary& s) {
  nlohmann::json j;
  j["count"] = s.count;
  j["mean"] = s.mean;
  j["stddev"] = s.stddev;
  j["min"] = s.min;
  j["p50"] = s.p50.value;
  j["p90"] = s.p90.value;
  j["p95"] = s.p95.value;
  j["p99"] = s.p99.value;
  j["p999"] = s.p999.value;
  j["max"] = s.max;
  return j;
}

nlohmann::json LengthsJson(const LengthDistribution& d) {
  nlohmann::json j = SummaryJson(d.summary);
  j["total"] = d.total;
  nlohmann::json hist = nlohmann::json::array();
  for (std::size_t b = 0; b < d.log2_counts.size(); ++b) {
    if (d.log2_counts[b] == 0) continue;
    const std::uint64_t lo = b == 0 ? 0 : (std::uint64_t{1} << (b - 1));
    const std::uint64_t hi = b == 0 ? 1 : (std::uint64_t{1} << b);
    hist.push_back({{"from", lo}, {"below", hi}, {"count", d.log2_counts[b]}});
  }
  j["log2_histogram"] = std::move(hist);
  return j;
}

std::string IsoTime(std::int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

FingerprintBuilder::FingerprintBuilder() = default;

void FingerprintBuilder::Add(const TraceRequest& r, std::uint32_t block_tokens) {
  arrival_s_.push_back(r.arrival_s);
  input_.push_back(r.input_tokens);
  output_.push_back(r.output_tokens);
  if (!r.prefix_hashes.empty() && block_tokens > 0) {
    if (!prefix_) prefix_ = std::make_unique<PrefixReuseCounter>(block_tokens);
    BAKEOFF_CHECK(prefix_->block_tokens() == block_tokens) << "block size changed within a trace";
    prefix_->Push(r.prefix_hashes, r.input_tokens);
    ++requests_with_blocks_;
  }
  if (r.session_id) {
    SessionState& s = sessions_[std::hash<std::string>{}(*r.session_id)];
    if (r.think_time_s) {
      think_time_s_.push_back(*r.think_time_s);
      think_from_trace_ = true;
    } else if (s.turns > 0 && !think_from_trace_ && r.arrival_s >= s.last_arrival_s) {
      think_time_s_.push_back(r.arrival_s - s.last_arrival_s);
    }
    ++s.turns;
    s.last_arrival_s = r.arrival_s;
  }
  if (r.model) CountName(models_, *r.model);
  if (r.prefix_group) {
    CountName(groups_, *r.prefix_group);
    ++requests_in_groups_;
  }
  if (r.structured_output) ++structured_;
  if (r.tokens_estimated) ++estimated_;
}

Fingerprint FingerprintBuilder::Finish(const ImportReport& report) {
  Fingerprint f;
  f.source = report.source;
  f.format = TraceFormatName(report.format);
  f.requests = arrival_s_.size();
  f.arrivals_known = report.arrivals_known;
  f.notes = report.notes;
  if (report.SkippedTotal() > 0) f.notes.push_back(report.SkippedSummary());
  f.tokens_estimated = estimated_;
  if (estimated_ > 0) {
    f.notes.push_back(fmt::format("{} requests have lengths estimated from text (ceil(bytes / 4))", estimated_));
  }
  // The prefix table first: its memory is freed before the summaries below allocate theirs.
  if (prefix_) {
    prefix_->Flush();
    f.block_tokens = prefix_->block_tokens();
    f.requests_with_blocks = requests_with_blocks_;
    f.distinct_blocks = prefix_->distinct_blocks();
    f.served_tokens = prefix_->served_tokens();
    prefix_.reset();
  }

  f.pearson = Pearson(input_, output_, [](std::uint32_t v) { return static_cast<double>(v); });
  std::uint32_t longest = 0;
  for (const std::uint32_t v : input_) longest = std::max(longest, v);
  for (const std::uint32_t v : output_) longest = std::max(longest, v);
  f.pearson_log = Pearson(input_, output_, Log1pOfCounts(longest));
  f.input = Lengths(std::move(input_));
  input_ = {};
  f.output = Lengths(std::move(output_));
  output_ = {};
  f.output_input_ratio = f.input.total > 0 ? static_cast<double>(f.output.total) / static_cast<double>(f.input.total) : 0;

  if (f.arrivals_known && !arrival_s_.empty()) {
    if (!std::is_sorted(arrival_s_.begin(), arrival_s_.end())) std::sort(arrival_s_.begin(), arrival_s_.end());
    const double first = arrival_s_.front();
    if (report.origin_unix_ns) {
      // The origin is the first row in file order; move it to the earliest arrival.
      f.origin_unix_ns = *report.origin_unix_ns + static_cast<std::int64_t>(std::llround(first * 1e9));
    }
    for (double& t : arrival_s_) t -= first;
    const std::size_t n = arrival_s_.size();
    f.duration_s = arrival_s_.back();
    f.mean_rps = f.duration_s > 0 ? static_cast<double>(n) / f.duration_s : 0;
    for (const double w : kRateWindowsS) {
      if (f.duration_s <= 0 || w > f.duration_s) break;
      std::size_t best = 0;
      for (std::size_t i = 0, j = 0; i < n; ++i) {
        while (j < n && arrival_s_[j] < arrival_s_[i] + w) ++j;
        best = std::max(best, j - i);
      }
      const double peak = static_cast<double>(best) / w;
      f.rate_windows.push_back({w, peak, f.mean_rps > 0 ? peak / f.mean_rps : 0});
    }
    if (f.duration_s > 0) {
      const double cutoff = f.duration_s * 0.01;
      const auto front = static_cast<std::size_t>(
          std::upper_bound(arrival_s_.begin(), arrival_s_.end(), cutoff) - arrival_s_.begin());
      f.first_percent_share = static_cast<double>(front) / static_cast<double>(n);
    } else {
      f.first_percent_share = 1;
    }
    // Batches: runs of equal arrival times, counted by size (few distinct sizes, no per-row memory).
    {
      std::map<std::uint32_t, std::uint64_t> by_size;
      std::uint32_t run = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (i > 0 && arrival_s_[i] != arrival_s_[i - 1]) ++by_size[std::exchange(run, 0)];
        if (run < UINT32_MAX) ++run;
      }
      ++by_size[run];
      f.batch_sizes.assign(by_size.begin(), by_size.end());
    }
    if (f.duration_s > 0) {
      // Past the ladder (a trace of more than kMaxRateBins days, or timestamps in a wrong unit):
      // whole days, as many as keep the bins at kMaxRateBins, so the profile stays small.
      constexpr double kLongestLadderBin = kRateBinLadderS[std::size(kRateBinLadderS) - 1];
      f.rate_bin_s = kLongestLadderBin *
                     std::ceil(f.duration_s / kLongestLadderBin / static_cast<double>(kMaxRateBins));
      for (const double bin : kRateBinLadderS) {
        if (std::ceil(f.duration_s / bin) <= static_cast<double>(kMaxRateBins)) {
          f.rate_bin_s = bin;
          break;
        }
      }
      const auto bins = static_cast<std::size_t>(std::max(1.0, std::ceil(f.duration_s / f.rate_bin_s)));
      f.rate_bins.assign(bins, 0);
      for (const double t : arrival_s_) ++f.rate_bins[std::min(bins - 1, static_cast<std::size_t>(t / f.rate_bin_s))];
    }
    if (f.duration_s >= kDiurnalMinimumS) {
      std::array<std::uint64_t, 24> hours{};
      const double origin_s = f.origin_unix_ns ? static_cast<double>(*f.origin_unix_ns) * 1e-9 : 0;
      for (const double t : arrival_s_) {
        // The hour of day in floating point: an arrival too far out for an integer count of
        // hours (a trace's own clock can be anything) still falls in one of the 24.
        const double hour = std::fmod(std::floor((origin_s + t) / 3600), 24.0);
        ++hours[static_cast<std::size_t>(hour < 0 ? hour + 24 : hour)];
      }
      f.hourly = hours;
      f.hourly_basis = f.origin_unix_ns ? "UTC hour of day" : "hours since the first arrival, mod 24";
      const auto [lo, hi] = std::minmax_element(hours.begin(), hours.end());
      if (*lo > 0) f.hourly_peak_to_trough = static_cast<double>(*hi) / static_cast<double>(*lo);
    }
    // Gaps last, once the arrival column is freed. They are sorted as their bit patterns, which
    // order as the values do for doubles >= 0.
    if (n >= 2) {
      std::vector<std::uint64_t> gap_bits(n - 1);
      std::uint64_t tied = 0;
      for (std::size_t i = 1; i < n; ++i) {
        const double gap = arrival_s_[i] - arrival_s_[i - 1];
        gap_bits[i - 1] = std::bit_cast<std::uint64_t>(gap);
        if (gap == 0) ++tied;
      }
      f.tied_share = static_cast<double>(tied) / static_cast<double>(n - 1);
      std::vector<double>().swap(arrival_s_);
      RadixSort(gap_bits);
      std::vector<double> gaps(gap_bits.size());
      for (std::size_t i = 0; i < gaps.size(); ++i) gaps[i] = std::bit_cast<double>(gap_bits[i]);
      std::vector<std::uint64_t>().swap(gap_bits);
      f.gap_s = SummarizeSorted(gaps);
      if (tied < gaps.size()) {
        const std::size_t nonzero = gaps.size() - tied;
        for (const double q : kNonzeroGapQuantiles) {
          const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(nonzero)));
          f.nonzero_gap_quantiles.emplace_back(q, gaps[tied + std::clamp<std::size_t>(rank, 1, nonzero) - 1]);
        }
      }
      if (f.gap_s.mean > 0) {
        f.gap_cv = f.gap_s.stddev / f.gap_s.mean;
        if (f.gap_cv > 0) f.gamma_shape = 1 / (f.gap_cv * f.gap_cv);
      }
    }
  }

  if (f.block_tokens > 0) {
    f.prompt_tokens = f.input.total;
    f.prefix_reuse = f.prompt_tokens > 0 ? static_cast<double>(f.served_tokens) / static_cast<double>(f.prompt_tokens) : 0;
    f.prefix_from_text = report.format == TraceFormat::kShareGpt || report.format == TraceFormat::kOpenAiLog ||
                         estimated_ > 0;
  }

  if (!sessions_.empty()) {
    f.sessions = sessions_.size();
    std::vector<double> turns;
    turns.reserve(sessions_.size());
    for (const auto& [key, s] : sessions_) {
      turns.push_back(s.turns);
      f.requests_in_sessions += s.turns;
    }
    f.turns_per_session = stats::Summarize(std::move(turns));
    // Without timestamps an inter-turn gap means nothing; a trace's own think times still do.
    if (!f.arrivals_known && !think_from_trace_) think_time_s_.clear();
    if (!think_time_s_.empty()) {
      f.think_time_source = think_from_trace_ ? "trace" : "inter-turn arrival gap";
      f.think_time_s = stats::Summarize(std::move(think_time_s_));
    }
  }
  f.structured_output = structured_;
  f.models = ByCount(models_);
  f.prefix_groups = groups_.size();
  f.requests_in_groups = requests_in_groups_;
  Classify(f);
  return f;
}

Result<Fingerprint> FingerprintFile(const std::filesystem::path& path, const ImportOptions& options,
                                    ImportReport* report) {
  ImportOptions compact = options;
  compact.keep_text = false;
  FingerprintBuilder builder;
  Result<ImportReport> imported = ImportTraceFile(
      path, compact, [&builder](const TraceRequest& r, std::uint32_t block_tokens) { builder.Add(r, block_tokens); });
  if (!imported.ok()) return imported.error();
  Fingerprint f = builder.Finish(*imported);
  if (report != nullptr) *report = std::move(*imported);
  return f;
}

std::string FingerprintJson(const Fingerprint& f) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["source"] = f.source;
  j["format"] = f.format;
  j["requests"] = f.requests;
  nlohmann::json arrivals;
  arrivals["known"] = f.arrivals_known;
  if (f.arrivals_known) {
    if (f.origin_unix_ns) arrivals["first_arrival_utc"] = IsoTime(*f.origin_unix_ns);
    arrivals["duration_s"] = f.duration_s;
    arrivals["mean_rps"] = f.mean_rps;
    nlohmann::json windows = nlohmann::json::array();
    for (const RateWindow& w : f.rate_windows) {
      windows.push_back({{"window_s", w.window_s}, {"peak_rps", w.peak_rps}, {"peak_to_mean", w.peak_to_mean}});
    }
    arrivals["peak_rate"] = std::move(windows);
    nlohmann::json burst;
    burst["gap_s"] = SummaryJson(f.gap_s);
    burst["gap_cv"] = f.gap_cv;
    burst["gamma_shape"] = f.gamma_shape ? nlohmann::json(*f.gamma_shape) : nlohmann::json(nullptr);
    burst["tied_gap_share"] = f.tied_share;
    nlohmann::json batches = nlohmann::json::array();
    for (const auto& [size, count] : f.batch_sizes) batches.push_back({size, count});
    burst["batch_sizes"] = std::move(batches);
    nlohmann::json quantiles = nlohmann::json::array();
    for (const auto& [q, gap] : f.nonzero_gap_quantiles) quantiles.push_back({q, gap});
    burst["nonzero_gap_quantiles"] = std::move(quantiles);
    arrivals["burstiness"] = std::move(burst);
    arrivals["first_percent_share"] = f.first_percent_share;
    if (!f.rate_bins.empty()) {
      arrivals["rate_profile"] = {{"bin_s", f.rate_bin_s}, {"requests_per_bin", f.rate_bins}};
    } else {
      arrivals["rate_profile"] = nullptr;
    }
    if (f.hourly) {
      arrivals["diurnal"] = {{"basis", f.hourly_basis},
                             {"requests_per_hour", *f.hourly},
                             {"peak_to_trough", f.hourly_peak_to_trough ? nlohmann::json(*f.hourly_peak_to_trough)
                                                                        : nlohmann::json(nullptr)}};
    } else {
      arrivals["diurnal"] = nullptr;
    }
  }
  j["arrivals"] = std::move(arrivals);
  j["input_tokens"] = LengthsJson(f.input);
  j["output_tokens"] = LengthsJson(f.output);
  j["lengths"] = {{"output_input_ratio", f.output_input_ratio},
                  {"pearson", f.pearson},
                  {"pearson_log", f.pearson_log},
                  {"estimated_requests", f.tokens_estimated}};
  if (f.prefix_reuse) {
    j["prefix_reuse"] = {{"block_tokens", f.block_tokens},
                         {"requests_with_blocks", f.requests_with_blocks},
                         {"distinct_blocks", f.distinct_blocks},
                         {"prompt_tokens", f.prompt_tokens},
                         {"served_tokens", f.served_tokens},
                         {"share", *f.prefix_reuse},
                         {"ids_from_text", f.prefix_from_text}};
  } else {
    j["prefix_reuse"] = nullptr;
  }
  if (f.sessions > 0) {
    nlohmann::json s = {{"sessions", f.sessions},
                        {"requests", f.requests_in_sessions},
                        {"turns_per_session", SummaryJson(f.turns_per_session)}};
    if (!f.think_time_source.empty()) {
      s["think_time_s"] = SummaryJson(f.think_time_s);
      s["think_time_source"] = f.think_time_source;
    }
    j["sessions"] = std::move(s);
  } else {
    j["sessions"] = nullptr;
  }
  nlohmann::json mix;
  mix["structured_output_requests"] = f.structured_output;
  mix["structured_output_share"] = f.requests > 0 ? static_cast<double>(f.structured_output) / static_cast<double>(f.requests) : 0;
  nlohmann::json models = nlohmann::json::array();
  for (const auto& [name, count] : f.models) models.push_back({{"name", name}, {"requests", count}});
  mix["models"] = std::move(models);
  mix["prefix_groups"] = f.prefix_groups;
  mix["requests_in_prefix_groups"] = f.requests_in_groups;
  j["mix"] = std::move(mix);
  nlohmann::json labels = nlohmann::json::array();
  for (const ClassLabel& c : f.classification) labels.push_back({{"label", c.label}, {"because", c.because}});
  j["classification"] = std::move(labels);
  j["notes"] = f.notes;
  // Notes quote source bytes, which need not be UTF-8: replace invalid sequences, never throw.
  return DumpJson(j, 2);
}

namespace {

// Reads fingerprint.json fields; every failure names the field's path.
class JsonReader {
 public:
  struct Failure {
    std::string message;
  };
  template <typename T>
  static T Get(const nlohmann::json& j, const char* key, const std::string& where) {
    const std::string path = where.empty() ? key : where + "." + key;
    if (!j.is_object() || !j.contains(key)) throw Failure{path + ": missing"};
    try {
      return j.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Failure{path + ": wrong type"};
    }
  }
  template <typename T>
  static T GetOr(const nlohmann::json& j, const char* key, const std::string& where, T fallback) {
    if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
    return Get<T>(j, key, where);
  }
  static stats::Summary Summary(const nlohmann::json& j, const std::string& where) {
    stats::Summary s;
    s.count = Get<std::size_t>(j, "count", where);
    s.mean = Get<double>(j, "mean", where);
    s.stddev = Get<double>(j, "stddev", where);
    s.min = Get<double>(j, "min", where);
    s.max = Get<double>(j, "max", where);
    const std::pair<stats::QuantileEstimate*, std::pair<const char*, double>> qs[] = {
        {&s.p50, {"p50", 0.5}}, {&s.p90, {"p90", 0.9}}, {&s.p95, {"p95", 0.95}},
        {&s.p99, {"p99", 0.99}}, {&s.p999, {"p999", 0.999}}};
    for (const auto& [q, name_q] : qs) {
      q->q = name_q.second;
      q->value = q->lower = q->upper = Get<double>(j, name_q.first, where);
    }
    return s;
  }
  static LengthDistribution Lengths(const nlohmann::json& j, const std::string& where) {
    LengthDistribution d;
    d.summary = Summary(j, where);
    d.total = Get<std::uint64_t>(j, "total", where);
    const nlohmann::json& hist = j.contains("log2_histogram") ? j.at("log2_histogram") : nlohmann::json::array();
    if (!hist.is_array()) throw Failure{where + ".log2_histogram: wrong type"};
    for (const nlohmann::json& b : hist) {
      const std::uint64_t from = Get<std::uint64_t>(b, "from", where + ".log2_histogram[]");
      const std::size_t bucket = from == 0 ? 0 : static_cast<std::size_t>(std::bit_width(from));
      if (bucket > 64 || (from != 0 && from != (std::uint64_t{1} << (bucket - 1)))) {
        throw Failure{where + ".log2_histogram[].from: not a power of two"};
      }
      if (d.log2_counts.size() <= bucket) d.log2_counts.resize(bucket + 1, 0);
      d.log2_counts[bucket] = Get<std::uint64_t>(b, "count", where + ".log2_histogram[]");
    }
    return d;
  }
};

std::optional<std::int64_t> ParseIsoTime(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm)) * 1'000'000'000;
}

}  // namespace

Result<Fingerprint> ParseFingerprintJson(std::string_view text) {
  using R = JsonReader;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("not valid JSON: {}", e.what()));
  }
  Fingerprint f;
  try {
    if (!j.is_object()) throw R::Failure{"top level: expected an object"};
    const int version = R::Get<int>(j, "schema_version", "");
    if (version != 1) throw R::Failure{fmt::format("schema_version: {} is not supported (1)", version)};
    f.source = R::Get<std::string>(j, "source", "");
    f.format = R::Get<std::string>(j, "format", "");
    f.requests = R::Get<std::uint64_t>(j, "requests", "");
    const nlohmann::json& a = j.contains("arrivals") ? j.at("arrivals") : nlohmann::json::object();
    f.arrivals_known = R::GetOr<bool>(a, "known", "arrivals", true);
    if (f.arrivals_known) {
      if (a.contains("first_arrival_utc")) {
        f.origin_unix_ns = ParseIsoTime(R::Get<std::string>(a, "first_arrival_utc", "arrivals"));
        if (!f.origin_unix_ns) throw R::Failure{"arrivals.first_arrival_utc: not YYYY-MM-DDTHH:MM:SSZ"};
      }
      f.duration_s = R::Get<double>(a, "duration_s", "arrivals");
      f.mean_rps = R::Get<double>(a, "mean_rps", "arrivals");
      for (const nlohmann::json& w : R::GetOr<nlohmann::json>(a, "peak_rate", "arrivals", nlohmann::json::array())) {
        f.rate_windows.push_back({R::Get<double>(w, "window_s", "arrivals.peak_rate[]"),
                                  R::Get<double>(w, "peak_rps", "arrivals.peak_rate[]"),
                                  R::Get<double>(w, "peak_to_mean", "arrivals.peak_rate[]")});
      }
      const nlohmann::json& b = R::Get<nlohmann::json>(a, "burstiness", "arrivals");
      f.gap_s = R::Summary(R::Get<nlohmann::json>(b, "gap_s", "arrivals.burstiness"), "arrivals.burstiness.gap_s");
      f.gap_cv = R::Get<double>(b, "gap_cv", "arrivals.burstiness");
      if (b.contains("gamma_shape") && !b.at("gamma_shape").is_null()) {
        f.gamma_shape = R::Get<double>(b, "gamma_shape", "arrivals.burstiness");
      }
      f.tied_share = R::GetOr<double>(b, "tied_gap_share", "arrivals.burstiness", 0);
      for (const nlohmann::json& e : R::GetOr<nlohmann::json>(b, "batch_sizes", "arrivals.burstiness",
                                                               nlohmann::json::array())) {
        const auto pair = e.get<std::pair<std::uint32_t, std::uint64_t>>();
        if (pair.first == 0 || pair.second == 0 ||
            (!f.batch_sizes.empty() && pair.first <= f.batch_sizes.back().first)) {
          throw R::Failure{"arrivals.burstiness.batch_sizes: expected [size, count] pairs, sizes ascending, both >= 1"};
        }
        f.batch_sizes.push_back(pair);
      }
      for (const nlohmann::json& e : R::GetOr<nlohmann::json>(b, "nonzero_gap_quantiles", "arrivals.burstiness",
                                                               nlohmann::json::array())) {
        const auto pair = e.get<std::pair<double, double>>();
        if (!(pair.first > 0 && pair.first < 1) || !(pair.second > 0) || !std::isfinite(pair.second) ||
            (!f.nonzero_gap_quantiles.empty() && (pair.first <= f.nonzero_gap_quantiles.back().first ||
                                                  pair.second < f.nonzero_gap_quantiles.back().second))) {
          throw R::Failure{
              "arrivals.burstiness.nonzero_gap_quantiles: expected [probability, gap] pairs, probabilities "
              "ascending in (0, 1), gaps > 0 and non-decreasing"};
        }
        f.nonzero_gap_quantiles.push_back(pair);
      }
      f.first_percent_share = R::GetOr<double>(a, "first_percent_share", "arrivals", 0);
      if (a.contains("rate_profile") && !a.at("rate_profile").is_null()) {
        const nlohmann::json& p = a.at("rate_profile");
        f.rate_bin_s = R::Get<double>(p, "bin_s", "arrivals.rate_profile");
        f.rate_bins = R::Get<std::vector<std::uint64_t>>(p, "requests_per_bin", "arrivals.rate_profile");
        if (!(f.rate_bin_s > 0) || f.rate_bins.empty()) {
          throw R::Failure{"arrivals.rate_profile: needs bin_s > 0 and at least one bin"};
        }
      }
      if (a.contains("diurnal") && !a.at("diurnal").is_null()) {
        const nlohmann::json& d = a.at("diurnal");
        f.hourly_basis = R::Get<std::string>(d, "basis", "arrivals.diurnal");
        f.hourly = R::Get<std::array<std::uint64_t, 24>>(d, "requests_per_hour", "arrivals.diurnal");
        if (d.contains("peak_to_trough") && !d.at("peak_to_trough").is_null()) {
          f.hourly_peak_to_trough = R::Get<double>(d, "peak_to_trough", "arrivals.diurnal");
        }
      }
    }
    f.input = R::Lengths(R::Get<nlohmann::json>(j, "input_tokens", ""), "input_tokens");
    f.output = R::Lengths(R::Get<nlohmann::json>(j, "output_tokens", ""), "output_tokens");
    const nlohmann::json& l = R::Get<nlohmann::json>(j, "lengths", "");
    f.output_input_ratio = R::Get<double>(l, "output_input_ratio", "lengths");
    f.pearson = R::Get<double>(l, "pearson", "lengths");
    f.pearson_log = R::Get<double>(l, "pearson_log", "lengths");
    f.tokens_estimated = R::GetOr<std::uint64_t>(l, "estimated_requests", "lengths", 0);
    if (j.contains("prefix_reuse") && !j.at("prefix_reuse").is_null()) {
      const nlohmann::json& p = j.at("prefix_reuse");
      f.block_tokens = R::Get<std::uint32_t>(p, "block_tokens", "prefix_reuse");
      f.requests_with_blocks = R::Get<std::uint64_t>(p, "requests_with_blocks", "prefix_reuse");
      f.distinct_blocks = R::Get<std::uint64_t>(p, "distinct_blocks", "prefix_reuse");
      f.prompt_tokens = R::Get<std::uint64_t>(p, "prompt_tokens", "prefix_reuse");
      f.served_tokens = R::Get<std::uint64_t>(p, "served_tokens", "prefix_reuse");
      f.prefix_reuse = R::Get<double>(p, "share", "prefix_reuse");
      f.prefix_from_text = R::GetOr<bool>(p, "ids_from_text", "prefix_reuse", false);
    }
    if (j.contains("sessions") && !j.at("sessions").is_null()) {
      const nlohmann::json& s = j.at("sessions");
      f.sessions = R::Get<std::uint64_t>(s, "sessions", "sessions");
      f.requests_in_sessions = R::Get<std::uint64_t>(s, "requests", "sessions");
      f.turns_per_session = R::Summary(R::Get<nlohmann::json>(s, "turns_per_session", "sessions"),
                                       "sessions.turns_per_session");
      if (s.contains("think_time_s")) {
        f.think_time_s = R::Summary(s.at("think_time_s"), "sessions.think_time_s");
        f.think_time_source = R::Get<std::string>(s, "think_time_source", "sessions");
      }
    }
    if (j.contains("mix")) {
      const nlohmann::json& m = j.at("mix");
      f.structured_output = R::GetOr<std::uint64_t>(m, "structured_output_requests", "mix", 0);
      for (const nlohmann::json& e : R::GetOr<nlohmann::json>(m, "models", "mix", nlohmann::json::array())) {
        f.models.emplace_back(R::Get<std::string>(e, "name", "mix.models[]"),
                              R::Get<std::uint64_t>(e, "requests", "mix.models[]"));
      }
      f.prefix_groups = R::GetOr<std::uint64_t>(m, "prefix_groups", "mix", 0);
      f.requests_in_groups = R::GetOr<std::uint64_t>(m, "requests_in_prefix_groups", "mix", 0);
    }
    for (const nlohmann::json& c : R::GetOr<nlohmann::json>(j, "classification", "", nlohmann::json::array())) {
      f.classification.push_back({R::Get<std::string>(c, "label", "classification[]"),
                                  R::Get<std::string>(c, "because", "classification[]")});
    }
    f.notes = R::GetOr<std::vector<std::string>>(j, "notes", "", {});
  } catch (const R::Failure& e) {
    return MakeError(ErrorCode::kInvalidInput, "fingerprint.json: " + e.message);
  } catch (const nlohmann::json::exception& e) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("fingerprint.json: {}", e.what()));
  }
  return f;
}

std::string FormatFingerprintTable(const Fingerprint& f) {
  std::string out;
  auto row = [&out](std::string_view name, const std::string& value) {
    out += fmt::format("  {:<24} {}\n", name, value);
  };
  auto lengths = [](const LengthDistribution& d) {
    const stats::Summary& s = d.summary;
    return fmt::format("mean {:.0f}  p50 {}  p90 {}  p99 {}  max {}", s.mean, s.p50.value, s.p90.value,
                       s.p99.value, s.max);
  };
  out += fmt::format("Workload fingerprint: {} ({}), {} requests\n", f.source, f.format, f.requests);
  if (f.arrivals_known) {
    row("duration", fmt::format("{:.1f} s", f.duration_s));
    row("mean rate", fmt::format("{:.3f} req/s", f.mean_rps));
    for (const RateWindow& w : f.rate_windows) {
      row(fmt::format("peak rate ({} s)", w.window_s), fmt::format("{:.3f} req/s  ({:.2f}x mean)", w.peak_rps, w.peak_to_mean));
    }
    row("inter-arrival CV", fmt::format("{:.2f}  (Gamma shape {}; Poisson: CV 1)", f.gap_cv,
                                        f.gamma_shape ? fmt::format("{:.2f}", *f.gamma_shape) : "n/a"));
    if (f.hourly) {
      row("diurnal", fmt::format("peak/trough hour {} ({})",
                                 f.hourly_peak_to_trough ? fmt::format("{:.2f}", *f.hourly_peak_to_trough) : "n/a",
                                 f.hourly_basis));
    } else {
      row("diurnal", "n/a (trace shorter than 24 h)");
    }
  } else {
    row("arrivals", "unknown (the source has no timestamps)");
  }
  row("input tokens", lengths(f.input));
  row("output tokens", lengths(f.output));
  row("output / input", fmt::format("{:.3f}  (correlation {:.2f}, of logs {:.2f})", f.output_input_ratio, f.pearson,
                                    f.pearson_log));
  if (f.prefix_reuse) {
    row("prefix reuse", fmt::format("{}  ({} of {} prompt tokens, {}-token blocks{})", Percent(*f.prefix_reuse),
                                    f.served_tokens, f.prompt_tokens, f.block_tokens,
                                    f.prefix_from_text ? ", ids from text" : ""));
  } else {
    row("prefix reuse", "n/a (no prefix block ids or text)");
  }
  if (f.sessions > 0) {
    row("sessions", fmt::format("{}  (turns mean {:.2f}, p99 {})", f.sessions, f.turns_per_session.mean,
                                f.turns_per_session.p99.value));
    if (!f.think_time_source.empty()) {
      row("think time", fmt::format("p50 {:.2f} s  p90 {:.2f} s  ({})", f.think_time_s.p50.value,
                                    f.think_time_s.p90.value, f.think_time_source));
    }
  }
  if (f.structured_output > 0) row("structured output", fmt::format("{} requests", f.structured_output));
  if (!f.models.empty()) {
    std::string mix;
    for (std::size_t i = 0; i < f.models.size() && i < 5; ++i) {
      mix += fmt::format("{}{} {}", i == 0 ? "" : ", ", f.models[i].first,
                         Percent(static_cast<double>(f.models[i].second) / static_cast<double>(f.requests)));
    }
    if (f.models.size() > 5) mix += fmt::format(", and {} more", f.models.size() - 5);
    row("models", mix);
  }
  out += "Classification:\n";
  for (const ClassLabel& c : f.classification) out += fmt::format("  {:<16} {}\n", c.label, c.because);
  if (!f.notes.empty()) {
    out += "Notes:\n";
    for (const std::string& n : f.notes) out += "  " + n + "\n";
  }
  return out;
}

}  // namespace bakeoff::workload

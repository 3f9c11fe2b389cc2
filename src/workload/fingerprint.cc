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
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace bakeoff::workload {

namespace {

constexpr std::size_t kMaxDistinctNames = 1000;  // model and group names kept before "(other)"
constexpr double kRateWindowsS[] = {1, 10, 60, 600, 3600};
constexpr double kDiurnalMinimumS = 86400;

LengthDistribution Lengths(const std::vector<std::uint32_t>& values) {
  LengthDistribution d;
  std::vector<double> as_double(values.begin(), values.end());
  for (const std::uint32_t v : values) {
    d.total += v;
    const std::size_t bucket = v == 0 ? 0 : static_cast<std::size_t>(std::bit_width(v));
    if (d.log2_counts.size() <= bucket) d.log2_counts.resize(bucket + 1, 0);
    ++d.log2_counts[bucket];
  }
  d.summary = stats::Summarize(std::move(as_double));
  return d;
}

double Pearson(const std::vector<std::uint32_t>& x, const std::vector<std::uint32_t>& y,
               const std::function<double(double)>& f) {
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
    served_tokens_ += prefix_->Add(r.prefix_hashes, r.input_tokens);
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

  f.input = Lengths(input_);
  f.output = Lengths(output_);
  f.output_input_ratio = f.input.total > 0 ? static_cast<double>(f.output.total) / static_cast<double>(f.input.total) : 0;
  f.pearson = Pearson(input_, output_, [](double v) { return v; });
  f.pearson_log = Pearson(input_, output_, [](double v) { return std::log1p(v); });
  std::vector<std::uint32_t>().swap(input_);
  std::vector<std::uint32_t>().swap(output_);

  if (f.arrivals_known && !arrival_s_.empty()) {
    std::sort(arrival_s_.begin(), arrival_s_.end());
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
    if (f.duration_s >= kDiurnalMinimumS) {
      std::array<std::uint64_t, 24> hours{};
      const double origin_s = f.origin_unix_ns ? static_cast<double>(*f.origin_unix_ns) * 1e-9 : 0;
      for (const double t : arrival_s_) {
        const auto hour = static_cast<std::int64_t>(std::floor((origin_s + t) / 3600));
        ++hours[static_cast<std::size_t>(((hour % 24) + 24) % 24)];
      }
      f.hourly = hours;
      f.hourly_basis = f.origin_unix_ns ? "UTC hour of day" : "hours since the first arrival, mod 24";
      const auto [lo, hi] = std::minmax_element(hours.begin(), hours.end());
      if (*lo > 0) f.hourly_peak_to_trough = static_cast<double>(*hi) / static_cast<double>(*lo);
    }
    // Gaps last: they reuse the arrival column's memory.
    std::vector<double> gaps;
    if (n >= 2) {
      gaps.resize(n - 1);
      std::uint64_t tied = 0;
      for (std::size_t i = 1; i < n; ++i) {
        gaps[i - 1] = arrival_s_[i] - arrival_s_[i - 1];
        if (gaps[i - 1] == 0) ++tied;
      }
      f.tied_share = static_cast<double>(tied) / static_cast<double>(n - 1);
      std::vector<double>().swap(arrival_s_);
      f.gap_s = stats::Summarize(std::move(gaps));
      if (f.gap_s.mean > 0) {
        f.gap_cv = f.gap_s.stddev / f.gap_s.mean;
        if (f.gap_cv > 0) f.gamma_shape = 1 / (f.gap_cv * f.gap_cv);
      }
    }
  }

  if (prefix_) {
    f.block_tokens = prefix_->block_tokens();
    f.requests_with_blocks = requests_with_blocks_;
    f.distinct_blocks = prefix_->distinct_blocks();
    f.served_tokens = served_tokens_;
    f.prompt_tokens = f.input.total;
    f.prefix_reuse = f.prompt_tokens > 0 ? static_cast<double>(served_tokens_) / static_cast<double>(f.prompt_tokens) : 0;
    f.prefix_from_text = report.format == TraceFormat::kShareGpt || report.format == TraceFormat::kOpenAiLog ||
                         estimated_ > 0;
    prefix_.reset();
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
    arrivals["burstiness"] = std::move(burst);
    arrivals["first_percent_share"] = f.first_percent_share;
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
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
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

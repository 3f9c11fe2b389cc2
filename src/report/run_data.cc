// report/run_data.cc: a run folder read into page data (contract in run_data.h).
#include "report/run_data.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "analyze/step_analysis.h"
#include "core/file.h"
#include "stats/sketch.h"

namespace bakeoff::report {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kCurveMetrics[] = {"ttft_ms", "tpot_ms", "itl_token_ms", "e2e_ms"};
constexpr std::int64_t kAbsent = -1;

// One request as the page needs it; instants in ns since its step's t0, kAbsent when absent.
struct RecordView {
  std::int64_t id = 0, step = 0;
  bool measured = false, ok = false;
  std::string outcome;
  std::int64_t intended = kAbsent, start = kAbsent, first_token = kAbsent, last_token = kAbsent,
               finished = kAbsent;
  std::int64_t output_tokens = 0, prompt_tokens = 0;
  std::vector<std::int64_t> event_ns, event_tokens;
};

std::int64_t Int(simdjson::dom::object& o, const char* key) {
  std::int64_t v = 0;
  return o[key].get_int64().get(v) == simdjson::SUCCESS ? v : kAbsent;
}

// An instant or a count as the page uses it: a negative or absurd value (past 10^17 ns, three
// years) is taken as absent, so no sum or difference of two can overflow.
constexpr std::int64_t kLargest = 100'000'000'000'000'000;
std::int64_t Bounded(simdjson::dom::object& o, const char* key) {
  const std::int64_t v = Int(o, key);
  return v >= 0 && v <= kLargest ? v : kAbsent;
}

bool Parse(simdjson::dom::parser& parser, const std::string& line, RecordView& r) {
  simdjson::dom::object o;
  if (parser.parse(line).get_object().get(o) != simdjson::SUCCESS) return false;
  r.id = Int(o, "id");
  r.step = Int(o, "step");
  std::string_view text;
  if (r.id < 0 || r.step < 0 || o["outcome"].get_string().get(text) != simdjson::SUCCESS) return false;
  r.outcome = std::string(text);
  r.ok = text == "ok";
  r.measured = o["phase"].get_string().get(text) == simdjson::SUCCESS && text == "measure";
  r.intended = Bounded(o, "intended_send_ns");
  r.start = Bounded(o, "send_start_ns");
  r.first_token = Bounded(o, "first_token_ns");
  r.last_token = Bounded(o, "last_token_ns");
  r.finished = Bounded(o, "finished_ns");
  r.output_tokens = std::max<std::int64_t>(0, Bounded(o, "output_tokens"));
  r.prompt_tokens = Bounded(o, "usage_prompt_tokens");
  if (r.prompt_tokens < 0) r.prompt_tokens = std::max<std::int64_t>(0, Bounded(o, "prompt_tokens_planned"));
  r.event_ns.clear();
  r.event_tokens.clear();
  simdjson::dom::array events;
  if (o["token_event_ns"].get_array().get(events) == simdjson::SUCCESS) {
    for (simdjson::dom::element e : events) {
      std::int64_t v = 0;
      if (e.get_int64().get(v) == simdjson::SUCCESS && v >= 0 && v <= kLargest) r.event_ns.push_back(v);
    }
  }
  if (o["token_event_tokens"].get_array().get(events) == simdjson::SUCCESS) {
    for (simdjson::dom::element e : events) {
      std::int64_t v = 0;
      if (e.get_int64().get(v) == simdjson::SUCCESS && v >= 0 && v <= kLargest) r.event_tokens.push_back(v);
    }
  }
  return true;
}

double Ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

// A time series in bins of bin_s seconds (counts add up, or the worst value is kept), whose bins
// double in width whenever there would be more than max_points: its memory is bounded whatever
// instants the records hold.
struct Binned {
  double bin_s;
  bool keep_max;  // false: counts add up
  std::size_t max_points;
  std::vector<double> values;
  void Add(double t_s, double v) {
    if (t_s < 0 || !std::isfinite(t_s)) return;
    while (t_s / bin_s >= static_cast<double>(max_points)) Halve();
    const auto i = static_cast<std::size_t>(t_s / bin_s);
    if (i >= values.size()) values.resize(i + 1, 0);
    values[i] = keep_max ? std::max(values[i], v) : values[i] + v;
  }
  void Halve() {
    std::vector<double> half((values.size() + 1) / 2, 0);
    for (std::size_t i = 0; i < values.size(); ++i) {
      half[i / 2] = keep_max ? std::max(half[i / 2], values[i]) : half[i / 2] + values[i];
    }
    values = std::move(half);
    bin_s *= 2;
  }
  json ToJson() const {
    json t = json::array(), y = json::array();
    for (std::size_t i = 0; i < values.size(); ++i) {
      t.push_back(static_cast<double>(i) * bin_s);
      y.push_back(keep_max ? values[i] : values[i] / bin_s);  // counts become per-second rates
    }
    return {{"bin_s", bin_s}, {"t_s", t}, {"values", y}};
  }
};

json Histogram(std::vector<std::int64_t> values, std::size_t bins) {
  if (values.empty()) return {{"edges", json::array()}, {"counts", json::array()}};
  const auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  const double lo = static_cast<double>(*lo_it);
  const double hi = static_cast<double>(*hi_it);
  const double width = hi > lo ? std::ceil((hi - lo + 1) / static_cast<double>(bins)) : 1;
  const std::size_t n = hi > lo ? static_cast<std::size_t>(std::floor((hi - lo) / width)) + 1 : 1;
  std::vector<std::uint64_t> counts(n, 0);
  for (std::int64_t v : values) counts[std::min(n - 1, static_cast<std::size_t>((static_cast<double>(v) - lo) / width))]++;
  json edges = json::array();
  for (std::size_t i = 0; i < n; ++i) edges.push_back(lo + static_cast<double>(i) * width);
  return {{"edges", edges}, {"width", width}, {"counts", counts}};
}

struct StepAccumulator {
  stats::QuantileSketch ttft, tpot, itl, e2e;
  stats::QuantileSketch& Of(const std::string& metric) {
    if (metric == "ttft_ms") return ttft;
    if (metric == "tpot_ms") return tpot;
    if (metric == "itl_token_ms") return itl;
    return e2e;
  }
};

// Where a step sits on the x axis of the load charts: its rate, its concurrency, or (a replay)
// the offered rate measured.
json LoadAxis(const json& summary) {
  const json& config = summary.value("config", json::object());
  const json rates = config.value("rates", json::array());
  const json concurrencies = config.value("concurrencies", json::array());
  const std::size_t steps = summary.value("steps", json::array()).size();
  json x = json::array();
  std::string name = "offered rate (requests/s)";
  for (std::size_t i = 0; i < steps; ++i) {
    const json& step = summary["steps"][i];
    if (rates.size() == steps) {
      x.push_back(rates[i]);
    } else if (concurrencies.size() == steps) {
      name = "concurrency (requests in flight)";
      x.push_back(concurrencies[i]);
    } else {
      x.push_back(step.value("throughput", json::object()).value("offered_requests_per_s", 0.0));
    }
  }
  return {{"name", name}, {"x", x}};
}

json Percentile(const json& summary_of_metric, const char* q) {
  if (!summary_of_metric.is_object() || !summary_of_metric.contains(q)) return nullptr;
  return summary_of_metric[q].value("value", json(nullptr));
}

// The per-step table and the exact percentiles, from summary.json.
json StepRows(const json& summary) {
  json rows = json::array();
  for (const json& step : summary.value("steps", json::array())) {
    const json& latency = step.value("latency", json::object());
    const json& throughput = step.value("throughput", json::object());
    const json& slo = step.value("slo", json::object());
    json row = {{"label", step.value("label", "")},
                {"measured", step.value("requests", json::object()).value("measured", 0)},
                {"outcomes", step.value("requests", json::object()).value("outcomes", json::object())},
                {"requests_per_s", throughput.value("requests_per_s", 0.0)},
                {"offered_requests_per_s", throughput.value("offered_requests_per_s", 0.0)},
                {"output_tokens_per_s", throughput.value("output_tokens_per_s", 0.0)},
                {"goodput_per_s", slo.is_object() ? slo.value("goodput_per_s", json(nullptr)) : json(nullptr)},
                {"attainment", slo.is_object() ? slo.value("attainment", json(nullptr)) : json(nullptr)},
                {"generator_limited", step.value("generator_limited", json::object()).value("limited", false)},
                {"interrupted", step.value("interrupted", false)}};
    for (const char* metric : {"ttft_ms", "tpot_ms", "itl_token_ms", "e2e_ms", "send_lag_ms"}) {
      const json m = latency.value(metric, json::object());
      row[metric] = {{"p50", Percentile(m, "p50")}, {"p90", Percentile(m, "p90")}, {"p99", Percentile(m, "p99")},
                     {"p99_bounded", m.contains("p99") ? m["p99"].value("bounded", false) : false},
                     {"count", m.value("count", 0)}};
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

json SloLines(const json& summary) {
  json lines = json::array();
  const json& steps = summary.value("steps", json::array());
  if (steps.empty() || !steps[0].value("slo", json()).is_object()) return lines;
  for (const json& term : steps[0]["slo"].value("terms", json::array())) {
    lines.push_back({{"term", term.value("term", "")}, {"metric", term.value("metric", "")},
                     {"quantile", term.value("quantile", 0.0)}, {"threshold_ms", term.value("threshold_ms", 0.0)}});
  }
  return lines;
}

// The engine's gauges over time (metrics.jsonl), and the span of each step in its clock.
json MetricsTimeline(const fs::path& file, std::uint64_t& unreadable) {
  std::ifstream in(file);
  if (!in) return nullptr;
  json t = json::array();
  std::map<std::string, json> series;
  constexpr const char* kSignals[] = {"running", "waiting", "kv_usage", "preemptions"};
  for (const char* s : kSignals) series[s] = json::array();
  std::map<std::int64_t, std::pair<double, double>> step_span;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("t_ms") || !j["t_ms"].is_number() ||
        (j.contains("step") && !j["step"].is_number_integer()) ||
        (j.contains("signals") && !j["signals"].is_object())) {
      ++unreadable;
      continue;
    }
    const double t_s = j["t_ms"].get<double>() / 1000;
    const std::int64_t step = j.value("step", std::int64_t{0});
    auto [it, fresh] = step_span.try_emplace(step, t_s, t_s);
    if (!fresh) it->second.second = t_s;
    t.push_back(t_s);
    const json& signals = j.value("signals", json::object());
    for (const char* s : kSignals) {
      series[s].push_back(signals.contains(s) && signals[s].is_number() ? signals[s] : json(nullptr));
    }
  }
  json spans = json::array();
  for (const auto& [step, span] : step_span) spans.push_back({{"step", step}, {"from_s", span.first}, {"to_s", span.second}});
  json out = {{"t_s", t}, {"steps", spans}, {"series", json::object()}};
  for (auto& [name, values] : series) {
    if (std::any_of(values.begin(), values.end(), [](const json& v) { return !v.is_null(); })) {
      out["series"][name] = std::move(values);
    }
  }
  return out;
}

}  // namespace

json WorkloadSeries(const std::vector<double>& arrival_s, std::vector<std::int64_t> prompt_tokens,
                    std::vector<std::int64_t> output_tokens, const RunDataOptions& options) {
  Binned arrivals{options.series_bin_s, false, options.max_series_points, {}};
  for (double t : arrival_s) arrivals.Add(t, 1);
  return {{"arrivals", arrivals.ToJson()},
          {"prompt_tokens", Histogram(std::move(prompt_tokens), options.histogram_bins)},
          {"output_tokens", Histogram(std::move(output_tokens), options.histogram_bins)}};
}

namespace {

// ReadRunData's body: nlohmann throws on a field of an unexpected type (a null where a number
// belongs), which ReadRunData turns into a one-line error.
Result<json> ReadRunDataOrThrow(const fs::path& dir, const RunDataOptions& options) {
  const fs::path summary_file = dir / "summary.json";
  Result<std::string> text = ReadFile(summary_file);
  if (!text) return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: {}", summary_file.string(), text.error().message));
  json summary = json::parse(*text, nullptr, false);
  if (!summary.is_object() || !summary.contains("steps") || !summary["steps"].is_array() ||
      !summary.contains("schema_version")) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: not a bakeoff bench or simulate summary (no schema_version and steps)",
                                 summary_file.string()));
  }
  if (summary["schema_version"] != 1) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: schema_version {} is not one this bakeoff reads (1)",
                                                           summary_file.string(), summary["schema_version"].dump()));
  }
  const json& target = summary.value("target", json::object());
  const std::size_t steps = summary["steps"].size();

  // One pass over the records: per-step sketches, timelines, histograms and a request sample.
  std::vector<StepAccumulator> acc(steps);
  Binned arrivals{options.series_bin_s, false, options.max_series_points, {}};
  Binned send_lag{options.series_bin_s, true, options.max_series_points, {}};
  std::vector<std::int64_t> prompt_lengths, output_lengths;
  const std::int64_t timeline_step = static_cast<std::int64_t>(steps) - 1;
  // records.jsonl may hold every request, a sample (simulate --keep), or be absent by choice.
  const json records_name = summary.value("records_file", json("records.jsonl"));
  const bool records_kept = records_name.is_string() && !records_name.get<std::string>().empty();
  const fs::path records_file = dir / (records_kept ? records_name.get<std::string>() : std::string("records.jsonl"));
  std::vector<std::int64_t> record_stride(steps, 1);
  const json records_kept_json = summary.value("records_kept", json::object());
  for (const json& k : records_kept_json.is_object() ? records_kept_json.value("steps", json::array()) : json::array()) {
    const std::uint64_t s = k.value("step", std::uint64_t{0});
    if (s < steps) record_stride[s] = std::max<std::int64_t>(1, k.value("every", std::int64_t{1}));
  }
  const bool sampled = std::any_of(record_stride.begin(), record_stride.end(), [](std::int64_t k) { return k > 1; });
  // The timeline's requests are evenly spread over the last step's ids, among those kept.
  std::int64_t planned = 0;
  if (steps > 0) planned = summary["steps"][steps - 1].value("requests", json::object()).value("planned", 0);
  const std::int64_t kept_every = steps > 0 ? record_stride[steps - 1] : 1;
  const std::int64_t stride =
      kept_every * std::max<std::int64_t>(1, planned / (kept_every * static_cast<std::int64_t>(
                                                                         std::max<std::size_t>(1, options.timeline_requests))));
  json timeline = json::array();
  std::uint64_t lines = 0, unreadable = 0, other_steps = 0;
  std::int64_t first_unreadable = 0;
  // Without a need for them (the summary holds every curve) a caller may skip the records.
  const bool summary_has_curves = std::all_of(summary["steps"].begin(), summary["steps"].end(), [](const json& step) {
    return step.is_object() && step.contains("latency_curves");
  });
  const bool read_records = records_kept && (options.read_records || !summary_has_curves);
  std::vector<std::int64_t> step_offset_ns(steps + 1, 0);  // where each step starts on the run's timeline
  {
    std::ifstream in;
    if (read_records) in.open(records_file);
    simdjson::dom::parser parser;
    std::string line;
    RecordView r;
    // Records are in completion order within a step and steps follow each other, so each step's
    // offset is known once its first record is seen: the previous steps' latest finish.
    std::int64_t run_end_ns = 0;
    std::int64_t current_step = -1;
    while (std::getline(in, line)) {
      ++lines;
      if (line.find_first_not_of(" \t\r") == std::string::npos || !Parse(parser, line, r)) {
        if (unreadable++ == 0) first_unreadable = static_cast<std::int64_t>(lines);
        continue;
      }
      if (r.step >= static_cast<std::int64_t>(steps)) {
        ++other_steps;
        continue;
      }
      if (r.step > current_step) {
        for (std::int64_t s = current_step + 1; s <= r.step; ++s) step_offset_ns[s] = run_end_ns;
        current_step = r.step;
      }
      StepAccumulator& a = acc[r.step];
      const std::int64_t offset = step_offset_ns[r.step];
      if (r.finished != kAbsent) run_end_ns = std::max(run_end_ns, offset + r.finished);
      // A sampled record stands for `stride` requests in the arrival counts.
      if (r.intended != kAbsent) arrivals.Add(Ms(offset + r.intended) / 1000, static_cast<double>(record_stride[r.step]));
      if (r.intended != kAbsent && r.start != kAbsent) send_lag.Add(Ms(offset + r.intended) / 1000, Ms(r.start - r.intended));
      if (r.step == timeline_step && r.id % stride == 0 &&
          timeline.size() < options.timeline_requests) {
        const auto at = [&](std::int64_t ns) { return ns == kAbsent ? json(nullptr) : json(Ms(ns)); };
        timeline.push_back({{"id", r.id}, {"outcome", r.outcome}, {"measured", r.measured},
                            {"intended_ms", at(r.intended)}, {"start_ms", at(r.start)},
                            {"first_token_ms", at(r.first_token)}, {"finished_ms", at(r.finished)}});
      }
      if (!r.measured || !r.ok) continue;
      prompt_lengths.push_back(r.prompt_tokens);
      output_lengths.push_back(r.output_tokens);
      if (r.start == kAbsent) continue;
      if (r.first_token != kAbsent) a.ttft.Add(Ms(r.first_token - r.start));
      if (r.finished != kAbsent) a.e2e.Add(Ms(r.finished - r.start));
      if (r.first_token != kAbsent && r.last_token != kAbsent && r.output_tokens > 1) {
        a.tpot.Add(Ms(r.last_token - r.first_token) / static_cast<double>(r.output_tokens - 1));
      }
      for (std::size_t i = 1; i < r.event_ns.size(); ++i) {
        const std::int64_t tokens = i < r.event_tokens.size() ? std::max<std::int64_t>(1, r.event_tokens[i]) : 1;
        a.itl.Add(Ms(r.event_ns[i] - r.event_ns[i - 1]) / static_cast<double>(tokens), static_cast<std::uint64_t>(tokens));
      }
    }
  }
  std::sort(timeline.begin(), timeline.end(), [](const json& a, const json& b) { return a["id"] < b["id"]; });

  // The curves summary.json holds come from every measured request; records (perhaps a sample, or
  // none) are read for them only when an older summary has none.
  const std::vector<double> nines = analyze::LatencyCurveNines();
  const std::vector<double> qs = analyze::LatencyCurveQuantiles();
  json curves = json::object();
  for (const char* metric : kCurveMetrics) {
    json per_step = json::array();
    for (std::size_t s = 0; s < steps; ++s) {
      const json& step = summary["steps"][s];
      const json& kept = step.value("latency_curves", json::object());
      if (kept.contains(metric) && kept.value("nines", json()) == json(nines)) {
        per_step.push_back({{"step", step.value("label", "")},
                            {"count", step.value("latency", json::object()).value(metric, json::object()).value("count", 0)},
                            {"values", kept[metric]}});
      } else {
        per_step.push_back({{"step", step.value("label", "")},
                            {"count", acc[s].Of(metric).count()},
                            {"values", acc[s].Of(metric).Quantiles(qs)}});
      }
    }
    curves[metric] = std::move(per_step);
  }

  json notes = json::array();
  if (!read_records && records_kept) {
    // The caller asked only for the summary's figures.
  } else if (!records_kept) {
    notes.push_back("this run kept no records (simulate --keep summary): the table and the latency curves are drawn "
                    "from summary.json; arrivals, lengths and request timelines need records");
  } else if (!fs::exists(records_file)) {
    notes.push_back(fmt::format("{} is missing: only summary.json's figures are drawn", records_file.string()));
  } else if (sampled) {
    notes.push_back("records.jsonl keeps a sample of the requests (simulate --keep sample): the table and the latency "
                    "curves come from every request; arrivals are scaled by the sampling stride, and the length "
                    "histograms and request timelines are drawn from the sample");
  }
  if (unreadable > 0) {
    notes.push_back(fmt::format("{} of {} lines of {} could not be read (the first is line {}): a run cut while "
                                "writing, or an edited file; the curves use the {} that could",
                                unreadable, lines, records_file.filename().string(), first_unreadable,
                                lines - unreadable));
  }
  if (other_steps > 0) notes.push_back(fmt::format("{} records name a step summary.json does not have", other_steps));
  if (summary.value("interrupted", false)) notes.push_back("the run was interrupted: its last step may be short");
  std::uint64_t metric_lines_unreadable = 0;
  json metrics = nullptr;
  if (summary.value("metrics_file", json()).is_string()) {
    metrics = MetricsTimeline(dir / summary["metrics_file"].get<std::string>(), metric_lines_unreadable);
  }
  if (metric_lines_unreadable > 0) notes.push_back(fmt::format("{} lines of metrics.jsonl could not be read", metric_lines_unreadable));

  json step_starts = json::array();
  for (std::size_t s = 0; s < steps; ++s) step_starts.push_back(Ms(step_offset_ns[s]) / 1000);

  return json{{"kind", "run"},
              {"tool", summary.value("tool", json::object())},
              {"target", target},
              {"emulated", target.value("emulated", false)},
              {"simulated", target.value("simulated", false)},
              {"started_at", summary.value("started_at", json(nullptr))},
              {"seed", summary.value("seed", json(nullptr))},
              {"interrupted", summary.value("interrupted", false)},
              {"steps", StepRows(summary)},
              {"load_axis", LoadAxis(summary)},
              {"slo", SloLines(summary)},
              {"curve_nines", nines},
              {"curves", curves},
              {"arrivals", arrivals.ToJson()},
              {"send_lag", send_lag.ToJson()},
              {"step_starts_s", step_starts},
              {"prompt_tokens", Histogram(std::move(prompt_lengths), options.histogram_bins)},
              {"output_tokens", Histogram(std::move(output_lengths), options.histogram_bins)},
              {"timeline", {{"step", steps > 0 ? summary["steps"][steps - 1].value("label", "") : ""}, {"requests", timeline}}},
              {"metrics", metrics},
              {"records", {{"lines", lines}, {"unreadable", unreadable}}},
              {"notes", notes}};
}

}  // namespace

Result<json> ReadRunData(const fs::path& dir, const RunDataOptions& options) {
  try {
    return ReadRunDataOrThrow(dir, options);
  } catch (const json::exception& e) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: summary.json has a field of an unexpected type ({})", dir.string(), e.what()));
  }
}

}  // namespace bakeoff::report

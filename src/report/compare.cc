// report/compare.cc: two runs' figures side by side, with verdicts (contract in compare.h).
#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "core/file.h"
#include "run/bench.h"
#include "study/bundle_reader.h"

namespace bakeoff::report {
namespace {

using nlohmann::json;

// The settings that decide what a run's figures mean: two runs that differ in any of them measured
// different loads (the URL, the engine and its version are what a comparison is for).
constexpr const char* kLoadSettings[] = {
    "api",        "stream",     "prompt_tokens", "output_tokens", "ignore_eos", "rates",
    "concurrencies", "arrival", "burstiness",    "duration",      "requests",   "warmup",
    "warmup_requests", "seed",  "slo",           "trace",         "time_scale", "batch",
    "structured", "structured_spec", "lora_adapters", "lora_distribution"};

struct MetricSpec {
  const char* group;   // "latency" or "throughput" or "slo"
  const char* field;   // "ttft_ms"
  const char* quantile;  // "p99"; nullptr for a plain number
  const char* name;    // as shown
  bool lower_is_better;
};

constexpr MetricSpec kMetrics[] = {
    {"latency", "ttft_ms", "p50", "TTFT p50 ms", true},
    {"latency", "ttft_ms", "p90", "TTFT p90 ms", true},
    {"latency", "ttft_ms", "p99", "TTFT p99 ms", true},
    {"latency", "tpot_ms", "p50", "TPOT p50 ms", true},
    {"latency", "tpot_ms", "p99", "TPOT p99 ms", true},
    {"latency", "itl_token_ms", "p99", "ITL p99 ms", true},
    {"latency", "e2e_ms", "p50", "E2E p50 ms", true},
    {"latency", "e2e_ms", "p99", "E2E p99 ms", true},
    {"throughput", "output_tokens_per_s", nullptr, "output tok/s", false},
    {"throughput", "requests_per_s", nullptr, "requests/s", false},
    {"slo", "goodput_per_s", nullptr, "goodput/s", false},
    {"capacity", "capacity_per_s", nullptr, "capacity req/s", false},
};

std::string Text(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

std::optional<std::pair<double, double>> Bounds(const json& q) {
  if (!q.is_object() || !q.value("bounded", false) || !q.contains("ci95")) return std::nullopt;
  return std::make_pair(q["ci95"][0].get<double>(), q["ci95"][1].get<double>());
}

// The change of one metric between two matched steps; nullopt when either lacks it.
std::optional<MetricChange> Change(const std::string& step, const json& old_step, const json& new_step,
                                   const MetricSpec& m, const CompareOptions& options) {
  const json* a = &old_step;
  const json* b = &new_step;
  for (const char* key : {m.group, m.field}) {
    if (!a->contains(key) || !b->contains(key)) return std::nullopt;
    a = &(*a)[key];
    b = &(*b)[key];
  }
  MetricChange c;
  c.step = step;
  c.metric = m.name;
  c.lower_is_better = m.lower_is_better;
  c.gates = m.quantile != nullptr || options.gate_throughput;
  if (m.quantile != nullptr) {
    if (!a->contains(m.quantile) || !b->contains(m.quantile)) return std::nullopt;  // no ok requests
    c.old_value = (*a)[m.quantile]["value"].get<double>();
    c.new_value = (*b)[m.quantile]["value"].get<double>();
    c.old_ci = Bounds((*a)[m.quantile]);
    c.new_ci = Bounds((*b)[m.quantile]);
  } else {
    if (!a->is_number() || !b->is_number()) return std::nullopt;
    c.old_value = a->get<double>();
    c.new_value = b->get<double>();
  }
  c.relative = c.old_value > 0 ? c.new_value / c.old_value - 1 : 0;
  const bool up = c.relative > options.tolerance;
  const bool down = c.relative < -options.tolerance;
  const Verdict when_up = m.lower_is_better ? Verdict::kWorse : Verdict::kBetter;
  const Verdict when_down = m.lower_is_better ? Verdict::kBetter : Verdict::kWorse;
  if (!up && !down) {
    c.basis = fmt::format("within the tolerance ({:.0f}%)", 100 * options.tolerance);
  } else if (m.quantile == nullptr) {
    c.verdict = up ? when_up : when_down;
    c.basis = "past the tolerance (no bounds for this figure)";
  } else if (!c.old_ci || !c.new_ci) {
    c.basis = "too few requests for a 95% bound";
  } else if (up && c.new_ci->first > c.old_ci->second) {
    c.verdict = when_up;
    c.basis = "95% bounds separate";
  } else if (down && c.new_ci->second < c.old_ci->first) {
    c.verdict = when_down;
    c.basis = "95% bounds separate";
  } else {
    c.basis = "95% bounds overlap";
  }
  return c;
}

std::vector<std::string> UnequalWork(const json& summary, const char* which) {
  std::vector<std::string> out;
  if (!summary.contains("fairness")) return out;
  for (const json& line : summary["fairness"].value("unequal_work", json::array())) {
    out.push_back(fmt::format("{} run: {}", which, Text(line)));
  }
  return out;
}

}  // namespace

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kBetter: return "better";
    case Verdict::kWorse: return "worse";
    case Verdict::kNoDetectableChange: return "no detectable change";
  }
  return "?";
}

bool Comparison::Regressed() const {
  for (const MetricChange& c : changes) {
    if (c.gates && c.verdict == Verdict::kWorse) return true;
  }
  return false;
}

namespace {

Result<json> ReadSummaryFile(const std::filesystem::path& file) {
  Result<std::string> text = ReadFile(file);
  if (!text.ok()) return text.error();
  json summary = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded() || !summary.is_object()) {
    return MakeError(ErrorCode::kInvalidInput, file.string() + ": not JSON (a run killed while writing it?)");
  }
  if (!summary["tool"].is_object() || summary["tool"]["name"] != "bakeoff" || !summary["steps"].is_array()) {
    return MakeError(ErrorCode::kInvalidInput, file.string() + ": not a bakeoff bench or simulate summary");
  }
  if (summary["schema_version"] != run::kSummarySchemaVersion) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: schema_version {} (this bakeoff reads {})", file.string(),
                                                           summary["schema_version"].dump(), run::kSummarySchemaVersion));
  }
  return summary;
}

// FNV-1a (64 bits) of a trace's requests, its header line left out (the header names where the
// workload came from, which may differ for the same requests): enough to tell whether two bundles
// replayed the same requests.
std::string RequestsDigest(const std::filesystem::path& trace) {
  Result<std::string> text = ReadFile(trace);
  if (!text.ok()) return "unreadable";
  std::string_view body = text.value();
  if (body.find("\"format\":\"bakeoff-trace\"") < body.find('\n')) body.remove_prefix(std::min(body.size(), body.find('\n') + 1));
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : body) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

// A study bundle as one comparable run: every candidate's steps of the last finished round of each
// load phase, labelled "CANDIDATE PHASE: STEP", and its capacity as a step of its own.
Result<json> BundleAsRun(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  Result<json> manifest_read = study::ReadBundleManifest(dir);
  if (!manifest_read.ok()) return manifest_read.error();
  const json& manifest = manifest_read.value();
  json run = {{"schema_version", run::kSummarySchemaVersion},
              {"tool", {{"name", "bakeoff"}}},
              {"bundle", true},
              {"target", {{"emulated", manifest.value("emulated", false)}}},
              {"config", {{"trace", "workload/trace.jsonl requests " + RequestsDigest(dir / "workload" / "trace.jsonl")},
                          {"seed", manifest.value("seeds", json::object()).value("traffic", json())}}},
              {"steps", json::array()},
              {"fairness", {{"unequal_work", json::array()}}}};
  for (const json& engine : manifest.value("engines", json::array())) {
    const std::string name = engine.value("candidate", "");
    const fs::path candidate = dir / "candidates" / name;
    for (const char* phase : {"single", "sweep", "replay"}) {
      const fs::path last = study::LastFinishedRound(candidate, phase);
      if (last.empty()) continue;
      Result<json> summary = ReadSummaryFile(last / "summary.json");
      if (!summary.ok()) return summary.error();
      // The SLO is a setting: two bundles judged against different ones measured different things.
      if (!run["config"].contains("slo")) run["config"]["slo"] = summary->value("config", json::object()).value("slo", json());
      for (json step : summary->at("steps")) {
        step["label"] = fmt::format("{} {}: {}", name, phase, step.value("label", ""));
        run["steps"].push_back(std::move(step));
      }
      for (const json& line : summary->value("fairness", json::object()).value("unequal_work", json::array())) {
        run["fairness"]["unequal_work"].push_back(fmt::format("{} {}: {}", name, phase, Text(line)));
      }
    }
    Result<std::string> capacity = ReadFile(candidate / "capacity" / "result.json");
    if (capacity.ok()) {
      const json c = json::parse(capacity.value(), nullptr, false);
      if (c.is_object() && c["capacity_per_s"].is_number() && c["capacity_per_s"].get<double>() >= 0) {
        run["steps"].push_back({{"label", name + " capacity"}, {"capacity", {{"capacity_per_s", c["capacity_per_s"]}}}});
      }
    }
  }
  return run;
}

}  // namespace

Result<json> LoadRunSummary(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "manifest.json")) {
    try {
      return BundleAsRun(dir);
    } catch (const json::exception& e) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("{}: a file of the bundle has a field of an unexpected type ({})", dir.string(), e.what()));
    }
  }
  if (!std::filesystem::exists(dir / "summary.json")) {
    return MakeError(ErrorCode::kIo, fmt::format("{}: not a bakeoff result folder (no summary.json of a run, no "
                                                 "manifest.json of a study bundle)",
                                                 dir.string()));
  }
  return ReadSummaryFile(dir / "summary.json");
}

namespace {

// CompareRuns' body; nlohmann throws on a field of an unexpected type.
Result<Comparison> CompareRunsOrThrow(const json& old_summary, const json& new_summary, const CompareOptions& options) {
  Comparison out;
  if (old_summary.value("bundle", false) != new_summary.value("bundle", false)) {
    return MakeError(ErrorCode::kInvalidInput, "one is a study bundle and the other a bench or simulate run: compare "
                                               "two bundles or two runs");
  }
  out.tolerance = options.tolerance;
  const json& old_config = old_summary.value("config", json::object());
  const json& new_config = new_summary.value("config", json::object());
  for (const char* key : kLoadSettings) {
    const json a = old_config.value(key, json());
    const json b = new_config.value(key, json());
    if (a != b) out.differences.push_back(fmt::format("{}: {} -> {}", key, Text(a), Text(b)));
  }
  if (!out.differences.empty() && !options.allow_different) {
    std::string list;
    for (const std::string& d : out.differences) list += "\n  " + d;
    return MakeError(ErrorCode::kInvalidInput,
                     "the two runs measured different loads (--allow-different compares them anyway):" + list);
  }
  out.emulated = old_summary.value("target", json::object()).value("emulated", false) ||
                 new_summary.value("target", json::object()).value("emulated", false);
  for (const std::string& line : UnequalWork(old_summary, "old")) out.unequal_work.push_back(line);
  for (const std::string& line : UnequalWork(new_summary, "new")) out.unequal_work.push_back(line);
  std::size_t matched = 0;
  for (const json& old_step : old_summary["steps"]) {
    const std::string label = old_step.value("label", "");
    const json* new_step = nullptr;
    for (const json& candidate : new_summary["steps"]) {
      if (candidate.value("label", "") == label) new_step = &candidate;
    }
    if (new_step == nullptr) {
      out.unmatched_steps.push_back(label + " (old run only)");
      continue;
    }
    ++matched;
    for (const MetricSpec& m : kMetrics) {
      if (std::optional<MetricChange> c = Change(label, old_step, *new_step, m, options)) out.changes.push_back(*c);
    }
  }
  for (const json& new_step : new_summary["steps"]) {
    const std::string label = new_step.value("label", "");
    bool found = false;
    for (const json& old_step : old_summary["steps"]) found = found || old_step.value("label", "") == label;
    if (!found) out.unmatched_steps.push_back(label + " (new run only)");
  }
  if (matched == 0) return MakeError(ErrorCode::kInvalidInput, "the two runs have no step in common (steps match by label)");
  return out;
}

}  // namespace

Result<Comparison> CompareRuns(const json& old_summary, const json& new_summary, const CompareOptions& options) {
  try {
    return CompareRunsOrThrow(old_summary, new_summary, options);
  } catch (const json::exception& e) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("a summary has a field of an unexpected type ({})", e.what()));
  }
}

json ToJson(const Comparison& c) {
  json changes = json::array();
  for (const MetricChange& m : c.changes) {
    auto ci = [](const std::optional<std::pair<double, double>>& b) { return b ? json::array({b->first, b->second}) : json(); };
    changes.push_back({{"step", m.step},
                       {"metric", m.metric},
                       {"lower_is_better", m.lower_is_better},
                       {"gates", m.gates},
                       {"old", m.old_value},
                       {"new", m.new_value},
                       {"old_ci95", ci(m.old_ci)},
                       {"new_ci95", ci(m.new_ci)},
                       {"relative_change", m.relative},
                       {"verdict", VerdictName(m.verdict)},
                       {"basis", m.basis}});
  }
  return {{"old", c.old_dir.string()},
          {"new", c.new_dir.string()},
          {"emulated", c.emulated},
          {"tolerance", c.tolerance},
          {"regressed", c.Regressed()},
          {"differences", c.differences},
          {"unmatched_steps", c.unmatched_steps},
          {"unequal_work", c.unequal_work},
          {"changes", std::move(changes)}};
}

std::string CompareTable(const Comparison& c) {
  std::string out;
  if (c.emulated) out += "EMULATED: at least one run measured bakeoff's emulated engine, not a real engine\n";
  for (const std::string& d : c.differences) out += "settings differ: " + d + "\n";
  for (const std::string& u : c.unequal_work) out += "unequal work: " + u + "\n";
  for (const std::string& s : c.unmatched_steps) out += "not compared: " + s + "\n";
  std::size_t width = 24;  // as wide as the longest step label (a bundle's are "CANDIDATE PHASE: STEP")
  for (const MetricChange& m : c.changes) width = std::max(width, m.step.size());
  out += fmt::format("{:<{}} {:<14} {:>12} {:>12} {:>8}  {}\n", "step", width, "metric", "old", "new", "change", "verdict");
  for (const MetricChange& m : c.changes) {
    out += fmt::format("{:<{}} {:<14} {:>12.2f} {:>12.2f} {:>+7.1f}%  {}{} ({})\n", m.step, width, m.metric, m.old_value,
                       m.new_value, 100 * m.relative, VerdictName(m.verdict), m.gates ? "" : " [not gated]", m.basis);
  }
  out += c.Regressed() ? "verdict: REGRESSED\n" : "verdict: no regression\n";
  return out;
}

}  // namespace bakeoff::report

// workload/synthesis_shape.cc
//
// Owns: the YAML workload shape (docs/workloads.md, "Synthesis"): parsing and checking it, with
// errors that name the file, line and field, and SynthesizeFromShape, the synthesis model of a
// shape: its arrival process (Poisson, Gamma or constant gaps at its rate), length distributions
// and their correlation, shared prefix groups, sessions, and the model and structured-output mix.
// Does not own: making the trace (synthesis_generate.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/file.h"
#include "core/rng.h"
#include "workload/synthesis.h"
#include "workload/synthesis_internal.h"

namespace bakeoff::workload {

using synthesis_internal::Invalid;
using synthesis_internal::kMaxRequests;
using synthesis_internal::Model;
using synthesis_internal::NormalizeWeights;
using synthesis_internal::QuantileFunction;
using synthesis_internal::Synthesize;

namespace {

class ShapeReader {
 public:
  explicit ShapeReader(std::string file) : file_(std::move(file)) {}
  Error Fail(const YAML::Node& node, const std::string& field, const std::string& what) const {
    return Invalid(fmt::format("{}:{}: {}: {}", file_, node.Mark().line + 1, field, what));
  }
  Result<double> Number(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) return Fail(node, field, "expected a number");
    try {
      const double v = node.as<double>();
      if (!std::isfinite(v)) return Fail(node, field, "expected a finite number");
      return v;
    } catch (const YAML::Exception&) {
      return Fail(node, field, fmt::format("expected a number, got '{}'", node.Scalar()));
    }
  }
  Result<double> NumberIn(const YAML::Node& node, const std::string& field, double lo, double hi,
                          bool lo_open = false) const {
    Result<double> v = Number(node, field);
    if (!v.ok()) return v;
    if (*v < lo || *v > hi || (lo_open && *v == lo)) {
      return Fail(node, field,
                  fmt::format("{} is out of range {}{}, {}]", *v, lo_open ? "(" : "[", lo, hi));
    }
    return v;
  }
  Status KnownKeys(const YAML::Node& map, const std::string& where,
                   std::initializer_list<std::string_view> keys) const {
    if (!map.IsMap()) return Fail(map, where, "expected a mapping");
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string known;
        for (const std::string_view k : keys)
          known += fmt::format("{}{}", known.empty() ? "" : ", ", k);
        return Fail(kv.first, where.empty() ? key : where + "." + key,
                    fmt::format("unknown field (known: {})", known));
      }
    }
    return Ok{};
  }
  Result<LengthShape> Length(const YAML::Node& node, const std::string& field) const {
    LengthShape s;
    if (node.IsScalar()) {
      Result<double> v = NumberIn(node, field, 0, 4e9);
      if (!v.ok()) return v.error();
      s.fixed = *v;
      return s;
    }
    if (Status k = KnownKeys(node, field, {"distribution", "fixed", "median", "p99", "min", "max"});
        !k.ok()) {
      return k.error();
    }
    if (node["fixed"]) {
      Result<double> v = NumberIn(node["fixed"], field + ".fixed", 0, 4e9);
      if (!v.ok()) return v.error();
      s.fixed = *v;
      return s;
    }
    if (!node["distribution"])
      return Fail(node, field, "needs 'fixed: N' or 'distribution: lognormal|uniform'");
    const std::string dist = node["distribution"].Scalar();
    if (dist == "lognormal") {
      s.kind = LengthShape::Kind::kLognormal;
      if (!node["median"] || !node["p99"])
        return Fail(node, field, "lognormal needs median and p99");
      Result<double> median = NumberIn(node["median"], field + ".median", 0, 4e9, true);
      if (!median.ok()) return median.error();
      Result<double> p99 = NumberIn(node["p99"], field + ".p99", *median, 4e9);
      if (!p99.ok()) return p99.error();
      s.median = *median;
      s.p99 = *p99;
    } else if (dist == "uniform") {
      s.kind = LengthShape::Kind::kUniform;
      if (!node["min"] || !node["max"]) return Fail(node, field, "uniform needs min and max");
      Result<double> lo = NumberIn(node["min"], field + ".min", 0, 4e9);
      if (!lo.ok()) return lo.error();
      Result<double> hi = NumberIn(node["max"], field + ".max", *lo, 4e9);
      if (!hi.ok()) return hi.error();
      s.min = *lo;
      s.max = *hi;
    } else {
      return Fail(node["distribution"], field + ".distribution",
                  fmt::format("'{}' is not one of lognormal, uniform (or use fixed: N)", dist));
    }
    return s;
  }

 private:
  std::string file_;
};

}  // namespace

Result<WorkloadShape> ParseWorkloadShape(std::string_view yaml, const std::string& file_name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return Invalid(fmt::format("{}:{}: not valid YAML: {}", file_name, e.mark.line + 1, e.msg));
  }
  const ShapeReader r(file_name);
  if (!root.IsMap())
    return Invalid(fmt::format("{}:1: expected a mapping of shape fields", file_name));
  if (Status k = r.KnownKeys(root, "",
                             {"rate_per_s", "arrival", "burstiness", "duration_s", "requests",
                              "input_tokens", "output_tokens", "correlation", "shared_prefix",
                              "sessions", "structured_output_share", "models"});
      !k.ok()) {
    return k.error();
  }
  WorkloadShape s;
  s.source = file_name;
  auto number = [&](const char* key, double lo, double hi, double& out,
                    bool lo_open = false) -> Status {
    if (!root[key]) return Ok{};
    Result<double> v = r.NumberIn(root[key], key, lo, hi, lo_open);
    if (!v.ok()) return v.error();
    out = *v;
    return Ok{};
  };
  if (!root["rate_per_s"]) return Invalid(fmt::format("{}:1: rate_per_s: required", file_name));
  if (Status st = number("rate_per_s", 0, 1e7, s.rate_per_s, true); !st.ok()) return st.error();
  if (root["arrival"]) {
    const std::string a = root["arrival"].Scalar();
    if (a == "poisson") {
      s.arrival = WorkloadShape::Arrival::kPoisson;
    } else if (a == "gamma") {
      s.arrival = WorkloadShape::Arrival::kGamma;
    } else if (a == "constant") {
      s.arrival = WorkloadShape::Arrival::kConstant;
    } else {
      return r.Fail(root["arrival"], "arrival",
                    fmt::format("'{}' is not one of poisson, gamma, constant", a));
    }
  }
  if (Status st = number("burstiness", 0, 1e6, s.burstiness, true); !st.ok()) return st.error();
  if (root["burstiness"] && s.arrival != WorkloadShape::Arrival::kGamma) {
    return r.Fail(root["burstiness"], "burstiness", "only applies to arrival: gamma");
  }
  if (root["duration_s"]) {
    double d = 0;
    if (Status st = number("duration_s", 0, 1e9, d, true); !st.ok()) return st.error();
    s.duration_s = d;
  }
  if (root["requests"]) {
    double n = 0;
    if (Status st = number("requests", 1, static_cast<double>(kMaxRequests), n); !st.ok())
      return st.error();
    if (n != std::floor(n)) return r.Fail(root["requests"], "requests", "expected a whole number");
    s.requests = static_cast<std::uint64_t>(n);
  }
  if (s.requests && s.duration_s)
    return r.Fail(root["requests"], "requests", "give requests or duration_s, not both");
  for (const char* key : {"input_tokens", "output_tokens"}) {
    if (!root[key]) return Invalid(fmt::format("{}:1: {}: required", file_name, key));
    Result<LengthShape> l = r.Length(root[key], key);
    if (!l.ok()) return l.error();
    (std::string_view(key) == "input_tokens" ? s.input_tokens : s.output_tokens) = *l;
  }
  if (Status st = number("correlation", -1, 1, s.correlation); !st.ok()) return st.error();
  if (Status st = number("structured_output_share", 0, 1, s.structured_share); !st.ok())
    return st.error();
  if (const YAML::Node p = root["shared_prefix"]) {
    if (Status k = r.KnownKeys(p, "shared_prefix", {"tokens", "share", "groups", "block_tokens"});
        !k.ok())
      return k.error();
    if (!p["tokens"]) return r.Fail(p, "shared_prefix.tokens", "required");
    Result<double> tokens = r.NumberIn(p["tokens"], "shared_prefix.tokens", 0, 4e9);
    if (!tokens.ok()) return tokens.error();
    s.prefix_tokens = static_cast<std::uint32_t>(*tokens);
    s.prefix_share = 1;
    if (p["share"]) {
      Result<double> share = r.NumberIn(p["share"], "shared_prefix.share", 0, 1);
      if (!share.ok()) return share.error();
      s.prefix_share = *share;
    }
    if (p["groups"]) {
      Result<double> g = r.NumberIn(p["groups"], "shared_prefix.groups", 1, 1e6);
      if (!g.ok()) return g.error();
      s.prefix_groups = static_cast<std::uint32_t>(*g);
    }
    if (p["block_tokens"]) {
      Result<double> b = r.NumberIn(p["block_tokens"], "shared_prefix.block_tokens", 1, 1e6);
      if (!b.ok()) return b.error();
      s.block_tokens = static_cast<std::uint32_t>(*b);
    }
  }
  if (const YAML::Node p = root["sessions"]) {
    if (Status k = r.KnownKeys(p, "sessions", {"turns_mean", "think_time_s"}); !k.ok())
      return k.error();
    if (!p["turns_mean"]) return r.Fail(p, "sessions.turns_mean", "required");
    Result<double> turns = r.NumberIn(p["turns_mean"], "sessions.turns_mean", 1, 1e4);
    if (!turns.ok()) return turns.error();
    s.turns_mean = *turns;
    if (p["think_time_s"]) {
      Result<double> think = r.NumberIn(p["think_time_s"], "sessions.think_time_s", 0, 1e7);
      if (!think.ok()) return think.error();
      s.think_time_s = *think;
    }
  }
  if (const YAML::Node m = root["models"]) {
    if (!m.IsMap() || m.size() == 0)
      return r.Fail(m, "models", "expected a mapping of model name to weight");
    for (const auto& kv : m) {
      const std::string name = kv.first.Scalar();
      Result<double> w = r.NumberIn(kv.second, "models." + name, 0, 1e9, true);
      if (!w.ok()) return w.error();
      s.models.emplace_back(name, *w);
    }
  }
  return s;
}

Result<WorkloadShape> LoadWorkloadShape(const std::filesystem::path& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.error();
  return ParseWorkloadShape(*text, path.string());
}

Result<Trace> SynthesizeFromShape(const WorkloadShape& s, const SynthesisOptions& options) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid.error();
  Model m;
  m.source = fmt::format("synthesized from the shape {} (seed {})", s.source, options.seed);
  m.lengths.emplace(QuantileFunction::FromShape(s.input_tokens),
                    QuantileFunction::FromShape(s.output_tokens), s.correlation);
  const double turns_mean = s.turns_mean >= 1 ? s.turns_mean : 0;
  m.session_prob = turns_mean > 0 ? 1 : 0;
  m.extra_turns_mean = std::max(0.0, turns_mean - 1);
  const double think = s.think_time_s;
  m.think_time = [think](Rng& rng) { return think > 0 ? rng.Exponential(think) : 0.0; };
  m.event_rate = s.rate_per_s * options.rate_scale / std::max(1.0, turns_mean);
  switch (s.arrival) {
    case WorkloadShape::Arrival::kPoisson:
      m.gap_shape = 1;
      break;
    case WorkloadShape::Arrival::kGamma:
      m.gap_shape = s.burstiness;
      break;
    case WorkloadShape::Arrival::kConstant:
      m.gap_shape = 0;
      break;
  }
  if ((s.prefix_tokens > 0 && s.prefix_share > 0) || turns_mean > 0) {
    m.block_tokens = s.block_tokens;
    m.prefix_share = s.prefix_tokens > 0 ? s.prefix_share : 0;
    // Only whole blocks of the shared prefix are reusable, as in an engine's paged KV cache.
    m.prefix_blocks = static_cast<double>(s.prefix_tokens / s.block_tokens);
    m.groups = s.prefix_groups;
    m.name_groups = m.prefix_share > 0;
  }
  m.structured_share = s.structured_share;
  m.models = s.models;
  NormalizeWeights(m.models);
  return Synthesize(m, options, s.requests, s.duration_s);
}

}  // namespace bakeoff::workload

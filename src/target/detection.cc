// target/detection.cc: which engine serves a URL (contract in detection.h).
#include "target/detection.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "core/json_dump.h"
#include "core/json_text.h"
#include "dialect/openai_control.h"
#include "target/discovery.h"
#include "target/prometheus.h"

namespace bakeoff::target {
namespace {

// Points per clue. A clue only one engine gives is worth more than one several share.
constexpr int kVersionRoutePoints = 40;  // an answer in the engine's own version/info shape
constexpr int kRootBodyPoints = 40;      // Ollama's "Ollama is running"
constexpr int kServerHeaderPoints = 30;
constexpr int kMetricPrefixPoints = 30;
constexpr int kOwnedByPoints = 25;
constexpr int kApiBasePoints = 30;
constexpr int kNamedAt = 25;  // below this the engine is not named
constexpr std::string_view kEmulatedName = "bakeoff emulated engine";
constexpr std::string_view kOpenAiModels = "/v1/models";


std::string_view HeaderOf(const Observation& o, std::string_view name) {
  for (const auto& [key, value] : o.headers) {
    if (AsciiLower(key) == AsciiLower(name)) return value;
  }
  return {};
}

const Observation* Find(const std::vector<Observation>& observations, std::string_view path) {
  for (const Observation& o : observations) {
    if (o.path == path) return &o;
  }
  return nullptr;
}

std::vector<dialect::ModelCard> Models(const Observation* o) {
  if (o == nullptr || o->status != 200) return {};
  Result<std::vector<dialect::ModelCard>> cards = dialect::DecodeModelList(o->body);
  return cards.ok() ? cards.value() : std::vector<dialect::ModelCard>{};
}

std::string Quote(std::string_view text) {
  std::string cut(Utf8Prefix(text, 60));
  return "\"" + cut + (text.size() > 60 ? "...\"" : "\"");
}

// Distinct sample family names on every metrics page that parsed.
std::set<std::string> MetricNames(const std::vector<Observation>& observations,
                                  std::map<std::string, std::string>& where) {
  std::set<std::string> metrics_paths;
  for (const EngineAdapter& adapter : AllAdapters()) {
    if (!adapter.metrics_path.empty()) metrics_paths.insert(std::string(adapter.metrics_path));
  }
  std::set<std::string> names;
  for (const std::string& path : metrics_paths) {
    const Observation* o = Find(observations, path);
    if (o == nullptr || o->status != 200) continue;
    Result<MetricsPage> page = ParsePrometheusText(o->body);
    if (!page.ok()) continue;
    for (const MetricSample& sample : page->samples) {
      if (names.insert(sample.name).second) where.emplace(sample.name, path);
    }
  }
  return names;
}

void Add(EngineScore& score, int points, std::string line) {
  score.score += points;
  score.evidence.push_back(fmt::format("+{} {}", points, line));
}

}  // namespace

std::vector<std::string> DetectionPaths() {
  std::vector<std::string> paths = {std::string(kOpenAiModels)};
  auto add = [&paths](std::string_view path) {
    if (!path.empty() && std::find(paths.begin(), paths.end(), path) == paths.end())
      paths.emplace_back(path);
  };
  for (const EngineAdapter& adapter : AllAdapters()) {
    for (const VersionSource& source : adapter.version) add(source.path);
  }
  add("/");
  for (const EngineAdapter& adapter : AllAdapters()) add(adapter.metrics_path);
  for (const EngineAdapter& adapter : AllAdapters()) {
    if (!adapter.detect.api_base.empty()) {
      add(std::string(adapter.detect.api_base) + std::string(kOpenAiModels));
    }
  }
  return paths;
}

Detection JudgeDetection(const std::vector<Observation>& observations) {
  Detection d;
  const Observation* models_answer = Find(observations, kOpenAiModels);
  const std::vector<dialect::ModelCard> cards = Models(models_answer);

  // What was seen, whoever it points to.
  std::vector<std::string> seen;
  for (const Observation& o : observations) {
    if (o.status == 0) continue;
    if (HeaderOf(o, "X-Bakeoff-Emulated") == "true") d.emulated = true;
  }
  if (models_answer != nullptr) {
    if (models_answer->status == 0) {
      seen.push_back(fmt::format("GET /v1/models: no answer ({})", models_answer->error));
    } else {
      std::set<std::string> owners;
      for (const dialect::ModelCard& card : cards) owners.insert(card.owned_by);
      seen.push_back(fmt::format(
          "GET /v1/models: HTTP {}, {} model(s), owned_by {}", models_answer->status, cards.size(),
          owners.empty() ? std::string("-") : fmt::format("{}", fmt::join(owners, ", "))));
      std::string_view server = HeaderOf(*models_answer, "Server");
      if (!server.empty()) seen.push_back(fmt::format("Server header: {}", Quote(server)));
    }
  }
  for (const dialect::ModelCard& card : cards) {
    if (card.owned_by == dialect::kEmulatedOwner) d.emulated = true;
  }

  std::map<std::string, std::string> metric_where;
  const std::set<std::string> metric_names = MetricNames(observations, metric_where);

  for (const EngineAdapter& adapter : AllAdapters()) {
    if (&adapter == &GenericOpenAiAdapter()) continue;
    EngineScore s;
    s.adapter = &adapter;
    // Version and info routes in this engine's shape. A shape several engines share (a bare
    // {"version"} at /version) splits its points between them.
    for (const VersionSource& source : adapter.version) {
      const Observation* o = Find(observations, source.path);
      if (o == nullptr || o->status != 200) continue;
      std::optional<std::string> version = ReadVersion(source, o->body);
      if (!version) continue;
      int sharing = 0;
      for (const EngineAdapter& other : AllAdapters()) {
        for (const VersionSource& theirs : other.version) {
          if (theirs.path == source.path && ReadVersion(theirs, o->body)) ++sharing;
        }
      }
      Add(s, kVersionRoutePoints / std::max(sharing, 1),
          fmt::format("GET {}: {} {}{}", source.path, source.field, Quote(*version),
                      sharing > 1 ? fmt::format(" (a shape {} engines share)", sharing) : ""));
      if (s.version.empty()) {
        s.version = *version;
        s.version_source = fmt::format("GET {} {}", source.path, source.field);
      }
    }
    // Server header on any answer.
    for (std::string_view hint : adapter.detect.server_header) {
      for (const Observation& o : observations) {
        std::string_view server = HeaderOf(o, "Server");
        if (!server.empty() && AsciiLower(server).find(AsciiLower(hint)) != std::string::npos) {
          Add(s, kServerHeaderPoints, fmt::format("Server: {} on GET {}", Quote(server), o.path));
          break;
        }
      }
    }
    // owned_by in the model listing.
    for (std::string_view owner : adapter.detect.owned_by) {
      const auto card = std::find_if(cards.begin(), cards.end(), [&](const auto& c) {
        return AsciiLower(c.owned_by) == AsciiLower(owner);
      });
      if (card != cards.end()) {
        Add(s, kOwnedByPoints, fmt::format("GET /v1/models: owned_by {}", Quote(card->owned_by)));
        break;
      }
    }
    // Metric family prefixes.
    for (std::string_view prefix : adapter.detect.metric_prefixes) {
      int count = 0;
      std::string first;
      for (const std::string& name : metric_names) {
        if (name.starts_with(prefix)) {
          if (count++ == 0) first = name;
        }
      }
      if (count > 0) {
        Add(s, kMetricPrefixPoints,
            fmt::format("GET {}: {} series named {}* (e.g. {})", metric_where[first], count, prefix,
                        first));
        break;
      }
    }
    // A root answer only this engine gives.
    if (!adapter.detect.root_body.empty()) {
      const Observation* root = Find(observations, "/");
      if (root != nullptr && root->status == 200 &&
          root->body.find(adapter.detect.root_body) != std::string::npos) {
        Add(s, kRootBodyPoints, fmt::format("GET /: {}", Quote(adapter.detect.root_body)));
      }
    }
    // OpenAI routes under a prefix of its own.
    if (!adapter.detect.api_base.empty()) {
      const std::string path = std::string(adapter.detect.api_base) + std::string(kOpenAiModels);
      const Observation* prefixed = Find(observations, path);
      if (prefixed != nullptr && !Models(prefixed).empty()) {
        const bool root_too = !cards.empty();
        Add(s, root_too ? kApiBasePoints / 3 : kApiBasePoints,
            fmt::format("GET {}: a model list{}", path,
                        root_too ? " (and /v1/models answers too)" : " (and /v1/models does not)"));
      }
    }
    if (s.score > 0) d.scores.push_back(std::move(s));
  }
  std::stable_sort(d.scores.begin(), d.scores.end(),
                   [](const EngineScore& a, const EngineScore& b) { return a.score > b.score; });

  const EngineScore* best = d.scores.empty() ? nullptr : &d.scores.front();
  const int runner_up = d.scores.size() > 1 ? d.scores[1].score : 0;
  if (d.emulated) {
    d.adapter = FindAdapter("vllm");
    d.engine = std::string(kEmulatedName);
    d.score = 100;
    d.confidence = "high";
    d.evidence.push_back(
        "+100 X-Bakeoff-Emulated: true or owned_by bakeoff-emulated: bakeoff's emulated engine, "
        "which serves vLLM's shapes (the vLLM adapter applies)");
    if (best != nullptr && best->adapter == d.adapter) {
      for (const std::string& line : best->evidence) d.evidence.push_back(line);
    }
  } else if (best != nullptr && best->score >= kNamedAt) {
    d.adapter = best->adapter;
    d.engine = std::string(best->adapter->display_name);
    d.score = best->score;
    d.version = best->version;
    d.version_source = best->version_source;
    d.evidence = best->evidence;
    const int lead = best->score - runner_up;
    d.confidence = best->score >= 60 && lead >= 25   ? "high"
                   : best->score >= 40 && lead >= 10 ? "medium"
                                                     : "low";
    if (lead == 0) {
      d.warnings.push_back(fmt::format(
          "{} and {} look alike here ({} points each); took {}; say which with --engine",
          best->adapter->name, d.scores[1].adapter->name, best->score, best->adapter->name));
    }
    if (d.version.empty()) {
      d.warnings.push_back(
          best->adapter->version.empty()
              ? fmt::format("{} publishes no version route; the version is unknown",
                            best->adapter->display_name)
              : fmt::format("{}'s version route did not answer; the version is unknown",
                            best->adapter->display_name));
    }
  } else {
    d.adapter = &GenericOpenAiAdapter();
    d.engine = std::string(d.adapter->display_name);
    d.score = best != nullptr ? best->score : 0;
    d.confidence = best != nullptr ? "low" : "none";
    d.warnings.push_back(
        best != nullptr
            ? fmt::format("not sure which engine this is (best guess {} with {} points, under "
                          "{}); using generic-openai; say which with --engine",
                          best->adapter->name, best->score, kNamedAt)
            : "nothing identifies the engine; using generic-openai (bakeoff's defaults); say "
              "which with --engine");
  }
  for (std::string& line : seen) d.evidence.push_back("+0 " + line);
  return d;
}

Result<Detection> DetectEngine(const net::Endpoint& endpoint, const DetectOptions& options) {
  net::ClientOptions client = options.client;
  client.deadlines.connect = std::min(client.deadlines.connect, options.per_request);
  client.deadlines.first_byte = std::min(client.deadlines.first_byte, options.per_request);
  client.deadlines.idle = std::min(client.deadlines.idle, options.per_request);
  client.deadlines.total = std::min(client.deadlines.total, options.per_request);
  client.limits.max_body_bytes = std::min<std::size_t>(client.limits.max_body_bytes, 8 << 20);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Observation> observations;
  for (const std::string& path : DetectionPaths()) {
    Observation o;
    o.path = path;
    if (std::chrono::steady_clock::now() - start > options.budget) {
      o.error = "skipped: the detection budget was spent";
      observations.push_back(std::move(o));
      continue;
    }
    Result<net::FetchedResponse> response = net::Fetch(endpoint, GetRequest(path), client);
    if (response.ok()) {
      o.status = response->head.status;
      o.headers = response->head.headers;
      o.body = std::move(response->body);
    } else {
      o.error = response.error().message;
      if (observations.empty() && response.error().code != ErrorCode::kTimeout) {
        return MakeError(ErrorCode::kUnavailable,
                         fmt::format("cannot reach {}: {}", endpoint.ToString(), o.error));
      }
    }
    observations.push_back(std::move(o));
  }
  return JudgeDetection(observations);
}

std::string DetectionJson(const Detection& d) {
  nlohmann::ordered_json j;
  j["engine"] = d.engine;
  j["adapter"] = d.adapter != nullptr ? std::string(d.adapter->name) : "";
  j["emulated"] = d.emulated;
  j["version"] = d.version;
  j["version_source"] = d.version_source;
  j["score"] = d.score;
  j["confidence"] = d.confidence;
  j["verified"] = d.adapter != nullptr ? VerifiedName(d.adapter->verified) : "";
  j["health_path"] = d.adapter != nullptr ? std::string(d.adapter->ReadinessRoute().path) : "";
  j["metrics_path"] = d.adapter != nullptr ? std::string(d.adapter->metrics_path) : "";
  j["evidence"] = d.evidence;
  j["warnings"] = d.warnings;
  nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
  for (const EngineScore& s : d.scores) {
    candidates.push_back({{"adapter", std::string(s.adapter->name)}, {"score", s.score}});
  }
  j["candidates"] = std::move(candidates);
  return DumpJson(j, 2);
}

}  // namespace bakeoff::target

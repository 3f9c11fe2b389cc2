// study/study.cc: reading and validating the study file (study.h, docs/formats/study.md).
#include "study/study.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "core/file.h"
#include "core/yaml_doc.h"
#include "qualify/probe.h"
#include "study/catalog.h"
#include "target/adapters.h"
#include "target/launcher.h"

namespace bakeoff::study {
namespace {

constexpr std::array<std::string_view, 4> kTaskNames = {"chat", "completion", "embedding", "rerank"};
constexpr std::array<std::string_view, 5> kPhaseNames = {"probes", "single", "sweep", "capacity", "replay"};
constexpr std::array<Phase, 5> kPhases = {Phase::kProbes, Phase::kSingle, Phase::kSweep, Phase::kCapacity,
                                          Phase::kReplay};
constexpr std::array<std::string_view, 4> kObjectiveNames = {"max_goodput", "max_goodput_per_cost",
                                                             "min_cost_per_token", "min_ttft_p99"};
// "an embedding study", "a rerank study": how the messages for a pooling task name it.
std::string PoolingStudy(Task task) {
  return task == Task::kEmbedding ? "an embedding study" : "a rerank study";
}

constexpr std::array<std::string_view, 2> kApiNames = {"chat", "completions"};

std::filesystem::path Resolve(const std::filesystem::path& base, const std::string& file) {
  const std::filesystem::path p(file);
  return p.is_absolute() || base.empty() ? p : (base / p).lexically_normal();
}

// Folder-safe and readable in tables: letters, digits, '.', '_' and '-'.
bool GoodName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-';
         });
}

void ReadModel(yaml::MapReader& root, Study& s) {
  std::optional<yaml::MapReader> m = root.Map("model", yaml::Need::kRequired);
  if (!m) return;
  if (auto v = m->Text("name", yaml::Need::kRequired)) s.model.name = *v;
  if (auto v = m->Text("revision")) s.model.revision = *v;
  if (auto v = m->Text("architecture", yaml::Need::kRequired)) s.model.architecture = *v;
  if (auto v = m->Bool("moe")) s.model.moe = *v;
  if (auto v = m->Number("parameters_b", 0, 100'000)) s.model.parameters_b = *v;
  if (auto v = m->Text("weight_format")) s.model.weight_format = *v;
  if (auto v = m->Text("quantization", yaml::Need::kRequired)) s.model.quantization = *v;
  if (auto v = m->Integer("max_context", 1, 100'000'000, yaml::Need::kRequired)) {
    s.model.max_context = static_cast<std::uint32_t>(*v);
  }
  m->Finish();
}

void ReadHardware(yaml::MapReader& root, Study& s) {
  std::optional<yaml::MapReader> h = root.Map("hardware", yaml::Need::kRequired);
  if (!h) return;
  if (auto kind = h->Enum("accelerator", AcceleratorKinds(), yaml::Need::kRequired)) {
    s.hardware.accelerator = std::string(AcceleratorKinds()[*kind]);
  }
  if (auto v = h->Text("gpu")) s.hardware.gpu = *v;
  if (auto v = h->Integer("gpus", 0, 4096)) s.hardware.gpus = static_cast<std::uint32_t>(*v);
  if (auto v = h->Integer("nodes", 1, 4096)) s.hardware.nodes = static_cast<std::uint32_t>(*v);
  if (auto v = h->Number("price_per_hour", 0, 1e7)) s.hardware.price_per_hour = *v;
  if (auto v = h->Text("currency")) s.hardware.currency = *v;
  if (s.hardware.accelerator != "cpu" && s.hardware.gpus == 0 && !h->Has("gpus") && h->Has("accelerator")) {
    h->Error("gpus", "missing: how many accelerators per node (0 only with accelerator: cpu)");
  }
  h->Finish();
}

void ReadTraffic(yaml::MapReader& root, Study& s, const std::filesystem::path& base) {
  std::optional<yaml::MapReader> t = root.Map("traffic", yaml::Need::kRequired);
  if (!t) return;
  int sources = 0;
  constexpr std::array<std::pair<std::string_view, TrafficSource>, 3> kSources = {
      {{"trace", TrafficSource::kTrace}, {"fingerprint", TrafficSource::kFingerprint}, {"shape", TrafficSource::kShape}}};
  for (const auto& [key, source] : kSources) {
    if (auto v = t->Text(key)) {
      ++sources;
      s.traffic.source = source;
      s.traffic.file = Resolve(base, *v);
    }
  }
  if (sources != 1) {
    t->Error("trace", sources == 0 ? "missing: one of trace, fingerprint or shape (a file)"
                                   : "give only one of trace, fingerprint or shape");
  }
  if (auto v = t->Text("format")) s.traffic.format = *v;
  if (auto v = t->Integer("seed", 0, INT64_MAX)) s.traffic.seed = static_cast<std::uint64_t>(*v);
  if (auto v = t->Integer("requests", 1, 100'000'000)) s.traffic.requests = static_cast<std::uint64_t>(*v);
  if (auto v = t->Duration("duration")) s.traffic.duration_s = ToSeconds(*v);
  if (auto v = t->Integer("inputs_per_request", 1, 4096)) {
    if (IsPoolingTask(s.task)) {
      s.traffic.inputs_per_request = static_cast<std::uint32_t>(*v);
    } else {
      t->Error(
          "inputs_per_request",
          fmt::format("only for task embedding or rerank (this is a {} study)", TaskName(s.task)));
    }
  }
  t->Finish();
}

void ReadSlo(yaml::MapReader& root, Study& s) {
  std::optional<yaml::MapReader> m = root.Map("slo", yaml::Need::kRequired);
  if (!m) return;
  if (std::optional<yaml::MapReader> latency = m->Map("latency", yaml::Need::kRequired)) {
    std::string text;
    for (const std::string& key : latency->Keys()) {
      std::optional<std::string> value = latency->Text(key);
      if (!value) continue;
      // A bare number means milliseconds to --slo but seconds everywhere else in a study: here
      // the unit must be written.
      if (value->ends_with("min") || value->ends_with("h")) {
        latency->Error(key, fmt::format("'{}': latency thresholds take ms or s, e.g. 2s or 250ms", *value));
        continue;
      }
      if (!value->ends_with("ms") && !value->ends_with("s")) {
        latency->Error(key, fmt::format("'{}' has no unit: write it, e.g. 2s or 250ms", *value));
        continue;
      }
      if (IsPoolingTask(s.task) && !key.starts_with("e2e")) {
        latency->Error(
            key, fmt::format("{}'s answers are whole, so it has no TTFT, TPOT or ITL: use e2e "
                             "terms, e.g. e2e_p99: 300ms",
                             PoolingStudy(s.task)));
        continue;
      }
      Result<analyze::Slo> one = analyze::ParseSlo(key + "=" + *value);
      if (!one.ok()) {
        std::string message = one.error().message;
        if (message.rfind("--slo: ", 0) == 0) message.erase(0, 7);
        latency->Error(key, message);
        continue;
      }
      text += (text.empty() ? "" : ",") + key + "=" + *value;
    }
    if (!text.empty()) {
      Result<analyze::Slo> all = analyze::ParseSlo(text);
      if (all.ok()) s.slo.latency = std::move(all.value());
    } else if (latency->Keys().empty()) {
      m->Error("latency", IsPoolingTask(s.task) ? "needs at least one term, e.g. e2e_p99: 300ms"
                                                : "needs at least one term, e.g. ttft_p99: 2s");
    }
    latency->Finish();
  }
  if (auto v = m->Number("attainment", 0.5, 1)) s.slo.attainment = *v;
  if (auto v = m->Number("availability", 0, 1)) s.slo.availability = *v;
  if (auto v = m->Number("min_goodput_per_s", 0, 1e7)) s.slo.min_goodput_per_s = *v;
  if (auto v = m->Duration("cold_start_max")) s.slo.cold_start_max = *v;
  if (auto v = m->Duration("drain_max")) s.slo.drain_max = *v;
  if (auto v = m->Number("cost_per_million_tokens_max", 0, 1e9)) s.slo.cost_per_million_tokens_max = *v;
  m->Finish();
}

void ReadRequires(yaml::MapReader& root, Study& s) {
  std::optional<yaml::MapReader> m = root.Map("requires");
  if (!m) return;
  const bool pooling = IsPoolingTask(s.task);
  if (auto v = m->Enum("api", kApiNames)) {
    if (pooling) {
      m->Error("api",
               "the task fixes the route (embedding: POST /v1/embeddings; rerank: POST "
               "/v1/rerank): leave it out");
    } else {
      s.api = std::string(kApiNames[*v]);
    }
  }
  if (auto list = m->TextList("features")) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      std::optional<Feature> f = ParseFeature((*list)[i]);
      if (!f) {
        m->ErrorAt(m->LineOf("features"), fmt::format("{}[{}]", m->Field("features"), i),
                   UnknownFeatureMessage((*list)[i]));
      } else if (pooling && GenerationFeature(*f)) {
        m->ErrorAt(m->LineOf("features"), fmt::format("{}[{}]", m->Field("features"), i),
                   fmt::format("'{}' is a generation feature; {}'s route answers whole", (*list)[i],
                               PoolingStudy(s.task)));
      } else if (std::find(s.required_features.begin(), s.required_features.end(), *f) ==
                 s.required_features.end()) {
        s.required_features.push_back(*f);
      }
    }
  }
  if (auto list = m->TextList("contracts")) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      std::optional<Contract> c = ParseContract((*list)[i]);
      if (!c) {
        m->ErrorAt(m->LineOf("contracts"), fmt::format("{}[{}]", m->Field("contracts"), i),
                   UnknownContractMessage((*list)[i]));
      } else if (pooling && *c == Contract::kOutputQuality) {
        m->ErrorAt(m->LineOf("contracts"), fmt::format("{}[{}]", m->Field("contracts"), i),
                   fmt::format("the quality probe scores generated text; {} generates none",
                               PoolingStudy(s.task)));
      } else if (std::find(s.required_contracts.begin(), s.required_contracts.end(), *c) ==
                 s.required_contracts.end()) {
        s.required_contracts.push_back(*c);
      }
    }
  }
  m->Finish();
}

// accept_risks: [{finding: CODE, reason: TEXT}]. A finding can be accepted only when it is a
// risk in this study: one that breaks what the study states would be a contradiction, and one
// that means the candidate never served is not a risk. Read after requires and slo.
void ReadAcceptedRisks(yaml::MapReader& root, Study& s) {
  std::optional<std::vector<yaml::ListItem>> items = root.List("accept_risks");
  if (!items) return;
  for (const yaml::ListItem& item : *items) {
    yaml::MapReader r(item, root.source(), &root.diagnostics());
    AcceptedRisk accepted;
    accepted.line = item.line;
    if (auto v = r.Text("finding", yaml::Need::kRequired)) accepted.finding = *v;
    if (auto v = r.Text("reason", yaml::Need::kRequired)) accepted.reason = *v;
    r.Finish();
    if (accepted.finding.empty()) continue;
    const FindingRule* rule = RuleFor(accepted.finding);
    const bool generation_probe =
        accepted.finding.starts_with("cancellation.") || accepted.finding.starts_with("quality.");
    if (IsPoolingTask(s.task) && generation_probe) {
      r.Error("finding",
              fmt::format("{}: the {} probe does not run in {} (its route generates nothing)",
                          accepted.finding, accepted.finding.substr(0, accepted.finding.find('.')),
                          PoolingStudy(s.task)));
    } else if (rule == nullptr) {
      r.Error("finding", UnknownFindingMessage(accepted.finding));
    } else if (rule->breaks == Breaks::kServing || rule->breaks == Breaks::kAvailability) {
      r.Error("finding", fmt::format("{} cannot be accepted: it breaks {}, which every study needs", accepted.finding,
                                     BrokenName(*rule)));
    } else if (StudyStates(s, *rule)) {
      r.Error("finding", fmt::format("{} breaks {}, which this study requires; accept it or require it, not both",
                                     accepted.finding, BrokenName(*rule)));
    } else {
      s.accepted_risks.push_back(std::move(accepted));
    }
  }
}

void ReadCandidates(yaml::MapReader& root, Study& s, const std::filesystem::path& base) {
  std::optional<std::vector<yaml::ListItem>> items = root.List("candidates", yaml::Need::kRequired);
  if (!items) return;
  if (items->empty()) root.Error("candidates", "needs at least one candidate");
  std::set<std::string, std::less<>> names;
  for (const yaml::ListItem& item : *items) {
    yaml::MapReader c(item, root.source(), &root.diagnostics());
    CandidateSpec spec;
    spec.line = item.line;
    if (auto v = c.Text("name", yaml::Need::kRequired)) {
      spec.name = *v;
      if (!GoodName(spec.name)) {
        c.Error("name", "use letters, digits, '.', '_' and '-' only (it names a folder), at most 64");
      } else if (!names.insert(spec.name).second) {
        c.Error("name", fmt::format("'{}' is already a candidate's name", spec.name));
      }
    }
    if (auto v = c.Text("catalog")) spec.catalog = *v;
    if (auto v = c.Text("engine")) {
      if (const target::EngineAdapter* adapter = target::FindAdapter(*v); adapter != nullptr) {
        spec.engine = std::string(adapter->name);
      } else {
        c.Error("engine", fmt::format("unknown engine '{}' (one of: {})", *v, target::AdapterNames()));
      }
    }
    if (auto v = c.TextList("settings")) spec.settings = *v;
    int kinds = 0;
    if (auto v = c.Text("url")) {
      ++kinds;
      spec.kind = CandidateKind::kUrl;
      spec.url = *v;
      if (spec.url.rfind("http://", 0) != 0 && spec.url.rfind("https://", 0) != 0) {
        c.Error("url", "expected http://HOST:PORT or https://...");
      }
    }
    if (std::optional<yaml::MapReader> l = c.Map("launch")) {
      ++kinds;
      spec.kind = CandidateKind::kLaunch;
      if (auto v = l->Text("command", yaml::Need::kRequired)) {
        spec.launch = *v;
        if (Result<std::vector<std::string>> argv = target::SplitCommandLine(spec.launch); !argv.ok()) {
          l->Error("command", argv.error().message);
        }
      }
      if (auto v = l->Integer("port", 1, 65535, yaml::Need::kRequired)) spec.port = static_cast<std::uint16_t>(*v);
      l->Finish();
    }
    if (std::optional<yaml::MapReader> e = c.Map("emulated")) {
      ++kinds;
      spec.kind = CandidateKind::kEmulated;
      if (auto v = e->Text("preset", yaml::Need::kRequired)) {
        // A path (it has a '/' or ends in .yaml) is the study's, like every path in it; a bare
        // name is a preset of the presets folder.
        const bool path = v->find('/') != std::string::npos || v->ends_with(".yaml") || v->ends_with(".yml");
        spec.preset = path ? Resolve(base, *v).string() : *v;
      }
      if (auto v = e->TextList("flags")) spec.emulator_flags = *v;
      e->Finish();
    }
    if (kinds != 1) {
      c.ErrorAt(item.line, item.path,
                kinds == 0 ? "needs one of url, launch or emulated" : "give only one of url, launch or emulated");
    }
    c.Finish();
    s.candidates.push_back(std::move(spec));
  }
}

void ReadPlan(yaml::MapReader& root, Study& s) {
  s.plan.phases.assign(kPhases.begin(), kPhases.end());
  std::optional<yaml::MapReader> m = root.Map("plan");
  if (!m) return;
  if (auto list = m->TextList("phases")) {
    s.plan.phases.clear();
    for (std::size_t i = 0; i < list->size(); ++i) {
      const auto* it = std::find(kPhaseNames.begin(), kPhaseNames.end(), (*list)[i]);
      if (it == kPhaseNames.end()) {
        m->ErrorAt(m->LineOf("phases"), fmt::format("{}[{}]", m->Field("phases"), i),
                   fmt::format("unknown phase '{}' (known: {})", (*list)[i], yaml::JoinNames(kPhaseNames)));
        continue;
      }
      const Phase p = kPhases[static_cast<std::size_t>(it - kPhaseNames.begin())];
      if (std::find(s.plan.phases.begin(), s.plan.phases.end(), p) == s.plan.phases.end()) s.plan.phases.push_back(p);
    }
    // Phases keep the method's order, whatever order the file lists them in (the runner's order
    // of execution is in study/runner.h).
    std::sort(s.plan.phases.begin(), s.plan.phases.end());
  }
  if (auto list = m->TextList("probes")) {
    if (list->empty()) m->Error("probes", "names no probe: list the probes to run, or drop probes from plan.phases");
    std::vector<std::string> known;
    for (const qualify::ProbeInfo& p : qualify::AllProbes()) known.emplace_back(p.name);
    for (std::size_t i = 0; i < list->size(); ++i) {
      const bool generation_only = std::any_of(
          qualify::AllProbes().begin(), qualify::AllProbes().end(),
          [&](const qualify::ProbeInfo& p) { return p.generation_only && p.name == (*list)[i]; });
      if (IsPoolingTask(s.task) && generation_only) {
        m->ErrorAt(m->LineOf("probes"), fmt::format("{}[{}]", m->Field("probes"), i),
                   fmt::format("'{}' watches or scores generated text; {}'s route generates none",
                               (*list)[i], PoolingStudy(s.task)));
      } else if (std::find(known.begin(), known.end(), (*list)[i]) == known.end()) {
        std::optional<std::string> near = yaml::NearestName((*list)[i], known);
        m->ErrorAt(m->LineOf("probes"), fmt::format("{}[{}]", m->Field("probes"), i),
                   fmt::format("unknown probe '{}'{}", (*list)[i],
                               near ? fmt::format("; did you mean {}?", *near)
                                    : fmt::format(" (known: {})", yaml::JoinNames(known))));
      }
    }
    s.plan.probes = *list;
  }
  if (auto v = m->Integer("single_requests", 1, 100'000)) s.plan.single_requests = static_cast<std::uint64_t>(*v);
  if (auto list = m->TextList("concurrency")) {
    s.plan.concurrency.clear();
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string& text = (*list)[i];
      int n = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 100'000) {
        m->ErrorAt(m->LineOf("concurrency"), fmt::format("{}[{}]", m->Field("concurrency"), i),
                   fmt::format("expected a whole number in [1, 100000], got '{}'", text));
        continue;
      }
      s.plan.concurrency.push_back(static_cast<std::uint32_t>(n));
    }
  }
  if (auto v = m->Integer("step_requests", 10, 10'000'000)) s.plan.step_requests = static_cast<std::uint64_t>(*v);
  if (auto v = m->Integer("repeats", 1, 100)) s.plan.repeats = static_cast<std::uint32_t>(*v);
  if (std::optional<yaml::MapReader> c = m->Map("capacity")) {
    if (auto v = c->Number("start_per_s", 0, 1e6)) s.plan.capacity_start_per_s = *v;
    if (auto v = c->Number("min_per_s", 1e-4, 1e6)) s.plan.capacity_min_per_s = *v;
    if (auto v = c->Number("max_per_s", 1e-4, 1e6)) s.plan.capacity_max_per_s = *v;
    if (auto v = c->Number("precision", 0.01, 1)) s.plan.capacity_precision = *v;
    if (s.plan.capacity_max_per_s < s.plan.capacity_min_per_s) c->Error("max_per_s", "must be at least min_per_s");
    if (s.plan.capacity_start_per_s > 0 && (s.plan.capacity_start_per_s < s.plan.capacity_min_per_s ||
                                            s.plan.capacity_start_per_s > s.plan.capacity_max_per_s)) {
      c->Error("start_per_s", fmt::format("{} is outside [min_per_s, max_per_s] = [{}, {}]", s.plan.capacity_start_per_s,
                                          s.plan.capacity_min_per_s, s.plan.capacity_max_per_s));
    }
    c->Finish();
  }
  if (std::optional<yaml::MapReader> r = m->Map("replay")) {
    if (auto v = r->Integer("requests", 0, 100'000'000)) s.plan.replay_requests = static_cast<std::uint64_t>(*v);
    if (auto v = r->Number("rate_scale", 1e-4, 1e4)) s.plan.replay_rate_scale = *v;
    r->Finish();
  }
  if (auto v = m->Integer("output_tokens_cap", 1, 1'000'000)) {
    if (IsPoolingTask(s.task)) {
      m->Error("output_tokens_cap",
               "answers are vectors or scores: there is no output length to cap");
    } else {
      s.plan.output_tokens_cap = static_cast<std::uint32_t>(*v);
    }
  }
  m->Finish();
}

}  // namespace

std::string_view TaskName(Task task) { return kTaskNames[static_cast<std::size_t>(task)]; }
bool IsPoolingTask(Task task) { return task == Task::kEmbedding || task == Task::kRerank; }

dialect::Api StudyApi(const Study& study) {
  switch (study.task) {
    case Task::kEmbedding:
      return dialect::Api::kEmbeddings;
    case Task::kRerank:
      return dialect::Api::kRerank;
    default:
      return study.api == "completions" ? dialect::Api::kCompletions : dialect::Api::kChat;
  }
}

Feature ApiFeature(const Study& study) {
  switch (StudyApi(study)) {
    case dialect::Api::kEmbeddings:
      return Feature::kEmbeddings;
    case dialect::Api::kRerank:
      return Feature::kRerank;
    case dialect::Api::kCompletions:
      return Feature::kOpenaiCompletions;
    default:
      return Feature::kOpenaiChat;
  }
}
std::string_view PhaseName(Phase phase) { return kPhaseNames[static_cast<std::size_t>(phase)]; }
std::span<const Phase> AllPhases() { return kPhases; }
std::string_view ObjectiveName(Objective objective) { return kObjectiveNames[static_cast<std::size_t>(objective)]; }
std::string_view CandidateKindName(CandidateKind kind) {
  switch (kind) {
    case CandidateKind::kUrl: return "url";
    case CandidateKind::kLaunch: return "launch";
    case CandidateKind::kEmulated: return "emulated";
  }
  return "?";
}

bool Study::Runs(Phase phase) const {
  return std::find(plan.phases.begin(), plan.phases.end(), phase) != plan.phases.end();
}

Result<Study> ParseStudy(std::string_view text, std::string_view source_name, const std::filesystem::path& source_path) {
  const yaml::DocumentKind kind{.noun = "study",
                                .with_article = "a study",
                                .empty_hint = ": expected a mapping with model, hardware, traffic, slo and candidates "
                                              "(docs/formats/study.md)",
                                .expect_mapping = "a mapping of study fields"};
  Result<YAML::Node> doc = yaml::LoadDocument(text, source_name, kind);
  if (!doc.ok()) return doc.error();
  yaml::Diagnostics diagnostics;
  yaml::MapReader root(doc.value(), "", source_name, &diagnostics);
  Study s;
  s.file = source_path;
  const std::filesystem::path base = source_path.empty() ? std::filesystem::path() : source_path.parent_path();
  if (auto v = root.Text("name", yaml::Need::kRequired)) s.name = *v;
  if (auto v = root.Enum("task", kTaskNames)) s.task = static_cast<Task>(*v);
  ReadModel(root, s);
  ReadHardware(root, s);
  ReadTraffic(root, s, base);
  ReadSlo(root, s);
  ReadRequires(root, s);
  ReadAcceptedRisks(root, s);
  if (auto v = root.Text("catalog")) s.catalog = Resolve(base, *v);
  ReadCandidates(root, s, base);
  ReadPlan(root, s);
  if (auto v = root.Enum("objective", kObjectiveNames)) s.objective = static_cast<Objective>(*v);
  if (IsPoolingTask(s.task) && s.objective == Objective::kMinTtftP99) {
    root.Error("objective",
               fmt::format("{} has no TTFT: rank by max_goodput, max_goodput_per_cost or "
                           "min_cost_per_token",
                           PoolingStudy(s.task)));
  }
  if (auto v = root.Duration("budget")) s.budget = *v;
  root.Finish();

  // Cross-field rules, each at the line of the field that has to change.
  const bool needs_price = s.objective == Objective::kMaxGoodputPerCost || s.objective == Objective::kMinCostPerToken ||
                           s.slo.cost_per_million_tokens_max.has_value();
  if (needs_price && s.hardware.price_per_hour <= 0) {
    root.Error("objective", "a cost objective or cost ceiling needs hardware.price_per_hour");
  }
  if (s.budget <= Nanos(0) && root.Has("budget")) root.Error("budget", "must be more than 0");
  bool any_catalog_ref = false;
  for (const CandidateSpec& c : s.candidates) any_catalog_ref = any_catalog_ref || !c.catalog.empty();
  if (any_catalog_ref && s.catalog.empty()) {
    root.Error("catalog", "candidates name catalog entries, so the study needs `catalog: FILE`");
  }
  if (!diagnostics.empty()) return diagnostics.ToError();
  return s;
}

Result<Study> LoadStudy(const std::filesystem::path& file) {
  Result<std::string> text = ReadFile(file);
  if (!text.ok()) return text.error();
  return ParseStudy(text.value(), file.string(), file);
}

}  // namespace bakeoff::study

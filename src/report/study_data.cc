// report/study_data.cc: a results bundle read into page data (contract in study_data.h).
#include "report/study_data.h"

#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analyze/step_analysis.h"
#include "core/file.h"
#include "report/run_data.h"
#include "study/bundle_reader.h"
#include "study/study.h"

namespace bakeoff::report {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A JSON file of the bundle; null when absent, an error when present but unreadable.
Result<json> ReadJson(const fs::path& file) {
  if (!fs::exists(file)) return json(nullptr);
  Result<std::string> text = ReadFile(file);
  if (!text) return text.error();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return MakeError(ErrorCode::kInvalidInput, file.string() + ": not valid JSON");
  return j;
}

double Concurrency(const std::string& label) {
  const std::size_t eq = label.find('=');
  if (eq == std::string::npos) return 0;
  try {
    return std::stod(label.substr(eq + 1));
  } catch (...) {
    return 0;
  }
}

json WorkloadOf(const fs::path& bundle, json& notes) {
  json out = json::object();
  std::ifstream in(bundle / "workload" / "trace.jsonl");
  if (in) {
    // The canonical trace is what every candidate was sent; a page-sized summary of it is drawn.
    std::vector<double> arrivals;
    std::vector<std::int64_t> prompts, outputs;
    std::string line;
    std::uint64_t unreadable = 0;
    bool synthesized = false;
    while (std::getline(in, line)) {
      json j = json::parse(line, nullptr, false);
      if (!j.is_object()) {
        ++unreadable;
        continue;
      }
      if (j.contains("format")) {
        synthesized = j["source"].is_string() && j["source"].get<std::string>().rfind("synthesized", 0) == 0;
        continue;
      }
      if (!j["input_tokens"].is_number_integer() || !j["output_tokens"].is_number_integer()) {
        ++unreadable;
        continue;
      }
      if (j["arrival_s"].is_number()) arrivals.push_back(j["arrival_s"].get<double>());
      prompts.push_back(std::max<std::int64_t>(0, j["input_tokens"].get<std::int64_t>()));
      outputs.push_back(std::max<std::int64_t>(0, j["output_tokens"].get<std::int64_t>()));
    }
    if (unreadable > 0) notes.push_back(fmt::format("{} lines of workload/trace.jsonl could not be read", unreadable));
    out = WorkloadSeries(arrivals, std::move(prompts), std::move(outputs));
    out["synthesized"] = synthesized;
  }
  Result<json> fp = ReadJson(bundle / "fingerprint.json");
  if (fp.ok() && fp->is_object()) {
    const json& f = fp.value();
    json figures = json::object();
    figures["requests"] = f.value("requests", json(nullptr));
    const json& burst = f.value("arrivals", json::object()).value("burstiness", json::object());
    if (burst.contains("gap_cv")) figures["inter-arrival CV"] = burst["gap_cv"];
    if (burst.contains("gamma_shape")) figures["Gamma shape"] = burst["gamma_shape"];
    const json& reuse = f.value("prefix_reuse", json::object());
    if (reuse.contains("share")) figures["prefix reuse (share of prompt tokens)"] = reuse["share"];
    for (const json& c : f.value("classification", json::array())) {
      if (c.is_object()) figures["class: " + c.value("label", "")] = c.value("because", "");
    }
    out["fingerprint"] = figures;
  }
  return out;
}

// ReadStudyData's body; nlohmann throws on a field of an unexpected type.
Result<json> ReadStudyDataOrThrow(const fs::path& bundle) {
  if (!fs::exists(bundle / "manifest.json") || !fs::exists(bundle / "verdict.json")) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("{}: no manifest.json and verdict.json", bundle.string()));
  }
  Result<json> manifest = study::ReadBundleManifest(bundle);
  if (!manifest) return manifest.error();
  Result<json> verdict = ReadJson(bundle / "verdict.json");
  if (!verdict) return verdict.error();
  Result<json> gate = ReadJson(bundle / "gate.json");
  if (!gate) return gate.error();
  json notes = json::array();
  // The task decides the figures the page draws: a pooling study's are E2E and inputs/s.
  Result<study::Study> kept_study = study::LoadStudy(bundle / "study.yaml");
  const study::Task task = kept_study.ok() ? kept_study->task : study::Task::kChat;
  const double inputs = kept_study.ok() ? kept_study->traffic.inputs_per_request : 1;

  json candidates = json::array();
  json slo = json::array();
  double attainment_target = 0;
  std::vector<double> nines;
  for (const json& v : verdict->value("candidates", json::array())) {
    const std::string name = v.value("name", "");
    const fs::path dir = bundle / "candidates" / name;
    json c = {{"name", name}, {"engine", v.value("engine", "")}, {"version", v.value("version", "")},
              {"status", v.value("status", "")}, {"capacity_per_s", v.value("capacity_per_s", json(nullptr))},
              {"cold_start_s", -1}, {"drain_s", -1}, {"findings", json::array()}, {"probe_verdicts", json::array()}};
    for (const json& e : v.value("evidence", json::array())) {
      if (e.value("clause", "") == "attainment") attainment_target = e.value("threshold", 0.0);
    }
    if (Result<json> probes = ReadJson(dir / "probes" / "result.json"); probes.ok() && probes->is_object()) {
      c["cold_start_s"] = probes->value("cold_start_s", -1.0);
      c["drain_s"] = probes->value("drain_s", -1.0);
      c["findings"] = probes->value("findings", json::array());
      c["probe_verdicts"] = probes->value("verdicts", json::array());
    }
    if (Result<json> capacity = ReadJson(dir / "capacity" / "result.json"); capacity.ok() && capacity->is_object()) {
      json points = json::array();
      for (const json& p : capacity->value("points", json::array())) {
        // The worst repeat at each rate: the search passes a rate only when every repeat does.
        double ttft = 0, tpot = 0, e2e = 0;
        for (const json& t : p.value("trials", json::array())) {
          ttft = std::max(ttft, t.value("ttft_p99_ms", 0.0));
          tpot = std::max(tpot, t.value("tpot_p99_ms", 0.0));
          e2e = std::max(e2e, t.value("e2e_p99_ms", 0.0));
        }
        points.push_back({{"rate_per_s", p.value("rate_per_s", 0.0)},
                          {"passed", p.value("passed", false)},
                          {"attainment", p.value("attainment", 0.0)},
                          {"ttft_p99_ms", ttft},
                          {"tpot_p99_ms", tpot},
                          {"e2e_p99_ms", e2e}});
      }
      c["capacity_points"] = points;
    } else if (!capacity.ok()) {
      notes.push_back(capacity.error().message);
    }
    if (const fs::path sweep = study::LastFinishedRound(dir, "sweep"); !sweep.empty()) {
      Result<json> phase = ReadJson(sweep / "result.json");
      json steps = json::array();
      if (phase.ok() && phase->is_object()) {
        for (const json& s : phase->value("steps", json::array())) {
          steps.push_back({{"concurrency", Concurrency(s.value("label", ""))},
                           {"output_tokens_per_s", s.value("output_tokens_per_s", 0.0)},
                           {"inputs_per_s", s.value("request_rate_per_s", 0.0) * inputs},
                           {"tpot_p50_ms", s.value("tpot_p50_ms", 0.0)},
                           {"ttft_p99_ms", s.value("ttft_p99_ms", 0.0)},
                           {"e2e_p50_ms", s.value("e2e_p50_ms", 0.0)}});
        }
      }
      c["sweep"] = steps;
    }
    if (const fs::path replay = study::LastFinishedRound(dir, "replay"); !replay.empty()) {
      RunDataOptions curves_only;
      curves_only.read_records = false;
      Result<json> run = ReadRunData(replay, curves_only);
      if (run.ok()) {
        json curves = json::object();
        for (const auto& [metric, per_step] : run->at("curves").items()) {
          if (!per_step.empty()) curves[metric] = per_step[0]["values"];
        }
        c["replay"] = curves;
        nines = run->at("curve_nines").get<std::vector<double>>();
        if (slo.empty()) slo = run->at("slo");
        for (const json& n : run->at("notes")) notes.push_back(fmt::format("{}: {}", name, n.get<std::string>()));
      } else {
        notes.push_back(fmt::format("{}: {}", name, run.error().message));
      }
    }
    candidates.push_back(std::move(c));
  }
  if (nines.empty()) nines = analyze::LatencyCurveNines();
  return json{{"kind", "study"},
              {"task", study::TaskName(task)},
              {"emulated", verdict->value("emulated", false)},
              {"simulated", verdict->value("simulated", false)},
              {"manifest", manifest.value()},
              {"verdict", verdict.value()},
              {"gate", gate.value()},
              {"candidates", candidates},
              {"slo", slo},
              {"attainment_target", attainment_target},
              {"curve_nines", nines},
              {"workload", WorkloadOf(bundle, notes)},
              {"notes", notes}};
}

}  // namespace

Result<json> ReadStudyData(const fs::path& bundle) {
  try {
    return ReadStudyDataOrThrow(bundle);
  } catch (const json::exception& e) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("{}: a file of the bundle has a field of an unexpected type ({})", bundle.string(), e.what()));
  }
}

}  // namespace bakeoff::report

// study/study.h
//
// Owns: the study file (docs/formats/study.md): the requirement sheet the method fixes before any
// benchmark (task, model, hardware, traffic, SLOs, required features, candidates, the experiment
// plan, the objective, a wall-time budget), as one typed value built once and validated once:
// every mistake in the file is reported at once as "FILE:LINE: FIELD: what is wrong"
// (core/yaml_doc.h). Nothing downstream re-reads the YAML or copies fields into other configs.
// Does not own: the runtime catalog (study/catalog.h), the gate (study/gate.h), running the study
// (study/runner.h).
//
// Thread-safety: plain values; the loaders read the file system.
// Units: durations as Nanos, rates per second, token counts as integers, money in the study's
// currency (one currency per study; the file names it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/slo.h"
#include "core/clock.h"
#include "core/result.h"
#include "study/contracts.h"
#include "study/features.h"

namespace bakeoff::dialect {
enum class Api;  // dialect/request.h
}  // namespace bakeoff::dialect

namespace bakeoff::study {

enum class Task { kChat, kCompletion, kEmbedding, kRerank };
std::string_view TaskName(Task task);
// Embedding and rerank: whole answers of vectors or scores, no tokens generated.
bool IsPoolingTask(Task task);

struct ModelSpec {
  std::string name;          // what requests carry as "model"
  std::string revision;      // a pinned revision (commit hash or tag); empty: not pinned
  std::string architecture;  // "LlamaForCausalLM", "llama", "qwen2_moe", ...
  bool moe = false;
  double parameters_b = 0;    // billions; 0: not given
  std::string weight_format;  // safetensors, gguf, ...
  std::string quantization;   // bf16, fp16, fp8, awq, gptq, q4_k_m, ...
  std::uint32_t max_context = 0;  // tokens every candidate must accept
};

struct HardwareSpec {
  std::string accelerator;  // nvidia, amd, cpu, ... (the catalog's quantization keys)
  std::string gpu;          // "H100-80GB"; empty on CPU
  std::uint32_t gpus = 0;   // per node
  std::uint32_t nodes = 1;
  double price_per_hour = 0;  // of everything listed (all nodes); 0: unknown (no cost figures)
  std::string currency = "USD";
};

enum class TrafficSource { kTrace, kFingerprint, kShape };

struct TrafficSpec {
  TrafficSource source = TrafficSource::kShape;
  std::filesystem::path file;   // the trace, fingerprint.json or shape YAML (relative to the study)
  std::string format = "auto";  // trace format, for kTrace
  std::uint64_t seed = 1;       // synthesis and the load's prompts
  std::uint64_t requests = 0;   // synthesize (or keep) this many; 0: what the source gives
  double duration_s = 0;        // kShape/kFingerprint: synthesize this long; 0: the source's
  // Pooling tasks: texts (embedding) or documents (rerank) per request, each of a workload
  // request's input length; 1 for generation.
  std::uint32_t inputs_per_request = 1;
};

struct SloSpec {
  analyze::Slo latency;          // percentile terms (ttft_p99=..., tpot_p99=..., e2e_p99=...)
  double attainment = 0.99;      // share of requests that must meet every latency threshold
  double availability = 0.99;    // share of requests that must complete
  double min_goodput_per_s = 0;  // 0: none
  std::optional<Nanos> cold_start_max;  // spawn to first answer
  std::optional<Nanos> drain_max;       // SIGTERM to exit with every stream finished
  std::optional<double> cost_per_million_tokens_max;  // output tokens, at capacity
};

enum class CandidateKind { kUrl, kLaunch, kEmulated };
std::string_view CandidateKindName(CandidateKind kind);

struct CandidateSpec {
  std::string name;     // unique within the study; names its folder in the bundle
  std::string catalog;  // the runtime catalog entry it claims to be
  CandidateKind kind = CandidateKind::kEmulated;
  std::string url;                  // kUrl
  std::string launch;               // kLaunch: the command line (split like a shell would)
  std::uint16_t port = 0;           // kLaunch
  std::string preset;               // kEmulated: an engine preset name or file
  std::vector<std::string> emulator_flags;  // kEmulated: extra `bakeoff emulate` flags (faults)
  std::string engine;               // adapter override; empty: detected or from the catalog
  std::vector<std::string> settings;  // tuning applied (flags changed from the engine's defaults)
  int line = 0;
};

// The ten steps of the method that a study can run (docs/formats/study.md says which are load
// phases and which are probes).
enum class Phase { kProbes, kSingle, kSweep, kCapacity, kReplay };
std::string_view PhaseName(Phase phase);
std::span<const Phase> AllPhases();

struct PlanSpec {
  std::vector<Phase> phases;             // in the order they run; default: all
  std::vector<std::string> probes;       // probe names; empty: the default selection
  std::uint64_t single_requests = 20;    // kSingle: sequential requests
  std::vector<std::uint32_t> concurrency = {1, 4, 16};  // kSweep levels
  std::uint64_t step_requests = 200;     // requests per sweep level and per capacity trial
  std::uint32_t repeats = 2;             // per capacity rate, and rounds of single/sweep/replay
  double capacity_start_per_s = 0;       // 0: from the single-request latency
  double capacity_min_per_s = 0.05;
  double capacity_max_per_s = 5000;
  double capacity_precision = 0.1;
  std::uint64_t replay_requests = 0;     // kReplay: 0 = the whole workload
  double replay_rate_scale = 1;          // kReplay: the workload's rate times this
  std::uint32_t output_tokens_cap = 0;   // 0: the workload's lengths
};

// A probe finding the study accepts as a known risk (accept_risks): recorded with its reason in
// the decision record, never hidden. `finding` is a code, or a rule's pattern with '*'.
struct AcceptedRisk {
  std::string finding;
  std::string reason;
  int line = 0;
};

enum class Objective { kMaxGoodput, kMaxGoodputPerCost, kMinCostPerToken, kMinTtftP99 };
std::string_view ObjectiveName(Objective objective);

struct Study {
  std::filesystem::path file;
  std::string name;
  Task task = Task::kChat;
  ModelSpec model;
  HardwareSpec hardware;
  TrafficSpec traffic;
  SloSpec slo;
  std::vector<Feature> required_features;
  std::vector<Contract> required_contracts;  // requires.contracts (study/contracts.h)
  std::vector<AcceptedRisk> accepted_risks;
  std::string api = "chat";  // the protocol every candidate must serve: chat or completions
  std::filesystem::path catalog;  // relative paths are resolved against the study's folder
  std::vector<CandidateSpec> candidates;
  PlanSpec plan;
  Objective objective = Objective::kMaxGoodput;
  Nanos budget = std::chrono::minutes(30);

  bool Runs(Phase phase) const;
};

// The route every candidate is measured on: the task's pooling route, else `api` (chat or
// completions).
dialect::Api StudyApi(const Study& study);
// That route as a catalog feature (openai_chat, openai_completions, embeddings, rerank).
Feature ApiFeature(const Study& study);

// Every mistake at once (kInvalidInput, one line each). Paths in the study are resolved against
// the folder of `source_path` (for ParseStudy: the current folder when it is empty).
Result<Study> ParseStudy(std::string_view text, std::string_view source_name,
                         const std::filesystem::path& source_path = {});
Result<Study> LoadStudy(const std::filesystem::path& file);

}  // namespace bakeoff::study

// target/metric_names.h
//
// Owns: the operator's canonical serving signals (TTFT, ITL, E2E and queue-time histograms;
// running and waiting requests; KV-cache usage; prefix-cache hits; prompt and generated token
// counters; preemptions) and the Prometheus metric family each engine exposes them under
// (../shared/reference/engine-interfaces.md, section 10.2), so a metrics page can be read without
// knowing which engine wrote it. The per-engine names live in the adapters (target/adapters.h);
// CanonicalSignals() gathers them per signal, in adapter order.
//
// Thread-safety: immutable data.
#pragma once

#include <string_view>
#include <vector>

namespace bakeoff::target {

enum class Signal {
  kTtft,
  kInterTokenLatency,
  kE2eLatency,
  kQueueTime,
  kRunning,
  kWaiting,
  kKvUsage,
  kPrefixCacheHits,
  kPromptTokens,
  kGenerationTokens,
  kPreemptions,
};

enum class SignalKind { kHistogram, kGauge, kCounter };

struct MetricFamilyName {
  std::string_view engine;  // "vLLM", "SGLang", ...
  std::string_view family;  // as on the page (a counter's family without "_total")
  SignalKind kind;
};

struct SignalInfo {
  Signal signal;
  std::string_view name;     // "ttft", "running", ...
  std::string_view meaning;  // one line
  bool essential;            // an operator cannot run the engine safely without it
  std::vector<MetricFamilyName> families;
};

// Every canonical signal, in a fixed order.
const std::vector<SignalInfo>& CanonicalSignals();

}  // namespace bakeoff::target

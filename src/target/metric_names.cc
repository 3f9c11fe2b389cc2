// target/metric_names.cc: the canonical signals, with every adapter's families gathered per
// signal (the names themselves are in target/adapters.cc).
#include "target/metric_names.h"

#include "target/adapters.h"

namespace bakeoff::target {
namespace {

std::vector<SignalInfo> BuildSignals() {
  std::vector<SignalInfo> signals = {
      {Signal::kTtft, "ttft", "time to first token histogram", true, {}},
      {Signal::kInterTokenLatency,
       "itl",
       "inter-token latency or time per output token histogram",
       false,
       {}},
      {Signal::kE2eLatency, "e2e", "end-to-end request latency histogram", true, {}},
      {Signal::kQueueTime, "queue_time", "time requests wait before running", false, {}},
      {Signal::kRunning, "running", "requests running now", true, {}},
      {Signal::kWaiting, "waiting", "requests queued now", true, {}},
      {Signal::kKvUsage, "kv_usage", "KV-cache usage", false, {}},
      {Signal::kPrefixCacheHits, "prefix_cache", "prefix-cache hits (counter or rate)", false, {}},
      {Signal::kPromptTokens, "prompt_tokens", "prompt tokens processed", true, {}},
      {Signal::kGenerationTokens, "generation_tokens", "tokens generated", true, {}},
      {Signal::kPreemptions, "preemptions", "requests preempted (KV pressure)", false, {}},
  };
  for (SignalInfo& info : signals) {
    for (const EngineAdapter& adapter : AllAdapters()) {
      for (const SignalMetric* metric : adapter.MetricsFor(info.signal)) {
        info.families.push_back({adapter.display_name, metric->family, metric->kind});
      }
    }
  }
  return signals;
}

}  // namespace

const std::vector<SignalInfo>& CanonicalSignals() {
  static const std::vector<SignalInfo> signals = BuildSignals();
  return signals;
}

}  // namespace bakeoff::target

// workload/trace_transform.cc: what-if changes of a workload (trace_transform.h).
#include "workload/trace_transform.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "workload/prefix_reuse.h"

namespace bakeoff::workload {
namespace {

std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The request's place in [0, 1): it is isolated when below the share.
double Draw(std::size_t index) { return static_cast<double>(Mix(index) >> 11) * 0x1.0p-53; }

bool HasBlocks(const Trace& trace) {
  return trace.block_tokens > 0 &&
         std::any_of(trace.requests.begin(), trace.requests.end(), [](const TraceRequest& r) { return !r.prefix_hashes.empty(); });
}

// Reuse over the trace when the requests drawn below `share` hold only their own blocks.
double ReuseWithIsolated(const Trace& trace, double share) {
  PrefixReuseCounter counter(trace.block_tokens);
  std::uint64_t prompt_tokens = 0;
  for (std::size_t i = 0; i < trace.requests.size(); ++i) {
    const TraceRequest& r = trace.requests[i];
    prompt_tokens += r.input_tokens;
    if (Draw(i) < share) continue;  // its own blocks: serves nothing, and no later chain matches it
    counter.Push(r.prefix_hashes, r.input_tokens);
  }
  counter.Flush();
  return prompt_tokens > 0 ? static_cast<double>(counter.served_tokens()) / static_cast<double>(prompt_tokens) : 0;
}

}  // namespace

void ScaleOutputs(Trace& trace, double factor) {
  BAKEOFF_CHECK(factor > 0) << "ScaleOutputs factor " << factor;
  for (TraceRequest& r : trace.requests) {
    const double scaled = std::round(static_cast<double>(r.output_tokens) * factor);
    r.output_tokens = static_cast<std::uint32_t>(std::clamp(scaled, 1.0, 4.0e9));
  }
}

std::optional<double> IdealPrefixReuse(const Trace& trace) {
  if (!HasBlocks(trace)) return std::nullopt;
  return ReuseWithIsolated(trace, 0);
}

std::optional<ReuseChange> CutPrefixReuse(Trace& trace, double keep) {
  BAKEOFF_CHECK(keep >= 0 && keep <= 1) << "CutPrefixReuse keep " << keep;
  if (!HasBlocks(trace)) return std::nullopt;
  ReuseChange change;
  change.before = ReuseWithIsolated(trace, 0);
  const double target = change.before * keep;
  double low = 0, high = 1, share = 0, reuse = change.before;
  for (int round = 0; round < 20 && std::abs(reuse - target) > 0.02 * std::max(change.before, 1e-9); ++round) {
    share = (low + high) / 2;
    reuse = ReuseWithIsolated(trace, share);
    (reuse > target ? low : high) = share;
  }
  if (keep == 0) {
    share = 1;
    reuse = 0;
  }
  change.after = reuse;
  change.isolated_share = share;
  for (std::size_t i = 0; i < trace.requests.size(); ++i) {
    if (Draw(i) >= share) continue;
    std::vector<std::uint64_t>& blocks = trace.requests[i].prefix_hashes;
    // Ids with the top bit set and the request's index in them: no other request has them.
    for (std::size_t k = 0; k < blocks.size(); ++k) blocks[k] = (1ULL << 63) | (Mix(i) << 20 >> 1) | k;
  }
  return change;
}

}  // namespace bakeoff::workload

// workload/synthesis_fingerprint.cc
//
// Owns: SynthesizeFromFingerprint: the synthesis model of a fingerprint (docs/workloads.md,
// "Synthesis"): its length distributions and their correlation, sessions (the share of requests
// in them, turns, think times), the event rate, its arrival process (fitted by FitArrivals), the
// prefix reuse to fit group prefixes to, and the model and structured-output mix.
// Does not own: fitting the arrival process (synthesis_arrival_fit.cc) or making the trace
// (synthesis_generate.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/rng.h"
#include "workload/synthesis.h"
#include "workload/synthesis_internal.h"

namespace bakeoff::workload {

using synthesis_internal::FitArrivals;
using synthesis_internal::Model;
using synthesis_internal::NormalizeWeights;
using synthesis_internal::QuantileFunction;
using synthesis_internal::RefuseTimeOptionsWithoutArrivals;
using synthesis_internal::Synthesize;

namespace {

constexpr std::uint32_t kDefaultBlockTokens = 512;
constexpr std::uint64_t kMaxDefaultGroups = 256;
constexpr std::uint64_t kDefaultGroups = 16;

// Sessions: the probability that an event is a session, given the share of requests in sessions
// and the mean turns per session.
double SessionProbability(double share, double turns_mean) {
  if (share <= 0 || turns_mean <= 0) return 0;
  if (share >= 1) return 1;
  return share / (turns_mean * (1 - share) + share);
}

}  // namespace

Result<Trace> SynthesizeFromFingerprint(const Fingerprint& f, const SynthesisOptions& options) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid.error();
  if (!f.arrivals_known || !(f.mean_rps > 0)) {
    const std::string what = fmt::format("the fingerprint of {}", f.source);
    if (Status refused = RefuseTimeOptionsWithoutArrivals(options, what); !refused.ok())
      return refused.error();
  }
  Model m;
  m.source =
      fmt::format("synthesized from the fingerprint of {} (seed {})", f.source, options.seed);
  m.arrivals_known = f.arrivals_known;
  m.lengths.emplace(QuantileFunction::FromLengths(f.input), QuantileFunction::FromLengths(f.output),
                    f.pearson_log);
  const double requests = static_cast<double>(std::max<std::uint64_t>(f.requests, 1));
  const double session_share = static_cast<double>(f.requests_in_sessions) / requests;
  const double turns_mean = f.sessions > 0 ? f.turns_per_session.mean : 0;
  m.session_prob = SessionProbability(session_share, turns_mean);
  m.extra_turns_mean = std::max(0.0, turns_mean - 1);
  if (f.think_time_source.empty() || f.think_time_s.count == 0) {
    m.think_time = [](Rng&) { return 0.0; };
  } else {
    const double p50 = f.think_time_s.p50.value, p90 = f.think_time_s.p90.value,
                 mean = f.think_time_s.mean;
    if (p50 > 0 && p90 > p50) {
      const double mu = std::log(p50), sigma = std::log(p90 / p50) / 1.281552;
      m.think_time = [mu, sigma](Rng& rng) { return std::exp(mu + sigma * rng.Normal()); };
    } else {
      m.think_time = [mean](Rng& rng) { return mean > 0 ? rng.Exponential(mean) : 0.0; };
    }
  }
  const double requests_per_event =
      m.session_prob * std::max(1.0, turns_mean) + (1 - m.session_prob);
  if (f.arrivals_known && f.mean_rps > 0) {
    // requests / duration counts one request more than the gaps in the duration: the mean gap is
    // duration / (requests - 1), which evenly spaced sources need exactly.
    const double gaps_per_request =
        f.requests > 1 ? static_cast<double>(f.requests - 1) / static_cast<double>(f.requests)
                       : 1.0;
    m.event_rate = f.mean_rps * gaps_per_request * options.rate_scale / requests_per_event;
    m.origin_unix_ns = f.origin_unix_ns;
    FitArrivals(f, m);
  }
  if (f.prefix_reuse) {
    m.block_tokens = f.block_tokens > 0 ? f.block_tokens : kDefaultBlockTokens;
    m.prefix_share = 1;
    m.target_reuse = *f.prefix_reuse;
    m.groups = f.prefix_groups > 0 ? std::min(f.prefix_groups, kMaxDefaultGroups) : kDefaultGroups;
    m.name_groups = f.prefix_groups > 0;
    if (m.name_groups) m.prefix_share = static_cast<double>(f.requests_in_groups) / requests;
  }
  m.structured_share = static_cast<double>(f.structured_output) / requests;
  for (const auto& [name, n] : f.models) m.models.emplace_back(name, static_cast<double>(n));
  NormalizeWeights(m.models);
  return Synthesize(m, options,
                    f.requests > 0 ? std::optional<std::uint64_t>(f.requests) : std::nullopt,
                    std::nullopt);
}

}  // namespace bakeoff::workload

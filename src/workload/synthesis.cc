// workload/synthesis.cc
//
// Owns: the options of synthesis and the time transforms of a trace (docs/workloads.md,
// "Synthesis"): checking the options, refusing the time options a source without arrival times
// cannot honour, rate scale, time scale, window and request cap on an existing trace, and the
// fingerprint of an in-memory trace.
//
// The synthesis model itself is split along its jobs, over the shared declarations of
// synthesis_internal.h: the model of a fingerprint (synthesis_fingerprint.cc) with its arrival
// process fitted in synthesis_arrival_fit.cc; the YAML shape and its model (synthesis_shape.cc);
// the length distributions (synthesis_lengths.cc); the arrival process (synthesis_arrivals.cc);
// and the trace made from a model (synthesis_generate.cc).
#include "workload/synthesis.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "workload/synthesis_internal.h"

namespace bakeoff::workload {

namespace synthesis_internal {

// A source without arrival times (ShareGPT) puts every request at 0: a rate scale or a window
// would change nothing, or drop everything, without saying so.
Status RefuseTimeOptionsWithoutArrivals(const SynthesisOptions& options,
                                        const std::string& source) {
  if (options.rate_scale != 1) {
    return Invalid(fmt::format(
        "rate scale (--rate-scale): {} has no arrival times (every request arrives at 0), "
        "so there is no rate to scale",
        source));
  }
  if (options.window) {
    return Invalid(fmt::format(
        "window (--window): {} has no arrival times (every request arrives at 0), so a time "
        "window cannot select from it; use a request count",
        source));
  }
  return Ok{};
}

}  // namespace synthesis_internal

using synthesis_internal::Invalid;
using synthesis_internal::RefuseTimeOptionsWithoutArrivals;

Status ValidateSynthesisOptions(const SynthesisOptions& o) {
  if (o.requests && o.duration_s) return Invalid("give requests or a duration, not both");
  if (o.requests && *o.requests == 0) return Invalid("requests: must be at least 1");
  if (o.duration_s && !(*o.duration_s > 0 && std::isfinite(*o.duration_s)))
    return Invalid("duration: must be > 0");
  if (!(o.rate_scale > 0 && std::isfinite(o.rate_scale))) return Invalid("rate scale: must be > 0");
  if (!(o.time_scale > 0 && std::isfinite(o.time_scale))) return Invalid("time scale: must be > 0");
  if (o.window && !(o.window->first >= 0 && o.window->second > o.window->first &&
                    std::isfinite(o.window->second))) {
    return Invalid("window: needs 0 <= start < end");
  }
  if (o.window && o.duration_s) return Invalid("give a window or a duration, not both");
  return Ok{};
}

void ScaleRate(Trace& trace, double factor) {
  for (TraceRequest& r : trace.requests) r.arrival_s /= factor;
}

void ScaleTime(Trace& trace, double factor) {
  for (TraceRequest& r : trace.requests) {
    r.arrival_s *= factor;
    if (r.think_time_s) *r.think_time_s *= factor;
  }
}

void ApplyWindow(Trace& trace, double start_s, double end_s) {
  if (trace.origin_unix_ns) *trace.origin_unix_ns += std::llround(start_s * 1e9);
  std::vector<TraceRequest> kept;
  for (TraceRequest& r : trace.requests) {
    if (r.arrival_s >= start_s && r.arrival_s < end_s) {
      r.arrival_s -= start_s;
      kept.push_back(std::move(r));
    }
  }
  trace.requests = std::move(kept);
}

Status ApplyTimeOptions(Trace& trace, const SynthesisOptions& options) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid;
  if (options.duration_s)
    return Invalid("a duration does not apply to an existing trace: use a window");
  if (!trace.arrivals_known) {
    if (Status refused = RefuseTimeOptionsWithoutArrivals(options, trace.source); !refused.ok())
      return refused;
    const bool thinks =
        std::any_of(trace.requests.begin(), trace.requests.end(),
                    [](const TraceRequest& r) { return r.think_time_s.has_value(); });
    if (options.time_scale != 1 && !thinks) {
      return Invalid(fmt::format(
          "time scale (--time-scale): {} has no arrival or think times, so scaling them "
          "would change nothing",
          trace.source));
    }
  }
  if (options.rate_scale != 1) ScaleRate(trace, options.rate_scale);
  if (options.time_scale != 1) ScaleTime(trace, options.time_scale);
  if (options.window) ApplyWindow(trace, options.window->first, options.window->second);
  if (options.requests && trace.requests.size() > *options.requests)
    trace.requests.resize(*options.requests);
  return Ok{};
}

Fingerprint FingerprintTrace(const Trace& trace) {
  FingerprintBuilder builder;
  for (const TraceRequest& r : trace.requests)
    builder.Add(r, r.prefix_hashes.empty() ? 0 : trace.block_tokens);
  ImportReport report;
  report.source = trace.source;
  report.format = TraceFormat::kTrace;
  report.arrivals_known = trace.arrivals_known;
  report.origin_unix_ns = trace.origin_unix_ns;
  return builder.Finish(report);
}

}  // namespace bakeoff::workload

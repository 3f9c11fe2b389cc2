// workload/synthesis_generate.cc
//
// Owns: turning a synthesis Model into a trace (docs/workloads.md, "Synthesis"): the events of the
// arrival process, each a single request or a session of several turns (geometric turns, their
// sampled lengths in increasing input order, think times between them), the model and
// structured-output mix, the cut to the options' request count, duration, time scale and window,
// and the prefix ids: history blocks from the session's previous turn plus shared group prefixes
// whose length is fixed or fitted to the model's ideal prefix-cache share.
// Does not own: the model of a source (synthesis_fingerprint.cc, synthesis_shape.cc) or its
// arrival process (synthesis_arrivals.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "workload/synthesis_internal.h"

namespace bakeoff::workload::synthesis_internal {

namespace {

struct Draft {
  double t = 0;
  std::uint32_t in = 0, out = 0;
  std::uint32_t session = 0;  // 1-based; 0: none
  std::uint32_t turn = 0;
  double think = 0;
  std::int32_t group = -1;
  double extra_u = 0;  // decides the fractional prefix block
  bool structured = false;
  std::int32_t model = -1;
};

std::uint32_t Blocks(std::uint32_t tokens, std::uint32_t block) {
  return (tokens + block - 1) / block;
}

// Served tokens of an ideal cache for a request of `in` tokens whose first `hist_blocks` blocks
// repeat its session's previous turn and whose first `prefix_blocks` are its group's.
double Served(std::uint32_t in, std::uint32_t hist_blocks, std::uint32_t prefix_blocks,
              std::uint32_t block) {
  const double hist = std::min<double>(static_cast<double>(hist_blocks) * block, in);
  const double pre = std::min<double>(static_cast<double>(prefix_blocks) * block, in);
  return std::max(hist, pre);
}

std::uint32_t PrefixBlocksOf(const Draft& d, double x) {
  const double whole = std::floor(x);
  return static_cast<std::uint32_t>(whole) + (d.extra_u < x - whole ? 1u : 0u);
}

}  // namespace

Result<Trace> Synthesize(const Model& m, const SynthesisOptions& options,
                         std::optional<std::uint64_t> default_requests,
                         std::optional<double> default_duration) {
  if (Status valid = ValidateSynthesisOptions(options); !valid.ok()) return valid.error();
  // With a window, the window bounds generation and the request count applies after it.
  std::optional<std::uint64_t> count = options.window ? std::nullopt : options.requests;
  std::optional<double> gen_end = options.duration_s;
  if (options.window) gen_end = options.window->second / options.time_scale;
  if (!count && !gen_end) {
    count = default_requests;  // a window always sets gen_end, so this is the no-option case
    if (!count) gen_end = default_duration;
  }
  if (!count && !gen_end) return Invalid("say how much to make: requests or a duration");
  if (m.event_rate <= 0 && !count) {
    return Invalid(
        "the source has no arrival rate, so a duration or window cannot bound it: give a request "
        "count");
  }
  if (count && *count > kMaxRequests)
    return Invalid(fmt::format("requests: at most {}", kMaxRequests));
  const std::uint64_t limit = count.value_or(0);  // 0: bounded by time only
  if (gen_end && m.event_rate > 0 && *gen_end * m.event_rate > static_cast<double>(kMaxRequests)) {
    return Invalid(fmt::format("duration x rate gives more than {} requests", kMaxRequests));
  }

  Rng master(options.seed);
  Rng arrivals = master.Fork(), lengths = master.Fork(), sessions = master.Fork(),
      mix = master.Fork();
  std::vector<Draft> drafts;
  std::priority_queue<double, std::vector<double>, std::greater<>>
      pending;  // arrivals not yet settled
  std::uint64_t settled = 0;
  std::uint32_t next_session = 0;
  double start = 0, operational = 0;
  std::vector<Draft> turns;
  GapState gaps(m);
  for (bool first = true;; first = false) {
    if (!first) {
      operational += SampleGap(m, gaps, arrivals);
      start = m.profile.Warp(operational);
    }
    if (gen_end && start >= *gen_end && !(m.event_rate <= 0)) break;
    while (!pending.empty() && pending.top() <= start) pending.pop(), ++settled;
    if (limit > 0 && settled >= limit) break;
    if (limit > 0 && m.event_rate <= 0 && drafts.size() >= limit) break;
    // One event: a single request or a session of several turns.
    std::uint32_t n_turns = 1;
    const bool session = m.session_prob > 0 && sessions.Uniform() < m.session_prob;
    if (session && m.extra_turns_mean > 0) {
      const double stop = 1 / (1 + m.extra_turns_mean);
      n_turns += static_cast<std::uint32_t>(
          std::min(1e4, std::floor(std::log(1 - sessions.Uniform()) / std::log(1 - stop))));
    }
    turns.assign(n_turns, Draft{});
    for (Draft& d : turns) std::tie(d.in, d.out) = m.lengths->Sample(lengths);
    // A conversation's history grows: its turns take the sampled lengths in increasing input order.
    std::stable_sort(turns.begin(), turns.end(),
                     [](const Draft& a, const Draft& b) { return a.in < b.in; });
    const std::int32_t group =
        m.block_tokens > 0 && m.prefix_share > 0 && mix.Uniform() < m.prefix_share
            ? static_cast<std::int32_t>(mix.Below(m.groups))
            : -1;
    double t = start;
    if (session) ++next_session;
    for (std::uint32_t i = 0; i < n_turns; ++i) {
      Draft& d = turns[i];
      if (session) {
        d.session = next_session;
        d.turn = i;
        if (i > 0) {
          d.think = m.think_time(sessions);
          if (m.event_rate > 0) t += d.think;
        }
      }
      d.t = t;
      d.group = group;
      d.extra_u = mix.Uniform();
      d.structured = m.structured_share > 0 && mix.Uniform() < m.structured_share;
      if (!m.models.empty()) {
        const double u = mix.Uniform();
        std::size_t k = 0;
        while (k + 1 < m.models.size() && u >= m.models[k].second) ++k;
        d.model = static_cast<std::int32_t>(k);
      }
      pending.push(d.t);
      drafts.push_back(d);
    }
  }
  std::stable_sort(drafts.begin(), drafts.end(),
                   [](const Draft& a, const Draft& b) { return a.t < b.t; });
  if (gen_end && m.event_rate > 0) {
    const double end = *gen_end;
    drafts.erase(std::lower_bound(drafts.begin(), drafts.end(), end,
                                  [](const Draft& d, double e) { return d.t < e; }),
                 drafts.end());
  }
  if (limit > 0 && drafts.size() > limit) drafts.resize(limit);
  for (Draft& d : drafts) d.t *= options.time_scale, d.think *= options.time_scale;
  if (options.window) {
    const auto [ws, we] = *options.window;
    std::vector<Draft> kept;
    for (const Draft& d : drafts) {
      if (d.t >= ws && d.t < we) kept.push_back(d), kept.back().t -= ws;
    }
    drafts = std::move(kept);
    if (options.requests && drafts.size() > *options.requests) drafts.resize(*options.requests);
  }

  // Prefix ids, in final order: history blocks from the session's previous turn, group blocks.
  Trace trace;
  trace.source = m.source;
  trace.arrivals_known = m.arrivals_known;
  if (m.origin_unix_ns) {
    trace.origin_unix_ns = *m.origin_unix_ns;
    if (options.window) *trace.origin_unix_ns += std::llround(options.window->first * 1e9);
  }
  const std::uint32_t block = m.block_tokens;
  std::vector<std::uint32_t> hist(drafts.size(), 0);
  if (block > 0) {
    std::unordered_map<std::uint32_t, std::uint32_t> prev_in;
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      const Draft& d = drafts[i];
      if (d.session == 0) continue;
      auto it = prev_in.find(d.session);
      if (it != prev_in.end()) hist[i] = std::min(it->second, d.in) / block;
      prev_in[d.session] = d.in;
    }
  }
  double x = m.prefix_blocks.value_or(0);
  if (block > 0 && m.target_reuse) {
    // Fit the group prefix length (in blocks, fractional through extra_u) to the target share.
    double total = 0;
    for (const Draft& d : drafts) total += d.in;
    auto share = [&](double blocks) {
      double served = 0;
      for (std::size_t i = 0; i < drafts.size(); ++i) {
        const Draft& d = drafts[i];
        served += Served(d.in, hist[i], d.group >= 0 ? PrefixBlocksOf(d, blocks) : 0, block);
      }
      return total > 0 ? served / total : 0;
    };
    double lo = 0, hi = 1;
    std::uint32_t max_in = 0;
    for (const Draft& d : drafts) max_in = std::max(max_in, d.in);
    hi = static_cast<double>(Blocks(max_in, block)) + 1;
    if (share(lo) >= *m.target_reuse) {
      x = 0;
    } else {
      for (int iter = 0; iter < 40; ++iter) {
        const double mid = (lo + hi) / 2;
        (share(mid) < *m.target_reuse ? lo : hi) = mid;
      }
      x = hi;
    }
  }
  if (block > 0) trace.block_tokens = block;
  Rng ids = master.Fork();
  std::vector<std::vector<std::uint64_t>> group_ids(m.groups);
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> prev_ids;
  trace.requests.reserve(drafts.size());
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    const Draft& d = drafts[i];
    TraceRequest r;
    // Whole microseconds: finer than any trace's clock, and no arrival like 1e-139 s.
    r.arrival_s = std::round(d.t * kArrivalTicksPerSecond) / kArrivalTicksPerSecond;
    r.input_tokens = d.in;
    r.output_tokens = d.out;
    if (block > 0) {
      const std::uint32_t n = Blocks(d.in, block);
      std::vector<std::uint64_t>& h = r.prefix_hashes;
      h.reserve(n);
      if (hist[i] > 0) {
        const std::vector<std::uint64_t>& p = prev_ids[d.session];
        h.assign(p.begin(), p.begin() + std::min<std::size_t>({hist[i], p.size(), n}));
      }
      if (d.group >= 0) {
        const std::uint32_t pre = std::min(n, PrefixBlocksOf(d, x));
        std::vector<std::uint64_t>& g = group_ids[static_cast<std::size_t>(d.group)];
        while (g.size() < pre) g.push_back(ids.Next());
        while (h.size() < pre) h.push_back(g[h.size()]);
      }
      while (h.size() < n) h.push_back(ids.Next());
      if (d.session != 0) prev_ids[d.session] = h;
      if (d.group >= 0 && m.name_groups) r.prefix_group = fmt::format("prefix-{}", d.group);
    }
    if (d.session != 0) {
      r.session_id = fmt::format("s{}", d.session);
      r.turn = d.turn;
      if (d.turn > 0) r.think_time_s = d.think;
    }
    r.structured_output = d.structured;
    if (d.model >= 0) r.model = m.models[static_cast<std::size_t>(d.model)].first;
    trace.requests.push_back(std::move(r));
  }
  if (trace.requests.empty()) trace.block_tokens = 0;
  return trace;
}

void NormalizeWeights(std::vector<std::pair<std::string, double>>& models) {
  double total = 0;
  for (const auto& [name, w] : models) total += w;
  double running = 0;
  for (auto& [name, w] : models) w = (running += w) / total;
  if (!models.empty()) models.back().second = 1;
}

}  // namespace bakeoff::workload::synthesis_internal

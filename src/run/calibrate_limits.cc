// run/calibrate_limits.cc: the scheduler's limits and features from the outside (contract in
// calibrate_limits.h).
#include "run/calibrate_limits.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/rng.h"
#include "emulate/cost_model.h"
#include "run/calibration_load.h"

namespace bakeoff::run {
namespace {

// Step 1: short prompts, answers long enough that every admitted request starts before the first
// one ends even when admission takes a few steps.
constexpr std::uint32_t kBurstPrompt = 32;
constexpr std::uint32_t kBurstOutput = 96;
// Step 2: prompt text in blocks of this many tokens; the shared lengths probed, in blocks.
constexpr std::uint32_t kPrefixTextBlock = 50;
constexpr std::uint32_t kPrefixBlocks = 20;
constexpr std::uint32_t kSharedBlocks[] = {6, 9, 11, 14, 17};
// A block size read off the cached counts (PrefixBlockOfCounts) under this is token-granular.
constexpr std::uint64_t kSmallestBlock = 4;
constexpr double kCachedTtftShare = 0.6;
// Steps 3 and 4.
constexpr std::uint32_t kLongestProbe = 16384;
constexpr std::uint32_t kContextMargin = 200;
constexpr double kStalledShare = 0.7;
constexpr std::uint32_t kMaxKvBurst = 64;

// How many of the requests ran together: those whose first token came before the first answer
// ended (a request admitted only when a running one left starts after it). nullopt when that
// first answer ended short of `planned` tokens (its length was not forced): the window it closes
// says nothing about admission then.
std::optional<std::size_t> RunningTogether(const std::vector<measure::RequestRecord>& ok, std::uint32_t planned) {
  const auto first = std::min_element(ok.begin(), ok.end(), [](const auto& a, const auto& b) {
    return a.last_token.value_or(*a.first_token) < b.last_token.value_or(*b.first_token);
  });
  if (first == ok.end() || double(first->OutputTokens()) < 0.9 * planned) return std::nullopt;
  const MonoTime first_end = first->last_token.value_or(*first->first_token);
  return static_cast<std::size_t>(
      std::count_if(ok.begin(), ok.end(), [&](const measure::RequestRecord& r) { return *r.first_token < first_end; }));
}

std::string FailureNote(const CalibrationLoad& load, std::size_t sent, const std::string& what) {
  if (load.failed == 0) return fmt::format("{}: no answer of {} came back (stopped)", what, sent);
  return fmt::format("{}: {} of {} requests failed ({})", what, load.failed, sent, load.first_error);
}

constexpr const char* kAnswersEndedEarly =
    "the first answer ended early (its length is not forced on this server), so its end says nothing about which "
    "requests ran together";

class Experiments {
 public:
  Experiments(const LimitsExperiment& experiment, emulate::EngineConfig& config, const std::atomic<bool>& stop,
              const std::function<void(const std::string&)>& log)
      : e_(experiment), config_(config), stop_(stop), log_(log), seed_(experiment.seed) {}

  LimitsOutcome Run() {
    for (void (Experiments::*experiment)() :
         {&Experiments::MaxNumSeqs, &Experiments::PrefixCache, &Experiments::ChunkedPrefill, &Experiments::KvCapacity}) {
      const emulate::EngineConfig before = config_;
      (this->*experiment)();
      // A finding that would make the preset invalid is not applied; the others stand.
      if (Status valid = emulate::ValidateEngineConfig(config_); !valid.ok()) {
        config_ = before;
        LimitFinding& last = outcome_.findings.back();
        last.determined = false;
        last.finding += " (not applied: it makes an invalid preset, " + valid.error().message + ")";
      }
    }
    return std::move(outcome_);
  }

 private:
  bool Skip(LimitFinding& finding) {
    if (!e_.over_budget()) return false;
    finding.finding = "not measured: the budget ran out";
    return true;
  }
  void Keep(LimitFinding finding) { outcome_.findings.push_back(std::move(finding)); }
  void Failed(const CalibrationLoad& load, std::size_t sent, const std::string& what) {
    if (outcome_.first_error.empty()) outcome_.first_error = load.first_error;
    outcome_.notes.push_back(FailureNote(load, sent, what));
  }

  void MaxNumSeqs() {
    LimitFinding f{"max_num_seqs", false, "", "[requests sent at once, answered, running together]", {}};
    std::uint32_t all_ran = 0;
    std::string stopped_by;  // why the bursts stopped short of a finding
    for (std::uint32_t n = std::min<std::uint32_t>(8, e_.max_burst); n > all_ran && !Skip(f);
         n = std::min(2 * n, e_.max_burst)) {
      log_(fmt::format("max_num_seqs: {} requests at once", n));
      const CalibrationLoad load = RunClosedPoint(e_.target, kBurstPrompt, kBurstOutput, n, n, ++seed_, stop_);
      if (load.failed > 0 || load.ok.empty()) {
        Failed(load, n, fmt::format("max_num_seqs, {} at once", n));
        stopped_by = fmt::format("{} of {} sent at once were not answered", n - load.ok.size(), n);
        break;
      }
      const std::optional<std::size_t> ran = RunningTogether(load.ok, kBurstOutput);
      if (!ran) {
        stopped_by = kAnswersEndedEarly;
        break;
      }
      const std::size_t together = std::max<std::size_t>(1, *ran);
      f.points.push_back({double(n), double(load.ok.size()), double(together)});
      if (together < load.ok.size()) {
        config_.max_num_seqs = static_cast<std::int64_t>(together);
        config_.max_batched_tokens = std::max(config_.max_batched_tokens, config_.max_num_seqs);
        f.determined = true;
        seqs_measured_ = true;
        f.finding = fmt::format("{} sequences at once: of {} sent together, {} started before the first answer ended{}",
                                together, n, together,
                                all_ran > 0 ? fmt::format(" (all {} did when {} were sent)", all_ran, all_ran) : "");
        break;
      }
      all_ran = n;
    }
    if (!f.determined && all_ran > 0) {
      config_.max_num_seqs = std::max<std::int64_t>(config_.max_num_seqs, all_ran);
      config_.max_batched_tokens = std::max(config_.max_batched_tokens, config_.max_num_seqs);
      f.finding = fmt::format("at least {}: all {} sent at once ran together; the preset has {}{}", all_ran, all_ran,
                              config_.max_num_seqs, stopped_by.empty() ? "" : " (then " + stopped_by + ")");
    } else if (!f.determined && !stopped_by.empty()) {
      f.finding = "not determined: " + stopped_by;
    }
    Keep(std::move(f));
  }

  // How long a trace point's requests may run after its last send: what is left of the budget, at
  // least a minute. The chunked-prefill streams must outlast a long prefill, and with a multi-token
  // step and a growing KV their answers can take more than the load's default minute, which would
  // cancel them before the experiment has its gaps.
  Nanos DrainTimeout() const { return std::max<Nanos>(e_.budget_left(), std::chrono::minutes(1)); }

  // One request of the trace, alone; nullopt (and a note) when it failed.
  std::optional<measure::RequestRecord> One(workload::TraceRequest request, std::uint32_t block_tokens,
                                            const std::string& what) {
    const workload::Trace trace = TraceOf({std::move(request)}, block_tokens);
    CalibrationLoad load = RunTracePoint(e_.target, trace, ++seed_, stop_, DrainTimeout());
    if (load.ok.empty()) {
      Failed(load, 1, what);
      return std::nullopt;
    }
    return std::move(load.ok.front());
  }

  void PrefixCache() {
    LimitFinding f{"prefix_caching", false, "",
                   "[prompt blocks shared with an earlier prompt, prompt tokens counted, cached tokens counted (-1: not "
                   "said), TTFT ms]",
                   {}};
    const std::uint32_t prompt = kPrefixTextBlock * kPrefixBlocks;
    if (e_.context_tokens < prompt + kContextMargin) {
      f.finding = fmt::format("not measured: the context ({} tokens) is too short for {}-token probes", e_.context_tokens,
                              prompt);
      return Keep(std::move(f));
    }
    if (Skip(f)) return Keep(std::move(f));
    // Ids of our own, so no prompt of an earlier calibration is in the cache.
    const std::uint64_t nonce = Rng(seed_ ^ static_cast<std::uint64_t>(RealClock().Now().time_since_epoch().count())).Next();
    std::vector<std::uint64_t> first;
    for (std::uint32_t b = 0; b < kPrefixBlocks; ++b) first.push_back(nonce + b);
    log_("prefix cache: one prompt twice, then prompts sharing part of it");
    const std::optional<measure::RequestRecord> small = One(TraceRequestOf(0, kBurstPrompt, 1), 0, "prefix cache, short prompt");
    const std::optional<measure::RequestRecord> fresh = One(TraceRequestOf(0, prompt, 1, first), kPrefixTextBlock, "prefix cache, first prompt");
    const std::optional<measure::RequestRecord> again = One(TraceRequestOf(0, prompt, 1, first), kPrefixTextBlock, "prefix cache, the same prompt");
    if (!small || !fresh || !again) {
      f.finding = "not determined: a probe failed (" + outcome_.notes.back() + ")";
      return Keep(std::move(f));
    }
    const auto point = [&](double shared, const measure::RequestRecord& r) {
      f.points.push_back({shared, double(r.usage_prompt_tokens.value_or(0)),
                          r.usage_cached_tokens ? double(*r.usage_cached_tokens) : -1.0, TtftMs(r)});
    };
    point(0, *fresh);
    point(kPrefixBlocks, *again);
    // The partly shared prompts' cached counts above 0: their common divisor is the block.
    std::vector<std::uint64_t> partial_counts;
    for (std::uint32_t shared : kSharedBlocks) {
      if (e_.over_budget()) break;
      std::vector<std::uint64_t> blocks(first.begin(), first.begin() + shared);
      for (std::uint32_t b = shared; b < kPrefixBlocks; ++b) blocks.push_back(nonce + 1000 * (shared + 1) + b);
      const std::optional<measure::RequestRecord> r =
          One(TraceRequestOf(0, prompt, 1, std::move(blocks)), kPrefixTextBlock, "prefix cache, partly shared prompt");
      if (!r) continue;
      point(shared, *r);
      if (r->usage_cached_tokens && *r->usage_cached_tokens > 0) partial_counts.push_back(*r->usage_cached_tokens);
    }
    const double counted = double(again->usage_prompt_tokens.value_or(prompt));
    const double t_small = TtftMs(*small), t_fresh = TtftMs(*fresh), t_again = TtftMs(*again);
    const std::string timing = fmt::format("TTFT {:.1f} ms the first time, {:.1f} ms repeated ({:.1f} ms for {} tokens)",
                                           t_fresh, t_again, t_small, kBurstPrompt);
    if (again->usage_cached_tokens) {
      // The server counts what it found cached: its counts decide, not the timing.
      const std::uint64_t repeated = *again->usage_cached_tokens;
      if (double(repeated) < 0.5 * counted) {
        config_.kv.prefix_caching = emulate::PrefixCaching::kNone;
        f.determined = true;
        f.finding = fmt::format("none: the repeat counted {} of {:.0f} tokens cached; {}", repeated, counted, timing);
        return Keep(std::move(f));
      }
      std::vector<std::uint64_t> counts = partial_counts;
      counts.push_back(repeated);
      const std::uint64_t block = PrefixBlockOfCounts(counts);
      const std::uint64_t smallest = partial_counts.empty() ? 0 : *std::min_element(partial_counts.begin(), partial_counts.end());
      f.determined = true;
      if (!partial_counts.empty() && block < kSmallestBlock) {
        config_.kv.prefix_caching = emulate::PrefixCaching::kRadix;
        f.finding = fmt::format("cached token by token (the {} cached counts share no power-of-two block; repeated: {} of "
                                "{:.0f}): radix; {}",
                                partial_counts.size() + 1, repeated, counted, timing);
      } else if (partial_counts.size() >= 2 && block <= kLargestPrefixBlock && block <= smallest) {
        config_.kv.prefix_caching = emulate::PrefixCaching::kHashedBlocks;
        // The pool keeps its size in tokens until step 4 measures it.
        const std::int64_t pool_tokens = config_.kv.num_blocks * config_.kv.block_tokens;
        config_.kv.block_tokens = static_cast<std::int64_t>(block);
        config_.kv.num_blocks = std::max<std::int64_t>(1, pool_tokens / config_.kv.block_tokens);
        f.finding = fmt::format("cached in blocks of {} tokens (the largest power of two dividing the {} cached counts; "
                                "repeated: {} of {:.0f}); {}",
                                block, partial_counts.size() + 1, repeated, counted, timing);
      } else {
        if (config_.kv.prefix_caching == emulate::PrefixCaching::kNone) {
          config_.kv.prefix_caching = emulate::PrefixCaching::kHashedBlocks;
        }
        f.finding = fmt::format("cached (repeated: {} of {:.0f}), but {} partly shared prompt(s) found cached do not give "
                                "its block size: the base preset's ({} tokens, {}); {}",
                                repeated, counted, partial_counts.size(), config_.kv.block_tokens,
                                emulate::PrefixCachingName(config_.kv.prefix_caching), timing);
      }
    } else if (t_again <= kCachedTtftShare * t_fresh) {
      if (config_.kv.prefix_caching == emulate::PrefixCaching::kNone) {
        config_.kv.prefix_caching = emulate::PrefixCaching::kHashedBlocks;
      }
      f.determined = true;
      f.finding = fmt::format("cached ({}); the server does not count cached tokens, so the block size is the base "
                              "preset's ({} tokens, {})",
                              timing, config_.kv.block_tokens, emulate::PrefixCachingName(config_.kv.prefix_caching));
    } else if (t_fresh - t_small < 0.5 * t_small) {
      f.finding = fmt::format("not determined: a {}-token prefill is too cheap to see ({})", prompt, timing);
    } else {
      config_.kv.prefix_caching = emulate::PrefixCaching::kNone;
      f.determined = true;
      f.finding = "none: " + timing;
    }
    Keep(std::move(f));
  }

  void ChunkedPrefill() {
    LimitFinding f{"chunked_prefill", false, "",
                   "[long prompt tokens counted, its TTFT alone ms, its TTFT among streams ms, a stream's usual gap ms, "
                   "its longest gap ms, steps with prefill]",
                   {}};
    const std::uint64_t room = e_.context_tokens > kContextMargin ? e_.context_tokens - kContextMargin : 0;
    long_prompt_ = static_cast<std::uint32_t>(std::min<std::uint64_t>(kLongestProbe, room));
    if (long_prompt_ < 512) {
      f.finding = fmt::format("not measured: the context ({} tokens) is too short", e_.context_tokens);
      return Keep(std::move(f));
    }
    if (Skip(f)) return Keep(std::move(f));
    log_(fmt::format("chunked prefill: a {}-token prompt arrives while two streams decode", long_prompt_));
    const std::optional<measure::RequestRecord> stream = One(TraceRequestOf(0, kBurstPrompt, 32), 0, "chunked prefill, one stream");
    const std::optional<measure::RequestRecord> alone = One(TraceRequestOf(0, long_prompt_, 1), 0, "chunked prefill, the long prompt alone");
    if (!stream || !alone) {
      f.finding = "not determined: a probe failed (" + outcome_.notes.back() + ")";
      return Keep(std::move(f));
    }
    long_ttft_ms_ = TtftMs(*alone);
    const double gap = std::max(0.01, UsualGap(*stream));
    const double short_ttft = TtftMs(*stream);
    const double arrive_ms = short_ttft + 10 * gap;
    const auto output = static_cast<std::uint32_t>(std::min<double>(
        std::min<double>(4000, double(e_.context_tokens) - kBurstPrompt - 64), std::ceil((arrive_ms + 3 * long_ttft_ms_) / gap) + 16));
    // The streams last their answer; a slow server's may not fit what is left of the budget.
    if (arrive_ms + 3 * long_ttft_ms_ + output * gap > ToMillis(e_.budget_left())) {
      f.finding = fmt::format("not measured: two streams outlasting a {:.0f} ms prefill do not fit the budget left",
                              long_ttft_ms_);
      return Keep(std::move(f));
    }
    const workload::Trace trace = TraceOf({TraceRequestOf(0, kBurstPrompt, output), TraceRequestOf(0, kBurstPrompt, output),
                                           TraceRequestOf(arrive_ms / 1000, long_prompt_, 1)});
    const CalibrationLoad load = RunTracePoint(e_.target, trace, ++seed_, stop_, DrainTimeout());
    const auto long_one = std::find_if(load.ok.begin(), load.ok.end(),
                                       [&](const auto& r) { return r.prompt_tokens_planned == long_prompt_; });
    const auto streaming = std::find_if(load.ok.begin(), load.ok.end(),
                                        [&](const auto& r) { return r.prompt_tokens_planned != long_prompt_; });
    if (long_one == load.ok.end() || streaming == load.ok.end()) {
      Failed(load, 3, "chunked prefill");
      // Requests the drain timeout cut once the budget was spent did not fail: they ran out of time.
      f.finding = e_.over_budget() ? fmt::format("not measured: the budget ran out during the experiment ({} of 3 "
                                                 "requests answered; the streams lasted longer than estimated)",
                                                 load.ok.size())
                                   : "not determined: a request of the experiment failed (" + outcome_.notes.back() + ")";
      return Keep(std::move(f));
    }
    // The stream's gaps that overlap the long prompt's wait for its first token.
    const MonoTime from = *long_one->send_start, to = *long_one->first_token;
    std::vector<double> during;
    const std::vector<measure::TokenEvent>& events = streaming->token_events;
    for (std::size_t i = 1; i < events.size(); ++i) {
      if (events[i].at > from && events[i - 1].at < to) during.push_back(ToMillis(events[i].at - events[i - 1].at));
    }
    const double usual = UsualGap(*streaming);
    if (events.empty() || events.back().at <= to || during.empty()) {
      f.finding = "not determined: the streams ended before the long prompt's first token";
      return Keep(std::move(f));
    }
    const double longest = *std::max_element(during.begin(), during.end());
    std::vector<double> prefill_steps;
    for (double g : during) {
      if (g > 2 * usual) prefill_steps.push_back(g);
    }
    const double counted = double(long_one->usage_prompt_tokens.value_or(long_prompt_));
    f.points.push_back({counted, long_ttft_ms_, TtftMs(*long_one), usual, longest, double(prefill_steps.size())});
    // The prefill as it happened here: a first long prompt alone can be slower than the same
    // length later (llama.cpp sizes its compute buffers on first use).
    const double prefill_ms = std::max(0.0, TtftMs(*long_one) - short_ttft);
    long_ttft_ms_ = std::min(long_ttft_ms_, TtftMs(*long_one));
    if (longest >= kStalledShare * prefill_ms || prefill_steps.size() == 1) {
      const std::string seen = fmt::format("a {:.0f}-token prompt stalled the running streams for {:.1f} ms (their longest "
                                           "gap) against its {:.1f} ms prefill (its TTFT among them less a short "
                                           "prompt's): one step took it all",
                                           counted, longest, prefill_ms);
      if (e_.context_known && double(long_prompt_) + kContextMargin >= 0.75 * double(e_.context_tokens)) {
        config_.chunked_prefill = false;
        config_.max_batched_tokens = std::max(config_.max_batched_tokens, config_.max_model_len);
        f.determined = true;
        chunk_known_ = true;
        f.finding = "no chunking: " + seen + ", and no prompt the context allows is much longer";
      } else {
        config_.max_batched_tokens = std::max<std::int64_t>(config_.max_batched_tokens, long_prompt_);
        f.finding = "not determined: " + seen + fmt::format("; the step budget is at least {} tokens", long_prompt_);
      }
      return Keep(std::move(f));
    }
    if (prefill_steps.empty()) {
      f.finding = fmt::format("not determined: no step of the streams' was slowed by the {:.0f}-token prefill ({:.1f} ms)",
                              counted, prefill_ms);
      return Keep(std::move(f));
    }
    // The last prefill step carries the remainder: its share of a full step's extra time.
    double steps = double(prefill_steps.size());
    if (prefill_steps.size() >= 2) {
      std::vector<double> full(prefill_steps.begin(), prefill_steps.end() - 1);
      const double full_extra = MedianOf(full) - usual;
      if (full_extra > 0) steps = steps - 1 + std::clamp((prefill_steps.back() - usual) / full_extra, 0.0, 1.0);
    }
    const auto chunk = static_cast<std::int64_t>(std::llround(counted / std::max(1.0, steps)));
    config_.chunked_prefill = true;
    config_.prefill_chunk_tokens = 0;
    config_.max_batched_tokens = std::max(config_.max_num_seqs, chunk + 2);  // the two streams' decodes share it
    f.determined = true;
    chunk_known_ = true;
    f.finding = fmt::format("chunked: the {:.0f}-token prompt was prefilled over {} steps (the streams' longest gap "
                            "{:.1f} ms, usual {:.2f} ms): about {} tokens a step",
                            counted, prefill_steps.size(), longest, usual, chunk + 2);
    Keep(std::move(f));
  }

  // One step's time (the preset's costs, fitted by then) with `streams` decoding at `context`.
  double StepMs(std::uint32_t streams, double context) const {
    const auto kv_tokens = static_cast<std::int64_t>(std::llround(streams * context));
    return emulate::StepMillis(config_.cost, emulate::StepWork{.decode_seqs = streams, .kv_tokens = kv_tokens});
  }

  void KvCapacity() {
    LimitFinding f{"kv_capacity", false, "",
                   "[prompt tokens, answer tokens, requests sent at once, answered, running together, tokens of the "
                   "running]",
                   {}};
    if (long_prompt_ < 512 || long_ttft_ms_ <= 0) {
      f.finding = "not measured: needs the chunked-prefill experiment's long prompt";
      return Keep(std::move(f));
    }
    std::uint32_t prompt = std::min<std::uint32_t>(long_prompt_, static_cast<std::uint32_t>(e_.context_tokens / 2));
    std::optional<double> capacity;
    double lower_bound = 0;
    for (int pass = 0; pass < 2 && !Skip(f); ++pass) {
      // The first answer must outlast every admitted prompt's prefill, one step per chunk each
      // (with a running stream decoding in every step), or a request still prefilling would look
      // as if it waited for room.
      const double per_prompt_ms = long_ttft_ms_ * double(prompt) / double(long_prompt_);
      // An unknown step budget is taken small, so the answers outlast any chunking.
      const std::int64_t step_tokens = chunk_known_ ? config_.max_batched_tokens : std::min<std::int64_t>(512, config_.max_batched_tokens);
      const std::int64_t chunks = (std::int64_t(prompt) + step_tokens - 1) / step_tokens;
      const auto answer = [&](std::uint32_t n) { return static_cast<std::uint32_t>(2 * n * chunks + 16); };
      const auto fits = [&](std::uint32_t n) {
        const double ms = n * per_prompt_ms + answer(n) * StepMs(n, prompt + answer(n) / 2.0);
        return std::uint64_t(prompt) + answer(n) + 64 <= e_.context_tokens && ms <= 0.5 * ToMillis(e_.budget_left());
      };
      auto n = static_cast<std::uint32_t>(std::min<std::int64_t>(config_.max_num_seqs, kMaxKvBurst));
      if (n < 2) {
        if (pass == 0) f.finding = fmt::format("not measured: {} sequence(s) at once cannot share the pool", n);
        break;
      }
      while (n >= 2 && !fits(n)) --n;
      if (n < 2) {
        if (pass == 0) f.finding = fmt::format("not measured: the budget and context left afford fewer than 2 prompts of {} tokens", prompt);
        break;
      }
      // Without a measured max_num_seqs, as many as the base preset's may be what stops them.
      const bool seqs_bound = !seqs_measured_ && n == config_.max_num_seqs;
      log_(fmt::format("KV capacity: {} prompts of {} tokens at once", n, prompt));
      const CalibrationLoad load = RunClosedPoint(e_.target, prompt, answer(n), n, n, ++seed_, stop_);
      if (load.failed > 0 || load.ok.empty()) Failed(load, n, "KV capacity");
      if (load.ok.empty()) break;
      const std::optional<std::size_t> ran = RunningTogether(load.ok, answer(n));
      if (!ran) {
        f.finding = std::string("not determined: ") + kAnswersEndedEarly;
        break;
      }
      const std::size_t together = *ran;
      const double tokens = CountedPrompt(load.ok, prompt).tokens + answer(n) / 2.0;
      f.points.push_back({double(prompt), double(answer(n)), double(n), double(load.ok.size()), double(together),
                          double(together) * tokens});
      if (together == load.ok.size()) {
        lower_bound = std::max(lower_bound, double(together) * tokens);
        break;
      }
      if (seqs_bound) {
        f.finding = fmt::format("not determined: {} of {} ran together, but the engine's max_num_seqs was not measured "
                                "and may be what held the rest",
                                together, n);
        break;
      }
      capacity = (double(together) + 0.5) * tokens;
      if (together >= 6) break;
      // Fewer than six whole prompts: again with prompts an eighth of that, for a finer estimate.
      const auto finer = static_cast<std::uint32_t>(*capacity / 8.5);
      if (finer < 256 || config_.max_num_seqs < 9) break;
      prompt = finer;
    }
    const std::int64_t block = std::max<std::int64_t>(1, config_.kv.block_tokens);
    if (capacity && lower_bound > *capacity) {
      // The finer pass held more than the first one's estimate: only the bound stands.
      capacity.reset();
    }
    if (capacity) {
      config_.kv.num_blocks = static_cast<std::int64_t>(std::ceil(*capacity / double(block)));
      f.determined = true;
      f.finding = fmt::format("about {:.0f} tokens ({} blocks of {}): fewer prompts ran together than were sent", *capacity,
                              config_.kv.num_blocks, block);
      if (const std::int64_t smallest = SmallestValidPoolBlocks(config_); config_.kv.num_blocks < smallest) {
        config_.kv.num_blocks = smallest;
        f.finding += fmt::format("; raised to {} blocks, the least that holds one max_model_len request", smallest);
      }
    } else if (lower_bound > 0) {
      const auto at_least = static_cast<std::int64_t>(std::ceil(lower_bound / double(block)));
      config_.kv.num_blocks = std::max(config_.kv.num_blocks, at_least);
      f.finding = fmt::format("at least {:.0f} tokens: every prompt sent ran together; the preset has {} blocks of {}",
                              lower_bound, config_.kv.num_blocks, block);
    } else if (f.finding.empty()) {
      f.finding = "not determined: no request was answered";
    }
    Keep(std::move(f));
  }

  // The median gap between a request's token events.
  static double UsualGap(const measure::RequestRecord& r) {
    std::vector<double> gaps;
    for (std::size_t i = 1; i < r.token_events.size(); ++i) gaps.push_back(ToMillis(r.token_events[i].at - r.token_events[i - 1].at));
    return MedianOf(gaps);
  }

  const LimitsExperiment& e_;
  emulate::EngineConfig& config_;
  const std::atomic<bool>& stop_;
  const std::function<void(const std::string&)>& log_;
  std::uint64_t seed_;
  LimitsOutcome outcome_;
  std::uint32_t long_prompt_ = 0;  // step 3's long prompt, reused by step 4
  double long_ttft_ms_ = 0;
  bool seqs_measured_ = false;  // step 1 determined max_num_seqs
  bool chunk_known_ = false;    // step 3 determined the step's token budget
};

}  // namespace

std::uint64_t PrefixBlockOfCounts(const std::vector<std::uint64_t>& counts) {
  std::uint64_t divisor = 0;
  for (std::uint64_t c : counts) divisor = std::gcd(divisor, c);
  if (divisor == 0 || divisor > kLargestPrefixBlock) return divisor;
  return std::uint64_t{1} << std::countr_zero(divisor);
}

std::int64_t SmallestValidPoolBlocks(const emulate::EngineConfig& config) {
  const std::int64_t block = std::max<std::int64_t>(1, config.kv.block_tokens);
  const std::int64_t per_request = (config.max_model_len + block - 1) / block;
  auto blocks = static_cast<std::int64_t>(std::ceil(double(per_request) / (1 - config.kv.watermark)));
  while (blocks - static_cast<std::int64_t>(std::ceil(config.kv.watermark * double(blocks))) < per_request) ++blocks;
  return blocks;
}

LimitsOutcome MeasureLimits(const LimitsExperiment& experiment, emulate::EngineConfig& config,
                            const std::atomic<bool>& stop, const std::function<void(const std::string&)>& log) {
  return Experiments(experiment, config, stop, log).Run();
}

}  // namespace bakeoff::run

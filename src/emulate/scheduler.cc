// emulate/scheduler.cc: the engine model over explicit time (contract in scheduler.h).
//
// A sequence needs the KV of `prompt + generated` tokens before it can produce its next token;
// `computed` counts those it has. pending = prompt + generated - computed is 1 for a decode
// (the last output token goes in, the next comes out) and more for a prefill: a fresh prompt, a
// chunk of one, or a recompute after preemption. The same rule serves every policy.
#include "emulate/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"
#include "emulate/tokenizer.h"

namespace bakeoff::emulate {

// Laid out for a step's walk over its batch: the scalars every step reads, then `kv` (which a
// decode's KV growth reads), then the output seed and token list a finished step appends to:
// three cache lines from the start of an aligned object. A fleet of replicas holds far more
// sequences than the processor's caches, so the walks wait on memory unless they prefetch each
// sequence a few places ahead (PrefetchSequence).
struct alignas(64) Scheduler::Sequence {
  SequenceId id = 0;
  std::int64_t prompt_len = 0;
  std::int64_t max_tokens = 0;
  std::int64_t generated = 0;
  std::int64_t computed = 0;     // leading tokens whose KV exists
  std::int64_t step_tokens = 0;  // tokens computed in the step in flight (0: not in it)
  std::int32_t slot = -1;        // slots_keep_kv: the slot it runs in while running
  bool running = false;
  bool finished = false;
  bool aborted = false;
  bool ignore_eos = false;
  KvSequence kv;
  std::uint64_t output_seed = 0;
  std::vector<TokenId> tokens;  // prompt, then the generated tokens' ids
  std::int64_t min_tokens = 0;
  bool constrained = false;
  std::uint32_t lora = 0;
  std::int64_t first_cached = -1;  // cached prompt tokens at the first admission; -1 before
  MonoTime admitted;               // start of the step that first admitted it

  std::int64_t Pending() const { return prompt_len + generated - computed; }
  bool Decoding() const { return generated >= 1 && Pending() == 1; }
};

namespace {

// Starts loading what a step reads of one sequence (its first three cache lines).
void PrefetchSequence(const void* seq) {
  const char* base = static_cast<const char*>(seq);
  __builtin_prefetch(base);
  __builtin_prefetch(base + 64);
  __builtin_prefetch(base + 128);
}

// How many sequences ahead of the one in hand a step's walk prefetches.
constexpr std::size_t kPrefetchAhead = 8;

}  // namespace

struct Scheduler::Impl {
  explicit Impl(const EngineConfig& config)
      : kv(config.kv), rng(config.seed), noise_rng(config.seed ^ 0x6e6f697365ULL) {
    if (config.slots_keep_kv) slots.resize(static_cast<std::size_t>(config.max_num_seqs));
  }

  struct Slot {
    std::int64_t kept_tokens = 0;  // KV kept since its last sequence left (0 while busy)
    std::uint64_t released = 0;    // when it was last left, in releases; 0 = never used
    bool busy = false;
  };
  std::vector<Slot> slots;  // slots_keep_kv only
  std::int64_t idle_kept_tokens = 0;
  std::uint64_t slot_releases = 0;

  // slots_keep_kv (engine_config.h): a running sequence takes the idle slot released longest ago
  // (never released first), and its KV replaces what that slot kept.
  void TakeSlot(Sequence& seq) {
    Slot* chosen = nullptr;
    for (Slot& slot : slots) {
      if (!slot.busy && (chosen == nullptr || slot.released < chosen->released)) chosen = &slot;
    }
    BAKEOFF_CHECK(chosen != nullptr) << "no idle slot for a sequence admitted under max_num_seqs";
    idle_kept_tokens -= chosen->kept_tokens;
    chosen->kept_tokens = 0;
    chosen->busy = true;
    seq.slot = static_cast<std::int32_t>(chosen - slots.data());
  }
  // The sequence leaves its slot, which keeps `kept_tokens` of KV until it is taken again.
  void LeaveSlot(Sequence& seq, std::int64_t kept_tokens) {
    if (seq.slot < 0) return;
    Slot& slot = slots[static_cast<std::size_t>(seq.slot)];
    slot.busy = false;
    slot.kept_tokens = kept_tokens;
    slot.released = ++slot_releases;
    idle_kept_tokens += kept_tokens;
    seq.slot = -1;
  }

  KvCache kv;
  Rng rng;        // EOS draws
  Rng noise_rng;  // step-time noise draws
  std::unordered_map<SequenceId, std::unique_ptr<Sequence>> sequences;  // waiting and running
  std::deque<Sequence*> waiting;   // queue order (preempted sequences re-enter at the front)
  std::vector<std::uint32_t> resident_loras;  // LoRA adapters in their slots, least recently used first
  std::vector<Sequence*> running;  // admission order
  // kStaticBatch: members of the running batch that finished; they keep their KV and pad every
  // step until the batch ends.
  std::vector<std::unique_ptr<Sequence>> padding;
  std::vector<Sequence*> step;  // scheduled in the step in flight, in event order
  std::vector<std::unique_ptr<Sequence>> aborted_in_step;  // freed when the step finishes
  std::vector<TokenEvent> events;
  // Output token ids for output_seed 0 (what clients that send no seed get), computed once.
  std::vector<TokenId> seed0_output_ids;
  SequenceId next_id = 1;
  EngineCounters counters;
};

namespace {

// Log-normal factor with mean 1 and coefficient of variation `cv`.
double NoiseFactor(Rng& rng, double cv) {
  const double sigma2 = std::log1p(cv * cv);
  return std::exp(std::sqrt(sigma2) * rng.Normal() - sigma2 / 2.0);
}

std::int64_t ChunkLimit(const EngineConfig& config, std::int64_t budget) {
  if (!config.chunked_prefill) return budget;
  return config.prefill_chunk_tokens > 0 ? std::min(config.prefill_chunk_tokens, budget) : budget;
}

}  // namespace

SingleRequestTiming ExpectedSingleRequest(const EngineConfig& config, std::int64_t prompt_tokens,
                                          std::int64_t output_tokens) {
  BAKEOFF_CHECK(prompt_tokens >= 1 && output_tokens >= 1)
      << "prompt " << prompt_tokens << " output " << output_tokens;
  SingleRequestTiming timing;
  // Sum the same per-step durations the scheduler uses, so the rounding matches exactly.
  for (std::int64_t computed = 0; computed < prompt_tokens;) {
    const std::int64_t chunk =
        config.chunked_prefill
            ? std::min(prompt_tokens - computed, ChunkLimit(config, config.max_batched_tokens))
            : prompt_tokens;
    StepWork work{chunk, 0, computed + chunk};
    work.prefill_pairs = PrefillPairs(computed, chunk);
    computed += chunk;
    timing.ttft += StepTime(config.cost, work);
  }
  Nanos decode_total{0};
  for (std::int64_t k = 1; k < output_tokens; ++k) {
    decode_total += StepTime(config.cost, StepWork{0, 1, prompt_tokens + k});
  }
  timing.tpot = output_tokens > 1 ? decode_total / (output_tokens - 1) : Nanos{0};
  timing.e2e = timing.ttft + decode_total;
  return timing;
}

Scheduler::Scheduler(EngineConfig config) : config_(std::move(config)) {
  Status valid = ValidateEngineConfig(config_);
  BAKEOFF_CHECK(valid.ok()) << valid.error().message;
  impl_ = std::make_unique<Impl>(config_);
}

Scheduler::~Scheduler() = default;

bool Scheduler::HasWork() const { return !impl_->running.empty() || !impl_->waiting.empty(); }
std::size_t Scheduler::num_running() const { return impl_->running.size(); }
std::size_t Scheduler::num_waiting() const { return impl_->waiting.size(); }
std::int64_t Scheduler::CachedPrefixLength(std::span<const TokenId> prompt) const {
  return impl_->kv.MatchLength(prompt);
}

EngineCounters Scheduler::counters() const {
  EngineCounters counters = impl_->counters;
  counters.running = static_cast<std::int64_t>(impl_->running.size());
  counters.waiting = static_cast<std::int64_t>(impl_->waiting.size());
  counters.kv = impl_->kv.stats();
  return counters;
}

Result<SequenceId> Scheduler::Add(SequenceRequest request) {
  const auto prompt = static_cast<std::int64_t>(request.prompt.size());
  if (prompt < 1 || request.max_tokens < 1 || request.min_tokens < 0) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("invalid request: prompt_tokens {}, max_tokens {}, min_tokens {}",
                                 prompt, request.max_tokens, request.min_tokens));
  }
  if (prompt + request.max_tokens > config_.max_model_len) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("prompt_tokens {} + max_tokens {} exceeds max_model_len {}", prompt,
                                 request.max_tokens, config_.max_model_len));
  }
  auto seq = std::make_unique<Sequence>();
  seq->id = impl_->next_id++;
  seq->prompt_len = prompt;
  seq->max_tokens = request.max_tokens;
  seq->min_tokens = request.min_tokens;
  seq->ignore_eos = request.ignore_eos;
  seq->output_seed = request.output_seed;
  seq->constrained = request.constrained;
  seq->lora = request.lora;
  seq->tokens = std::move(request.prompt);
  seq->tokens.reserve(static_cast<std::size_t>(prompt + request.max_tokens));
  impl_->waiting.push_back(seq.get());
  const SequenceId id = seq->id;
  impl_->sequences.emplace(id, std::move(seq));
  return id;
}

void Scheduler::Abort(SequenceId id) {
  auto it = impl_->sequences.find(id);
  if (it == impl_->sequences.end()) return;
  Sequence* seq = it->second.get();
  if (seq->running) {
    impl_->running.erase(std::find(impl_->running.begin(), impl_->running.end(), seq));
    impl_->LeaveSlot(*seq, seq->computed);  // as llama.cpp: a cancelled request's cells stay
  } else {
    impl_->waiting.erase(std::find(impl_->waiting.begin(), impl_->waiting.end(), seq));
  }
  impl_->kv.Release(seq->kv);
  seq->aborted = true;
  if (seq->step_tokens > 0) impl_->aborted_in_step.push_back(std::move(it->second));
  impl_->sequences.erase(it);
}

std::optional<StepPlan> Scheduler::BeginStep(MonoTime now) {
  BAKEOFF_CHECK(!step_in_flight_) << "BeginStep with a step in flight";
  Impl& m = *impl_;
  ReleasePaddingIfBatchOver();
  if (!HasWork()) return std::nullopt;

  StepPlan plan;
  plan.start = now;
  std::int64_t budget = config_.max_batched_tokens;
  m.step.clear();

  // Puts `seq` in the step for `tokens` more tokens of KV (already allocated).
  auto schedule = [&](Sequence* seq, std::int64_t tokens) {
    seq->step_tokens = tokens;
    m.step.push_back(seq);
    budget -= tokens;
    if (seq->Decoding()) {
      plan.work.decode_seqs += 1;
      if (seq->constrained) plan.work.constrained_decodes += 1;
    } else {
      plan.work.prefill_tokens += tokens;
      plan.work.prefill_pairs += PrefillPairs(seq->computed, tokens);
      plan.prefill_seqs += 1;
      m.counters.prefill_tokens += static_cast<std::uint64_t>(tokens);
    }
    plan.work.kv_tokens += seq->computed + tokens;
  };

  // Takes `seq` out of the step again (it was preempted after being scheduled).
  auto unschedule = [&](Sequence* seq) {
    m.step.erase(std::find(m.step.begin(), m.step.end(), seq));
    budget += seq->step_tokens;
    if (seq->Decoding()) {
      plan.work.decode_seqs -= 1;
      if (seq->constrained) plan.work.constrained_decodes -= 1;
    } else {
      plan.work.prefill_tokens -= seq->step_tokens;
      plan.work.prefill_pairs -= PrefillPairs(seq->computed, seq->step_tokens);
      plan.prefill_seqs -= 1;
      m.counters.prefill_tokens -= static_cast<std::uint64_t>(seq->step_tokens);
    }
    plan.work.kv_tokens -= seq->computed + seq->step_tokens;
    seq->step_tokens = 0;
  };

  // Sends the last admitted running sequence back to the front of the queue, keeping what it
  // generated; its KV is released and recomputed on readmission.
  auto preempt_last = [&]() {
    Sequence* victim = m.running.back();
    m.running.pop_back();
    if (victim->step_tokens > 0) unschedule(victim);
    m.kv.Release(victim->kv);
    m.LeaveSlot(*victim, 0);
    victim->computed = 0;
    victim->running = false;
    m.waiting.push_front(victim);
    ++plan.preempted;
    ++m.counters.preemptions;
    return victim;
  };

  // Grows a running sequence's KV by `tokens`, preempting from the back until it fits; false
  // when `seq` itself was preempted.
  auto grow_running = [&](Sequence* seq, std::int64_t tokens) {
    while (!m.kv.Grow(seq->kv, seq->tokens, seq->computed + tokens, /*keep_watermark=*/false)) {
      if (preempt_last() == seq) return false;
    }
    return true;
  };

  // Pass 1: every running sequence that decodes, in admission order.
  auto decode_running = [&]() {
    for (std::size_t i = 0; i < m.running.size(); ++i) {
      if (i + kPrefetchAhead < m.running.size()) PrefetchSequence(m.running[i + kPrefetchAhead]);
      Sequence* seq = m.running[i];
      if (!seq->Decoding()) continue;
      if (grow_running(seq, 1)) schedule(seq, 1);
    }
  };

  // Pass 2: running sequences with an unfinished prefill continue it; at most `max_seqs`.
  auto continue_prefills = [&](std::int64_t max_seqs) {
    for (std::size_t i = 0; i < m.running.size() && budget > 0 && max_seqs > 0; ++i) {
      Sequence* seq = m.running[i];
      if (seq->Decoding() || seq->step_tokens > 0) continue;
      const std::int64_t chunk = std::min(seq->Pending(), ChunkLimit(config_, budget));
      if (grow_running(seq, chunk)) {
        schedule(seq, chunk);
        --max_seqs;
      }
    }
    return max_seqs;
  };

  // Pass 3: admit waiting requests in queue order; at most `max_seqs`.
  auto admit = [&](std::int64_t max_seqs, bool ignore_budget) {
    if (plan.preempted > 0) return;  // as vLLM: the victim would only come straight back
    const std::int64_t watermark_tokens =
        static_cast<std::int64_t>(std::ceil(config_.kv.watermark * config_.kv.num_blocks)) *
        config_.kv.block_tokens;
    // The LoRA adapters the running sequences use: at most max_loras at once (as vLLM).
    std::vector<std::uint32_t> running_loras;
    for (const Sequence* seq : m.running) {
      if (seq->lora != 0 && std::find(running_loras.begin(), running_loras.end(), seq->lora) == running_loras.end()) {
        running_loras.push_back(seq->lora);
      }
    }
    while (!m.waiting.empty() && max_seqs > 0 &&
           static_cast<std::int64_t>(m.running.size()) < config_.max_num_seqs &&
           (budget > 0 || ignore_budget)) {
      Sequence* seq = m.waiting.front();
      const bool new_adapter = seq->lora != 0 &&
                               std::find(running_loras.begin(), running_loras.end(), seq->lora) == running_loras.end();
      // In queue order: an adapter beyond max_loras waits until a running one has no sequence left.
      if (new_adapter && static_cast<std::int64_t>(running_loras.size()) >= config_.max_loras) break;
      const std::span<const TokenId> context(seq->tokens.data(),
                                             static_cast<std::size_t>(seq->prompt_len + seq->generated));
      // Cheap refusal before touching the cache's counters and LRU order: the chunk needs at
      // least this many free or evictable slots beyond the watermark. On an idle engine it always
      // passes (validation guarantees room for one max_model_len request), so nothing strands.
      const std::int64_t cached = m.kv.MatchLength(context);
      const std::int64_t need = static_cast<std::int64_t>(context.size()) - cached;
      std::int64_t chunk = need;
      if (!ignore_budget) {
        if (config_.chunked_prefill) {
          chunk = std::min(need, ChunkLimit(config_, budget));
        } else if (need > budget) {
          break;  // strict order: nothing overtakes a prompt that does not fit
        }
      }
      if (m.kv.AvailableTokens() - watermark_tokens < chunk) break;
      m.kv.Begin(seq->kv, context);
      seq->computed = seq->kv.tokens;
      chunk = std::min(chunk, seq->Pending());
      if (!m.kv.Grow(seq->kv, seq->tokens, seq->computed + chunk, /*keep_watermark=*/true)) {
        m.kv.Release(seq->kv);
        seq->computed = 0;
        break;
      }
      m.waiting.pop_front();
      if (new_adapter) running_loras.push_back(seq->lora);
      const auto queried = static_cast<std::uint64_t>(context.size());
      const auto hit = static_cast<std::uint64_t>(seq->kv.cached_tokens);
      if (seq->first_cached < 0) {
        seq->first_cached = seq->computed;
        seq->admitted = now;
        m.counters.prompt_tokens += static_cast<std::uint64_t>(seq->prompt_len);
        m.counters.prefix_queries_tokens += queried;
        m.counters.prefix_hit_tokens += hit;
      } else {
        m.counters.resumed_queries_tokens += queried;
        m.counters.resumed_hit_tokens += hit;
      }
      seq->running = true;
      if (config_.slots_keep_kv) m.TakeSlot(*seq);
      m.running.push_back(seq);
      schedule(seq, chunk);
      --max_seqs;
    }
  };

  constexpr std::int64_t kAny = INT64_MAX;
  switch (config_.policy) {
    case SchedulingPolicy::kFcfs:
      decode_running();
      admit(continue_prefills(kAny), false);
      break;
    case SchedulingPolicy::kLongestPrefixMatch:
      decode_running();
      // Ranked only when this step can admit one: a saturated engine's queue is not re-ranked
      // every step for nothing (the ranking depends only on the cache, never on the old order).
      if (plan.preempted == 0 && m.waiting.size() > 1 && m.waiting.size() <= kLpmMaxQueue && budget > 0 &&
          static_cast<std::int64_t>(m.running.size()) < config_.max_num_seqs) {
        SortWaitingByPrefixMatch();
      }
      admit(continue_prefills(kAny), false);
      break;
    case SchedulingPolicy::kPrefillFirst:
      admit(continue_prefills(kAny), false);
      if (m.step.empty()) decode_running();
      break;
    case SchedulingPolicy::kDecodeFirst:
      decode_running();
      if (m.step.empty()) {
        admit(continue_prefills(kAny), false);
      } else {
        admit(continue_prefills(1), false);  // at most one prefill next to decodes
      }
      break;
    case SchedulingPolicy::kStaticBatch:
      if (m.running.empty()) {
        admit(kAny, /*ignore_budget=*/true);
      } else {
        decode_running();
        if (m.running.empty()) ReleasePaddingIfBatchOver();  // every member was preempted
        for (const auto& member : m.padding) {  // finished members still take their slot
          plan.work.decode_seqs += 1;
          plan.work.kv_tokens += member->computed;
        }
      }
      break;
  }

  if (m.step.empty()) return std::nullopt;  // e.g. the head of the queue waits for KV
  plan.work.lora_loads = LoadAdapters();
  plan.work.idle_kv_tokens = m.idle_kept_tokens;
  double millis = StepMillis(config_.cost, plan.work);
  if (config_.step_noise_cv > 0) millis *= NoiseFactor(m.noise_rng, config_.step_noise_cv);
  plan.end = now + Nanos(std::llround(millis * 1e6));
  step_in_flight_ = true;
  return plan;
}

std::int64_t Scheduler::LoadAdapters() {
  Impl& m = *impl_;
  std::int64_t loads = 0;
  for (const Sequence* seq : m.step) {
    if (seq->lora == 0) continue;
    auto resident = std::find(m.resident_loras.begin(), m.resident_loras.end(), seq->lora);
    if (resident != m.resident_loras.end()) {
      m.resident_loras.erase(resident);  // most recently used goes to the back
    } else {
      ++loads;
      if (static_cast<std::int64_t>(m.resident_loras.size()) >= config_.max_loras) {
        m.resident_loras.erase(m.resident_loras.begin());
      }
    }
    m.resident_loras.push_back(seq->lora);
  }
  m.counters.lora_loads += static_cast<std::uint64_t>(loads);
  return loads;
}

namespace {

// The id the tokenizer gives output word `index` when a later prompt quotes it: the word without
// the space that follows it.
TokenId OutputWordId(std::uint64_t seed, std::uint64_t index) {
  std::string_view piece = OutputPiece(seed, index);
  piece.remove_suffix(1);
  return PieceId(piece);
}

}  // namespace

TokenId Scheduler::OutputTokenId(std::uint64_t seed, std::int64_t index) {
  const auto i = static_cast<std::size_t>(index);
  if (seed != 0) return OutputWordId(seed, i);
  std::vector<TokenId>& ids = impl_->seed0_output_ids;
  while (ids.size() <= i) ids.push_back(OutputWordId(0, ids.size()));
  return ids[i];
}

void Scheduler::ReleasePaddingIfBatchOver() {
  Impl& m = *impl_;
  if (!m.running.empty() || m.padding.empty()) return;
  for (auto& member : m.padding) m.kv.Release(member->kv);
  m.padding.clear();
}

void Scheduler::SortWaitingByPrefixMatch() {
  Impl& m = *impl_;
  std::vector<std::pair<std::int64_t, Sequence*>> ranked;
  ranked.reserve(m.waiting.size());
  for (Sequence* seq : m.waiting) {
    const std::span<const TokenId> context(seq->tokens.data(),
                                           static_cast<std::size_t>(seq->prompt_len + seq->generated));
    ranked.emplace_back(m.kv.MatchLength(context), seq);
  }
  // Longest match first; ties by arrival (ids are given in arrival order).
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second->id < b.second->id;
  });
  for (std::size_t i = 0; i < ranked.size(); ++i) m.waiting[i] = ranked[i].second;
}

std::span<const TokenEvent> Scheduler::FinishStep() {
  BAKEOFF_CHECK(step_in_flight_) << "FinishStep without a step in flight";
  step_in_flight_ = false;
  Impl& m = *impl_;
  ++m.counters.steps;
  m.events.clear();
  m.events.reserve(m.step.size());
  const bool caching = config_.kv.prefix_caching != PrefixCaching::kNone;
  bool any_finished = false;
  for (std::size_t i = 0; i < m.step.size(); ++i) {
    if (i + kPrefetchAhead < m.step.size()) {
      PrefetchSequence(m.step[i + kPrefetchAhead]);
      __builtin_prefetch(m.events.data() + i + kPrefetchAhead, 1);  // within the reserved events
    }
    if (i + kPrefetchAhead / 2 < m.step.size()) {
      // Its generated token's id goes after its last one (the sequence is loaded by now).
      const Sequence* later = m.step[i + kPrefetchAhead / 2];
      __builtin_prefetch(later->tokens.data() + later->tokens.size(), 1);
    }
    Sequence* seq = m.step[i];
    if (seq->aborted) continue;
    seq->computed += seq->step_tokens;
    seq->step_tokens = 0;
    if (seq->Pending() > 0) continue;  // a chunk of a longer prefill
    TokenEvent& event = m.events.emplace_back();  // filled in place: no copy through the stack
    event.id = seq->id;
    event.index = seq->generated;
    if (event.index == 0) {
      event.cached_prompt_tokens = seq->first_cached;
      event.admitted = seq->admitted;
    }
    seq->tokens.push_back(caching ? OutputTokenId(seq->output_seed, seq->generated) : 0);
    seq->generated += 1;
    ++m.counters.generation_tokens;
    if (seq->generated >= seq->max_tokens) {
      event.finish = FinishReason::kLength;
    } else if (config_.eos_probability > 0.0 && !seq->ignore_eos &&
               seq->generated >= seq->min_tokens && m.rng.Uniform() < config_.eos_probability) {
      event.finish = FinishReason::kStop;
    }
    if (event.finish) {
      seq->running = false;
      seq->finished = true;
      m.LeaveSlot(*seq, seq->computed);
      any_finished = true;
    }
  }
  if (any_finished) {
    std::erase_if(m.running, [](const Sequence* seq) { return seq->finished; });
    for (const TokenEvent& event : m.events) {
      if (!event.finish) continue;
      auto it = m.sequences.find(event.id);
      if (config_.policy == SchedulingPolicy::kStaticBatch) {
        m.padding.push_back(std::move(it->second));
      } else {
        m.kv.Release(it->second->kv);
      }
      m.sequences.erase(it);
    }
  }
  ReleasePaddingIfBatchOver();
  m.aborted_in_step.clear();
  return m.events;
}

}  // namespace bakeoff::emulate

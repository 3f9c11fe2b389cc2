// measure/step_recorder.cc: StepRecorder (contract in step_recorder.h).
#include "measure/step_recorder.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace bakeoff::measure {
namespace {

double Ms(Nanos d) { return ToMillis(d); }

}  // namespace

bool MeetsThresholds(const RequestFigures& f, const std::vector<SloThreshold>& thresholds) {
  for (const SloThreshold& t : thresholds) {
    double value = 0;
    switch (t.metric) {
      case SloMetric::kTtft: value = f.ttft; break;
      case SloMetric::kTpot: value = f.tpot; break;
      case SloMetric::kItl: value = f.itl_max; break;
      case SloMetric::kE2e: value = f.e2e; break;
    }
    // A request without the figure (one output token has no TPOT) does not fail that term.
    if (!std::isnan(value) && value > t.threshold_ms) return false;
  }
  return true;
}

StepSketches::StepSketches(std::size_t exact_cap)
    : ttft_ms(exact_cap), ttft_answer_ms(exact_cap), itl_event_ms(exact_cap),
      itl_token_ms(exact_cap), tpot_ms(exact_cap), e2e_ms(exact_cap), response_ms(exact_cap),
      send_lag_ms(exact_cap), output_tokens(exact_cap), prompt_tokens(exact_cap),
      vllm_ttft_ms(exact_cap), vllm_tpot_ms(exact_cap), vllm_e2e_ms(exact_cap),
      guidellm_tpot_ms(exact_cap), loop_lag_ms(exact_cap) {}

StepRecorder::StepRecorder(std::vector<SloThreshold> slo, std::size_t exact_cap)
    : slo_(std::move(slo)), sketches_(exact_cap) {}

void StepRecorder::Add(const RequestRecord& r) {
  StepCounts& c = counts_;
  StepSketches& s = sketches_;
  if (r.phase == Phase::kWarmup) {
    ++c.warmup;
    return;
  }
  ++c.measured;
  ++c.outcomes[static_cast<std::size_t>(r.outcome)];
  if (r.stale_retry_at) ++c.stale_retries;
  if (r.send_start) {
    ++c.sent;
    s.send_lag_ms.Add(Ms(*r.send_start - r.intended_send));
    c.first_send = std::min(c.first_send.value_or(*r.send_start), *r.send_start);
  }
  if (r.finished) c.last_finish = std::max(c.last_finish.value_or(*r.finished), *r.finished);
  if (r.outcome != Outcome::kOk) {
    std::optional<ErrorExample>& first = first_errors_[static_cast<std::size_t>(r.outcome)];
    if (!first || r.id < first->id) first = ErrorExample{r.id, r.error};
    return;
  }
  BAKEOFF_CHECK(r.send_start.has_value()) << "ok request " << r.id << " was never sent";
  ++c.ok;
  RequestFigures f;
  const MonoTime start = *r.send_start;
  const std::uint64_t n = r.OutputTokens();
  if (r.OutputTokensEstimated()) {
    c.output_tokens_estimated = true;
  } else {
    ++c.output_counted_by_server;
  }
  if (r.max_tokens > 0 && n < r.max_tokens) ++c.ended_before_max_tokens;
  s.output_tokens.Add(static_cast<double>(n));
  c.output_tokens += n;
  if (r.usage_prompt_tokens) {
    c.prompt_tokens_from_server = true;
    s.prompt_tokens.Add(static_cast<double>(*r.usage_prompt_tokens));
    c.input_tokens += *r.usage_prompt_tokens;
    ++c.prompts_counted;
    c.prompt_tokens_planned += r.prompt_tokens_planned;
    c.prompt_tokens_counted += *r.usage_prompt_tokens;
  } else {
    c.input_tokens += r.prompt_tokens_planned;
  }
  if (r.finished) {
    f.e2e = Ms(*r.finished - start);
    s.e2e_ms.Add(f.e2e);
    s.response_ms.Add(Ms(*r.finished - r.intended_send));
  }
  if (r.first_token) {
    f.ttft = Ms(*r.first_token - start);
    s.ttft_ms.Add(f.ttft);
  }
  if (r.first_answer_token) s.ttft_answer_ms.Add(Ms(*r.first_answer_token - start));
  if (r.first_token && r.last_token && n > 1) {
    f.tpot = Ms(*r.last_token - *r.first_token) / static_cast<double>(n - 1);
    s.tpot_ms.Add(f.tpot);
  }
  for (std::size_t i = 1; i < r.token_events.size(); ++i) {
    const double gap = Ms(r.token_events[i].at - r.token_events[i - 1].at);
    s.itl_event_ms.Add(gap);
    const std::uint32_t tokens = std::max<std::uint32_t>(1, r.token_events[i].tokens);
    s.itl_token_ms.Add(gap / tokens, tokens);
    f.itl_max = std::max(f.itl_max, gap / tokens);
  }
  // vLLM: TTFT at the first chunk with choices (even an empty role chunk), E2E at the last
  // token-bearing chunk, TPOT = (E2E - TTFT) / (N - 1).
  const MonoTime vllm_first = r.first_chunk.value_or(r.first_token.value_or(start));
  if (r.first_chunk || r.first_token) s.vllm_ttft_ms.Add(Ms(vllm_first - start));
  if (r.last_token) {
    s.vllm_e2e_ms.Add(Ms(*r.last_token - start));
    if (n > 1) s.vllm_tpot_ms.Add(Ms(*r.last_token - vllm_first) / static_cast<double>(n - 1));
    // GuideLLM: TPOT = (t_last - t_start) / N, which includes TTFT.
    if (n > 0) s.guidellm_tpot_ms.Add(Ms(*r.last_token - start) / static_cast<double>(n));
  }
  if (MeetsThresholds(f, slo_)) ++c.good;
}

void StepRecorder::Merge(const StepRecorder& other) {
  BAKEOFF_CHECK(slo_ == other.slo_) << "recorders of one step share its SLO thresholds";
  StepCounts& c = counts_;
  const StepCounts& o = other.counts_;
  c.warmup += o.warmup;
  c.measured += o.measured;
  c.sent += o.sent;
  c.ok += o.ok;
  c.good += o.good;
  for (std::size_t i = 0; i < c.outcomes.size(); ++i) c.outcomes[i] += o.outcomes[i];
  c.input_tokens += o.input_tokens;
  c.stale_retries += o.stale_retries;
  c.prompts_counted += o.prompts_counted;
  c.prompt_tokens_planned += o.prompt_tokens_planned;
  c.prompt_tokens_counted += o.prompt_tokens_counted;
  c.output_tokens += o.output_tokens;
  c.output_tokens_estimated = c.output_tokens_estimated || o.output_tokens_estimated;
  c.output_counted_by_server += o.output_counted_by_server;
  c.ended_before_max_tokens += o.ended_before_max_tokens;
  c.prompt_tokens_from_server = c.prompt_tokens_from_server || o.prompt_tokens_from_server;
  if (o.first_send) c.first_send = std::min(c.first_send.value_or(*o.first_send), *o.first_send);
  if (o.last_finish) c.last_finish = std::max(c.last_finish.value_or(*o.last_finish), *o.last_finish);

  StepSketches& s = sketches_;
  const StepSketches& t = other.sketches_;
  s.ttft_ms.Merge(t.ttft_ms);
  s.ttft_answer_ms.Merge(t.ttft_answer_ms);
  s.itl_event_ms.Merge(t.itl_event_ms);
  s.itl_token_ms.Merge(t.itl_token_ms);
  s.tpot_ms.Merge(t.tpot_ms);
  s.e2e_ms.Merge(t.e2e_ms);
  s.response_ms.Merge(t.response_ms);
  s.send_lag_ms.Merge(t.send_lag_ms);
  s.output_tokens.Merge(t.output_tokens);
  s.prompt_tokens.Merge(t.prompt_tokens);
  s.vllm_ttft_ms.Merge(t.vllm_ttft_ms);
  s.vllm_tpot_ms.Merge(t.vllm_tpot_ms);
  s.vllm_e2e_ms.Merge(t.vllm_e2e_ms);
  s.guidellm_tpot_ms.Merge(t.guidellm_tpot_ms);
  s.loop_lag_ms.Merge(t.loop_lag_ms);

  for (std::size_t i = 0; i < first_errors_.size(); ++i) {
    const std::optional<ErrorExample>& theirs = other.first_errors_[i];
    if (theirs && (!first_errors_[i] || theirs->id < first_errors_[i]->id)) first_errors_[i] = theirs;
  }
}

std::vector<std::string> StepRecorder::ErrorExamples() const {
  std::vector<const ErrorExample*> firsts;
  for (const auto& e : first_errors_) {
    if (e) firsts.push_back(&*e);
  }
  std::sort(firsts.begin(), firsts.end(),
            [](const ErrorExample* a, const ErrorExample* b) { return a->id < b->id; });
  std::vector<std::string> examples;
  for (std::size_t i = 0; i < firsts.size() && i < kMaxErrorExamples; ++i) {
    examples.push_back(firsts[i]->message);
  }
  return examples;
}

}  // namespace bakeoff::measure

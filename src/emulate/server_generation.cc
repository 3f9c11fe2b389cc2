// emulate/server_generation.cc: the generation a connection of the emulated server carries: its
// choices' output (emulate/output_text.h), its start in the engine model or in instant mode, the
// tokens each engine step hands it, instant mode's pumping, the stream's end, keep-alive comments,
// and its end when the server aborts everything (contract in server.h; declarations in
// server_impl.h; the faults that strike a generation in server_faults.cc).
//
// A stream is one chunked HTTP/1.1 body whose chunks each hold every SSE event (WHATWG HTML
// "Server-sent events") produced for the connection since its last write: one engine step's
// tokens in modelled mode, up to kInstantBatchBytes of events in instant mode.
#include "emulate/server_impl.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace bakeoff::emulate {

namespace {

namespace beast = boost::beast;

using server_internal::Unavailable;
using server_internal::UnixSeconds;

// Instant mode renders at most this many event bytes before handing them to the socket.
constexpr std::size_t kInstantBatchBytes = 64 * 1024;

constexpr std::string_view kKeepAliveComment = ": keep-alive\n\n";

}  // namespace

void Connection::OnToken(const TokenEvent& event, MonoTime now) {
  if (!responding() || !renderer_ || !generation_open_) return;
  RequestMetrics& metrics = server_.metrics();
  if (event.index == 0) {
    cached_tokens_ = event.cached_prompt_tokens;
    metrics.ttft.Observe(ToSeconds(now - arrival_));
    metrics.queue_time.Observe(ToSeconds(std::max(Nanos{0}, event.admitted - arrival_)));
  } else {
    metrics.inter_token.Observe(ToSeconds(now - last_token_at_));
  }
  last_token_at_ = now;
  emitted_ = event.index + 1;
  if (event.finish) {
    sequence_ = 0;  // the scheduler has already freed it
    metrics.e2e.Observe(ToSeconds(now - arrival_));
  }
  if (!renderer_->spec().stream) {
    if (event.finish) {
      SendBody(200, "application/json",
               renderer_->RenderFullBody(emitted_, *event.finish, CachedTokens()));
    }
    return;
  }
  std::string& out = Out();
  if (event.index == 0) renderer_->AppendRoleEvent(out);
  const bool error_now = stream_error_after_ && emitted_ >= *stream_error_after_ && !event.finish;
  const bool stall_now = stall_after_ && emitted_ == *stall_after_ && !event.finish;
  renderer_->AppendProgress(out, progress_, emitted_, event.finish,
                            server_.config().tokens_per_event, error_now || stall_now);
  if (event.finish) {
    EndStream();
  } else if (error_now) {
    FailStream();
  } else if (stall_now) {
    BeginStall();
  }
}

void Connection::AbortForShutdown() {
  if (!responding() || !generation_open_) return;
  set_keep_alive(false);
  if (response_ending() || held_final_) return;  // already complete
  aborted_ = true;
  if (sequence_ != 0) {
    server_.AbortSequence(sequence_);
    sequence_ = 0;
  }
  if (instant_generating_) {
    instant_generating_ = false;
    server_.InstantEnded(false);
  }
  if (!renderer_ || !renderer_->spec().stream) {
    SendError(Unavailable("the request was aborted: the server is shutting down"));
    return;
  }
  EndStall();
  renderer_->AppendStreamError(data(), Unavailable("the request was aborted: the server is shutting down"));
  EndResponse();
  Flush();
}

std::vector<ChoiceText> Connection::ChoicesFor(const GenerationSpec& spec, bool& structured) {
  const EmulatorConfig& config = server_.config();
  std::uint64_t seed = spec.seed;
  if (config.faults.nondeterministic) seed ^= server_.NextOutputSalt() * 0x9e3779b97f4a7c15ULL;
  const std::string* answer = nullptr;
  if (!config.answers.empty() && spec.answer_key) {
    auto it = config.answers.find(*spec.answer_key);
    if (it != config.answers.end()) answer = &it->second;
  }
  structured = answer != nullptr || spec.json_text || spec.tool_call || spec.choice_text;
  std::vector<ChoiceText> choices;
  choices.reserve(static_cast<std::size_t>(spec.n));
  for (std::int64_t c = 0; c < spec.n; ++c) {
    if (spec.tool_call) {
      choices.push_back(ChoiceText::Fixed(spec.tool_call->arguments, FinishReason::kToolCalls));
      continue;
    }
    if (answer != nullptr) {
      choices.push_back(ChoiceText::Fixed(*answer, FinishReason::kStop));
    } else if (spec.json_text) {
      choices.push_back(ChoiceText::Fixed(*spec.json_text, FinishReason::kStop));
    } else if (spec.choice_text) {
      choices.push_back(ChoiceText::Fixed(*spec.choice_text, FinishReason::kStop));
    } else if (config.faults.cut_utf8) {
      choices.push_back(ChoiceText::CutUtf8());
    } else {
      choices.push_back(ChoiceText::Words(seed + static_cast<std::uint64_t>(c)));
    }
    if (!spec.stop.empty() && !config.faults.ignore_stop) {
      choices.back().ApplyStop(spec.stop, spec.max_tokens);
    }
  }
  return choices;
}

void Connection::BeginGeneration(std::variant<GenerationSpec, ApiError> parsed) {
  if (auto* error = std::get_if<ApiError>(&parsed)) return SendBadInput(*error);
  GenerationSpec& spec = std::get<GenerationSpec>(parsed);
  const FaultDraws faults = DrawFaults();
  if (faults.error) return FailRequest();
  const EmulatorConfig& config = server_.config();
  if (!config.instant && config.max_waiting > 0 &&
      static_cast<std::int64_t>(server_.NumWaiting()) >= config.max_waiting) {
    server_.CountRejected(&RequestMetrics::rejected_queue_full);
    // Well-behaved shedding: tell the client when to come back.
    return SendError(Unavailable("The request queue is full."), "Retry-After: 1\r\n");
  }
  ResetGeneration();
  const bool stream = spec.stream;
  const std::int64_t prompt_tokens = spec.prompt_tokens;
  bool structured = false;
  std::vector<ChoiceText> choices = ChoicesFor(spec, structured);
  if (config.instant) {
    std::vector<TokenId>().swap(spec.prompt);  // the renderer needs only the count
    renderer_.emplace(spec, server_.served(), server_.NextRequestNumber(), UnixSeconds(),
                      std::move(choices));
    progress_.assign(static_cast<std::size_t>(spec.n), ChoiceProgress{});
    if (stream) PlanStreamFaults(faults);
    if (!stream) {
      const std::int64_t tokens = renderer_->engine_tokens();
      server_.InstantStarted(prompt_tokens);
      server_.InstantTokens(tokens);
      server_.InstantEnded(true);
      return SendBody(200, "application/json",
                      renderer_->RenderFullBody(tokens, FinishReason::kLength));
    }
    OpenGeneration();
    server_.InstantStarted(prompt_tokens);
    instant_generating_ = true;
    AppendStreamHead();
    return PumpInstant();
  }
  SequenceRequest request;
  request.prompt = std::move(spec.prompt);  // the renderer needs only the count
  renderer_.emplace(spec, server_.served(), server_.NextRequestNumber(), UnixSeconds(),
                    std::move(choices));
  progress_.assign(static_cast<std::size_t>(spec.n), ChoiceProgress{});
  if (stream) PlanStreamFaults(faults);
  // One sequence for all choices, as long as the longest; an answer, a JSON text or a tool
  // call ends where it ends, never at an EOS draw.
  request.max_tokens = renderer_->engine_tokens();
  request.min_tokens = std::min(spec.min_tokens, request.max_tokens);
  request.ignore_eos = spec.ignore_eos || structured;
  request.output_seed = spec.seed;
  request.constrained = spec.json_text || spec.tool_call || spec.choice_text;
  request.lora = spec.lora;
  auto id = server_.AddSequence(std::move(request), this);
  if (!id.ok()) {
    ResetGeneration();
    return SendError(BadRequest(id.error().message));
  }
  sequence_ = *id;
  OpenGeneration();
  if (stream) {
    AppendStreamHead();  // headers now, as a real server does before the first token
    Flush();
    ArmKeepAlive();
    if (stream_error_after_ == 0) {
      FailStream();
    } else if (stall_after_ == 0) {
      BeginStall();
    }
  }
}

void Connection::ResetGeneration() {
  renderer_.reset();
  emitted_ = 0;
  progress_.clear();
  cached_tokens_ = 0;
  aborted_ = false;
  writes_at_tick_ = data_writes();
  stall_after_.reset();
  stream_error_after_.reset();
}

void Connection::OpenGeneration() {
  generation_open_ = true;
  server_.GenerationOpened();
}

void Connection::CloseGeneration(bool completed) {
  generation_open_ = false;
  server_.GenerationClosed(completed);
}

std::optional<std::int64_t> Connection::CachedTokens() const {
  if (!server_.ReportsCachedTokens()) return std::nullopt;
  return cached_tokens_;
}

void Connection::PumpInstant() {
  if (stalled_ || !instant_generating_) return;
  const std::int64_t total = renderer_->engine_tokens();
  std::int64_t limit = total;
  if (stall_after_) limit = std::min(limit, *stall_after_);
  if (stream_error_after_) limit = std::min(limit, *stream_error_after_);
  const std::int64_t per_event = server_.config().tokens_per_event;
  const std::int64_t before = emitted_;
  if (emitted_ == 0 && limit > 0) renderer_->AppendRoleEvent(data());
  while (emitted_ < limit && data().size() < kInstantBatchBytes) {
    emitted_ += std::min(per_event, limit - emitted_);
    renderer_->AppendProgress(data(), progress_, emitted_, std::nullopt, per_event,
                              /*flush=*/true);
  }
  server_.InstantTokens(emitted_ - before);
  if (emitted_ == total) {
    instant_generating_ = false;
    server_.InstantEnded(true);
    EndStream();
  } else if (stream_error_after_ && emitted_ == *stream_error_after_) {
    instant_generating_ = false;
    server_.InstantEnded(false);
    FailStream();
    return;
  } else if (stall_after_ && emitted_ == *stall_after_) {
    Flush();
    BeginStall();
    return;
  }
  Flush();
}

void Connection::EndStream() {
  const GenerationSpec& spec = renderer_->spec();
  std::string& out = Out();
  if (spec.include_usage || server_.config().usage_always) {
    renderer_->AppendUsageEvent(out, renderer_->CompletionTokens(emitted_), CachedTokens());
  }
  if (!server_.config().faults.no_done) renderer_->AppendStreamEnd(out);
  if (stalled_) {
    held_final_ = true;
  } else {
    EndResponse();
  }
}

void Connection::ArmKeepAlive() {
  const Nanos period = server_.config().keepalive_comments;
  if (period <= Nanos{0}) return;
  if (!keepalive_timer_) keepalive_timer_.emplace(executor());
  keepalive_timer_->expires_after(period);
  keepalive_timer_->async_wait([self = Self()](beast::error_code ec) {
    if (ec) return;
    self->OnKeepAliveTick();
  });
}

void Connection::OnKeepAliveTick() {
  if (!responding() || !generation_open_ || !renderer_ || response_ending() || held_final_) return;
  if (data_writes() == writes_at_tick_ && !stalled_) {
    data() += kKeepAliveComment;
    Flush();
  }
  writes_at_tick_ = data_writes();
  ArmKeepAlive();
}

void Connection::CancelTimers() {
  if (health_timer_) health_timer_->cancel();
  health_waiting_ = false;
  if (stall_timer_) stall_timer_->cancel();
  if (keepalive_timer_) keepalive_timer_->cancel();
  stalled_ = false;
  held_data_.clear();
  held_final_ = false;
}

}  // namespace bakeoff::emulate

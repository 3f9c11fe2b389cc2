// load/exchange.h
//
// Owns: one request/response exchange as measured: it receives the HTTP client's events for one
// request, frames the body (SSE, or NDJSON for Ollama's native routes), decodes it in its route's
// dialect (dialect/codec.h), stamps every instant into a
// measure::RequestRecord and decides the request's single Outcome when the transport ends. A
// stale-connection retry by the client is recorded (instant, reason), never an outcome.
// Does not own: when to send (load/worker.h) or the transport (net/http_client.h).
//
// Thread-safety: used on one worker's event-loop thread only.
#pragma once

#include <functional>
#include <string>

#include "dialect/codec.h"
#include "measure/record.h"
#include "net/http_client.h"
#include "net/ndjson.h"
#include "net/sse.h"

namespace bakeoff::load {

class Exchange final : public net::ResponseHandler {
 public:
  // Called once, from OnEnd, with the finished record. The Exchange may be reused afterwards.
  using DoneCallback = std::function<void(Exchange&)>;

  // `secret` (the bearer token, may be empty) is redacted from the error text of every record.
  // Every request of this Exchange goes to a route of `api`.
  Exchange(dialect::Api api, bool streaming, std::string secret, DoneCallback done);

  // Prepares for a new request whose record fields (id, intended_send, ...) are already set.
  // With `keep_answer_text`, the generated answer text is collected (for session replay, where
  // the next turn carries it in its history); otherwise text is only measured, never copied.
  void Begin(measure::RequestRecord record, bool keep_answer_text = false);
  measure::RequestRecord& record() { return record_; }
  const std::string& answer_text() const { return answer_text_; }

  void OnConnected(MonoTime at, bool reused) override;
  void OnRequestWritten(MonoTime at) override;
  // Not an outcome: the record keeps the instant and reason, and the retry's result decides.
  void OnStaleConnectionRetry(MonoTime at, std::string_view reason) override;
  void OnHeaders(MonoTime at, const net::ResponseHead& head) override;
  Status OnBody(MonoTime at, std::string_view bytes) override;
  void OnEnd(MonoTime at, net::TransportEnd end, std::string_view detail) override;

 private:
  Status OnSseEvent(MonoTime at, const net::SseEvent& event);
  // One payload (an SSE event's data or an NDJSON line) of a streamed answer.
  Status OnPayload(MonoTime at, std::string_view payload);
  void KeepUsage(const dialect::Usage& usage);
  void Finish(measure::Outcome outcome, std::string error);

  dialect::Api api_;
  bool streaming_;
  std::string secret_;
  DoneCallback done_;
  measure::RequestRecord record_;
  net::SseDecoder sse_;
  net::NdjsonDecoder ndjson_;
  std::vector<std::string> lines_;  // NDJSON lines of the current read
  dialect::StreamDecoder decoder_;
  std::string body_;                   // non-streaming body, or the start of an error body
  bool keep_answer_text_ = false;
  std::string answer_text_;
  bool success_status_ = false;
  bool saw_done_ = false;
  std::string stream_error_;
};

}  // namespace bakeoff::load

// qualify/api_call.cc: single API calls with a deadline and evidence, streamed answers read
// back, greedy request bodies.
#include "qualify/api_call.h"

#include <fmt/format.h>

#include "core/json_dump.h"
#include "core/json_text.h"
#include "dialect/codec.h"
#include "net/event_loop.h"
#include "net/sse.h"

namespace bakeoff::qualify {
namespace {

// Collects one response up to a cap; stops the loop at its end.
class CappedHandler final : public net::ResponseHandler {
 public:
  CappedHandler(net::EventLoop& loop, std::size_t cap, MonoTime start)
      : loop_(loop), cap_(cap), start_(start) {}
  void OnRequestWritten(MonoTime at) override { call.written = at - start_; }
  void OnHeaders(MonoTime, const net::ResponseHead& head) override {
    call.status = head.status;
    call.content_type = head.content_type;
  }
  Status OnBody(MonoTime, std::string_view bytes) override {
    const std::size_t room = cap_ - std::min(cap_, call.body.size());
    call.body.append(bytes.substr(0, room));
    if (bytes.size() > room) {
      call.body_cut = true;
      return MakeError(ErrorCode::kCancelled, "body cap reached");
    }
    return Ok{};
  }
  void OnEnd(MonoTime, net::TransportEnd end, std::string_view detail) override {
    call.end = end;
    if (end != net::TransportEnd::kComplete && !call.body_cut)
      call.error = fmt::format("{}: {}", net::TransportEndName(end), detail);
    loop_.Stop();
  }
  ApiCall call;

 private:
  net::EventLoop& loop_;
  std::size_t cap_;
  MonoTime start_;
};

}  // namespace

bool ApiCall::TimedOut() const {
  return status == 0 &&
         (end == net::TransportEnd::kTimeoutConnect ||
          end == net::TransportEnd::kTimeoutFirstByte || end == net::TransportEnd::kTimeoutIdle ||
          end == net::TransportEnd::kTimeoutTotal);
}

std::optional<std::string> ApiCall::ErrorMessage() const {
  return dialect::DecodeErrorMessage(body);
}

std::string ApiCall::Describe() const {
  if (!Answered()) return "no answer: " + error;
  std::string text = fmt::format("HTTP {}", status);
  if (!Success()) {
    const std::optional<std::string> message = ErrorMessage();
    text += message ? ": " + *message : fmt::format(" (no error body: {})", Utf8Prefix(body, 120));
  }
  return text;
}

ApiCall SendApi(ProbeContext& context, const std::string& name, const std::string& path,
                std::string body, const CallOptions& options) {
  const Nanos timeout =
      std::max<Nanos>(std::min(options.timeout, context.Remaining()), std::chrono::seconds(1));
  net::HttpRequest request;
  request.method = options.method;
  request.path = path;
  if (options.method == "GET") request.content_type.clear();
  // The request body is kept for the evidence; a huge one is kept cut (WriteExchange cuts too).
  const std::string kept = body.size() > (64 << 10) ? body.substr(0, 64 << 10) : body;
  const std::size_t sent_bytes = body.size();
  request.body = std::move(body);
  net::EventLoop loop;
  const MonoTime start = std::chrono::steady_clock::now();
  CappedHandler handler(loop, options.body_cap, start);
  {
    net::HttpClient client(loop, context.candidate.endpoint(),
                           context.candidate.OptionsWithin(timeout));
    client.Start(std::move(request), &handler);
    loop.Run();
  }
  ApiCall call = std::move(handler.call);
  call.took = std::chrono::steady_clock::now() - start;
  std::string request_text = kept;
  if (sent_bytes > kept.size()) request_text += fmt::format("... [{} bytes in all]", sent_bytes);
  call.evidence = context.evidence.WriteExchange(name, options.method, path, request_text,
                                                 call.status, call.body, call.error, call.took);
  return call;
}

StreamedAnswer ReadStream(std::string_view sse_body) {
  StreamedAnswer answer;
  net::SseDecoder sse;
  std::vector<net::SseEvent> events;
  if (Status framed = sse.Feed(sse_body, &events); !framed.ok())
    answer.error = framed.error().message;
  if (sse.Finish() && answer.error.empty()) answer.error = "the stream ended mid-event";
  dialect::OpenAiStreamDecoder decoder;
  for (const net::SseEvent& event : events) {
    for (const auto& [field, value] : event.unknown_fields) {
      if (field == "error" && answer.error.empty()) answer.error = "error event: " + value;
    }
    if (event.data.empty()) continue;
    Result<dialect::StreamChunk> chunk = decoder.Decode(event.data);
    if (!chunk.ok()) {
      if (answer.error.empty()) answer.error = chunk.error().message;
      continue;
    }
    if (chunk->done) {
      answer.done = true;
      continue;
    }
    ++answer.chunks;
    if (chunk->error && answer.error.empty())
      answer.error = "error in the stream: " + *chunk->error;
    answer.text += chunk->content;
    if (!chunk->finish_reason.empty()) answer.finish_reason = std::string(chunk->finish_reason);
    if (chunk->usage) answer.usage = chunk->usage;
  }
  return answer;
}

nlohmann::json GreedyBody(const std::string& model, dialect::Api api, const std::string& prompt,
                          std::uint32_t max_tokens) {
  nlohmann::json body;
  body["model"] = model;
  if (api == dialect::Api::kChat) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
  } else {
    body["prompt"] = prompt;
  }
  body["max_tokens"] = max_tokens;
  body["temperature"] = 0;
  body["seed"] = kProbeSeed;
  return body;
}

nlohmann::json PoolingBody(const std::string& model, dialect::Api api, const std::vector<std::string>& texts,
                           const std::string& query) {
  dialect::GenerationRequest request;
  request.api = api;
  request.model = model;
  request.prompt = query;
  request.inputs = texts;
  request.stream = false;
  return nlohmann::json::parse(dialect::EncodeRequestBody(request));
}

std::string Dump(const nlohmann::json& doc) {
  return DumpJson(doc, -1);
}

}  // namespace bakeoff::qualify

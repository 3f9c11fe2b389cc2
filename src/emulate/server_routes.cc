// emulate/server_routes.cc: the HTTP side of the emulated server's connections: what each request
// means (GET /health, /metrics, /v1/models; POST /v1/completions, /v1/chat/completions, the
// pooling and native routes, /tokenize), whether a generation may start, the answers of /health,
// and how error and whole bodies go out (contract in server.h; declarations in server_impl.h).
// The request bodies' formats are emulate/openai_api.h's, native_api.h's and pooling_api.h's.
#include "emulate/server_impl.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "emulate/native_api.h"
#include "emulate/pooling_api.h"

namespace bakeoff::emulate {

namespace {

namespace http = boost::beast::http;

using server_internal::Now;
using server_internal::Unavailable;
using server_internal::UnixSeconds;

constexpr std::string_view kEmulatedHeader = "X-Bakeoff-Emulated: true\r\n";

ApiError ShuttingDownError() { return Unavailable("the emulated server is shutting down"); }

}  // namespace

void Connection::OnClose() {
  if (sequence_ != 0) {
    if (server_.config().faults.ignore_disconnect && !server_.ShuttingDown()) {
      server_.DetachSequence(sequence_);
    } else {
      server_.AbortSequence(sequence_);
    }
    sequence_ = 0;
  } else if (instant_generating_) {
    instant_generating_ = false;
    server_.InstantEnded(false);
  }
  if (generation_open_) CloseGeneration(false);
  CancelTimers();
}

void Connection::OnMalformedRequest(int status, const std::string& message) {
  SendError(ApiError{status, "BadRequestError", message, ""});
}

void Connection::OnDataWritten() {
  if (instant_generating_ && !stalled_) return PumpInstant();
  Flush();  // events that arrived while writing (or before a stall began)
}

void Connection::OnResponseWritten() {
  if (generation_open_) CloseGeneration(!aborted_);
  if (keepalive_timer_) keepalive_timer_->cancel();
  renderer_.reset();
  instant_generating_ = false;
  sequence_ = 0;
  if (server_.ShuttingDown()) set_keep_alive(false);
}

void Connection::OnRequest(Request& request) {
  server_.CountRequest();
  arrival_ = Now();
  wire_ = Wire::kOpenAi;
  if (server_.ShuttingDown()) set_keep_alive(false);

  std::string_view target(request.target().data(), request.target().size());
  std::string_view path = target.substr(0, target.find('?'));
  const http::verb method = request.method();
  auto expect = [&](http::verb verb) {
    if (method == verb) return true;
    SendError(ApiError{405, "MethodNotAllowed", "Method Not Allowed", ""});
    return false;
  };
  const bool loading = server_.Loading();
  if (path == "/health") {
    if (!expect(http::verb::get)) return;
    const Nanos delay = server_.config().faults.health_busy_delay;
    if (delay > Nanos{0} && server_.Busy()) return DelayHealth(delay);
    AnswerHealth();
  } else if (path == "/metrics") {
    if (!expect(http::verb::get)) return;
    if (server_.config().no_metrics) return SendError(NotFound("Not Found"));
    SendBody(200, "text/plain; version=0.0.4; charset=utf-8", server_.RenderMetrics());
  } else if (path == "/v1/models") {
    if (!expect(http::verb::get)) return;
    if (loading) return SendLoading();
    std::string body = RenderModelsResponse(server_.served(), UnixSeconds());
    if (server_.config().faults.cut_utf8) {
      server_internal::CutUtf8InModelList(body, server_.served().name);
    }
    SendBody(200, "application/json", body);
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!expect(http::verb::post) || !AdmitGeneration(loading)) return;
    const Endpoint endpoint = path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions;
    BeginGeneration(ParseGenerationRequest(endpoint, request.body(), server_.served()));
  } else if (const std::optional<Wire> pooling = MatchPoolingRoute(path)) {
    if (server_.config().no_pooling) return SendError(NotFound("Not Found"));
    if (!expect(http::verb::post) || !AdmitGeneration(loading)) return;
    BeginGeneration(ParsePoolingRequest(*pooling, request.body(), server_.served()));
  } else if (const std::optional<NativeRoute> native = MatchNativeRoute(path)) {
    wire_ = native->wire;
    if (!expect(http::verb::post) || !AdmitGeneration(loading)) return;
    BeginGeneration(ParseNativeRequest(*native, request.body(), server_.served()));
  } else if (path == "/tokenize") {
    if (!expect(http::verb::post)) return;
    if (loading) return SendLoading();
    auto response = RenderTokenizeResponse(request.body(), server_.served());
    if (auto* error = std::get_if<ApiError>(&response)) return SendBadInput(*error);
    SendBody(200, "application/json", std::get<std::string>(response));
  } else {
    SendError(NotFound("Not Found"));
  }
}

void Connection::SendLoading() { SendError(Unavailable("the emulated model is still loading")); }

bool Connection::AdmitGeneration(bool loading) {
  if (server_.CountGenerationRequestAndMaybeCrash()) return false;  // this connection is gone
  if (server_.ShuttingDown()) {
    server_.CountRejected(&RequestMetrics::rejected_shutting_down);
    SendError(ShuttingDownError());
    return false;
  }
  if (loading) {
    server_.CountRejected(&RequestMetrics::rejected_not_ready);
    SendLoading();
    return false;
  }
  return true;
}

void Connection::AnswerHealth() {
  health_waiting_ = false;
  if (server_.Healthy()) return SendBody(200, "application/json", "");
  const int status = server_.ShuttingDown() ? 503 : server_.config().not_ready_status;
  SendBody(status, "application/json", status == 503 ? "" : R"({"status":"loading"})");
}

void Connection::OnIdle() {
  if (!health_waiting_ || !responding()) return;
  if (health_timer_) health_timer_->cancel();
  AnswerHealth();
}

void Connection::AppendStreamHead() {
  std::string headers = "cache-control: no-cache\r\n";
  headers += kEmulatedHeader;
  StreamHead(StreamContentType(renderer_->spec().wire), headers);
}

void Connection::SendError(const ApiError& error, std::string_view extra_headers) {
  std::string body = RenderErrorFor(wire_, error);
  if (server_.config().faults.cut_utf8) server_internal::CutUtf8InErrorBody(body);
  SendBody(error.status, "application/json", body, extra_headers);
}

void Connection::SendBody(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers) {
  renderer_.reset();
  SendWhole(status, content_type, body, fmt::format("{}{}", kEmulatedHeader, extra_headers));
}

}  // namespace bakeoff::emulate

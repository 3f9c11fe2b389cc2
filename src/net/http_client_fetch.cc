// net/http_client_fetch.cc
//
// Owns: Fetch (one blocking request on a private event loop, its errors named by endpoint and
// path, the bearer token redacted from what it returns) and RedactSecret.
// Does not own: the transport (HttpClient, net/http_client.h). No Asio here: this file uses only
// the public API.
#include "net/http_client.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"
#include "net/event_loop.h"

namespace bakeoff::net {

// -----------------------------------------------------------------------------------------------
// Fetch

namespace {

class CollectingHandler final : public ResponseHandler {
 public:
  explicit CollectingHandler(EventLoop& loop) : loop_(loop) {}
  void OnHeaders(MonoTime, const ResponseHead& head) override { response.head = head; }
  Status OnBody(MonoTime, std::string_view bytes) override {
    response.body.append(bytes);
    return Ok{};
  }
  void OnEnd(MonoTime, TransportEnd end_in, std::string_view detail_in) override {
    end = end_in;
    detail = detail_in;
    loop_.Stop();
  }

  FetchedResponse response;
  TransportEnd end = TransportEnd::kCancelled;
  std::string detail;

 private:
  EventLoop& loop_;
};

ErrorCode ErrorCodeFor(TransportEnd end) {
  switch (end) {
    case TransportEnd::kConnectFailed:
      return ErrorCode::kUnavailable;
    case TransportEnd::kTimeoutConnect:
    case TransportEnd::kTimeoutFirstByte:
    case TransportEnd::kTimeoutIdle:
    case TransportEnd::kTimeoutTotal:
      return ErrorCode::kTimeout;
    case TransportEnd::kCancelled:
      return ErrorCode::kCancelled;
    case TransportEnd::kProtocolError:
    case TransportEnd::kTooLarge:
      return ErrorCode::kProtocol;
    case TransportEnd::kReset:
    case TransportEnd::kHandlerAborted:
    case TransportEnd::kComplete:
      break;
  }
  return ErrorCode::kIo;
}

}  // namespace

Result<FetchedResponse> Fetch(const Endpoint& endpoint, HttpRequest request,
                              const ClientOptions& options) {
  EventLoop loop;
  CollectingHandler handler(loop);
  const std::string what = request.method + " " + endpoint.ToString() +
                           (request.path.empty() || request.path.front() != '/' ? "/" : "") +
                           request.path;
  {
    HttpClient client(loop, endpoint, options);
    client.Start(std::move(request), &handler);
    loop.Run();
  }
  if (handler.end != TransportEnd::kComplete) {
    return MakeError(ErrorCodeFor(handler.end),
                     what + ": " + TransportEndName(handler.end) + ": " + handler.detail);
  }
  FetchedResponse response = std::move(handler.response);
  response.body = RedactSecret(std::move(response.body), options.bearer_token);
  for (auto& [name, value] : response.head.headers) {
    value = RedactSecret(std::move(value), options.bearer_token);
  }
  return response;
}

std::string RedactSecret(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  constexpr std::string_view kRedacted = "[REDACTED]";
  for (std::size_t at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at + kRedacted.size())) {
    text.replace(at, secret.size(), kRedacted);
  }
  // Text cut to a length (error bodies, messages ending in "...") may end inside the secret.
  constexpr std::size_t kShortestTail = 8;
  const std::size_t end = text.ends_with("...") ? text.size() - 3 : text.size();
  for (std::size_t length = std::min(secret.size() - 1, end); length >= kShortestTail; --length) {
    if (std::string_view(text).substr(end - length, length) == secret.substr(0, length)) {
      text.replace(end - length, length, kRedacted);
      break;
    }
  }
  return text;
}

}  // namespace bakeoff::net

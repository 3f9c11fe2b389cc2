// qualify/api_call.h
//
// Owns: the one-request-at-a-time API calls of the compatibility, bad-input and quality probes:
// sending a hand-built request with a deadline and keeping the exchange as evidence
// (Evidence::WriteExchange), telling "no answer in time" from "the connection was closed" from
// "an answer with a status", reading a streamed (SSE) answer back into text, finish reason and
// usage, and building the greedy request bodies those probes start from.
// Does not own: what an answer means for a check (the probes), the load-generation path
// (load/exchange.h, qualify/stream_batch.h).
//
// Thread-safety: blocking calls on a private event loop; call from one thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dialect/openai.h"
#include "net/http_client.h"
#include "qualify/probe.h"

namespace bakeoff::qualify {

// One request's answer as a probe sees it.
struct ApiCall {
  int status = 0;  // 0: no status line (see `end`)
  std::string content_type;
  std::string body;       // at most the call's body cap
  bool body_cut = false;  // the body went on past the cap; reading stopped there
  net::TransportEnd end = net::TransportEnd::kComplete;
  std::string error;  // the transport's detail when `end` is not kComplete
  Nanos took{0};
  std::optional<Nanos> written;  // when the whole request had been written, from the start
  std::string evidence;  // the exchange file, relative to the output folder

  bool Answered() const { return status != 0; }
  bool Success() const { return status >= 200 && status <= 299; }
  bool ClientError() const { return status >= 400 && status <= 499; }
  bool ServerError() const { return status >= 500; }
  // No status line before a deadline passed (connect, first byte, or the server stopped reading
  // the request).
  bool TimedOut() const;
  // The message of an error body (dialect::DecodeErrorMessage); nullopt without one.
  std::optional<std::string> ErrorMessage() const;
  // "HTTP 400: <message>", "no answer: timed out waiting for the first byte ...": for details.
  std::string Describe() const;
};

struct CallOptions {
  std::string method = "POST";
  Nanos timeout = std::chrono::seconds(30);  // every deadline of the request
  std::size_t body_cap = 1 << 20;            // stop reading past this many bytes
};

// Sends `body` to `path` on the candidate and records the exchange as evidence `name` (a file
// name without extension under the probe's evidence folder). The timeout is cut to the probe's
// remaining time. Never throws; never waits past the timeout.
ApiCall SendApi(ProbeContext& context, const std::string& name, const std::string& path,
                std::string body, const CallOptions& options = {});

// A streamed answer read back from its SSE body.
struct StreamedAnswer {
  std::string text;
  std::string finish_reason;
  std::optional<dialect::Usage> usage;
  std::size_t chunks = 0;  // data payloads other than [DONE]
  bool done = false;       // [DONE] seen
  std::string error;       // first decode error or in-stream error; "" when none
};
StreamedAnswer ReadStream(std::string_view sse_body);

// {"model", "messages":[{"role":"user","content":prompt}] or "prompt", "max_tokens",
// "temperature": 0, "seed": kProbeSeed} for `api`.
nlohmann::json GreedyBody(const std::string& model, dialect::Api api, const std::string& prompt,
                          std::uint32_t max_tokens);
inline constexpr std::uint64_t kProbeSeed = 1234;
// A pooling route's body for `texts` (embeddings: "input"; rerank: "query" and "documents").
// REQUIRES: !ApiGenerates(api).
nlohmann::json PoolingBody(const std::string& model, dialect::Api api, const std::vector<std::string>& texts,
                           const std::string& query = "Which text is about the sea?");

// `text` as JSON; invalid UTF-8 replaced, never throws.
std::string Dump(const nlohmann::json& doc);

}  // namespace bakeoff::qualify

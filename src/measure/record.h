// measure/record.h
//
// Owns: what bakeoff knows about one request (RequestRecord: every instant it had, its token
// events, token counts and its single Outcome), the fixed outcome taxonomy, and the raw-record
// line format of records.jsonl (docs/formats/records.md), written and read back.
// Does not own: deciding when to send (load/) or aggregate figures (analyze/).
//
// Definitions of every derived figure live in docs/TERMINOLOGY.md; this file only stores instants.
// Thread-safety: plain values; a RecordLineReader is used by one thread at a time.
// Units: instants are MonoTime; in records.jsonl they are integer nanoseconds since the run's t0.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/result.h"

namespace bakeoff::measure {

// Exactly one per request.
enum class Outcome : std::uint8_t {
  kOk,               // 2xx and a complete, well-formed stream or body
  kHttpError,        // non-2xx; status and a truncated body are kept
  kConnectFailed,    // could not establish the connection
  kReset,            // peer closed or reset before the response was complete
  kTimeout,          // one of our deadlines passed first (detail names which)
  kMalformedStream,  // bytes violated the HTTP, SSE or JSON contract
  kStreamError,      // the server reported an error inside a 2xx stream
  kTruncated,        // the stream ended cleanly but without a finish (no [DONE], no finish_reason)
  kCancelled,        // we stopped it: run interrupted or cancel-at reached
};
inline constexpr int kOutcomeCount = 9;
const char* OutcomeName(Outcome outcome);

// Warm-up and measurement are assigned by *intended* send time, never by completion.
enum class Phase : std::uint8_t { kWarmup, kMeasure };
const char* PhaseName(Phase phase);

// One SSE event that carried generated text.
struct TokenEvent {
  MonoTime at;
  std::uint32_t tokens = 1;  // tokens in the event: from the server when it says, else 1
  bool reasoning = false;    // the event carried reasoning text only
  bool counted = true;       // false: `tokens` is an estimate (server did not say)
};

struct RequestRecord {
  std::uint64_t id = 0;        // unique within the run, in plan order
  std::uint32_t step = 0;      // index in a rate/concurrency sweep
  std::uint32_t worker = 0;
  Phase phase = Phase::kMeasure;

  MonoTime intended_send;                     // from the plan; always set
  std::optional<MonoTime> send_start;         // the client began the request (pool or connect)
  // A reused connection went stale before any response byte and the client began the request
  // again on a new connection at this instant (net/http_client.h). send_start stays the first
  // try's; connected, request_written and connection_reused describe the retry.
  std::optional<MonoTime> stale_retry_at;
  std::optional<MonoTime> connected;          // a connection was ready (new or reused)
  std::optional<MonoTime> request_written;    // last request byte handed to the socket
  std::optional<MonoTime> headers_received;
  std::optional<MonoTime> first_chunk;        // first parsed event with a choices entry (vLLM's TTFT)
  std::optional<MonoTime> first_token;        // first event with non-empty text, reasoning included
  std::optional<MonoTime> first_answer_token; // first event with non-empty non-reasoning text
  std::optional<MonoTime> last_token;
  std::optional<MonoTime> finished;           // OnEnd: stream closed, cleanly or not
  std::vector<TokenEvent> token_events;

  bool connection_reused = false;
  bool invalid_utf8 = false;  // some generated text was not valid UTF-8 (counted all the same)
  std::string stale_retry_reason;  // how the stale connection failed; empty without a retry
  std::uint32_t prompt_tokens_planned = 0;
  std::uint32_t max_tokens = 0;
  std::optional<std::uint64_t> usage_prompt_tokens;      // server usage report
  std::optional<std::uint64_t> usage_completion_tokens;
  std::optional<std::uint64_t> usage_cached_tokens;
  std::uint64_t counted_tokens = 0;  // sum of TokenEvent::tokens (a whole answer: its words)

  int http_status = 0;
  Outcome outcome = Outcome::kCancelled;
  std::string finish_reason;
  std::string error;  // what went wrong, naming the request; empty when kOk

  // Output tokens: the server's usage when reported, otherwise the client's count.
  std::uint64_t OutputTokens() const { return usage_completion_tokens.value_or(counted_tokens); }
  bool OutputTokensEstimated() const { return !usage_completion_tokens.has_value(); }
};

// Serialises one record as a single JSON line (no trailing newline), times relative to `t0`.
std::string RecordToJsonLine(const RequestRecord& record, MonoTime t0);

// Parses a records.jsonl line back into the record RecordToJsonLine wrote (instants relative to
// `t0`; token events from first_token_ns, which is the first event's instant). The derived fields
// (output_tokens, output_tokens_estimated) are not read back. kInvalidInput names the field that
// is missing, of the wrong type or out of range ("not a JSON object" for a line that is not); a
// record it returns can be fed to a StepRecorder (an ok request has its send start).
class RecordLineReader {
 public:
  RecordLineReader();
  ~RecordLineReader();
  RecordLineReader(const RecordLineReader&) = delete;
  RecordLineReader& operator=(const RecordLineReader&) = delete;

  Result<RequestRecord> Read(std::string_view line, MonoTime t0);

 private:
  struct Parser;
  std::unique_ptr<Parser> parser_;
};

}  // namespace bakeoff::measure

// target/adapters.h
//
// Owns: what bakeoff knows about each inference engine it compares, as data plus a few small
// functions (no class per engine): health and readiness routes and what their status codes mean;
// where the version is published and how to read it from the answer; the metrics path and the
// metric family (name, kind, unit) per canonical signal (target/metric_names.h); the request
// fields that force an output length and ask for usage in streams; a launch template (port,
// context limit, prefix caching, parallelism); cold-start log patterns; known quirks; and whether
// this project has checked the adapter against a live engine or only against hand-written
// fixtures. Every fact comes from ../shared/reference/engine-interfaces.md (section numbers in
// adapters.cc) or, for llama.cpp, from docs/engines/llama.cpp.md; a hint that is neither is
// marked as such where it is written.
// Does not own: deciding which engine a server is (target/detection.h), HTTP, or request encoding
// (dialect/).
//
// Thread-safety: immutable data built once; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dialect/request.h"
#include "target/metric_names.h"
#include "target/prometheus.h"

namespace bakeoff::target {

enum class Verified {
  kLive,          // this project ran it against the real engine (docs/engines/<engine>.md)
  kFixturesOnly,  // checked only against fixtures written from the engine's documented formats
};
// "live" or "fixtures only".
const char* VerifiedName(Verified verified);

// One health or readiness route and what its answers mean.
struct HealthRoute {
  std::string_view path;       // "/health"
  std::string_view meaning;    // one line: codes while loading, ready, dead
  std::vector<int> not_ready;  // statuses meaning "up but not ready" (503; Triton's 400)
  bool generates = false;      // answering it runs a generation (a liveness probe must not use it)
};

// How a version is read from an answer.
enum class VersionRead {
  kJsonField,  // a top-level string field of a JSON object (`field`)
  kHeader,     // a response header (`field`), e.g. Server
};

// Where a version (or identity) is published.
struct VersionSource {
  std::string_view path;  // "/version"; "" for a header on any answer
  VersionRead read = VersionRead::kJsonField;
  std::string_view field;  // "version", "build_info", ...
  // For detection: fields the JSON answer must also have for it to identify this engine (a bare
  // {"version": ...} is said by more than one engine). Empty: the version field alone.
  std::vector<std::string_view> also_has;
  // For detection: the `name` field must contain this (Open Inference Protocol metadata), "" any.
  std::string_view name_contains;
};

// One canonical signal on an engine's metrics page.
struct SignalMetric {
  Signal signal;
  std::string_view family;  // as on the page (a counter's family without "_total")
  SignalKind kind;
  std::string_view unit;      // "s", "ms", "us", "fraction", "tokens", "requests", "rate"
  std::string_view selector;  // the label that picks the series, e.g. request_type="active"
};

// Request fields for a fixed output length and for usage in streams.
struct RequestFields {
  std::string_view ignore_eos;    // field name; "" when the engine has none
  std::string_view min_tokens;    // "min_tokens", "min_new_tokens", or "" when none
  bool forced_length = false;     // these fields make every answer max_tokens long
  std::string_view stream_usage;  // how usage arrives in a stream, one line
  bool strict_schema = false;     // unknown request fields are rejected (send only known ones)
  // Where it takes a regex constraint (bench --structured regex); nullopt when it documents none.
  std::optional<dialect::RegexField> regex = std::nullopt;
};

// A launch command with placeholders {model} {port} {context} {parallel}.
struct LaunchTemplate {
  std::string_view command;         // "vllm serve {model}"
  std::string_view port;            // "--port {port}"
  std::string_view context_limit;   // "--max-model-len {context}"
  std::string_view prefix_caching;  // how to turn it on (or off), with its default
  std::string_view parallelism;     // tensor parallel / slots
  std::string_view metrics;         // the flag that enables metrics when they are opt-in, or ""
  std::uint16_t default_port = 0;
};

// A cold-start phase: the first log line matching `pattern` (ECMAScript regex) ends it.
struct LogPhase {
  std::string_view name;
  std::string_view pattern;
};

// What detection looks for besides version routes.
struct DetectionHints {
  std::vector<std::string_view> owned_by;         // /v1/models owned_by values
  std::vector<std::string_view> server_header;    // substrings of the Server header
  std::vector<std::string_view> metric_prefixes;  // family name prefixes on its metrics page
  std::string_view root_body;  // GET / answers 200 with a body containing this ("" none)
  std::string_view api_base;   // where its OpenAI routes live when not at "/" ("/openai")
};

struct EngineAdapter {
  std::string_view name;                  // "vllm": what --engine takes
  std::string_view display_name;          // "vLLM": what reports and the metric table say
  std::vector<std::string_view> aliases;  // other --engine spellings
  std::string_view dialect;         // request/stream dialect: "openai" (+ native routes in quirks)
  std::vector<dialect::Api> apis;   // the routes bakeoff can load it on (--api), OpenAI's first
  std::vector<HealthRoute> health;  // the first is the readiness path bakeoff polls
  std::vector<VersionSource> version;
  std::string_view metrics_path;  // "" when the engine has no Prometheus page
  std::string_view metrics_port;  // "" = the API's port; "8002" for Triton's default
  std::string_view metrics_note;  // opt-in flag, JSON vs text, ...
  std::vector<SignalMetric> metrics;
  RequestFields request;
  LaunchTemplate launch;
  std::vector<LogPhase> cold_start;
  std::vector<std::string_view> quirks;
  DetectionHints detect;
  Verified verified = Verified::kFixturesOnly;
  std::string_view verified_note;  // version and date of the live check, where there was one
  std::string_view reference;      // section of engine-interfaces.md (or the doc) it came from

  const HealthRoute& ReadinessRoute() const { return health.front(); }
  // The adapter's metric for `signal`, first alternative first; empty when it has none.
  std::vector<const SignalMetric*> MetricsFor(Signal signal) const;
};

// Every adapter, in a fixed order: the engines, then generic-openai last.
const std::vector<EngineAdapter>& AllAdapters();
// By name or alias, case-insensitive; null when unknown.
const EngineAdapter* FindAdapter(std::string_view name);
// The fallback for a server nothing identifies: OpenAI routes, /health, /metrics.
const EngineAdapter& GenericOpenAiAdapter();
// "vllm, sglang, ..." for error messages.
std::string AdapterNames();

// The version in `body` as `source` says to read it (for a kHeader source, `body` is the header's
// value); nullopt when the answer does not have it or lacks `also_has`/`name_contains`.
std::optional<std::string> ReadVersion(const VersionSource& source, std::string_view body);

// Whether `page` has a sample of `metric`'s family (histogram buckets/count, a counter with or
// without _total, a gauge), and that sample's value (histogram: its count; others: the sum over
// the series its selector picks, or over all series).
std::optional<double> SignalValue(const MetricsPage& page, const SignalMetric& metric);

// A histogram metric's buckets, sum and count over the series its selector picks; nullopt when
// `page` has none (or `metric` is not a histogram).
std::optional<MetricsPage::Histogram> SignalHistogram(const MetricsPage& page, const SignalMetric& metric);

// The first of `adapter`'s metrics for `signal` that `page` has; null when none.
const SignalMetric* FindAdapterSignal(const EngineAdapter& adapter, const MetricsPage& page,
                                      Signal signal);

}  // namespace bakeoff::target

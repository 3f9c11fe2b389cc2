// target/detection.h
//
// Owns: telling which engine serves a URL, and its version, from what the server says about
// itself: response headers (Server, X-Bakeoff-Emulated), the version/info routes each adapter
// names (target/adapters.h), /v1/models owned_by, the metric family prefixes on its metrics
// page, Ollama's root answer and KServe's /openai prefix. Each clue adds points to an engine and
// an evidence line; the best engine wins when it has enough, with a confidence from its score and
// its lead over the next. Nothing identifying: generic-openai, with a warning. bakeoff's emulated
// engine (X-Bakeoff-Emulated: true, owned_by bakeoff-emulated) is named as such and uses the vLLM
// adapter, whose shapes it serves.
// Every request is bounded by DetectOptions (a short deadline each, and a budget for all).
// Does not own: the adapters' facts, or what bench/probe do with the answer.
//
// Thread-safety: blocking calls on private event loops; safe from any one thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/result.h"
#include "net/http_client.h"
#include "target/adapters.h"

namespace bakeoff::target {

struct DetectOptions {
  net::ClientOptions client;                    // bearer token, TLS; deadlines are capped
  Nanos per_request = std::chrono::seconds(2);  // each request, connect to last byte
  Nanos budget = std::chrono::seconds(15);      // all requests together
};

// One engine's score and the clues that gave it.
struct EngineScore {
  const EngineAdapter* adapter = nullptr;
  int score = 0;
  std::vector<std::string> evidence;  // "+40 GET /props: build_info b4748-c392e5094"
  std::string version;                // "" when none of its version routes answered
  std::string version_source;         // "GET /props build_info"
};

struct Detection {
  const EngineAdapter* adapter = nullptr;  // never null after DetectEngine: generic when unknown
  std::string engine;                      // display name, or "bakeoff emulated engine"
  bool emulated = false;
  std::string version;  // "" = unknown
  std::string version_source;
  int score = 0;
  std::string confidence;             // "high", "medium", "low" or "none"
  std::vector<std::string> evidence;  // the winner's clues, then what was seen (0 points)
  std::vector<std::string> warnings;  // fallback, ties, no version, ...
  std::vector<EngineScore> scores;    // every engine with points, best first
};

// One answer detection looked at (status 0: no answer; `error` says why).
struct Observation {
  std::string path;
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string error;
};

// The paths DetectEngine asks, in order: /v1/models, every adapter's version routes, /, the
// metrics paths, /openai/v1/models.
std::vector<std::string> DetectionPaths();

// Asks the server (GET on every DetectionPaths() entry, within the options' bounds) and judges.
// kUnavailable when the first request cannot connect at all (nothing listens there).
Result<Detection> DetectEngine(const net::Endpoint& endpoint, const DetectOptions& options = {});

// The judgement alone, from answers already in hand.
Detection JudgeDetection(const std::vector<Observation>& observations);

// {"engine", "adapter", "emulated", "version", "version_source", "score", "confidence",
//  "verified", "health_path", "metrics_path", "evidence": [...], "warnings": [...],
//  "candidates": [{"adapter", "score"}]}, pretty-printed.
std::string DetectionJson(const Detection& detection);

}  // namespace bakeoff::target

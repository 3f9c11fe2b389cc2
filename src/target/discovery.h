// target/discovery.h
//
// Owns: learning what a running target serves before any load: the model to ask for (the one
// named, or the first /v1/models lists), whether it is bakeoff's emulated engine, and its context
// limit where the server says (max_model_len in the model card, as vLLM, SGLang and the emulated
// engine report it; llama.cpp's n_ctx in GET /props) and its number of slots (llama.cpp's
// total_slots there). Also the one base-URL mistake people make:
// a URL ending in /v1, to which bakeoff would add /v1/... again.
// Returns what it found as a value; it never changes the configuration it was given.
// Does not own: prompt-length calibration (target/prompt_calibration.h) or engine adapters.
//
// Thread-safety: blocking calls on private event loops; safe from any one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "net/http_client.h"

namespace bakeoff::target {

struct TargetFacts {
  std::string model;                // the model to request
  bool model_from_listing = false;  // chosen from /v1/models because none was named
  std::vector<std::string> listed_models;  // every id GET /v1/models listed (empty: none or no listing)
  bool emulated = false;            // the server said it is bakeoff's emulated engine
  std::optional<std::uint64_t> max_context_tokens;  // prompt + output limit, where the server says
  std::string max_context_source;  // where that limit came from, e.g. "GET /props n_ctx"
  std::optional<std::uint64_t> slots;  // sequences it runs at once, where it says (llama.cpp's total_slots)
};

// Asks the server. `model` is the model the user named ("" = take the first listed).
// Errors (kUnavailable) name the endpoint and say what to pass instead.
Result<TargetFacts> Discover(const net::Endpoint& endpoint, const net::ClientOptions& client,
                             const std::string& model);

// A GET of `path` (under the endpoint's base path) with no body: the control calls' request.
net::HttpRequest GetRequest(std::string path);

// A base path that ends in "/v1" (or "/v1/") has it removed: bakeoff appends /v1/... itself.
// Returns a note for the user when it did (trailing slashes alone are dropped silently).
std::optional<std::string> StripApiVersionSuffix(net::Endpoint& endpoint);

}  // namespace bakeoff::target

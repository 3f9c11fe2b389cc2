// target/prompt_calibration.h
//
// Owns: making planned prompt lengths true on a real server. bakeoff writes prompts in words of
// its corpus; a server counts tokens of its own tokenizer and adds tokens of its own (the chat
// template, BOS). Calibration measures both, so that a prompt planned at N tokens is counted as N
// by the server:
//   1. words per token: through the server's token-counting route, trying each known dialect
//      (dialect/tokenize.h) on a few thousand corpus words;
//   2. the server's own tokens: `usage.prompt_tokens` of short probe requests (max_tokens 1) minus
//      what the tokenize route counts for the same text; with no tokenize route, a least-squares
//      line through the usage of probes of several sizes gives both figures at once;
//   3. the check: prompts built exactly as the run builds its requests (from seeds the run does
//      not use, so none of the run's prompts is left in the server's prefix cache), counted by
//      the server (usage, else tokenize plus the overhead), their mean compared with the plan.
// Returns what it measured as a value; it never changes the configuration it was given.
// Does not own: building the run's prompts (load/prompt_text.h, load/request_builder.h) or
// deciding whether a deviation is acceptable (the caller holds the tolerance).
//
// Thread-safety: blocking calls on private event loops; safe from any one thread.
// Units: tokens and words.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dialect/openai.h"
#include "dialect/tokenize.h"
#include "load/prompt_text.h"
#include "net/http_client.h"

namespace bakeoff::target {

struct CalibrationPlan {
  net::Endpoint endpoint;
  net::ClientOptions client;
  dialect::GenerationRequest request;  // the run's template: api and model (prompt ignored)
  // Fixed-length steps: the planned prompt length to check; none for trace replay, where every
  // request has its own length and only the sizing is measured.
  std::optional<std::uint32_t> planned_prompt_tokens;
  std::uint64_t seed = 1;  // the run's seed: the check's prompts are built from seeds mixed from it
  std::optional<std::uint64_t> max_context_tokens;  // probes stay well inside it when known
  const std::atomic<bool>* stop = nullptr;  // when set (a stop signal), no further request is sent
};

struct PromptCalibration {
  bool checked = false;  // the sizing was measured through the server
  std::string reason;    // when !checked: why not
  std::string method;  // "tokenize+usage", "tokenize" (no usage reported) or "usage" (no tokenize)
  std::optional<dialect::TokenizeDialect> tokenize_dialect;
  load::PromptSizing sizing;
  bool overhead_measured = false;  // false: the server's own tokens are unknown (taken as 0)
  std::uint32_t probes_sent = 0;   // generation requests (max_tokens 1) spent on calibration

  std::optional<std::uint32_t> planned_tokens;
  std::optional<double> achieved_tokens;  // mean count of the checked prompts
  std::string achieved_by;                // "usage.prompt_tokens" or "tokenize + overhead"
  std::vector<std::string> notes;         // what a user should know (failed probes, fallbacks)

  // (achieved - planned) / planned; nullopt when either is missing.
  std::optional<double> Deviation() const;
};

// Never fails as a whole: what could not be measured is said in `reason` and `notes`.
PromptCalibration CalibratePrompts(const CalibrationPlan& plan, const load::PromptText& prompts);

// Corpus words tokenized to measure words per token (several samples from different places).
inline constexpr std::uint32_t kCalibrationSampleWords = 1000;
inline constexpr std::uint32_t kCalibrationSamples = 4;

}  // namespace bakeoff::target

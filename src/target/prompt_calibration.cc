// target/prompt_calibration.cc: measuring how a server counts prompts (contract in
// prompt_calibration.h).
#include "target/prompt_calibration.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "core/json_text.h"
#include "dialect/codec.h"
#include "load/request_builder.h"

namespace bakeoff::target {
namespace {

// A count this far from one token per word is not a tokenizer's answer.
constexpr double kMinTokensPerWord = 0.2;
constexpr double kMaxTokensPerWord = 10;
// Probe prompts for the server's own tokens, in words; the largest stays within a quarter of a
// known context limit (at most two tokens a word in any tokenizer bakeoff has met).
constexpr std::uint32_t kSmallProbeWords = 20;
constexpr std::uint32_t kLargeProbeWords = 400;
// Without a tokenize route the slope comes from usage alone; texts differ in tokens per word by a
// few percent, so several texts of each size are averaged (the fit then lands within 1-2%).
constexpr std::uint32_t kSmallProbes = 2;
constexpr std::uint32_t kLargeProbes = 4;
// Prompts built as the run builds its requests and counted for the check, from seeds the run
// never uses (its seed mixed with this): sending the run's own first prompts would leave them in
// the server's prefix cache, and the run's first requests would find them there.
constexpr std::uint32_t kCheckPrompts = 4;
constexpr std::uint64_t kCheckSeedMix = 0x636865636b6c656eULL;  // "checklen"

Error Stopped() { return MakeError(ErrorCode::kCancelled, "stopped by a signal"); }
bool StopRequested(const CalibrationPlan& plan) {
  return plan.stop != nullptr && plan.stop->load();
}

Result<std::uint64_t> TokenizeCount(const CalibrationPlan& plan, dialect::TokenizeDialect dialect,
                                    const std::string& text) {
  if (StopRequested(plan)) return Stopped();
  net::HttpRequest request;
  request.path = dialect::TokenizePath(dialect);
  request.body = dialect::EncodeTokenizeRequest(dialect, plan.request.model, text);
  Result<net::FetchedResponse> response = net::Fetch(plan.endpoint, request, plan.client);
  if (!response.ok()) return response.error();
  if (response->head.status != 200) {
    return MakeError(ErrorCode::kUnavailable, fmt::format("HTTP {}", response->head.status));
  }
  return dialect::DecodeTokenizeCount(dialect, response->body);
}

// usage.prompt_tokens of a one-token generation of `text`, sent as the run sends prompts.
Result<std::uint64_t> UsagePromptTokens(const CalibrationPlan& plan, const std::string& text,
                                        std::uint32_t& probes_sent) {
  if (StopRequested(plan)) return Stopped();
  dialect::GenerationRequest generation = plan.request;
  generation.prompt = text;
  generation.system.clear();
  generation.history.clear();
  generation.max_tokens = 1;
  generation.min_tokens.reset();
  generation.ignore_eos = false;
  generation.stream = false;
  net::HttpRequest request;
  request.path = dialect::RequestPath(generation.api, generation.model, false);
  request.body = dialect::EncodeRequestBody(generation);
  ++probes_sent;
  Result<net::FetchedResponse> response = net::Fetch(plan.endpoint, request, plan.client);
  if (!response.ok()) return response.error();
  if (response->head.status != 200) {
    const std::string message =
        dialect::DecodeErrorMessage(response->body).value_or(std::string(Utf8Prefix(response->body, 200)));
    return MakeError(ErrorCode::kUnavailable,
                     fmt::format("HTTP {}: {}", response->head.status, message));
  }
  Result<dialect::CompletionResponse> decoded = dialect::DecodeResponse(generation.api, response->body);
  if (!decoded.ok()) return decoded.error();
  if (!decoded->usage || !decoded->usage->prompt_known || decoded->usage->prompt_tokens == 0) {
    return MakeError(ErrorCode::kProtocol, "the answer reports no usage.prompt_tokens");
  }
  return decoded->usage->prompt_tokens;
}

bool PlausibleCount(std::uint64_t tokens, std::uint32_t words) {
  const double per_word = static_cast<double>(tokens) / words;
  return per_word >= kMinTokensPerWord && per_word <= kMaxTokensPerWord;
}

std::uint32_t ProbeWordCap(const CalibrationPlan& plan) {
  if (!plan.max_context_tokens) return kLargeProbeWords;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(*plan.max_context_tokens / 4, 8, kLargeProbeWords));
}

// Step 1: the first dialect whose route counts a plausible number of tokens, and the server's
// words per token over several samples.
void MeasureByTokenize(const CalibrationPlan& plan, const load::PromptText& prompts,
                       PromptCalibration& out) {
  const std::string first = prompts.Build(kCalibrationSampleWords, 1);
  std::vector<std::string> refusals;
  for (dialect::TokenizeDialect dialect : dialect::kTokenizeDialects) {
    Result<std::uint64_t> count = TokenizeCount(plan, dialect, first);
    if (!count.ok() || !PlausibleCount(count.value(), kCalibrationSampleWords)) {
      refusals.push_back(fmt::format(
          "{} {}: {}", dialect::TokenizeDialectName(dialect), dialect::TokenizePath(dialect),
          count.ok() ? fmt::format("counted {} tokens", count.value()) : count.error().message));
      continue;
    }
    std::uint64_t tokens = count.value();
    std::uint64_t words = kCalibrationSampleWords;
    for (std::uint32_t sample = 1; sample < kCalibrationSamples; ++sample) {
      Result<std::uint64_t> more =
          TokenizeCount(plan, dialect, prompts.Build(kCalibrationSampleWords, 1 + sample));
      if (!more.ok() || !PlausibleCount(more.value(), kCalibrationSampleWords)) continue;
      tokens += more.value();
      words += kCalibrationSampleWords;
    }
    out.tokenize_dialect = dialect;
    out.sizing.words_per_token = static_cast<double>(words) / static_cast<double>(tokens);
    return;
  }
  out.notes.push_back("no token-counting route answered (" +
                      fmt::format("{}", fmt::join(refusals, "; ")) + ")");
}

// Step 2 with a tokenize route: the server's own tokens are what usage counts beyond it.
void MeasureOverhead(const CalibrationPlan& plan, const load::PromptText& prompts,
                     PromptCalibration& out) {
  const std::uint32_t cap = ProbeWordCap(plan);
  double overhead_sum = 0;
  int measured = 0;
  for (std::uint32_t words : {std::min(kSmallProbeWords, cap), cap}) {
    const std::string text = prompts.Build(words, 11 + words);
    Result<std::uint64_t> used = UsagePromptTokens(plan, text, out.probes_sent);
    if (!used.ok()) {
      out.notes.push_back(
          "the server's own prompt tokens (chat template, BOS) not measured: probe "
          "request: " +
          used.error().message);
      return;
    }
    Result<std::uint64_t> counted = TokenizeCount(plan, *out.tokenize_dialect, text);
    if (!counted.ok()) continue;
    overhead_sum += static_cast<double>(used.value()) - static_cast<double>(counted.value());
    ++measured;
  }
  if (measured == 0) return;
  out.sizing.overhead_tokens = std::max(0.0, overhead_sum / measured);
  out.overhead_measured = true;
}

// Step 2 without a tokenize route: usage of probes of several sizes, fitted by least squares:
// tokens = overhead + words / words_per_token.
void MeasureByUsageFit(const CalibrationPlan& plan, const load::PromptText& prompts,
                       PromptCalibration& out) {
  const std::uint32_t cap = ProbeWordCap(plan);
  std::vector<std::pair<double, double>> points;  // (words, tokens)
  std::vector<std::uint32_t> sizes(kSmallProbes, std::min(kSmallProbeWords, cap / 2));
  sizes.insert(sizes.end(), kLargeProbes, cap);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::uint32_t w = std::max<std::uint32_t>(1, sizes[k]);
    Result<std::uint64_t> used = UsagePromptTokens(plan, prompts.Build(w, 11 + k), out.probes_sent);
    if (!used.ok()) {
      out.notes.push_back("usage probe of " + std::to_string(w) +
                          " words: " + used.error().message);
      if (points.empty() && k + 1 >= kSmallProbes) break;  // the server does not report usage
      continue;
    }
    points.emplace_back(w, static_cast<double>(used.value()));
  }
  const bool two_sizes = std::any_of(
      points.begin(), points.end(), [&](const auto& p) { return p.first != points.front().first; });
  if (points.size() < 2 || !two_sizes) {
    out.reason =
        "no tokenize route, and the server's usage report could not be read from two probe "
        "requests";
    return;
  }
  double mean_w = 0, mean_t = 0;
  for (const auto& [w, t] : points) {
    mean_w += w;
    mean_t += t;
  }
  mean_w /= static_cast<double>(points.size());
  mean_t /= static_cast<double>(points.size());
  double sww = 0, swt = 0;
  for (const auto& [w, t] : points) {
    sww += (w - mean_w) * (w - mean_w);
    swt += (w - mean_w) * (t - mean_t);
  }
  const double tokens_per_word = swt / sww;
  if (!(tokens_per_word >= kMinTokensPerWord && tokens_per_word <= kMaxTokensPerWord)) {
    out.reason = fmt::format(
        "the server's usage reports do not grow with the prompt ({:.3f} tokens "
        "per word)",
        tokens_per_word);
    return;
  }
  out.sizing.words_per_token = 1.0 / tokens_per_word;
  out.sizing.overhead_tokens = std::max(0.0, mean_t - tokens_per_word * mean_w);
  out.overhead_measured = true;
}

// Step 3: prompts built as the run's, counted by the server.
void Check(const CalibrationPlan& plan, const load::PromptText& prompts, bool usage_works,
           PromptCalibration& out) {
  const std::uint32_t planned = *plan.planned_prompt_tokens;
  double sum = 0;
  std::uint32_t counted = 0;
  for (std::uint32_t k = 0; k < kCheckPrompts; ++k) {
    const std::string text =
        prompts.Build(load::PromptWords(planned, out.sizing), load::RequestSeed(plan.seed ^ kCheckSeedMix, 0, k));
    Result<std::uint64_t> count = usage_works ? UsagePromptTokens(plan, text, out.probes_sent)
                                              : TokenizeCount(plan, *out.tokenize_dialect, text);
    if (!count.ok()) {
      out.notes.push_back("prompt length check: " + count.error().message);
      break;
    }
    sum += static_cast<double>(count.value()) + (usage_works ? 0 : out.sizing.overhead_tokens);
    ++counted;
  }
  out.planned_tokens = planned;
  if (counted == 0) return;
  out.achieved_tokens = sum / counted;
  out.achieved_by = usage_works ? "usage.prompt_tokens" : "tokenize + overhead";
}

}  // namespace

std::optional<double> PromptCalibration::Deviation() const {
  if (!planned_tokens || !achieved_tokens || *planned_tokens == 0) return std::nullopt;
  return (*achieved_tokens - *planned_tokens) / *planned_tokens;
}

PromptCalibration CalibratePrompts(const CalibrationPlan& plan, const load::PromptText& prompts) {
  PromptCalibration out;
  MeasureByTokenize(plan, prompts, out);
  bool usage_works = false;
  if (out.tokenize_dialect) {
    MeasureOverhead(plan, prompts, out);
    usage_works = out.overhead_measured;
    out.method = usage_works ? "tokenize+usage" : "tokenize";
  } else {
    MeasureByUsageFit(plan, prompts, out);
    if (!out.reason.empty()) return out;
    usage_works = true;
    out.method = "usage";
  }
  out.checked = true;
  if (plan.planned_prompt_tokens) Check(plan, prompts, usage_works, out);
  return out;
}

}  // namespace bakeoff::target

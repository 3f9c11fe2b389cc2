// qualify/quality_probe.cc
//
// Owns: the quality probe (docs/formats/probes.md, "quality"): a prompt set (the user's
// --quality-set, else the built-in one) asked greedily (temperature 0, a fixed seed, non-streaming)
// on the API under test; each answer scored by its item's scorer (qualify/quality_set.h); the score
// is the fraction passed. Every output is kept in evidence/quality/outputs.jsonl ({id, output,
// passed, why} a line), so that a later study can compare candidates' outputs with each other.
// Finding: a score below ProbeOptions::quality_min_score is disqualifying ("the weights load" is
// not "the answers are right"). A random-weight model fails the built-in set, as it should.
// Does not own: the set format and the scorers (qualify/quality_set.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qualify/api_call.h"
#include "qualify/probes.h"
#include "qualify/quality_set.h"

namespace bakeoff::qualify {
namespace {

using nlohmann::json;

// A file-name-safe form of an item id, for its exchange's evidence file.
std::string FileSafe(const std::string& id) {
  std::string safe;
  for (char c : id.substr(0, 60))
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return safe;
}

json ItemBody(const QualityItem& item, const std::string& model, dialect::Api api) {
  json body = GreedyBody(model, api, PromptText(item), item.max_tokens);
  if (api == dialect::Api::kChat && !item.messages.empty()) body["messages"] = item.messages;
  return body;
}

}  // namespace

void ProbeQuality(ProbeContext& context, ProbeResult& result) {
  target::Candidate& candidate = context.candidate;
  Result<std::vector<QualityItem>> set = LoadQualitySet(context.options.quality_set);
  if (!set.ok()) {
    result.verdict = Verdict::kNotRun;
    result.not_run_reason = set.error().message;
    return;
  }
  Result<target::TargetFacts> facts = candidate.Facts();
  if (!facts.ok()) {
    result.Find(Severity::kDisqualifying, "no_model",
                "could not learn the model to request: " + facts.error().message);
    return;
  }
  const dialect::Api api = candidate.spec().api;
  const std::string path = dialect::ApiPath(api);
  std::string outputs;
  std::size_t passed = 0, index = 0;
  for (const QualityItem& item : *set) {
    ++index;
    std::string output, why;
    bool ok = false;
    std::vector<std::string> evidence;
    if (context.Expired()) {
      why = "not asked: the probe's time bound passed";
    } else {
      CallOptions options;
      options.timeout = 2 * context.options.answer_within;
      const ApiCall call = SendApi(context, fmt::format("item_{:03}_{}", index, FileSafe(item.id)),
                                   path, Dump(ItemBody(item, facts->model, api)), options);
      evidence.push_back(call.evidence);
      Result<dialect::CompletionResponse> decoded =
          call.Success() ? dialect::DecodeCompletionResponse(call.body)
                         : Result<dialect::CompletionResponse>(
                               MakeError(ErrorCode::kProtocol, call.Describe()));
      if (!decoded.ok()) {
        why = "no answer: " + decoded.error().message;
      } else {
        output = decoded->content;
        const ItemScore score = ScoreOutput(item, output);
        ok = score.passed;
        why = score.why;
      }
    }
    if (ok) ++passed;
    result.AddCheck(item.id, ok ? CheckStatus::kPass : CheckStatus::kFail,
                    fmt::format("{}: {}", ScorerName(item.scorer), why), std::move(evidence));
    outputs += Dump(json{{"id", item.id}, {"output", output}, {"passed", ok}, {"why", why}}) + "\n";
  }
  const std::string outputs_file = context.evidence.Write("outputs.jsonl", outputs);
  const double score = static_cast<double>(passed) / static_cast<double>(set->size());
  result.Measure("score", score, "fraction");
  result.Measure("items", static_cast<double>(set->size()), "items");
  result.Measure("passed", static_cast<double>(passed), "items");
  const double threshold = context.options.quality_min_score;
  if (score < threshold) {
    result.Find(
        Severity::kDisqualifying, "score_below_threshold",
        fmt::format("{} of {} items right ({:.2f}), below the minimum score {:.2f} ({}); "
                    "the outputs and why each failed are in the evidence",
                    passed, set->size(), score, threshold,
                    context.options.quality_set.empty() ? std::string("built-in set")
                                                        : context.options.quality_set.string()),
        {outputs_file});
  }
}

}  // namespace bakeoff::qualify

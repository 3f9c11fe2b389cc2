// run/calibrate.cc: the engine's step costs fitted from the outside (contract in calibrate.h).
#include "run/calibrate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "emulate/cost_model.h"
#include "run/calibration_load.h"
#include "stats/regression.h"
#include "target/discovery.h"
#include "target/prompt_calibration.h"

namespace bakeoff::run {
namespace {

// The decode experiment's answer length: long enough that most gaps are pure decode steps.
constexpr std::uint32_t kDecodeOutputTokens = 48;
constexpr std::uint32_t kPrefillPasses = 5;
constexpr int kDecodePasses = 2;
// A fit takes its extra term (prefill: the pair term, attention growing with the prompt's square;
// decode: the multi-token step's fixed cost) when the F statistic of adding it is above
// kExtraTermMinF, about the 5% point of F(1, n - k) for the 5 to 12 points calibration measures,
// and the term is at least kExtraTermMinShare of the fitted time where it weighs most (prefill:
// the longest prompt; decode: the fewest streams above one): a linear engine's timing jitter can
// pass the first test by chance, but not with a term that size.
constexpr double kExtraTermMinF = 8;
constexpr double kExtraTermMinShare = 0.05;
// A calibration whose passes differ in speed by more than this (the slowest pass's factor over
// the fastest's, less 1) says so: the fits pool the passes, so the preset describes an average of
// machines. Above the few percent that step noise gives a pass's median over the points.
constexpr double kSpeedChangeNote = 0.15;
// A point's weight is 1 / ms², its ms taken as at least this (a TTFT or step gap under a
// microsecond is not a time to weigh a million times more than a millisecond's).
constexpr double kShortestFittedMs = 1e-3;
// Step 3 (calibrate.h): prompts of these lengths, each twice, among this many decoding streams;
// the whole-batch fit is taken when it leaves under kWholeBatchResidualShare of the other's summed
// squared relative residual.
constexpr std::uint32_t kMixedStreams = 2;
constexpr std::uint32_t kMixedPrompts[] = {256, 512};
constexpr int kMixedRepeats = 2;
constexpr double kWholeBatchResidualShare = 0.5;

// Least squares of the relative residuals (weights 1 / ms²) with every cost at least 0
// (stats::FitNonNegative). Relative, because timing noise grows with the time: a 2,048-token
// prompt's TTFT varies by tens of ms where a 32-token one's varies by one, and plain least squares
// would let the long prompts' noise decide the fit (and hide a curve) while the short prompts,
// which a workload may be made of, come out tens of percent off. Where the fit makes a cost
// negative (a prefill that grows faster than its prompt pulls the fixed cost under 0), the best
// fit holds some at 0, and the fit names them.
CalibrationFit Fit(std::string name, std::string formula, const std::vector<std::string>& coefficient_names,
                   std::vector<CalibrationPoint> points,
                   const std::function<std::vector<double>(const CalibrationPoint&)>& regressors) {
  CalibrationFit fit;
  fit.name = std::move(name);
  fit.formula = std::move(formula);
  fit.coefficient_names = coefficient_names;
  fit.points = std::move(points);
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  std::vector<double> weights;
  for (const CalibrationPoint& p : fit.points) {
    rows.push_back(regressors(p));
    y.push_back(p.ms);
    weights.push_back(1 / std::pow(std::max(p.ms, kShortestFittedMs), 2));
  }
  // Two points beyond the coefficients at least, so R² can say something.
  const std::optional<stats::NonNegativeFit> line =
      fit.points.size() >= coefficient_names.size() + 2 ? stats::FitNonNegative(rows, y, weights) : std::nullopt;
  const bool collinear = line && !stats::FitLinear(rows, y, weights);
  if (!line || collinear) {
    fit.problem = collinear ? "the points do not tell the costs apart"
                            : fmt::format("{} points do not determine it", fit.points.size());
    return fit;
  }
  fit.coefficients = line->fit.coefficients;
  fit.r_squared = line->fit.r_squared;
  fit.rms_residual_ms = line->fit.rms_residual;
  fit.rms_relative_residual = std::sqrt(line->fit.weighted_ss_residual / static_cast<double>(fit.points.size()));
  for (std::size_t j = 0; j < coefficient_names.size(); ++j) {
    if (line->held_at_zero[j]) fit.held_at_zero.push_back(coefficient_names[j]);
  }
  if (!(fit.r_squared >= kGoodFitR2)) {
    fit.problem = fmt::format("poor fit: R² {:.3f} < {}", fit.r_squared, kGoodFitR2);
  } else if (std::all_of(line->held_at_zero.begin() + 1, line->held_at_zero.end(), [](bool held) { return held; })) {
    fit.problem = "every cost but the fixed one came out at 0: the model does not describe this engine there";
  }
  fit.good = fit.problem.empty();
  return fit;
}

// The F statistic of adding one term to a fit (`fuller` has one coefficient more than `simpler`):
// how much of the simpler fit's (relative) residual the extra coefficient explains, against the
// fuller fit's residual variance; 0 when either fit is missing or the fuller one leaves no degrees
// of freedom.
double ExtraTermF(const CalibrationFit& simpler, const CalibrationFit& fuller) {
  const std::size_t n = fuller.points.size();
  const std::size_t k = fuller.coefficients.size();
  if (simpler.coefficients.empty() || k == 0 || n <= k) return 0;
  const double rss_simpler = simpler.rms_relative_residual * simpler.rms_relative_residual * static_cast<double>(n);
  const double rss_fuller = fuller.rms_relative_residual * fuller.rms_relative_residual * static_cast<double>(n);
  if (rss_fuller <= 0) return rss_simpler > 0 ? INFINITY : 0;
  return (rss_simpler - rss_fuller) / (rss_fuller / static_cast<double>(n - k));
}

// The lone prefill fit's TTFT for `tokens` prefilled (the line, or the curve with the causal pairs).
double LonePrefillMs(const CalibrationFit& fit, double tokens) {
  double ms = fit.coefficients[0] + fit.coefficients[1] * tokens;
  if (fit.coefficients.size() == 3) {
    ms += fit.coefficients[2] * static_cast<double>(emulate::PrefillPairs(0, std::llround(tokens))) / 1e6;
  }
  return ms;
}

// The pair term's share of the prefill curve's TTFT at its longest prompt; 0 without a curve.
double PairTermShare(const CalibrationFit& curve) {
  if (curve.coefficients.size() != 3 || curve.points.empty()) return 0;
  double longest = 0;
  for (const CalibrationPoint& p : curve.points) longest = std::max(longest, p.context_tokens);
  const double pairs = static_cast<double>(emulate::PrefillPairs(0, std::llround(longest))) / 1e6;
  const double total = LonePrefillMs(curve, longest);
  return total > 0 ? curve.coefficients[2] * pairs / total : 0;
}

// The decode fit's terms beyond the per-sequence and per-KV-token ones: the multi-token step's
// fixed cost and the pair term (each stream's token against every stream's KV).
struct DecodeTerms {
  bool stepped = false;
  bool pairs = false;
};

// A decode point's regressors, the intercept (base_ms) first, in the order of DecodeFit's names.
std::vector<double> DecodeRow(const CalibrationPoint& p, DecodeTerms terms) {
  const double c = p.concurrency, kv = c * p.context_tokens;
  std::vector<double> row = {1.0};
  if (terms.stepped) row.push_back(c > 1 ? 1.0 : 0.0);
  row.push_back(c);
  row.push_back(kv / 1000);
  if (terms.pairs) row.push_back(c * kv / 1e6);
  return row;
}

CalibrationFit DecodeFit(const std::vector<CalibrationPoint>& points, DecodeTerms terms) {
  std::vector<std::string> names = {"base_ms"};
  std::string formula = "gap_ms = base_ms";
  if (terms.stepped) {
    names.emplace_back("multi_token_ms");
    formula += " + multi_token_ms x (streams > 1)";
  }
  names.insert(names.end(), {"decode_ms_per_seq", "kv_ms_per_1k_tokens"});
  formula += " + decode_ms_per_seq x streams + kv_ms_per_1k_tokens x streams x context / 1000";
  if (terms.pairs) {
    names.emplace_back("decode_ms_per_1m_pairs");
    formula += " + decode_ms_per_1m_pairs x streams x streams x context / 1e6";
  }
  return Fit("decode", formula, names, points, [terms](const CalibrationPoint& p) {
    std::vector<double> row = DecodeRow(p, terms);
    row.erase(row.begin());
    return row;
  });
}

// The share of coefficient `term` (an index into the fit's coefficients) in the fitted decode step,
// at the point where it weighs most; 0 without a fit.
double DecodeTermShare(const CalibrationFit& fit, DecodeTerms terms, std::size_t term) {
  if (fit.coefficients.size() <= term) return 0;
  double most = 0;
  for (const CalibrationPoint& p : fit.points) {
    const std::vector<double> row = DecodeRow(p, terms);
    double step = 0;
    for (std::size_t j = 0; j < row.size(); ++j) step += fit.coefficients[j] * row[j];
    if (step > 0) most = std::max(most, fit.coefficients[term] * row[term] / step);
  }
  return most;
}

// The decode fit with its optional terms (the multi-token step's fixed cost, only with points at
// one stream and at more; the pair term) chosen by backward elimination: from the fit with both,
// a term is dropped while it is too small (under kExtraTermMinShare where it weighs most) or not
// worth its coefficient (F against the fit without it not above kExtraTermMinF, unless the fit
// without it is not good), the weakest first. Both terms take some of the same curvature, so
// adding them one at a time missed an engine that has both. A note says what was kept or left out.
CalibrationFit ChooseDecodeFit(const std::vector<CalibrationPoint>& points, bool one_and_more,
                               std::vector<std::string>& notes) {
  DecodeTerms terms{.stepped = one_and_more, .pairs = true};
  CalibrationFit fit = DecodeFit(points, terms);
  std::vector<std::string> kept;
  while (terms.stepped || terms.pairs) {
    struct Candidate {
      bool stepped = false;  // dropping the multi-token term (else the pair term)
      std::string name;
      double f = 0;
      double share = 0;
      CalibrationFit without;
      bool holds = false;
    };
    std::vector<Candidate> candidates;
    if (terms.stepped) {
      candidates.push_back({true, "multi-token step cost (one stream's step far cheaper than two streams')", 0,
                            DecodeTermShare(fit, terms, 1), DecodeFit(points, {.stepped = false, .pairs = terms.pairs})});
    }
    if (terms.pairs) {
      candidates.push_back({false,
                            "pair term (each stream's token against every stream's KV: the step grows with the "
                            "streams' square)",
                            0, DecodeTermShare(fit, terms, fit.coefficients.size() - 1),
                            DecodeFit(points, {.stepped = terms.stepped, .pairs = false})});
    }
    for (Candidate& c : candidates) {
      c.f = ExtraTermF(c.without, fit);
      c.holds = fit.good && c.share >= kExtraTermMinShare && (!c.without.good || c.f > kExtraTermMinF);
    }
    Candidate* weakest = nullptr;
    for (Candidate& c : candidates) {
      if (!c.holds && (weakest == nullptr || c.f < weakest->f)) weakest = &c;
    }
    if (weakest == nullptr) {
      for (const Candidate& c : candidates) {
        kept.push_back(fmt::format("the {}, {:.0f}% of the fitted time where it weighs most, is kept: {}", c.name,
                                   100 * c.share,
                                   c.without.good ? fmt::format("F = {:.1f} against the fit without it, above {}", c.f,
                                                                kExtraTermMinF)
                                                  : "without it the fit is not good: " + c.without.problem));
      }
      break;
    }
    if (fit.good && weakest->share >= kExtraTermMinShare) {
      notes.push_back(fmt::format("decode: the {}, {:.0f}% of the fitted time where it weighs most, is left out: F = "
                                  "{:.1f} against the fit without it, not above {}",
                                  weakest->name, 100 * weakest->share, weakest->f, kExtraTermMinF));
    }
    (weakest->stepped ? terms.stepped : terms.pairs) = false;
    fit = std::move(weakest->without);
  }
  for (const std::string& k : kept) notes.push_back("decode: " + k);
  return fit;
}

// A fit's coefficient by name; 0 when the fit does not have it.
double CoefficientOf(const CalibrationFit& fit, std::string_view name) {
  for (std::size_t j = 0; j < fit.coefficient_names.size() && j < fit.coefficients.size(); ++j) {
    if (fit.coefficient_names[j] == name) return fit.coefficients[j];
  }
  return 0;
}

// Of a fit with and without an extra term, the one to keep and a note saying why (empty when the
// fuller fit is not usable or its term is too small to matter). `term` names the term.
const CalibrationFit& KeepExtraTerm(const CalibrationFit& simpler, const CalibrationFit& fuller, double share,
                                    std::string_view term, std::string& note) {
  if (!fuller.good || share < kExtraTermMinShare) return simpler;
  const double f = ExtraTermF(simpler, fuller);
  const bool kept = !simpler.good || f > kExtraTermMinF;
  const std::string why = !simpler.good ? fmt::format("without it the fit is not good: {}", simpler.problem)
                                        : fmt::format("F = {:.1f} against the fit without it, {} {}", f,
                                                      kept ? "above" : "not above", kExtraTermMinF);
  note = fmt::format("{}: the {}, {:.0f}% of the fitted time where it weighs most, is {}: {}", fuller.name, term,
                     100 * share, kept ? "kept" : "left out", why);
  return kept ? fuller : simpler;
}

std::string Quoted(std::string_view text) { return nlohmann::json(std::string(text)).dump(); }

// Each pass's speed against the points' own: for every point measured in two passes or more, each
// pass's figure over that point's median across its passes; per pass, the median of those ratios
// (1 = as usual, 1.2 = 20% slower). `by_point[i][p]` is point i's figure in pass p, 0 when none.
// Passes no point compares are left off the end.
std::vector<double> PassFactors(const std::vector<std::vector<double>>& by_point) {
  std::vector<std::vector<double>> ratios;
  for (const std::vector<double>& passes : by_point) {
    std::vector<double> measured;
    for (double ms : passes) {
      if (ms > 0) measured.push_back(ms);
    }
    if (measured.size() < 2) continue;
    const double median = MedianOf(measured);
    if (ratios.size() < passes.size()) ratios.resize(passes.size());
    for (std::size_t p = 0; p < passes.size(); ++p) {
      if (passes[p] > 0) ratios[p].push_back(passes[p] / median);
    }
  }
  std::vector<double> factors;
  for (const std::vector<double>& pass : ratios) {
    if (pass.empty()) break;
    factors.push_back(MedianOf(pass));
  }
  return factors;
}

// The slowest pass's factor over the fastest's, less 1; 0 with fewer than two.
double SpeedChange(const std::vector<double>& factors) {
  if (factors.size() < 2) return 0;
  const auto [fastest, slowest] = std::minmax_element(factors.begin(), factors.end());
  return *slowest / *fastest - 1;
}

bool SpeedChanged(const CalibrationOutcome& outcome) {
  return std::max(SpeedChange(outcome.prefill_pass_speed), SpeedChange(outcome.decode_pass_speed)) > kSpeedChangeNote;
}

// The calibration block of the preset: YAML the preset reader skips (docs/engine-presets.md).
std::string CalibrationYaml(const CalibrateConfig& config, const std::string& model, const CalibrationOutcome& outcome) {
  std::string out = "calibration:\n";
  out += fmt::format("  by: {}\n  url: {}\n  model: {}\n  date: {}\n  seed: {}\n  good_fit_r2: {}\n",
                     Quoted("bakeoff calibrate"), Quoted(config.url), Quoted(model), Quoted(UtcNowIso()), config.seed,
                     kGoodFitR2);
  out += "  fits:\n";
  for (const CalibrationFit& f : outcome.fits) {
    out += fmt::format("    {}:\n      formula: {}\n      quality: {}\n", f.name, Quoted(f.formula),
                       f.good ? "good" : Quoted(f.problem));
    if (!f.coefficients.empty()) {
      out += fmt::format(
          "      coefficients: [{:.6g}]\n      r2: {:.4f}\n      rms_residual_ms: {:.4g}\n      rms_relative_residual: "
          "{:.4g}\n",
          fmt::join(f.coefficients, ", "), f.r_squared, f.rms_residual_ms, f.rms_relative_residual);
      if (!f.held_at_zero.empty()) {
        out += fmt::format("      held_at_zero: [{}]  # by the non-negative fit\n", fmt::join(f.held_at_zero, ", "));
      }
    }
    out += "      points:  # [planned prompt tokens, streams, tokens (prefill: prefilled; decode: mean context), ms, "
           "requests, other streams' KV tokens (a prompt among streams), cleared slots' KV tokens (prefill)]\n";
    for (const CalibrationPoint& p : f.points) {
      out += fmt::format("        - [{}, {}, {:.1f}, {:.4f}, {}, {:.0f}, {:.0f}]\n", p.prompt_tokens, p.concurrency,
                         p.context_tokens, p.ms, p.requests, p.others_kv_tokens, p.idle_kv_tokens);
    }
  }
  if (!outcome.prefill_pass_speed.empty() || !outcome.decode_pass_speed.empty()) {
    out += fmt::format(
        "  pass_speed:  # each pass's time over the points' median across passes (1 = as usual; > 1 slower)\n"
        "    prefill: [{:.3f}]\n    decode: [{:.3f}]\n    changed: {}  # the slowest pass over the fastest beyond {}\n",
        fmt::join(outcome.prefill_pass_speed, ", "), fmt::join(outcome.decode_pass_speed, ", "), SpeedChanged(outcome),
        kSpeedChangeNote);
  }
  if (!outcome.mixed_points.empty()) {
    out += fmt::format(
        "  prompt_among_streams:\n    whole_batch_attention: {}\n    rms_relative_residual:  # over every prefill "
        "point\n      own_attention: {:.4g}\n      whole_batch: {:.4g}\n    points:  # [prompt tokens prefilled, other "
        "streams' KV tokens, its TTFT ms less the streams' share of the step]\n",
        outcome.whole_batch_attention, outcome.own_attention_residual, outcome.whole_batch_residual);
    for (const CalibrationPoint& p : outcome.mixed_points) {
      out += fmt::format("      - [{:.0f}, {:.0f}, {:.4f}]\n", p.context_tokens, p.others_kv_tokens, p.ms);
    }
  }
  if (outcome.slots > 0) {
    const IdleSlotsOutcome& idle = outcome.idle_slots;
    out += fmt::format(
        "  idle_slots:\n    slots: {}\n    slots_keep_kv: {}\n    finding: {}\n    rms_log_ratio:  # ln(measured / predicted) "
        "of the probes after filling, predicted with the kept cells attended and with nothing kept\n      kept: {:.4g}\n      "
        "none: {:.4g}\n    points:  # [planned prompt tokens, prefilled, other slots' KV tokens cleared, filled, TTFT ms "
        "cleared, filled, predicted filled / cleared, predicted filled ms with the kept cells attended, without]\n",
        outcome.slots, idle.slots_keep_kv, Quoted(idle.finding), idle.kept_residual, idle.none_residual);
    for (const IdleSlotProbe& p : idle.probes) {
      out += fmt::format("      - [{}, {:.0f}, {:.0f}, {:.0f}, {:.4f}, {:.4f}, {:.4f}, {:.4f}, {:.4f}]\n", p.prompt_tokens,
                         p.prefilled_tokens, p.cleared_kept_tokens, p.filled_kept_tokens, p.cleared_ms, p.filled_ms,
                         p.predicted_ratio, p.kept_ms, p.none_ms);
    }
  }
  out += "  limits:\n";
  for (const LimitFinding& f : outcome.limits) {
    out += fmt::format("    {}:\n      determined: {}\n      finding: {}\n      points:  # {}\n", f.setting,
                       f.determined, Quoted(f.finding), f.points_format);
    for (const std::vector<double>& p : f.points) out += fmt::format("        - [{:.6g}]\n", fmt::join(p, ", "));
  }
  out += "  not_determined:\n";
  for (const std::string& what : outcome.not_determined) out += fmt::format("    - {}\n", Quoted(what));
  return out;
}

// Why PromptAmongStreams measured nothing when the streams' prompts are too long for the context
// (a slow engine's streams must answer for long to outlast the prompt): shorter ones may fit.
constexpr std::string_view kStreamsDoNotFit = "the context cannot hold streams that outlast the prompt";

// Step 3's point: a `prompt`-token prompt arriving while kMixedStreams streams of `stream_prompt`
// tokens decode, timed from the fits (`cost`: the decode fit's; `prefill`: the lone one) so the
// streams are decoding when it arrives and outlast its prefill. nullopt, with `why`, when the point
// could not be had.
std::optional<CalibrationPoint> PromptAmongStreams(const load::TargetSpec& target, const emulate::CostModel& cost,
                                                   const CalibrationFit& prefill, std::uint32_t stream_prompt,
                                                   std::uint32_t prompt, std::uint64_t context, Nanos time_left,
                                                   std::uint64_t seed, const std::atomic<bool>& stop, std::string& why) {
  const double gap = emulate::StepMillis(
      cost, {.decode_seqs = kMixedStreams, .kv_tokens = std::int64_t{kMixedStreams} * stream_prompt});
  // Three times the streams' prefill as the lone fit prices it: batched together, beside what the
  // slots of a unified cache still hold, it costs more than alone (llama.cpp: up to twice).
  const double arrive_ms = 3 * LonePrefillMs(prefill, double(kMixedStreams) * stream_prompt) + 10 * gap;
  const double outlast_ms = arrive_ms + 3 * LonePrefillMs(prefill, prompt);
  const auto output = static_cast<std::uint32_t>(std::ceil(outlast_ms / std::max(gap, 0.01))) + 32;
  if (std::uint64_t{stream_prompt} + output + 64 > context) {
    why = kStreamsDoNotFit;
    return std::nullopt;
  }
  if (outlast_ms + output * gap > ToMillis(time_left)) {
    why = "streams that outlast the prompt do not fit the budget left";
    return std::nullopt;
  }
  std::vector<workload::TraceRequest> requests(kMixedStreams, TraceRequestOf(0, stream_prompt, output));
  requests.push_back(TraceRequestOf(arrive_ms / 1000, prompt, 1));
  const CalibrationLoad load =
      RunTracePoint(target, TraceOf(std::move(requests)), seed, stop, std::max<Nanos>(time_left, std::chrono::minutes(1)));
  std::vector<measure::RequestRecord> probe;
  std::vector<const measure::RequestRecord*> streams;
  for (const measure::RequestRecord& r : load.ok) {
    if (r.prompt_tokens_planned == prompt) {
      probe.push_back(r);
    } else {
      streams.push_back(&r);
    }
  }
  if (probe.size() != 1 || streams.size() != kMixedStreams) {
    why = "a request failed" + (load.first_error.empty() ? "" : ": " + load.first_error);
    return std::nullopt;
  }
  const MonoTime sent = *probe[0].send_start, first = *probe[0].first_token;
  double others = 0;
  for (const measure::RequestRecord* stream : streams) {
    if (!stream->first_token || *stream->first_token >= sent) {
      why = "it arrived before the streams' prefill ended";
      return std::nullopt;
    }
    if (!stream->last_token || *stream->last_token <= first) {
      why = "a stream ended before the prompt's first token";
      return std::nullopt;
    }
    others += static_cast<double>(stream->usage_prompt_tokens.value_or(stream_prompt));
    for (const measure::TokenEvent& e : stream->token_events) {
      if (e.at < sent) others += e.tokens;
    }
  }
  const PromptCount counted = CountedPrompt(probe, prompt);
  const double tokens = counted.tokens - counted.cached;
  // The step that prefilled it decoded the streams too, and it arrived mid-step (half a step on
  // average). The streams' share is their decode and KV terms (the pairs are what is measured).
  emulate::CostModel decode_terms = cost;
  decode_terms.prefill_ms_per_1m_pairs = 0;
  const std::int64_t p = std::llround(tokens);
  const double streams_share =
      emulate::StepMillis(decode_terms,
                          {.prefill_tokens = p, .decode_seqs = kMixedStreams, .kv_tokens = p + std::llround(others)}) -
      emulate::StepMillis(decode_terms, {.prefill_tokens = p, .kv_tokens = p});
  return CalibrationPoint{prompt, kMixedStreams + 1, tokens, TtftMs(probe[0]) - streams_share - gap / 2, 1, others};
}

// The prefill fit with the pairs of the whole batch over `points` (lone ones and prompts among
// streams): each prompt token against its own, the streams' and, when `idle_attended`, what the
// cleared slots beside it kept.
CalibrationFit WholeBatchFit(std::vector<CalibrationPoint> points, bool idle_attended) {
  return Fit("prefill",
             fmt::format("ttft_ms = overhead_ms + ms_per_prompt_token x prompt_tokens + ms_per_1m_pairs x prompt_tokens x "
                         "(prompt_tokens + the other streams' KV tokens{}) / 1e6 (whole_batch_attention)",
                         idle_attended ? " + the cleared slots' KV tokens" : ""),
             {"overhead_ms", "ms_per_prompt_token", "ms_per_1m_pairs"}, std::move(points),
             [idle_attended](const CalibrationPoint& p) {
               const double kv = p.context_tokens + p.others_kv_tokens + (idle_attended ? p.idle_kv_tokens : 0);
               return std::vector<double>{p.context_tokens, p.context_tokens * kv / 1e6};
             });
}

// Step 3's choice: the prefill fit over the lone points and the prompts among streams with the
// pairs of the whole batch, or the lone fit as it is (predicting them); `prefill` becomes the
// one taken.
// `idle_attended`: the whole-batch fit counts what the cleared slots kept (step 4 may undo it).
void ChooseAttention(std::vector<CalibrationPoint> mixed, bool idle_attended, CalibrationFit& prefill,
                     CalibrationOutcome& outcome) {
  double own_ss = std::pow(prefill.rms_relative_residual, 2) * static_cast<double>(prefill.points.size());
  double excess = 0;
  for (const CalibrationPoint& p : mixed) {
    const double alone = LonePrefillMs(prefill, p.context_tokens);
    own_ss += std::pow((p.ms - alone) / std::max(p.ms, kShortestFittedMs), 2);
    excess += (p.ms / alone - 1) / static_cast<double>(mixed.size());
  }
  std::vector<CalibrationPoint> all = prefill.points;
  all.insert(all.end(), mixed.begin(), mixed.end());
  const double n = static_cast<double>(all.size());
  CalibrationFit whole = WholeBatchFit(std::move(all), idle_attended);
  outcome.mixed_points = std::move(mixed);
  outcome.own_attention_residual = std::sqrt(own_ss / n);
  outcome.whole_batch_residual = whole.coefficients.empty() ? NAN : whole.rms_relative_residual;
  if (!whole.good || whole.coefficients[2] <= 0 ||
      !(std::pow(whole.rms_relative_residual, 2) * n < kWholeBatchResidualShare * own_ss)) {
    return;
  }
  outcome.notes.push_back(fmt::format(
      "prefill: a prompt arriving while {} streams decode took {:.0f}% longer than alone, beyond the streams' share of "
      "the step: its attention covers their KV too (relative residual {:.1f}% with it, {:.1f}% without); the preset "
      "takes whole_batch_attention",
      kMixedStreams, 100 * excess, 100 * outcome.whole_batch_residual, 100 * outcome.own_attention_residual));
  outcome.whole_batch_attention = true;
  prefill = std::move(whole);
}

Error NothingMeasured(const CalibrateConfig& config, const std::atomic<bool>& stop, const std::string& first_error) {
  if (stop.load()) return MakeError(ErrorCode::kCancelled, "calibrate: stopped before any point was measured");
  return MakeError(ErrorCode::kUnavailable, fmt::format("calibrate: no request to {} succeeded{}", config.url,
                                                        first_error.empty() ? "" : ": " + first_error));
}

}  // namespace

// One decode point of the sweep (c streams at one prompt length) over its passes.
struct DecodeSample {
  std::uint32_t prompt_tokens = 0;
  std::uint32_t streams = 0;
  std::vector<double> gaps;       // ms per token, every pass's
  std::vector<double> pass_median = std::vector<double>(kDecodePasses, 0);  // each pass's median gap; 0 = none
  double context_tokens = 0;      // the passes' mean contexts, summed
  int passes = 0;                 // passes that gave gaps
  std::uint64_t requests = 0;
  bool never_together = false;    // the engine never ran all its streams at once
};

// Adds pass `pass`'s gaps to `sample`: only those while every stream decodes, after the last
// stream's first token (every prompt is prefilled) and before the first one ends. False when
// there are none.
bool AddDecodeGaps(const std::vector<measure::RequestRecord>& ok, int pass, DecodeSample& sample) {
  MonoTime all_started = MonoTime::min(), first_done = MonoTime::max();
  double output_tokens = 0;
  for (const measure::RequestRecord& r : ok) {
    all_started = std::max(all_started, *r.first_token);
    first_done = std::min(first_done, r.last_token.value_or(*r.first_token));
    output_tokens += static_cast<double>(r.OutputTokens()) / static_cast<double>(ok.size());
  }
  const std::size_t before = sample.gaps.size();
  for (const measure::RequestRecord& r : ok) {
    for (std::size_t i = 1; i < r.token_events.size(); ++i) {
      if (r.token_events[i - 1].at < all_started || r.token_events[i].at > first_done) continue;
      sample.gaps.push_back(ToMillis(r.token_events[i].at - r.token_events[i - 1].at) /
                            std::max<std::uint32_t>(1, r.token_events[i].tokens));
    }
  }
  if (sample.gaps.size() == before) return false;
  sample.pass_median[pass] = MedianOf({sample.gaps.begin() + static_cast<std::ptrdiff_t>(before), sample.gaps.end()});
  sample.context_tokens += CountedPrompt(ok, sample.prompt_tokens).tokens + output_tokens / 2;
  sample.passes += 1;
  sample.requests += ok.size();
  return true;
}

Result<CalibrationOutcome> Calibrate(const CalibrateConfig& config, const std::atomic<bool>& stop,
                                     const std::function<void(const std::string&)>& log) {
  const MonoTime started = RealClock().Now();
  const auto over_budget = [&] { return stop.load() || RealClock().Now() - started > config.budget; };
  load::TargetSpec target = config.target;
  Result<target::TargetFacts> facts = target::Discover(target.endpoint, target.client, target.request.model);
  if (!facts.ok()) return facts.error();
  target.request.model = facts->model;
  CalibrationOutcome outcome;
  outcome.preset = config.base;
  if (facts->emulated) outcome.notes.push_back("the target is bakeoff's emulated engine: the fit describes its model");

  target::CalibrationPlan plan;
  plan.endpoint = target.endpoint;
  plan.client = target.client;
  plan.request = target.request;
  plan.seed = config.seed;
  plan.max_context_tokens = facts->max_context_tokens;
  plan.stop = &stop;
  const target::PromptCalibration sizing = target::CalibratePrompts(plan, load::PromptText());
  if (sizing.checked) {
    target.prompt_sizing = sizing.sizing;
  } else {
    outcome.notes.push_back("prompt lengths not calibrated (" + sizing.reason + "): the fits use the server's usage counts");
  }
  const std::uint64_t context = facts->max_context_tokens.value_or(8192);
  const auto fits_context = [&](std::uint32_t prompt, std::uint32_t output) {
    return static_cast<std::uint64_t>(prompt) + output + 64 <= context;
  };

  // 1. Prefill: TTFT of one request at a time against its prompt length.
  std::vector<CalibrationPoint> prefill_points;
  std::string first_error;
  std::uint64_t seed = config.seed;
  // The slots: the server's count where it says one, else the base preset's. An engine of more than
  // kMaxSlotsProbed (a paged-KV engine's hundreds) is neither cleared nor probed.
  const std::uint64_t slots = facts->slots.value_or(static_cast<std::uint64_t>(config.base.config.max_num_seqs));
  const bool clearing = slots <= kMaxSlotsProbed;
  double cleared_tokens = 0;  // what each slot keeps after the last clearing burst
  const auto clear_slots = [&] {
    if (clearing) cleared_tokens = ClearSlots(target, static_cast<std::uint32_t>(slots), ++seed, stop);
  };
  // The KV tokens the cleared slots keep beside a point that runs `busy` requests at once.
  const auto idle_beside = [&](std::uint32_t busy) {
    return clearing ? static_cast<double>(slots - std::min<std::uint64_t>(slots, busy)) * cleared_tokens : 0.0;
  };
  // A prompt longer than one step's token budget is prefilled in chunks, each with its own fixed
  // cost: the line holds only for prompts of one chunk (the base preset's budget, the engine's
  // being unknown).
  const std::int64_t one_chunk = config.base.config.chunked_prefill && config.base.config.prefill_chunk_tokens > 0
                                     ? std::min(config.base.config.prefill_chunk_tokens, config.base.config.max_batched_tokens)
                                     : config.base.config.max_batched_tokens;
  std::vector<std::uint32_t> prefill_prompts;
  for (std::uint32_t prompt : {32u, 128u, 256u, 512u, 768u, 1024u, 1536u, 2048u, 4096u}) {
    if (!config.costs || !fits_context(prompt, 1) || prompt > one_chunk) break;
    prefill_prompts.push_back(prompt);
  }
  // Each pass sends one request of every length, every other pass longest first, so a machine
  // whose speed drifts meanwhile slows every length alike instead of bending the line.
  std::vector<std::vector<measure::RequestRecord>> prefill_ok(prefill_prompts.size());
  std::vector<std::vector<double>> prefill_by_pass(prefill_prompts.size(), std::vector<double>(kPrefillPasses, 0));
  for (std::uint32_t pass = 0; pass < kPrefillPasses; ++pass) {
    for (std::size_t k = 0; k < prefill_prompts.size() && !over_budget(); ++k) {
      const std::size_t at = pass % 2 == 0 ? k : prefill_prompts.size() - 1 - k;
      log(fmt::format("prefill ({} of {}): {} prompt tokens", pass + 1, kPrefillPasses, prefill_prompts[at]));
      clear_slots();
      CalibrationLoad m = RunClosedPoint(target, prefill_prompts[at], 1, 1, 1, ++seed, stop);
      if (first_error.empty()) first_error = m.first_error;
      for (measure::RequestRecord& r : m.ok) {
        prefill_by_pass[at][pass] = TtftMs(r);
        prefill_ok[at].push_back(std::move(r));
      }
    }
  }
  outcome.prefill_pass_speed = PassFactors(prefill_by_pass);
  for (std::size_t at = 0; at < prefill_prompts.size(); ++at) {
    const std::vector<measure::RequestRecord>& ok = prefill_ok[at];
    if (ok.empty()) continue;
    std::vector<double> ttft;
    for (const measure::RequestRecord& r : ok) ttft.push_back(TtftMs(r));
    // Only the tokens the server prefilled: a prompt it found cached costs less.
    const PromptCount counted = CountedPrompt(ok, prefill_prompts[at]);
    if (counted.cached > 0) {
      outcome.notes.push_back(fmt::format("prefill: the server found {:.0f} of {:.0f} prompt tokens cached at {}; the fit "
                                          "uses the tokens it prefilled",
                                          counted.cached, counted.tokens, prefill_prompts[at]));
    }
    prefill_points.push_back(
        {prefill_prompts[at], 1, counted.tokens - counted.cached, MedianOf(ttft), ok.size(), 0, idle_beside(1)});
  }
  // 2. Decode: the median gap between token events of c streams at once, at a short and a long
  // context (2,048 tokens, or half a shorter context). The sweep runs twice, the second time in
  // reverse, and each point pools its gaps from both: a machine whose speed drifts during the
  // sweep pulls every point the same way on average instead of tilting the fit.
  std::vector<DecodeSample> decode_samples;
  std::vector<std::uint32_t> decode_contexts = {128};
  if (context / 2 >= 512) decode_contexts.push_back(static_cast<std::uint32_t>(std::min<std::uint64_t>(2048, context / 2)));
  for (std::uint32_t prompt : decode_contexts) {
    for (std::uint32_t c : {1u, 2u, 3u, 4u, 8u, 16u, 32u}) {
      if (!config.costs || c > config.max_concurrency || !fits_context(prompt, kDecodeOutputTokens)) break;
      DecodeSample& sample = decode_samples.emplace_back();
      sample.prompt_tokens = prompt;
      sample.streams = c;
    }
  }
  for (int pass = 0; pass < kDecodePasses; ++pass) {
    for (std::size_t k = 0; k < decode_samples.size() && !over_budget(); ++k) {
      DecodeSample& sample = decode_samples[pass == 0 ? k : decode_samples.size() - 1 - k];
      if (sample.never_together) continue;
      log(fmt::format("decode ({} of {}): {} streams of {} prompt tokens", pass + 1, kDecodePasses, sample.streams,
                      sample.prompt_tokens));
      clear_slots();
      const CalibrationLoad m =
          RunClosedPoint(target, sample.prompt_tokens, kDecodeOutputTokens, sample.streams, sample.streams, ++seed, stop);
      if (first_error.empty()) first_error = m.first_error;
      if (m.ok.size() < sample.streams) {
        outcome.notes.push_back(fmt::format("decode: {} of {} streams of {} prompt tokens failed; that pass's gaps are "
                                            "left out",
                                            sample.streams - m.ok.size(), sample.streams, sample.prompt_tokens));
        continue;
      }
      if (!AddDecodeGaps(m.ok, pass, sample) && sample.passes == 0) {
        // More streams than the engine runs at once: more would not either.
        outcome.notes.push_back(fmt::format("decode: {} streams of {} prompt tokens never all decoded at once; the "
                                            "point is left out, and more streams are not tried",
                                            sample.streams, sample.prompt_tokens));
        for (DecodeSample& more : decode_samples) {
          if (more.prompt_tokens == sample.prompt_tokens && more.streams >= sample.streams) more.never_together = true;
        }
      }
    }
  }
  std::vector<CalibrationPoint> decode_points;
  std::vector<std::vector<double>> decode_by_pass;
  for (const DecodeSample& sample : decode_samples) {
    if (sample.never_together || sample.gaps.empty()) continue;
    decode_points.push_back({sample.prompt_tokens, sample.streams, sample.context_tokens / sample.passes,
                             MedianOf(sample.gaps), sample.requests});
    decode_by_pass.push_back(sample.pass_median);
  }
  if (config.costs && prefill_points.empty() && decode_points.empty()) {
    return NothingMeasured(config, stop, first_error);
  }
  if (!first_error.empty()) outcome.notes.push_back("some requests failed, e.g. " + first_error);
  // An endpoint whose speed changed between passes: said, with each pass's factor.
  outcome.decode_pass_speed = PassFactors(decode_by_pass);
  if (SpeedChanged(outcome)) {
    outcome.notes.push_back(fmt::format(
        "the endpoint's speed changed during calibration: the prefill passes took [{:.2f}] and the decode passes "
        "[{:.2f}] times each point's median (the slowest pass {:.0f}% and {:.0f}% over the fastest); the fits pool the "
        "passes, so the preset describes an average of them: validate it (--validate), whose lone-request probes show "
        "the speed at each load",
        fmt::join(outcome.prefill_pass_speed, ", "), fmt::join(outcome.decode_pass_speed, ", "),
        100 * SpeedChange(outcome.prefill_pass_speed), 100 * SpeedChange(outcome.decode_pass_speed)));
  }

  std::set<std::uint32_t> decode_prompts;
  for (const CalibrationPoint& p : decode_points) decode_prompts.insert(p.prompt_tokens);
  // Decode: linear in the streams and their context, with the multi-token step's fixed cost and
  // the pair term where the points show them (ChooseDecodeFit).
  const bool one_and_more = std::any_of(decode_points.begin(), decode_points.end(),
                                        [](const CalibrationPoint& p) { return p.concurrency == 1; }) &&
                            std::any_of(decode_points.begin(), decode_points.end(),
                                        [](const CalibrationPoint& p) { return p.concurrency > 1; });
  CalibrationFit decode = ChooseDecodeFit(decode_points, one_and_more, outcome.notes);
  if (decode.good && decode_prompts.size() < 2) {
    decode.good = false;
    decode.problem = "one prompt length: the per-sequence and per-KV-token costs cannot be told apart";
  }
  // Prefill: a line, or with the pair term when the points curve upwards more than noise does.
  const CalibrationFit prefill_line = Fit("prefill", "ttft_ms = overhead_ms + ms_per_prompt_token x prompt_tokens",
                                          {"overhead_ms", "ms_per_prompt_token"}, prefill_points,
                                          [](const CalibrationPoint& p) { return std::vector<double>{p.context_tokens}; });
  const CalibrationFit prefill_curve =
      Fit("prefill",
          "ttft_ms = overhead_ms + ms_per_prompt_token x prompt_tokens + ms_per_1m_pairs x prompt_tokens x "
          "(prompt_tokens + 1) / 2 / 1e6",
          {"overhead_ms", "ms_per_prompt_token", "ms_per_1m_pairs"}, prefill_points, [](const CalibrationPoint& p) {
            return std::vector<double>{p.context_tokens,
                                       static_cast<double>(emulate::PrefillPairs(0, std::llround(p.context_tokens))) / 1e6};
          });
  std::string prefill_note;
  CalibrationFit prefill = KeepExtraTerm(prefill_line, prefill_curve, PairTermShare(prefill_curve),
                                         "pair term (attention growing with the prompt's square)", prefill_note);
  if (!prefill_note.empty()) outcome.notes.push_back(prefill_note);
  emulate::CostModel& cost = outcome.preset.config.cost;
  if (decode.good) {
    cost.base_ms = CoefficientOf(decode, "base_ms");
    cost.multi_token_ms = CoefficientOf(decode, "multi_token_ms");
    cost.decode_ms_per_seq = CoefficientOf(decode, "decode_ms_per_seq");
    cost.kv_ms_per_1k_tokens = CoefficientOf(decode, "kv_ms_per_1k_tokens");
    cost.decode_ms_per_1m_pairs = CoefficientOf(decode, "decode_ms_per_1m_pairs");
  }
  // 3. A prompt among streams, timed by the fits so far.
  if (decode.good && prefill.good && decode_contexts.size() >= 2) {
    std::vector<CalibrationPoint> mixed;
    std::vector<std::string> left_out;
    for (int round = 0; round < kMixedRepeats; ++round) {
      for (std::uint32_t prompt : kMixedPrompts) {
        if (over_budget() || prompt >= decode_contexts.back() ||
            std::find(prefill_prompts.begin(), prefill_prompts.end(), prompt) == prefill_prompts.end()) {
          continue;
        }
        log(fmt::format("a prompt among streams ({} of {}): {} prompt tokens while {} streams decode", round + 1,
                        kMixedRepeats, prompt, kMixedStreams));
        clear_slots();
        const Nanos time_left = config.budget - (RealClock().Now() - started);
        std::string why;
        std::optional<CalibrationPoint> point;
        // The long decode context's streams, or half as long while they do not fit (not under the prompt).
        for (std::uint32_t streams = decode_contexts.back(); !point && streams > prompt; streams /= 2) {
          point = PromptAmongStreams(target, cost, prefill, streams, prompt, context, time_left, ++seed, stop, why);
          if (why != kStreamsDoNotFit) break;
        }
        if (point) {
          point->idle_kv_tokens = idle_beside(kMixedStreams + 1);
          mixed.push_back(*point);
        } else {
          left_out.push_back(fmt::format("{} tokens: {}", prompt, why));
        }
      }
    }
    if (!left_out.empty()) {
      outcome.notes.push_back(fmt::format("a prompt among streams: {} of {} points left out ({})", left_out.size(),
                                          left_out.size() + mixed.size(), fmt::join(left_out, "; ")));
    }
    if (mixed.size() >= 2) ChooseAttention(std::move(mixed), clearing, prefill, outcome);
  }
  // 4. What idle slots keep: only an engine attending the whole batch's KV pays for them.
  if (outcome.whole_batch_attention && !clearing) {
    outcome.not_determined.push_back(
        fmt::format("slots_keep_kv: not probed ({} slots, more than {}); the base preset's", slots, kMaxSlotsProbed));
  } else if (outcome.whole_batch_attention) {
    const WholeBatchPrefill fit{prefill.coefficients[0], prefill.coefficients[1], prefill.coefficients[2],
                                cost.kv_ms_per_1k_tokens};
    const auto fill = static_cast<std::uint32_t>(std::min<std::uint64_t>(1024, context / 2));
    outcome.slots = static_cast<std::uint32_t>(slots);
    outcome.idle_slots = MeasureIdleSlots(target, outcome.slots, fill, fit, seed, over_budget, stop, log);
    if (first_error.empty()) first_error = outcome.idle_slots.first_error;
    if (outcome.idle_slots.probes.empty()) {
      outcome.not_determined.push_back("slots_keep_kv: " + outcome.idle_slots.finding + "; the base preset's");
    } else {
      outcome.preset.config.slots_keep_kv = outcome.idle_slots.slots_keep_kv;
      outcome.notes.push_back("idle slots: " + outcome.idle_slots.finding);
    }
    // Slots that keep nothing: the whole-batch fit again without the cleared slots' KV.
    if (!outcome.preset.config.slots_keep_kv) {
      if (CalibrationFit refit = WholeBatchFit(prefill.points, false); refit.good) prefill = std::move(refit);
    }
  }
  const bool curved = prefill.coefficients.size() == 3;
  if (prefill.good) {
    // The prefill step's KV term (kv_tokens = the prompt) is part of the slope.
    cost.prefill_ms_per_token = std::max(0.0, prefill.coefficients[1] - cost.kv_ms_per_1k_tokens / 1000);
    cost.prefill_ms_per_1m_pairs = curved ? prefill.coefficients[2] : 0;
    cost.whole_batch_attention = outcome.whole_batch_attention;
    if (prefill.coefficients[1] < cost.kv_ms_per_1k_tokens / 1000) {
      outcome.notes.push_back("prefill: the slope is under the decode fit's KV cost per token; prefill_ms_per_token is 0");
    }
  }
  if (config.costs) {
    const CalibrationFit* const fits[] = {&prefill, &decode};
    for (const CalibrationFit* f : fits) {
      if (!f->good) outcome.notes.push_back(fmt::format("{}: {}; its costs are the base preset's", f->name, f->problem));
    }
    outcome.fits = {prefill, decode};
  } else {
    outcome.not_determined.push_back("the step costs: not measured (the base preset's)");
  }

  // The server's context limit is the preset's; then the limits, with the fitted costs.
  emulate::EngineConfig& engine = outcome.preset.config;
  if (facts->max_context_tokens && *facts->max_context_tokens >= 2) {
    engine.max_model_len = static_cast<std::int64_t>(*facts->max_context_tokens);
    engine.max_batched_tokens = engine.chunked_prefill ? engine.max_batched_tokens
                                                       : std::max(engine.max_batched_tokens, engine.max_model_len);
    outcome.notes.push_back(fmt::format("max_model_len {}: the server's ({})", engine.max_model_len,
                                        facts->max_context_source));
    if (const std::int64_t smallest = SmallestValidPoolBlocks(engine); engine.kv.num_blocks < smallest) {
      outcome.notes.push_back(fmt::format("kv.num_blocks raised from the base's {} to {}, the least that holds one "
                                          "max_model_len request",
                                          engine.kv.num_blocks, smallest));
      engine.kv.num_blocks = smallest;
    }
  }
  if (config.limits) {
    LimitsExperiment limits;
    limits.target = target;
    limits.seed = seed;
    limits.context_tokens = context;
    limits.context_known = facts->max_context_tokens.has_value();
    limits.max_burst = config.max_burst;
    limits.over_budget = over_budget;
    limits.budget_left = [&] { return config.budget - (RealClock().Now() - started); };
    LimitsOutcome found = MeasureLimits(limits, engine, stop, log);
    for (LimitFinding& f : found.findings) {
      if (!f.determined) outcome.not_determined.push_back(f.setting + ": " + f.finding);
    }
    outcome.limits = std::move(found.findings);
    outcome.notes.insert(outcome.notes.end(), found.notes.begin(), found.notes.end());
    if (first_error.empty()) first_error = found.first_error;
  } else {
    outcome.not_determined.push_back("max_num_seqs, prefix caching, chunked prefill, KV capacity: not measured (the base "
                                     "preset's)");
  }
  if (!config.costs && std::all_of(outcome.limits.begin(), outcome.limits.end(),
                                   [](const LimitFinding& f) { return f.points.empty(); })) {
    return NothingMeasured(config, stop, first_error);
  }
  outcome.not_determined.push_back("step_noise_cv: the base preset's");
  outcome.interrupted = stop.load();
  if (!outcome.interrupted && RealClock().Now() - started > config.budget) {
    outcome.notes.push_back("the budget ran out before every point was measured: the fits use fewer points, or a "
                            "limit was not measured");
  }
  if (Status valid = emulate::ValidateEngineConfig(engine); !valid.ok()) {
    return MakeError(ErrorCode::kInternal, "calibrate: the preset found is not valid: " + valid.error().message);
  }
  outcome.preset.config.name = config.base.config.name + "-calibrated";
  std::vector<std::string> fitted;
  if (config.costs) fitted.emplace_back("step costs");
  if (config.limits) fitted.emplace_back("limits");
  outcome.preset.description = fmt::format("{}'s {} measured by bakeoff calibrate at {} ({}); the rest from {}", facts->model,
                                           fmt::join(fitted, " and "), config.url, UtcTodayIso(), config.base.config.name);
  outcome.preset_text = "# Written by bakeoff calibrate (docs/engine-presets.md, \"calibration\").\n" +
                        emulate::RenderEnginePreset(outcome.preset) + CalibrationYaml(config, facts->model, outcome);
  if (Result<emulate::EnginePreset> reread = emulate::ParseEnginePreset(outcome.preset_text, config.out.string());
      !reread.ok()) {
    return MakeError(ErrorCode::kInternal, "calibrate wrote a preset it cannot read: " + reread.error().message);
  }
  if (Status written = WriteFileAtomically(config.out, outcome.preset_text); !written.ok()) return written.error();
  return outcome;
}

}  // namespace bakeoff::run

// tests/unit/workload/synthesis_test.cc
//
// Owns: synthesis (workload/synthesis.h): a seed reproduces a trace byte for byte; the fingerprint
// of a trace synthesized from a fingerprint matches its source within the tolerances stated in
// docs/workloads.md ("Synthesis"), peak-to-mean over every window included, for a hand-made source,
// a three-day diurnal source (from its rate profile, from its hour-of-day counts alone, and beyond
// its length; without either profile the checks fail) and the two real traces (skipped when
// ../shared is absent); rate scale, time scale and window; YAML shape errors name line and field;
// fingerprint.json reads back to the same file.
#include "workload/synthesis.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/rng.h"
#include "support/timing.h"
#include "workload/trace_jsonl.h"
#include "support/test_data.h"

namespace bakeoff::workload {
namespace {

using bakeoff::testing::SharedDir;

// The tolerances of docs/workloads.md, "Synthesis".
constexpr double kRateTolerance = 0.05;         // relative
constexpr double kGapCvTolerance = 0.10;        // relative
constexpr double kTiedShareTolerance = 0.02;    // absolute
constexpr double kLengthTolerance = 0.10;       // relative, p50 and p90 of input and output
constexpr double kPearsonLogTolerance = 0.1;    // absolute
constexpr double kPrefixReuseTolerance = 0.05;  // absolute
constexpr double kMixTolerance = 0.03;  // absolute, shares of structured output and sessions
// Peak-to-mean, relative: over 1 s and 10 s windows (peaks of a few to a few dozen requests, as
// noisy between two realizations of one process), over 60 s windows, and over 600 s and longer.
constexpr double kPeakToMeanShortTolerance = 0.30;
constexpr double kPeakToMeanMinuteTolerance = 0.15;
constexpr double kPeakToMeanLongTolerance = 0.10;
constexpr double kDiurnalShareTolerance =
    0.03;  // total variation distance of the hour-of-day shares
constexpr double kDiurnalPeakToTroughTolerance = 0.15;  // relative, busiest / quietest hour of day

std::string Jsonl(const Trace& t) {
  std::string out = FormatTraceHeader(t) + "\n";
  for (const TraceRequest& r : t.requests) {
    AppendTraceLine(out, r);
    out += '\n';
  }
  return out;
}

double Rel(double got, double want) {
  return want == 0 ? std::abs(got) : std::abs(got - want) / std::abs(want);
}

// The peak-to-mean over one window size that the source's own process gives (where the source
// was generated and its process is known): the lowest and highest over the source and other
// realizations.
struct PeakRange {
  double low = 0, high = 0;
};

// The tolerances of docs/workloads.md ("Tolerances of the round trip") that a synthesized
// trace's fingerprint breaks against its source's, one line each; empty when all hold. Without
// `peaks`, peak-to-mean is left out; with `peak_ranges`, its tolerance is around the range of the
// source's process rather than around the source's figure alone.
std::vector<std::string> Mismatches(const Fingerprint& src, const Fingerprint& syn,
                                    bool peaks = true,
                                    const std::vector<PeakRange>& peak_ranges = {}) {
  std::vector<std::string> out;
  auto check = [&out](bool ok, const std::string& what) {
    if (!ok) out.push_back(what);
  };
  check(Rel(syn.mean_rps, src.mean_rps) <= kRateTolerance,
        fmt::format("mean rate {:.4g} vs {:.4g}", syn.mean_rps, src.mean_rps));
  for (std::size_t i = 0; peaks && i < src.rate_windows.size(); ++i) {
    const RateWindow& w = src.rate_windows[i];
    if (w.window_s > syn.duration_s) continue;  // the synthesized trace may end a little sooner
    if (i >= syn.rate_windows.size() || syn.rate_windows[i].window_s != w.window_s) {
      out.push_back(fmt::format("no peak-to-mean over {} s windows", w.window_s));
      continue;
    }
    const double tolerance = w.window_s <= 10   ? kPeakToMeanShortTolerance
                             : w.window_s <= 60 ? kPeakToMeanMinuteTolerance
                                                : kPeakToMeanLongTolerance;
    const PeakRange range =
        i < peak_ranges.size() ? peak_ranges[i] : PeakRange{w.peak_to_mean, w.peak_to_mean};
    const double got = syn.rate_windows[i].peak_to_mean;
    check(got >= range.low * (1 - tolerance) && got <= range.high * (1 + tolerance),
          range.low == range.high
              ? fmt::format("peak-to-mean over {} s windows {:.3g} vs {:.3g}", w.window_s, got,
                            w.peak_to_mean)
              : fmt::format("peak-to-mean over {} s windows {:.3g} vs {:.3g} (its process: {:.3g} "
                            "to {:.3g})",
                            w.window_s, got, w.peak_to_mean, range.low, range.high));
  }
  check(Rel(syn.gap_cv, src.gap_cv) <= kGapCvTolerance,
        fmt::format("gap CV {:.4g} vs {:.4g}", syn.gap_cv, src.gap_cv));
  check(std::abs(syn.tied_share - src.tied_share) <= kTiedShareTolerance,
        fmt::format("tied gap share {:.4g} vs {:.4g}", syn.tied_share, src.tied_share));
  const std::pair<const char*, std::pair<double, double>> lengths[] = {
      {"input p50", {syn.input.summary.p50.value, src.input.summary.p50.value}},
      {"input p90", {syn.input.summary.p90.value, src.input.summary.p90.value}},
      {"output p50", {syn.output.summary.p50.value, src.output.summary.p50.value}},
      {"output p90", {syn.output.summary.p90.value, src.output.summary.p90.value}}};
  for (const auto& [what, v] : lengths) {
    check(Rel(v.first, v.second) <= kLengthTolerance,
          fmt::format("{} {} vs {}", what, v.first, v.second));
  }
  check(std::abs(syn.pearson_log - src.pearson_log) <= kPearsonLogTolerance,
        fmt::format("pearson_log {:.3f} vs {:.3f}", syn.pearson_log, src.pearson_log));
  check(syn.prefix_reuse.has_value() == src.prefix_reuse.has_value(),
        "prefix reuse present in one only");
  if (src.prefix_reuse && syn.prefix_reuse) {
    check(std::abs(*syn.prefix_reuse - *src.prefix_reuse) <= kPrefixReuseTolerance,
          fmt::format("prefix reuse {:.3f} vs {:.3f}", *syn.prefix_reuse, *src.prefix_reuse));
  }
  const auto share = [](std::uint64_t part, std::uint64_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
  };
  check(std::abs(share(syn.structured_output, syn.requests) -
                 share(src.structured_output, src.requests)) <= kMixTolerance,
        "structured-output share");
  check(std::abs(share(syn.requests_in_sessions, syn.requests) -
                 share(src.requests_in_sessions, src.requests)) <= kMixTolerance,
        "share of requests in sessions");
  if (src.sessions > 0) {
    check(Rel(syn.turns_per_session.mean, src.turns_per_session.mean) <= 0.15,
          "mean turns per session");
  }
  return out;
}

// Compares a synthesized trace's fingerprint with its source's and prints the errors.
void ExpectMatches(const Fingerprint& src, const Fingerprint& syn, const std::string& name,
                   bool assert_all = true) {
  std::printf(
      "[%s] rate %+.1f%%  gap CV %.2f->%.2f (%+.1f%%)  tied %.3f->%.3f  in p50 %+.1f%% p90 %+.1f%% "
      " "
      "out p50 %+.1f%% p90 %+.1f%%  pearson_log %.3f->%.3f",
      name.c_str(), 100 * (syn.mean_rps / src.mean_rps - 1), src.gap_cv, syn.gap_cv,
      100 * (syn.gap_cv / src.gap_cv - 1), src.tied_share, syn.tied_share,
      100 * (syn.input.summary.p50.value / src.input.summary.p50.value - 1),
      100 * (syn.input.summary.p90.value / src.input.summary.p90.value - 1),
      100 * (syn.output.summary.p50.value / src.output.summary.p50.value - 1),
      100 * (syn.output.summary.p90.value / src.output.summary.p90.value - 1), src.pearson_log,
      syn.pearson_log);
  if (src.prefix_reuse && syn.prefix_reuse)
    std::printf("  prefix %.3f->%.3f", *src.prefix_reuse, *syn.prefix_reuse);
  std::printf("\n  peak-to-mean:");
  for (std::size_t i = 0; i < src.rate_windows.size() && i < syn.rate_windows.size(); ++i) {
    std::printf(" %gs %.2f->%.2f", src.rate_windows[i].window_s, src.rate_windows[i].peak_to_mean,
                syn.rate_windows[i].peak_to_mean);
  }
  std::printf("\n");
  if (assert_all) {
    for (const std::string& m : Mismatches(src, syn)) ADD_FAILURE() << name << ": " << m;
  }
}

// A hand-made source: bursty Gamma arrivals, correlated lognormal lengths, two system prompts,
// some multi-turn sessions, a model mix and structured output.
Trace HandMade() {
  Rng rng(7);
  Trace t;
  t.source = "hand-made";
  t.block_tokens = 16;
  std::vector<std::uint64_t> sys[2];
  for (auto& s : sys) {
    for (int i = 0; i < 40; ++i) s.push_back(rng.Next());
  }
  double now = 0;
  for (int i = 0; i < 20'000; ++i) {
    TraceRequest r;
    now += rng.Gamma(0.4, 0.1 / 0.4);
    r.arrival_s = now;
    const double z = rng.Normal();
    r.input_tokens = static_cast<std::uint32_t>(std::exp(6.5 + 0.8 * z));
    r.output_tokens =
        static_cast<std::uint32_t>(std::exp(4.5 + 0.7 * (0.6 * z + 0.8 * rng.Normal())));
    const std::uint32_t blocks = (r.input_tokens + 15) / 16;
    const auto& s = sys[rng.Below(2)];
    const std::uint32_t shared = rng.Uniform() < 0.7 ? std::min<std::uint32_t>(blocks, 40) : 0;
    for (std::uint32_t b = 0; b < blocks; ++b)
      r.prefix_hashes.push_back(b < shared ? s[b] : rng.Next());
    r.structured_output = rng.Uniform() < 0.2;
    r.model = rng.Uniform() < 0.75 ? "base" : "lora-a";
    t.requests.push_back(r);
  }
  return t;
}

// Three days whose rate swings by +-70% over the day (peak hour about 5x the quietest), with
// bursty Gamma(0.5) gaps at the momentary rate, starting 2023-11-16T05:30:00Z.
Trace DiurnalSource() {
  Rng rng(31);
  Trace t;
  t.source = "diurnal";
  t.origin_unix_ns = 1'700'112'600'000'000'000LL;
  constexpr double kMeanRps = 0.3, kShape = 0.5;
  for (double now = 0;;) {
    const double rate = kMeanRps * (1 + 0.7 * std::sin(2 * M_PI * now / 86400));
    now += rng.Gamma(kShape, 1 / (rate * kShape));
    if (now >= 3 * 86400) break;
    TraceRequest r;
    r.arrival_s = now;
    r.input_tokens = 200 + static_cast<std::uint32_t>(rng.Below(2000));
    r.output_tokens = 20 + static_cast<std::uint32_t>(rng.Below(400));
    t.requests.push_back(r);
  }
  const double first = t.requests.front().arrival_s;
  for (TraceRequest& r : t.requests) r.arrival_s -= first;
  *t.origin_unix_ns += std::llround(first * 1e9);
  return t;
}

// Total variation distance between two hour-of-day profiles: half the sum of the shares'
// differences.
double HourlyDistance(const std::array<std::uint64_t, 24>& a,
                      const std::array<std::uint64_t, 24>& b) {
  double ta = 0, tb = 0, d = 0;
  for (int h = 0; h < 24; ++h) ta += static_cast<double>(a[h]), tb += static_cast<double>(b[h]);
  for (int h = 0; h < 24; ++h)
    d += std::abs(static_cast<double>(a[h]) / ta - static_cast<double>(b[h]) / tb);
  return d / 2;
}

// The diurnal checks of docs/workloads.md; returns false (having printed why) when one fails,
// so that a test can also show that a flat synthesis fails them.
bool DiurnalMatches(const Fingerprint& src, const Fingerprint& syn, const std::string& name) {
  if (!src.hourly || !syn.hourly || !src.hourly_peak_to_trough || !syn.hourly_peak_to_trough) {
    std::printf("[%s] no diurnal profile\n", name.c_str());
    return false;
  }
  const double distance = HourlyDistance(*src.hourly, *syn.hourly);
  std::printf("[%s] diurnal: hour-of-day distance %.3f, peak/trough %.2f->%.2f (%s)\n",
              name.c_str(), distance, *src.hourly_peak_to_trough, *syn.hourly_peak_to_trough,
              syn.hourly_basis.c_str());
  return distance <= kDiurnalShareTolerance &&
         Rel(*syn.hourly_peak_to_trough, *src.hourly_peak_to_trough) <=
             kDiurnalPeakToTroughTolerance &&
         syn.hourly_basis == src.hourly_basis;
}

Fingerprint ThroughJson(const Fingerprint& f) {
  Result<Fingerprint> read = ParseFingerprintJson(FingerprintJson(f));
  EXPECT_TRUE(read.ok()) << read.error().message;
  return read.ok() ? *read : f;
}

TEST(SynthesisTest, DiurnalRoundTripFromTheRateProfile) {
  const Fingerprint src = FingerprintTrace(DiurnalSource());
  ASSERT_TRUE(src.hourly.has_value());
  ASSERT_EQ(src.hourly_basis, "UTC hour of day");
  ASSERT_FALSE(src.rate_bins.empty());
  const Fingerprint read = ThroughJson(src);
  SynthesisOptions o;
  o.seed = 1;
  Result<Trace> t = SynthesizeFromFingerprint(read, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_TRUE(t->origin_unix_ns.has_value());
  const Fingerprint syn = FingerprintTrace(*t);
  ExpectMatches(src, syn, "diurnal");
  EXPECT_TRUE(DiurnalMatches(src, syn, "diurnal"));
  // Deterministic for a seed, rate profile and all.
  Result<Trace> again = SynthesizeFromFingerprint(read, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Jsonl(*again), Jsonl(*t));
}

TEST(SynthesisTest, DiurnalRoundTripFromTheHourOfDayAlone) {
  // A fingerprint.json written before the rate profile existed has only the requests per hour.
  Fingerprint src = FingerprintTrace(DiurnalSource());
  Fingerprint read = ThroughJson(src);
  read.rate_bins.clear();
  read.rate_bin_s = 0;
  SynthesisOptions o;
  o.seed = 2;
  Result<Trace> t = SynthesizeFromFingerprint(read, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  const Fingerprint syn = FingerprintTrace(*t);
  ExpectMatches(src, syn, "diurnal, hour of day only");
  EXPECT_TRUE(DiurnalMatches(src, syn, "diurnal, hour of day only"));
}

TEST(SynthesisTest, DiurnalShapeRepeatsDayByDayBeyondTheSource) {
  const Fingerprint src = FingerprintTrace(DiurnalSource());
  SynthesisOptions o;
  o.duration_s = 6 * 86400.0;  // twice the source
  Result<Trace> t = SynthesizeFromFingerprint(ThroughJson(src), o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  const Fingerprint syn = FingerprintTrace(*t);
  EXPECT_LE(Rel(syn.mean_rps, src.mean_rps), kRateTolerance);
  EXPECT_TRUE(DiurnalMatches(src, syn, "diurnal, six days"));
}

// The checks above can fail: without the rate over time (a fingerprint with neither profile), the
// same source comes back flat.
TEST(SynthesisTest, WithoutTheProfileTheDiurnalChecksFail) {
  const Fingerprint src = FingerprintTrace(DiurnalSource());
  Fingerprint flat = src;
  flat.rate_bins.clear();
  flat.hourly.reset();
  flat.hourly_peak_to_trough.reset();
  Result<Trace> t = SynthesizeFromFingerprint(flat, {});
  ASSERT_TRUE(t.ok()) << t.error().message;
  const Fingerprint syn = FingerprintTrace(*t);
  EXPECT_FALSE(DiurnalMatches(src, syn, "diurnal, flat"));
  ASSERT_FALSE(src.rate_windows.empty());
  const RateWindow& hour = src.rate_windows.back();
  ASSERT_EQ(hour.window_s, 3600);
  EXPECT_GT(Rel(syn.rate_windows.back().peak_to_mean, hour.peak_to_mean), kPeakToMeanLongTolerance);
}

TEST(SynthesisTest, SameSeedSameBytesOtherSeedDiffers) {
  const Fingerprint f = FingerprintTrace(HandMade());
  SynthesisOptions o;
  o.seed = 11;
  o.requests = 3000;
  Result<Trace> a = SynthesizeFromFingerprint(f, o), b = SynthesizeFromFingerprint(f, o);
  o.seed = 12;
  Result<Trace> c = SynthesizeFromFingerprint(f, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->requests.size(), 3000u);
  EXPECT_EQ(Jsonl(*a), Jsonl(*b));
  EXPECT_NE(Jsonl(*a), Jsonl(*c));
  Result<WorkloadShape> shape = ParseWorkloadShape(
      "rate_per_s: 4\ninput_tokens: {distribution: lognormal, median: 500, p99: "
      "4000}\noutput_tokens: {fixed: 64}\n"
      "sessions: {turns_mean: 3, think_time_s: 5}\nshared_prefix: {tokens: 1024, share: "
      "0.5}\nrequests: 500\n",
      "s.yaml");
  ASSERT_TRUE(shape.ok()) << shape.error().message;
  o.seed = 3;
  o.requests.reset();
  Result<Trace> d = SynthesizeFromShape(*shape, o), e = SynthesizeFromShape(*shape, o);
  ASSERT_TRUE(d.ok() && e.ok());
  EXPECT_EQ(d->requests.size(), 500u);
  EXPECT_EQ(Jsonl(*d), Jsonl(*e));
}

TEST(SynthesisTest, HandMadeSourceRoundTrip) {
  const Fingerprint src = FingerprintTrace(HandMade());
  ASSERT_TRUE(src.prefix_reuse.has_value());
  SynthesisOptions o;
  o.seed = 5;
  Result<Trace> t = SynthesizeFromFingerprint(src, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->requests.size(), src.requests);
  ExpectMatches(src, FingerprintTrace(*t), "hand-made");
}

TEST(SynthesisTest, SessionsRoundTrip) {
  Rng rng(9);
  Trace src;
  double now = 0;
  for (int s = 0; s < 3000; ++s) {
    now += rng.Exponential(1.0);
    const int turns = 1 + static_cast<int>(rng.Below(5));
    double t = now;
    for (int i = 0; i < turns; ++i) {
      TraceRequest r;
      if (i > 0) {
        r.think_time_s = rng.Exponential(8);
        t += *r.think_time_s;
      }
      r.arrival_s = t;
      r.input_tokens = 200 + static_cast<std::uint32_t>(rng.Below(3000));
      r.output_tokens = 50 + static_cast<std::uint32_t>(rng.Below(500));
      r.session_id = fmt::format("c{}", s);
      r.turn = static_cast<std::uint32_t>(i);
      src.requests.push_back(r);
    }
  }
  std::stable_sort(
      src.requests.begin(), src.requests.end(),
      [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  const Fingerprint f = FingerprintTrace(src);
  SynthesisOptions o;
  Result<Trace> t = SynthesizeFromFingerprint(f, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  const Fingerprint g = FingerprintTrace(*t);
  EXPECT_LE(Rel(g.mean_rps, f.mean_rps), kRateTolerance);
  EXPECT_LE(Rel(g.turns_per_session.mean, f.turns_per_session.mean), 0.15);
  EXPECT_LE(Rel(g.think_time_s.p50.value, f.think_time_s.p50.value), 0.15);
  EXPECT_EQ(g.think_time_source, "trace");
  // Turns of a session grow: each turn's prompt repeats the previous turn's whole blocks.
  for (std::size_t i = 0; i < t->requests.size() && i < 200; ++i) {
    const TraceRequest& r = t->requests[i];
    if (r.turn && *r.turn > 0) {
      EXPECT_TRUE(r.think_time_s.has_value());
    }
  }
}

TEST(SynthesisTest, AzureTraceRoundTrip) {
  const std::filesystem::path path = SharedDir() / "data/traces/AzureLLMInferenceTrace_conv.csv";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "real trace not found at " << path << " (set BAKEOFF_SHARED_DIR)";
  Result<Fingerprint> src = FingerprintFile(path, {});
  ASSERT_TRUE(src.ok()) << src.error().message;
  // Through fingerprint.json, as `bakeoff synth --from-fingerprint` reads it.
  Result<Fingerprint> read = ParseFingerprintJson(FingerprintJson(*src));
  ASSERT_TRUE(read.ok()) << read.error().message;
  SynthesisOptions o;
  o.seed = 1;
  Result<Trace> t = SynthesizeFromFingerprint(*read, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ExpectMatches(*src, FingerprintTrace(*t), "azure-conv");
}

TEST(SynthesisTest, MooncakeTraceRoundTrip) {
  const std::filesystem::path path = SharedDir() / "data/traces/mooncake_conversation_trace.jsonl";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "real trace not found at " << path << " (set BAKEOFF_SHARED_DIR)";
  Result<Fingerprint> src = FingerprintFile(path, {});
  ASSERT_TRUE(src.ok()) << src.error().message;
  Result<Fingerprint> read = ParseFingerprintJson(FingerprintJson(*src));
  ASSERT_TRUE(read.ok()) << read.error().message;
  SynthesisOptions o;
  o.seed = 1;
  Result<Trace> t = SynthesizeFromFingerprint(*read, o);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->block_tokens, 512u);
  ExpectMatches(*src, FingerprintTrace(*t), "mooncake");
}

TEST(SynthesisTest, RateScaleDoublesTheRate) {
  const Fingerprint f = FingerprintTrace(HandMade());
  SynthesisOptions o;
  o.requests = 10'000;
  Result<Trace> base = SynthesizeFromFingerprint(f, o);
  o.rate_scale = 2;
  Result<Trace> fast = SynthesizeFromFingerprint(f, o);
  ASSERT_TRUE(base.ok() && fast.ok());
  const double r1 = FingerprintTrace(*base).mean_rps, r2 = FingerprintTrace(*fast).mean_rps;
  EXPECT_NEAR(r2 / r1, 2.0, 0.1);
  EXPECT_NEAR(r2 / f.mean_rps, 2.0, 0.1);
  // On an existing trace too.
  Trace copy = *base;
  ScaleRate(copy, 2);
  EXPECT_NEAR(FingerprintTrace(copy).mean_rps, 2 * r1, 1e-9 * r1);
}

TEST(SynthesisTest, TimeScaleStretchesAndWindowKeepsItsArrivals) {
  Result<WorkloadShape> shape = ParseWorkloadShape(
      "rate_per_s: 10\narrival: constant\ninput_tokens: 100\noutput_tokens: 10\nduration_s: 100\n",
      "c.yaml");
  ASSERT_TRUE(shape.ok()) << shape.error().message;
  SynthesisOptions o;
  Result<Trace> t = SynthesizeFromShape(*shape, o);
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(static_cast<double>(t->requests.size()), 1000, 1);  // [0, 100) at 0.1 s, summed gaps
  o.time_scale = 2;
  Result<Trace> slow = SynthesizeFromShape(*shape, o);
  ASSERT_TRUE(slow.ok());
  EXPECT_NEAR(FingerprintTrace(*slow).mean_rps, 5.0, 0.05);
  o.time_scale = 1;
  o.window = {{20.0, 30.0}};
  Result<Trace> w = SynthesizeFromShape(*shape, o);
  ASSERT_TRUE(w.ok());
  ASSERT_FALSE(w->requests.empty());
  EXPECT_NEAR(static_cast<double>(w->requests.size()), 100, 1);
  for (const TraceRequest& r : w->requests) {
    EXPECT_GE(r.arrival_s, 0);
    EXPECT_LT(r.arrival_s, 10);
  }
  EXPECT_NEAR(w->requests.front().arrival_s, 0, 0.1);
  // The window on an existing trace keeps exactly the arrivals in [start, end), moved by start.
  Trace copy = *t;
  ApplyWindow(copy, 20, 30);
  std::size_t expected = 0;
  for (const TraceRequest& r : t->requests) expected += r.arrival_s >= 20 && r.arrival_s < 30;
  EXPECT_EQ(copy.requests.size(), expected);
  EXPECT_NEAR(copy.requests.front().arrival_s, 0, 1e-9);
}

TEST(SynthesisTest, ShapeLengthsAndPrefix) {
  Result<WorkloadShape> shape = ParseWorkloadShape(
      "rate_per_s: 20\narrival: gamma\nburstiness: 0.25\nrequests: 20000\n"
      "input_tokens: {distribution: lognormal, median: 4000, p99: 16000}\n"
      "output_tokens: {distribution: uniform, min: 10, max: 100}\n"
      "shared_prefix: {tokens: 1024, share: 0.8, groups: 2}\nstructured_output_share: 0.25\n"
      "models: {base: 3, lora: 1}\n",
      "rag.yaml");
  ASSERT_TRUE(shape.ok()) << shape.error().message;
  Result<Trace> t = SynthesizeFromShape(*shape, {});
  ASSERT_TRUE(t.ok());
  const Fingerprint f = FingerprintTrace(*t);
  EXPECT_EQ(f.requests, 20000u);
  EXPECT_NEAR(f.mean_rps, 20, 1);
  EXPECT_NEAR(f.gap_cv, 2.0, 0.2);
  EXPECT_NEAR(f.input.summary.p50.value, 4000, 200);
  EXPECT_NEAR(f.input.summary.p99.value, 16000, 1600);
  EXPECT_GE(f.output.summary.min, 10);
  EXPECT_LE(f.output.summary.max, 100);
  ASSERT_TRUE(f.prefix_reuse.has_value());
  // 80% of requests reuse 1024 of their tokens (two whole 512-token blocks).
  double expect_served = 0, total = 0;
  for (const TraceRequest& r : t->requests) total += r.input_tokens;
  expect_served = 0.8 * 1024 * static_cast<double>(t->requests.size());
  EXPECT_NEAR(*f.prefix_reuse, expect_served / total, 0.01);
  EXPECT_EQ(f.prefix_groups, 2u);
  EXPECT_NEAR(static_cast<double>(f.structured_output) / 20000, 0.25, 0.02);
  ASSERT_EQ(f.models.size(), 2u);
  EXPECT_NEAR(static_cast<double>(f.models[0].second) / 20000, 0.75, 0.02);
}

TEST(SynthesisTest, ShapeErrorsNameLineAndField) {
  auto error = [](const std::string& yaml) {
    Result<WorkloadShape> s = ParseWorkloadShape(yaml, "w.yaml");
    return s.ok() ? std::string("ok") : s.error().message;
  };
  EXPECT_EQ(error("rate_per_s: 2\ninput_tokens: 10\noutput_tokens: lots\n"),
            "w.yaml:3: output_tokens: expected a number, got 'lots'");
  EXPECT_EQ(
      error("rate_per_s: 2\ninput_tokens:\n  distribution: lognormal\n  median: 100\n  p99: 50\n"
            "output_tokens: 1\n"),
      "w.yaml:5: input_tokens.p99: 50 is out of range [100, 4000000000]");
  EXPECT_EQ(
      error("rate_per_s: 2\ninput_tokens: 1\noutput_tokens: 1\narival: poisson\n").substr(0, 23),
      "w.yaml:4: arival: unkno");
  EXPECT_EQ(error("rate_per_s: 2\narrival: bursty\ninput_tokens: 1\noutput_tokens: 1\n"),
            "w.yaml:2: arrival: 'bursty' is not one of poisson, gamma, constant");
  EXPECT_EQ(error("rate_per_s: -1\ninput_tokens: 1\noutput_tokens: 1\n"),
            "w.yaml:1: rate_per_s: -1 is out of range (0, 10000000]");
  EXPECT_EQ(error("input_tokens: 1\noutput_tokens: 1\n"), "w.yaml:1: rate_per_s: required");
  EXPECT_EQ(error("rate_per_s: 2\ninput_tokens: 1\noutput_tokens: 1\nsessions:\n  turns: 3\n")
                .substr(0, 35),
            "w.yaml:5: sessions.turns: unknown f");
  EXPECT_EQ(error("rate_per_s: [1\n").substr(0, 22), "w.yaml:2: not valid YA");
}

TEST(SynthesisTest, ExampleShapesParseAndSynthesize) {
  for (const char* name : {"chatbot.yaml", "rag.yaml"}) {
    const std::filesystem::path path =
        std::filesystem::path(BAKEOFF_SOURCE_DIR) / "examples/workloads" / name;
    Result<WorkloadShape> shape = LoadWorkloadShape(path);
    ASSERT_TRUE(shape.ok()) << shape.error().message;
    SynthesisOptions o;
    o.requests = 2000;
    Result<Trace> t = SynthesizeFromShape(*shape, o);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->requests.size(), 2000u) << name;
  }
}

TEST(SynthesisTest, OptionErrorsNameTheOption) {
  const Fingerprint f = FingerprintTrace(HandMade());
  SynthesisOptions o;
  o.rate_scale = 0;
  Result<Trace> t = SynthesizeFromFingerprint(f, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "rate scale: must be > 0");
  o.rate_scale = 1;
  o.window = {{5.0, 5.0}};
  t = SynthesizeFromFingerprint(f, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "window: needs 0 <= start < end");
}

// A rate scale or a window on a source without arrival times (ShareGPT) would change nothing
// (or drop everything) silently; they are refused, naming the option.
TEST(SynthesisTest, TimeOptionsWithoutArrivalTimesAreRefused) {
  Result<Trace> sharegpt =
      LoadTrace(std::string(BAKEOFF_TESTDATA_DIR) + "/traces/sharegpt_small.json", {});
  ASSERT_TRUE(sharegpt.ok()) << sharegpt.error().message;
  ASSERT_FALSE(sharegpt->arrivals_known);
  SynthesisOptions rate;
  rate.rate_scale = 2;
  SynthesisOptions window;
  window.window = {{0, 10}};
  SynthesisOptions stretch;
  stretch.time_scale = 2;
  for (const auto& [options, name] :
       {std::pair{rate, "rate scale (--rate-scale)"}, std::pair{window, "window (--window)"},
        std::pair{stretch, "time scale (--time-scale)"}}) {
    Trace t = *sharegpt;
    Status s = ApplyTimeOptions(t, options);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidInput);
    EXPECT_EQ(s.error().message.rfind(name, 0), 0u) << s.error().message;
    EXPECT_NE(s.error().message.find("sharegpt_small.json"), std::string::npos)
        << s.error().message;
  }
  Trace capped = *sharegpt;
  SynthesisOptions requests;
  requests.requests = 2;
  ASSERT_TRUE(ApplyTimeOptions(capped, requests).ok());
  EXPECT_EQ(capped.requests.size(), 2u);

  const Fingerprint f = FingerprintTrace(*sharegpt);
  for (const auto& [options, name] :
       {std::pair{rate, "rate scale (--rate-scale)"}, std::pair{window, "window (--window)"}}) {
    SynthesisOptions o = options;
    o.requests = 5;
    if (o.window) o.requests.reset();
    Result<Trace> t = SynthesizeFromFingerprint(f, o);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_EQ(t.error().message.rfind(name, 0), 0u) << t.error().message;
  }
  SynthesisOptions plain;
  plain.requests = 5;
  Result<Trace> made = SynthesizeFromFingerprint(f, plain);
  ASSERT_TRUE(made.ok()) << made.error().message;
  EXPECT_EQ(made->requests.size(), 5u);
}

// Property tests over generated sources spanning the burstiness real traces show. A source's
// arrivals are instants whose gaps have coefficient of variation `cv` (0: evenly spaced; below 1
// Gamma; from 1 a two-phase hyperexponential with balanced means: bursts of short gaps between
// long ones, drawn without underflow, so with no tied gaps); `batch_max` > 1 puts a batch of 1
// to batch_max requests (uniformly) at each instant; `idle` switches the traffic off for one hour
// after every two.
struct GeneratedShape {
  double cv = 1;
  std::uint32_t batch_max = 1;
  bool idle = false;
  std::string Name() const {
    return fmt::format("cv {} batches 1-{}{}", cv, batch_max, idle ? " idle hours" : "");
  }
};

constexpr std::uint64_t kSourceSeed = 17;

Trace Generated(const GeneratedShape& g, std::uint64_t seed) {
  constexpr std::size_t kRequests = 30'000;
  constexpr double kRate = 1;  // requests per active second
  Rng rng(seed);
  Trace t;
  t.source = g.Name();
  const double instant_rate = kRate / ((1.0 + g.batch_max) / 2);
  const double mean = 1 / instant_rate;
  // Hyperexponential with balanced means: phase 1 with probability p, mean mean / (2p).
  const double p = g.cv >= 1 ? (1 + std::sqrt((g.cv * g.cv - 1) / (g.cv * g.cv + 1))) / 2 : 1;
  double active = 0;
  while (t.requests.size() < kRequests) {
    double gap = mean;
    if (g.cv > 0 && g.cv < 1) {
      const double k = 1 / (g.cv * g.cv);
      gap = rng.Gamma(k, mean / k);
    } else if (g.cv >= 1) {
      const double phase = rng.Uniform() < p ? p : 1 - p;
      gap = rng.Exponential(mean / (2 * phase));
    }
    active += gap;
    const double real = g.idle ? active + std::floor(active / 7200) * 3600 : active;
    const std::uint32_t batch =
        g.batch_max > 1 ? 1 + static_cast<std::uint32_t>(rng.Below(g.batch_max)) : 1;
    for (std::uint32_t i = 0; i < batch && t.requests.size() < kRequests; ++i) {
      TraceRequest r;
      r.arrival_s = real;
      r.input_tokens = 100 + static_cast<std::uint32_t>(rng.Below(900));
      r.output_tokens = 10 + static_cast<std::uint32_t>(rng.Below(200));
      t.requests.push_back(r);
    }
  }
  const double first = t.requests.front().arrival_s;
  for (TraceRequest& r : t.requests) r.arrival_s -= first;
  return t;
}

// Peak-to-mean over each of the source's windows in the source and in other realizations of the
// process that made it (kRealizations of them, seeds after the source's). A synthesized trace is
// one more realization: over 600 s windows of an eight-hour source at CV 8, the process's own
// realizations range from 1.56 to 2.00 around the source's 1.70, and no synthesis can be held
// nearer the source than its own process comes.
constexpr std::uint64_t kRealizations = 16;
// (Kept per shape: the property test and its control both ask.)
const std::vector<PeakRange>& ProcessPeakRanges(const GeneratedShape& g, const Fingerprint& src) {
  static std::map<std::string, std::vector<PeakRange>> known;
  std::vector<PeakRange>& ranges = known[g.Name()];
  if (!ranges.empty()) return ranges;
  for (const RateWindow& w : src.rate_windows) ranges.push_back({w.peak_to_mean, w.peak_to_mean});
  for (std::uint64_t seed = kSourceSeed + 1; seed <= kSourceSeed + kRealizations; ++seed) {
    const Fingerprint other = FingerprintTrace(Generated(g, seed));
    for (std::size_t i = 0; i < ranges.size() && i < other.rate_windows.size(); ++i) {
      ranges[i].low = std::min(ranges[i].low, other.rate_windows[i].peak_to_mean);
      ranges[i].high = std::max(ranges[i].high, other.rate_windows[i].peak_to_mean);
    }
  }
  return ranges;
}

// Under AddressSanitizer the property test runs one seed of the shapes at the ends of the range
// (CV 0 and CV 20): the sanitizer checks the code's memory, which the middle shapes walk the same
// way; the release build checks every shape with two seeds.
constexpr std::uint64_t kPropertySeeds = testing::kSanitizedBuild ? 1 : 2;

const GeneratedShape kGeneratedShapes[] = {
    {0, 1, false},  {0.5, 1, false}, {1, 1, false},  {3, 1, false},   {8, 1, false},
    {13, 1, false}, {20, 1, false},  {0, 10, false}, {1, 100, false}, {13, 20, false},
    {1, 1, true},   {3, 1, true},    {13, 1, true},  {13, 20, true},  {20, 100, true},
};

// Every tolerance holds at every shape (mean rate, gap CV, tied share, lengths, and peak-to-mean
// around the range of the source's own process), with arrivals in whole microseconds.
TEST(SynthesisPropertyTest, ExtremeBurstinessRoundTripsWithinTheTolerances) {
  for (const GeneratedShape& g : kGeneratedShapes) {
    if (testing::kSanitizedBuild && g.cv != 0 && g.cv != 20) continue;
    const Fingerprint src = ThroughJson(FingerprintTrace(Generated(g, kSourceSeed)));
    const std::vector<PeakRange>& ranges = ProcessPeakRanges(g, src);
    std::printf("[%s] peak-to-mean of its process:", g.Name().c_str());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      std::printf(" %gs %.2f (%.2f to %.2f)", src.rate_windows[i].window_s,
                  src.rate_windows[i].peak_to_mean, ranges[i].low, ranges[i].high);
    }
    std::printf("\n");
    // The non-zero gaps' quantiles that synthesis draws the burst state from.
    EXPECT_EQ(src.nonzero_gap_quantiles.size(), kNonzeroGapQuantiles.size()) << g.Name();
    for (std::uint64_t seed = 1; seed <= kPropertySeeds; ++seed) {
      SynthesisOptions o;
      o.seed = seed;
      Result<Trace> t = SynthesizeFromFingerprint(src, o);
      ASSERT_TRUE(t.ok()) << t.error().message;
      double smallest = INFINITY;
      for (const TraceRequest& r : t->requests) {
        if (r.arrival_s > 0) smallest = std::min(smallest, r.arrival_s);
        EXPECT_EQ(r.arrival_s, std::round(r.arrival_s * 1e6) / 1e6) << g.Name();
      }
      // Arrivals are whole microseconds: nothing like 7.7e-139 s.
      EXPECT_GE(smallest, 1e-6) << g.Name();
      const Fingerprint syn = FingerprintTrace(*t);
      const std::string name = fmt::format("{}, seed {}", g.Name(), seed);
      std::printf("[%s] tied %.3f->%.3f\n", name.c_str(), src.tied_share, syn.tied_share);
      ExpectMatches(src, syn, name, /*assert_all=*/false);  // prints every figure
      for (const std::string& m : Mismatches(src, syn, /*peaks=*/true, ranges))
        ADD_FAILURE() << name << ": " << m;
      // Whatever the shape: no same-instant arrivals that the source does not have.
      EXPECT_NEAR(syn.tied_share, src.tied_share, kTiedShareTolerance) << name;
    }
  }
}

// An idle period of the source (here an hour switched off after every two, far longer than any of
// its gaps) is the traffic's, not counting noise: the synthesized trace leaves it empty, however
// bursty the traffic around it, instead of smoothing arrivals into it or putting its idle time
// at random places.
TEST(SynthesisTest, IdlePeriodsOfTheSourceStayEmpty) {
  for (const double cv : {1.0, 13.0}) {
    const Trace source = Generated({cv, 1, true}, kSourceSeed);
    std::vector<std::pair<double, double>> idle;
    for (std::size_t i = 1; i < source.requests.size(); ++i) {
      const double from = source.requests[i - 1].arrival_s, to = source.requests[i].arrival_s;
      if (to - from > 3000) idle.emplace_back(from, to);
    }
    ASSERT_GE(idle.size(), 3u) << cv;
    SynthesisOptions o;
    o.seed = 1;
    Result<Trace> t = SynthesizeFromFingerprint(FingerprintTrace(source), o);
    ASSERT_TRUE(t.ok()) << t.error().message;
    for (const auto& [from, to] : idle) {
      // Within the bins that were empty (60 s bins: a minute's slack at each end). The bounds are
      // named copies: clang 14 does not let a lambda capture a structured binding.
      const double lo = from + 60, hi = to - 60;
      const auto inside =
          std::count_if(t->requests.begin(), t->requests.end(),
                        [&](const TraceRequest& r) { return r.arrival_s > lo && r.arrival_s < hi; });
      EXPECT_EQ(inside, 0) << "CV " << cv << ": arrivals in the idle period " << from << " s to "
                           << to << " s";
    }
  }
}

// The control: the checks asserted at every shape (peak-to-mean left out) fail on a synthesis that
// is wrong on purpose, Poisson arrivals in single requests (the fingerprint's burstiness, batches
// and rate profile removed), for every source that is not Poisson already.
TEST(SynthesisPropertyTest, TheChecksFailOnAWrongSynthesis) {
  for (const GeneratedShape& g : kGeneratedShapes) {
    if (g.cv == 1 && g.batch_max == 1 && !g.idle) continue;  // Poisson is right for it
    const Fingerprint src = ThroughJson(FingerprintTrace(Generated(g, kSourceSeed)));
    Fingerprint wrong = src;
    wrong.gap_cv = 1;
    wrong.tied_share = 0;
    wrong.batch_sizes = {{1, src.requests}};
    wrong.rate_bins.clear();
    wrong.hourly.reset();
    Result<Trace> t = SynthesizeFromFingerprint(wrong, {});
    ASSERT_TRUE(t.ok()) << t.error().message;
    const Fingerprint syn = FingerprintTrace(*t);
    const std::vector<std::string> broken = Mismatches(src, syn, /*peaks=*/false);
    std::printf("[%s] a Poisson synthesis breaks %zu tolerances%s%s\n", g.Name().c_str(),
                broken.size(),
                broken.empty() ? "" : ", first: ", broken.empty() ? "" : broken.front().c_str());
    EXPECT_FALSE(broken.empty()) << g.Name();
    // And peak-to-mean, judged around the process's range, is broken too: the range is no licence.
    if (testing::kSanitizedBuild) continue;  // the realizations cost more than they check there
    const std::size_t peaks_broken =
        Mismatches(src, syn, /*peaks=*/true, ProcessPeakRanges(g, src)).size() - broken.size();
    std::printf("[%s] ... and %zu peak-to-mean windows\n", g.Name().c_str(), peaks_broken);
    EXPECT_GT(peaks_broken, 0u) << g.Name();
  }
}

TEST(FingerprintJsonTest, ReadsBackToTheSameFile) {
  Trace t = HandMade();
  for (std::size_t i = 0; i < t.requests.size(); i += 3) {
    t.requests[i].session_id = fmt::format("s{}", i % 50);
    t.requests[i].prefix_group = "sys";
  }
  const std::string json = FingerprintJson(FingerprintTrace(t));
  Result<Fingerprint> read = ParseFingerprintJson(json);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(FingerprintJson(*read), json);
  Result<Fingerprint> bad =
      ParseFingerprintJson(R"({"schema_version": 1, "source": "x", "format": "y"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "fingerprint.json: requests: missing");
  bad = ParseFingerprintJson("{");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace bakeoff::workload

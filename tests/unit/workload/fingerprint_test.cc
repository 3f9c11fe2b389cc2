// tests/unit/workload/fingerprint_test.cc
//
// Owns: the fingerprint on traces with known properties: Poisson arrivals have inter-arrival CV
// near 1, Gamma arrivals CV 1/sqrt(k); a shared 1k-token system prompt gives the prefix reuse
// computed by hand; lengths, sessions, the mix, the diurnal profile, the rate profile, same-instant
// batches and each classification label; the summaries equal stats::Summarize exactly;
// fingerprint.json carries no prompt text.
#include "workload/fingerprint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "stats/quantile.h"

namespace bakeoff::workload {
namespace {

ImportReport Report() {
  ImportReport r;
  r.source = "test";
  r.format = TraceFormat::kTrace;
  return r;
}

Fingerprint ArrivalsOnly(const std::vector<double>& arrivals, std::uint32_t in = 1000, std::uint32_t out = 200) {
  FingerprintBuilder b;
  for (const double t : arrivals) {
    TraceRequest r;
    r.arrival_s = t;
    r.input_tokens = in;
    r.output_tokens = out;
    b.Add(r, 0);
  }
  return b.Finish(Report());
}

bool HasLabel(const Fingerprint& f, const std::string& label) {
  for (const ClassLabel& c : f.classification) {
    if (c.label == label) return true;
  }
  return false;
}

TEST(FingerprintTest, PoissonArrivalsHaveBurstinessNearOne) {
  Rng rng(42);
  std::vector<double> arrivals;
  double t = 0;
  for (int i = 0; i < 50'000; ++i) {
    arrivals.push_back(t);
    t += rng.Exponential(0.1);
  }
  const Fingerprint f = ArrivalsOnly(arrivals);
  EXPECT_NEAR(f.gap_cv, 1.0, 0.03);
  ASSERT_TRUE(f.gamma_shape.has_value());
  EXPECT_NEAR(*f.gamma_shape, 1.0, 0.06);
  EXPECT_NEAR(f.mean_rps, 10.0, 0.2);
  EXPECT_TRUE(HasLabel(f, "steady online"));
  EXPECT_FALSE(HasLabel(f, "bursty online"));
  ASSERT_FALSE(f.rate_windows.empty());
  EXPECT_EQ(f.rate_windows.front().window_s, 1);
  EXPECT_GT(f.rate_windows.front().peak_to_mean, 1.5);  // the busiest second of ~5000
}

TEST(FingerprintTest, GammaArrivalsAreBurstyWithTheirShape) {
  Rng rng(7);
  std::vector<double> arrivals;
  double t = 0;
  for (int i = 0; i < 100'000; ++i) {
    arrivals.push_back(t);
    t += rng.Gamma(0.25, 0.4);  // mean 0.1 s, CV 2
  }
  const Fingerprint f = ArrivalsOnly(arrivals);
  EXPECT_NEAR(f.gap_cv, 2.0, 0.1);
  EXPECT_NEAR(*f.gamma_shape, 0.25, 0.03);
  EXPECT_TRUE(HasLabel(f, "bursty online"));
}

TEST(FingerprintTest, ConstantRatePeakEqualsMean) {
  std::vector<double> arrivals;
  for (int i = 0; i < 1000; ++i) arrivals.push_back(i * 0.5);
  const Fingerprint f = ArrivalsOnly(arrivals);
  EXPECT_DOUBLE_EQ(f.duration_s, 499.5);
  EXPECT_NEAR(f.gap_cv, 0, 1e-9);
  EXPECT_FALSE(f.gamma_shape.has_value());
  ASSERT_EQ(f.rate_windows.size(), 3u);  // 1, 10 and 60 s windows fit in 499.5 s
  EXPECT_DOUBLE_EQ(f.rate_windows[1].peak_rps, 2.0);  // 20 arrivals in any 10 s
  EXPECT_NEAR(f.rate_windows[1].peak_to_mean, 2.0 / (1000 / 499.5), 1e-9);
}

TEST(FingerprintTest, AllAtOnceIsOfflineBatch) {
  const Fingerprint f = ArrivalsOnly(std::vector<double>(500, 0.0));
  EXPECT_TRUE(HasLabel(f, "offline batch"));
  EXPECT_EQ(f.duration_s, 0);
  EXPECT_DOUBLE_EQ(f.tied_share, 1.0);
  std::vector<double> front(900, 0.0);
  for (int i = 1; i <= 100; ++i) front.push_back(i * 10.0);
  EXPECT_TRUE(HasLabel(ArrivalsOnly(front), "offline batch"));
}

// 200 requests, each a shared 1024-token system prompt (two 512-token blocks, ids 1 and 2) plus a
// unique 300-token question (one partial block). The first request is all misses; each later one
// is served the two shared blocks: 199 * 1024 of 200 * 1324 prompt tokens.
TEST(FingerprintTest, SharedSystemPromptPrefixReuseByHand) {
  FingerprintBuilder b;
  for (std::uint64_t i = 0; i < 200; ++i) {
    TraceRequest r;
    r.arrival_s = static_cast<double>(i);
    r.input_tokens = 1324;
    r.output_tokens = 100;
    r.prefix_hashes = {1, 2, 1000 + i};
    r.prefix_group = "system-prompt";
    b.Add(r, 512);
  }
  const Fingerprint f = b.Finish(Report());
  ASSERT_TRUE(f.prefix_reuse.has_value());
  EXPECT_EQ(f.served_tokens, 199u * 1024u);
  EXPECT_EQ(f.prompt_tokens, 200u * 1324u);
  EXPECT_DOUBLE_EQ(*f.prefix_reuse, 199.0 * 1024.0 / (200.0 * 1324.0));
  EXPECT_EQ(f.distinct_blocks, 202u);
  EXPECT_TRUE(HasLabel(f, "prefix-heavy"));
  EXPECT_EQ(f.prefix_groups, 1u);
  EXPECT_EQ(f.requests_in_groups, 200u);
}

// The same shape from text: a 4000-byte (1000-token) system prompt and a unique 1200-byte question,
// with 16-token (64-byte) blocks. 4000 / 64 = 62.5: 62 shared full blocks; the 63rd mixes the
// prompt's tail with the question, so it differs. Served per later request: 62 * 16 = 992 tokens.
TEST(FingerprintTest, SharedSystemPromptFromTextIdsByHand) {
  const std::string system(4000, 's');
  FingerprintBuilder b;
  const int n = 50;
  for (int i = 0; i < n; ++i) {
    TraceRequest r;
    r.arrival_s = i;
    // The number first, so block 62 differs between every pair of requests.
    const std::string question = std::to_string(1000 + i) + std::string(1196, static_cast<char>('A' + i % 26));
    const std::string text = system + question;
    r.input_tokens = EstimateTokens(text.size());  // 1300
    r.output_tokens = 10;
    r.prefix_hashes = TextBlockIds(text, 16);
    b.Add(r, 16);
  }
  const Fingerprint f = b.Finish(Report());
  EXPECT_EQ(f.served_tokens, static_cast<std::uint64_t>(n - 1) * 992u);
  EXPECT_DOUBLE_EQ(*f.prefix_reuse, (n - 1) * 992.0 / (n * 1300.0));
}

TEST(FingerprintTest, LengthsCorrelationAndDecodeHeavy) {
  FingerprintBuilder b;
  for (std::uint32_t i = 1; i <= 100; ++i) {
    TraceRequest r;
    r.arrival_s = i;
    r.input_tokens = i;
    r.output_tokens = 4 * i;
    b.Add(r, 0);
  }
  const Fingerprint f = b.Finish(Report());
  EXPECT_EQ(f.input.summary.p50.value, 50);
  EXPECT_EQ(f.input.summary.max, 100);
  EXPECT_EQ(f.input.total, 5050u);
  EXPECT_DOUBLE_EQ(f.output_input_ratio, 4.0);
  EXPECT_NEAR(f.pearson, 1.0, 1e-12);
  EXPECT_TRUE(HasLabel(f, "decode-heavy"));
  // log2 buckets: 1 -> [1,2), 2..3 -> [2,4), ..., 64..100 -> [64,128)
  ASSERT_EQ(f.input.log2_counts.size(), 8u);
  EXPECT_EQ(f.input.log2_counts[0], 0u);
  EXPECT_EQ(f.input.log2_counts[1], 1u);
  EXPECT_EQ(f.input.log2_counts[2], 2u);
  EXPECT_EQ(f.input.log2_counts[7], 37u);
}

TEST(FingerprintTest, PrefillHeavyAndBalanced) {
  EXPECT_TRUE(HasLabel(ArrivalsOnly({0, 1, 2, 3}, 8000, 100), "prefill-heavy"));
  EXPECT_TRUE(HasLabel(ArrivalsOnly({0, 1, 2, 3}, 1000, 200), "balanced"));
}

TEST(FingerprintTest, SessionsThinkTimeAndMix) {
  FingerprintBuilder b;
  const double arrivals[] = {0, 1, 5, 6, 20};
  const char* sessions[] = {"a", "b", "a", "b", "a"};
  for (int i = 0; i < 5; ++i) {
    TraceRequest r;
    r.arrival_s = arrivals[i];
    r.input_tokens = 10;
    r.output_tokens = 10;
    r.session_id = sessions[i];
    r.model = i < 3 ? "base" : "lora-1";
    r.structured_output = i == 4;
    b.Add(r, 0);
  }
  const Fingerprint f = b.Finish(Report());
  EXPECT_EQ(f.sessions, 2u);
  EXPECT_EQ(f.requests_in_sessions, 5u);
  EXPECT_EQ(f.turns_per_session.max, 3);
  EXPECT_EQ(f.think_time_source, "inter-turn arrival gap");
  EXPECT_EQ(f.think_time_s.count, 3u);  // a: 5, 15; b: 5
  EXPECT_EQ(f.think_time_s.max, 15);
  ASSERT_EQ(f.models.size(), 2u);
  EXPECT_EQ(f.models[0], (std::pair<std::string, std::uint64_t>{"base", 3}));
  EXPECT_EQ(f.structured_output, 1u);
}

TEST(FingerprintTest, DiurnalShapeOnlyForLongTraces) {
  std::vector<double> arrivals;
  for (int hour = 0; hour < 48; ++hour) {
    const int per_hour = (hour % 24) < 12 ? 10 : 30;
    for (int k = 0; k < per_hour; ++k) arrivals.push_back(hour * 3600.0 + k * (3600.0 / per_hour));
  }
  const Fingerprint f = ArrivalsOnly(arrivals);
  ASSERT_TRUE(f.hourly.has_value());
  EXPECT_EQ((*f.hourly)[0], 20u);
  EXPECT_EQ((*f.hourly)[13], 60u);
  EXPECT_DOUBLE_EQ(*f.hourly_peak_to_trough, 3.0);
  EXPECT_FALSE(ArrivalsOnly({0, 10, 20}).hourly.has_value());
}

// The summaries sort with a radix sort and skip stats::Summarize's own sort; the figures must be
// exactly its figures.
TEST(FingerprintTest, SummariesAreExactlyStatsSummarize) {
  Rng rng(17);
  FingerprintBuilder b;
  std::vector<double> in, out, arrivals;
  double t = 0;
  for (int i = 0; i < 30'000; ++i) {
    TraceRequest r;
    t += rng.Uniform() < 0.3 ? 0 : rng.Exponential(0.05);  // ties too
    r.arrival_s = t;
    r.input_tokens = static_cast<std::uint32_t>(std::exp(7 + 1.5 * rng.Normal()));
    r.output_tokens = static_cast<std::uint32_t>(rng.Below(5000));
    in.push_back(r.input_tokens);
    out.push_back(r.output_tokens);
    arrivals.push_back(t);
    b.Add(r, 0);
  }
  const Fingerprint f = b.Finish(Report());
  // Gaps between arrivals moved to start at 0, as the fingerprint computes them.
  const double first = arrivals.front();
  std::vector<double> gaps;
  for (std::size_t i = 1; i < arrivals.size(); ++i) gaps.push_back((arrivals[i] - first) - (arrivals[i - 1] - first));
  const auto same = [](const stats::Summary& got, const stats::Summary& want, const char* what) {
    EXPECT_EQ(got.count, want.count) << what;
    EXPECT_EQ(got.mean, want.mean) << what;
    EXPECT_EQ(got.stddev, want.stddev) << what;
    EXPECT_EQ(got.min, want.min) << what;
    EXPECT_EQ(got.max, want.max) << what;
    const std::pair<const stats::QuantileEstimate*, const stats::QuantileEstimate*> qs[] = {
        {&got.p50, &want.p50}, {&got.p90, &want.p90}, {&got.p95, &want.p95}, {&got.p99, &want.p99},
        {&got.p999, &want.p999}};
    for (const auto& [g, w] : qs) {
      EXPECT_EQ(g->value, w->value) << what << " q" << w->q;
      EXPECT_EQ(g->lower, w->lower) << what << " q" << w->q;
      EXPECT_EQ(g->upper, w->upper) << what << " q" << w->q;
    }
  };
  same(f.input.summary, stats::Summarize(in), "input");
  same(f.output.summary, stats::Summarize(out), "output");
  same(f.gap_s, stats::Summarize(gaps), "gaps");
}

TEST(FingerprintTest, BatchSizesCountRequestsAtOneInstant) {
  // Instants 0 (3 requests), 1 (1), 2.5 (2), 4 (1), 7 (2).
  const Fingerprint f = ArrivalsOnly({0, 0, 0, 1, 2.5, 2.5, 4, 7, 7});
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> want = {{1, 2}, {2, 2}, {3, 1}};
  EXPECT_EQ(f.batch_sizes, want);
  EXPECT_DOUBLE_EQ(f.tied_share, 4.0 / 8);
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> singles = {{1, 3}};
  EXPECT_EQ(ArrivalsOnly({0, 1, 2}).batch_sizes, singles);
}

TEST(FingerprintTest, RateProfileCountsPerBin) {
  // 100.5 s: 1-second bins (101 of them, at most kMaxRateBins); the last bin holds the last arrival.
  std::vector<double> arrivals;
  for (int i = 0; i < 50; ++i) arrivals.push_back(i * 0.5);       // 2 a second for 25 s
  for (int i = 0; i < 75; ++i) arrivals.push_back(25 + i * 1.0);  // 1 a second after
  arrivals.push_back(100.5);
  const Fingerprint f = ArrivalsOnly(arrivals);
  EXPECT_EQ(f.rate_bin_s, 1);
  ASSERT_EQ(f.rate_bins.size(), 101u);
  EXPECT_EQ(f.rate_bins[0], 2u);
  EXPECT_EQ(f.rate_bins[24], 2u);
  EXPECT_EQ(f.rate_bins[25], 1u);
  EXPECT_EQ(f.rate_bins[100], 1u);  // 100.5
  std::uint64_t total = 0;
  for (const std::uint64_t c : f.rate_bins) total += c;
  EXPECT_EQ(total, arrivals.size());
  // 30 hours need 600-second bins (1800 one-minute bins would be too many).
  const Fingerprint day = ArrivalsOnly({0, 3600, 30 * 3600.0});
  EXPECT_EQ(day.rate_bin_s, 600);
  ASSERT_EQ(day.rate_bins.size(), 180u);
  EXPECT_EQ(day.rate_bins[6], 1u);
  EXPECT_EQ(day.rate_bins[179], 1u);
  EXPECT_TRUE(ArrivalsOnly({5, 5}).rate_bins.empty());  // duration 0
  // Past 1440 days, whole days that keep the bins at 1440: timestamps in a wrong unit (9e12 s
  // here) must not ask for 1e8 day bins, nor 9e14 s for more memory than there is.
  const Fingerprint years = ArrivalsOnly({0, 86400, 2000 * 86400.0});
  EXPECT_EQ(years.rate_bin_s, 2 * 86400);
  EXPECT_EQ(years.rate_bins.size(), 1000u);
  for (const double span : {9e12, 9e14, 1e300}) {
    const Fingerprint wrong_unit = ArrivalsOnly({0, span});
    EXPECT_LE(wrong_unit.rate_bins.size(), kMaxRateBins) << span;
    EXPECT_EQ(wrong_unit.rate_bins.back(), 1u) << span;
  }
}

TEST(FingerprintTest, JsonHasNoPromptTextAndUnknownArrivals) {
  FingerprintBuilder b;
  TraceRequest r;
  r.input_tokens = 10;
  r.output_tokens = 5;
  r.prompt = "SECRET PROMPT";
  r.messages = {{"user", "SECRET MESSAGE"}};
  b.Add(r, 0);
  b.Add(r, 0);
  ImportReport report = Report();
  report.arrivals_known = false;
  const std::string json = FingerprintJson(b.Finish(report));
  EXPECT_EQ(json.find("SECRET"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["arrivals"]["known"], false);
  EXPECT_FALSE(j["arrivals"].contains("duration_s"));
  EXPECT_EQ(j["input_tokens"]["p50"], 10);
  EXPECT_TRUE(j["prefix_reuse"].is_null());
}

// A skipped row's note may quote bytes that are not UTF-8 (fuzz_trace_import makes such rows):
// the JSON writer replaces them instead of throwing.
TEST(FingerprintTest, JsonReplacesInvalidUtf8InNotes) {
  ImportReport report = Report();
  report.notes.push_back("t.csv:6: timestamp \"yesterd\xF1\xF1\" is not a date-time");
  const Fingerprint f = ArrivalsOnly({0, 1});
  Fingerprint with_note = f;
  with_note.notes = report.notes;
  std::string json;
  EXPECT_NO_THROW(json = FingerprintJson(with_note));
  EXPECT_NE(json.find("yesterd\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
}

TEST(FingerprintTest, TableMentionsEveryHeadline) {
  const std::string table = FormatFingerprintTable(ArrivalsOnly({0, 1, 2, 30}));
  for (const char* s : {"duration", "mean rate", "inter-arrival CV", "input tokens", "output tokens", "prefix reuse",
                        "Classification:"}) {
    EXPECT_NE(table.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace bakeoff::workload

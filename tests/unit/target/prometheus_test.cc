// Prometheus text / OpenMetrics page parsing: the hard lines real exporters write (escapes,
// separators inside label values, special values, exemplars, CRLF, timestamps, OpenMetrics' EOF),
// the lenient and strict verdicts, the size limits, and the page queries (Family, Sum,
// HistogramOf, HistogramQuantile) on a vLLM-shaped page.
#include "target/prometheus.h"
#include "support/test_data.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bakeoff::target {
namespace {

using bakeoff::testing::ReadTestData;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr double kInf = std::numeric_limits<double>::infinity();

MetricsPage ParseOk(std::string_view text, const PrometheusParseOptions& options = {}) {
  Result<MetricsPage> page = ParsePrometheusText(text, options);
  EXPECT_TRUE(page.ok()) << page.error().message;
  if (!page.ok()) return {};
  return std::move(page).value();
}

std::string ParseError(std::string_view text, const PrometheusParseOptions& options = {}) {
  Result<MetricsPage> page = ParsePrometheusText(text, options);
  EXPECT_FALSE(page.ok()) << "parsed " << page->samples.size() << " samples";
  if (page.ok()) return {};
  EXPECT_EQ(page.error().code, ErrorCode::kInvalidInput);
  return page.error().message;
}

std::vector<std::string> Names(const MetricsPage& page) {
  std::vector<std::string> names;
  for (const MetricSample& s : page.samples) names.push_back(s.name);
  return names;
}

// ---- Pages that are valid but unusual.

TEST(PrometheusParseTest, EmptyPageIsValidWithNoSamples) {
  for (const std::string_view text : {"", "\n", "\n\n  \n\t\n", "\r\n"}) {
    const MetricsPage page = ParseOk(text);
    EXPECT_THAT(page.samples, IsEmpty());
    EXPECT_THAT(page.families, IsEmpty());
    EXPECT_THAT(page.warnings, IsEmpty());
    EXPECT_FALSE(page.openmetrics);
  }
}

TEST(PrometheusParseTest, CommentOnlyPageIsValidWithNoSamples) {
  const MetricsPage page = ParseOk("# a comment\n#\n# HELP foo Foo things.\n# TYPE foo gauge\n");
  EXPECT_THAT(page.samples, IsEmpty());
  ASSERT_EQ(page.families.size(), 1u);
  EXPECT_EQ(page.families[0].name, "foo");
  EXPECT_EQ(page.families[0].type, MetricType::kGauge);
  EXPECT_EQ(page.families[0].help, "Foo things.");
}

TEST(PrometheusParseTest, SampleWithoutLabelsHelpOrType) {
  const MetricsPage page = ParseOk("up 1\nprocess_open_fds 12");  // no final LF
  ASSERT_EQ(page.samples.size(), 2u);
  EXPECT_EQ(page.samples[0].name, "up");
  EXPECT_THAT(page.samples[0].labels, IsEmpty());
  EXPECT_EQ(page.samples[0].value, 1.0);
  EXPECT_FALSE(page.samples[0].timestamp_ms);
  EXPECT_EQ(page.samples[1].value, 12.0);
  EXPECT_THAT(page.families, IsEmpty());
  EXPECT_EQ(page.Family("up"), nullptr);
  EXPECT_THAT(page.warnings, IsEmpty());
}

TEST(PrometheusParseTest, EscapedLabelValuesAreUnescaped) {
  const MetricsPage page =
      ParseOk(R"(m{back="a\\b",quote="say \"hi\"",nl="one\ntwo",all="\\\"\n"} 1)"
              "\n");
  ASSERT_EQ(page.samples.size(), 1u);
  const MetricSample& s = page.samples[0];
  EXPECT_EQ(s.Label("back"), "a\\b");
  EXPECT_EQ(s.Label("quote"), "say \"hi\"");
  EXPECT_EQ(s.Label("nl"), "one\ntwo");
  EXPECT_EQ(s.Label("all"), "\\\"\n");
}

TEST(PrometheusParseTest, UnknownEscapeIsKeptAsWritten) {
  const MetricsPage page = ParseOk(R"(m{path="C:\temp\x"} 1)");
  ASSERT_EQ(page.samples.size(), 1u);
  EXPECT_EQ(page.samples[0].Label("path"), R"(C:\temp\x)");
}

TEST(PrometheusParseTest, LabelValuesMayHoldSeparatorsAndSpaces) {
  const MetricsPage page = ParseOk(
      R"(http_requests_total{path="/a,b}c",query="x=1 y=2",pad="  two  ",hash="# {not} an exemplar"} 7)");
  ASSERT_EQ(page.samples.size(), 1u);
  const MetricSample& s = page.samples[0];
  EXPECT_THAT(s.labels, ElementsAre(MetricLabel{"path", "/a,b}c"}, MetricLabel{"query", "x=1 y=2"},
                                    MetricLabel{"pad", "  two  "},
                                    MetricLabel{"hash", "# {not} an exemplar"}));
  EXPECT_EQ(s.value, 7.0);
  EXPECT_THAT(page.warnings, IsEmpty());
}

TEST(PrometheusParseTest, LabelsKeepPageOrderAndAbsentLabelReadsEmpty) {
  const MetricsPage page = ParseOk(R"(m{z="1",a="2",m="3"} 0)");
  ASSERT_EQ(page.samples.size(), 1u);
  EXPECT_THAT(page.samples[0].labels,
              ElementsAre(MetricLabel{"z", "1"}, MetricLabel{"a", "2"}, MetricLabel{"m", "3"}));
  EXPECT_EQ(page.samples[0].Label("absent"), "");
}

TEST(PrometheusParseTest, Utf8LabelValuesPassThrough) {
  const MetricsPage page = ParseOk("m{model=\"Ünïcödé-模型-🚀\"} 1\n");
  ASSERT_EQ(page.samples.size(), 1u);
  EXPECT_EQ(page.samples[0].Label("model"), "Ünïcödé-模型-🚀");
}

TEST(PrometheusParseTest, SpecialValues) {
  const MetricsPage page = ParseOk(
      "a +Inf\nb -Inf\nc NaN\nd Inf\ne nan\nf 1e3\ng -0.5\nh +2.5E-1\ni 0\nj 123456789012345678\n");
  ASSERT_EQ(page.samples.size(), 10u);
  EXPECT_EQ(page.samples[0].value, kInf);
  EXPECT_EQ(page.samples[1].value, -kInf);
  EXPECT_TRUE(std::isnan(page.samples[2].value));
  EXPECT_EQ(page.samples[3].value, kInf);
  EXPECT_TRUE(std::isnan(page.samples[4].value));
  EXPECT_EQ(page.samples[5].value, 1000.0);
  EXPECT_EQ(page.samples[6].value, -0.5);
  EXPECT_EQ(page.samples[7].value, 0.25);
  EXPECT_EQ(page.samples[8].value, 0.0);
  EXPECT_EQ(page.samples[9].value, 123456789012345678.0);
  EXPECT_THAT(page.warnings, IsEmpty());
}

TEST(PrometheusParseTest, BadValuesAreSkippedWithAWarning) {
  const MetricsPage page = ParseOk("ok 1\na abc\nb 1e999\nc +-1\nd 0x10\ne 1_000\nf\ng 1 2 3\n");
  EXPECT_THAT(Names(page), ElementsAre("ok"));
  ASSERT_EQ(page.warnings.size(), 7u);
  EXPECT_THAT(page.warnings[0], StartsWith("line 2: bad value \"abc\""));
  EXPECT_THAT(page.warnings[1], StartsWith("line 3: bad value \"1e999\""));
  EXPECT_THAT(page.warnings[5], StartsWith("line 7: expected a blank and a value"));
  EXPECT_THAT(page.warnings[6], StartsWith("line 8: expected the end of the line"));
}

TEST(PrometheusParseTest, InfLeLabelAndHistogramBuckets) {
  const MetricsPage page = ParseOk(
      "# TYPE rt histogram\n"
      "rt_bucket{le=\"0.5\"} 1\nrt_bucket{le=\"1\"} 3\nrt_bucket{le=\"+Inf\"} 4\n"
      "rt_sum 3.5\nrt_count 4\n");
  ASSERT_EQ(page.samples.size(), 5u);
  EXPECT_EQ(page.samples[2].Label("le"), "+Inf");
  const std::optional<MetricsPage::Histogram> h = page.HistogramOf("rt");
  ASSERT_TRUE(h);
  using Bucket = std::pair<double, double>;
  EXPECT_THAT(h->buckets, ElementsAre(Bucket{0.5, 1}, Bucket{1, 3}, Bucket{kInf, 4}));
  EXPECT_EQ(h->sum, 3.5);
  EXPECT_EQ(h->count, 4);
}

TEST(PrometheusParseTest, TimestampsInMilliseconds) {
  const MetricsPage page = ParseOk("a 1 1712345678901\nb{x=\"y\"} 2 -5\nc 3 +7\n");
  ASSERT_EQ(page.samples.size(), 3u);
  EXPECT_EQ(page.samples[0].timestamp_ms, 1712345678901);
  EXPECT_EQ(page.samples[1].timestamp_ms, -5);
  EXPECT_EQ(page.samples[2].timestamp_ms, 7);
}

TEST(PrometheusParseTest, NonIntegerTimestampIsBadOutsideOpenMetrics) {
  const MetricsPage page = ParseOk("a 1 1712345678.9\nb 2 99999999999999999999\nc 3\n");
  EXPECT_THAT(Names(page), ElementsAre("c"));
  ASSERT_EQ(page.warnings.size(), 2u);
  EXPECT_THAT(page.warnings[0], HasSubstr("integer milliseconds"));
}

TEST(PrometheusParseTest, CrlfLineEndsReadLikeLf) {
  const std::string lf = "# HELP a An a.\n# TYPE a counter\na_total{x=\"1\"} 5 100\nb 2\n\n# EOF\n";
  std::string crlf;
  for (const char c : lf) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  const MetricsPage from_lf = ParseOk(lf);
  const MetricsPage from_crlf = ParseOk(crlf);
  ASSERT_EQ(from_crlf.samples.size(), 2u);
  EXPECT_EQ(from_crlf.samples[0].Label("x"), "1");
  EXPECT_EQ(from_crlf.samples[0].timestamp_ms, 100000);  // OpenMetrics: seconds
  EXPECT_EQ(from_crlf.samples[1].value, 2.0);
  EXPECT_EQ(from_crlf.families[0].help, "An a.");
  EXPECT_TRUE(from_crlf.openmetrics);
  EXPECT_EQ(Names(from_lf), Names(from_crlf));
  EXPECT_THAT(from_crlf.warnings, IsEmpty());
}

TEST(PrometheusParseTest, EmptyBracesAndBlanksAroundTokens) {
  const MetricsPage page = ParseOk("a{} 1\nb { } 2\n  c{ x = \"1\" , y=\"2\" }\t3\t 4 \nd\t5\n");
  ASSERT_EQ(page.samples.size(), 4u);
  EXPECT_THAT(page.samples[0].labels, IsEmpty());
  EXPECT_THAT(page.samples[1].labels, IsEmpty());
  EXPECT_EQ(page.samples[1].value, 2.0);
  EXPECT_THAT(page.samples[2].labels, ElementsAre(MetricLabel{"x", "1"}, MetricLabel{"y", "2"}));
  EXPECT_EQ(page.samples[2].value, 3.0);
  EXPECT_EQ(page.samples[2].timestamp_ms, 4);
  EXPECT_EQ(page.samples[3].value, 5.0);
  EXPECT_THAT(page.warnings, IsEmpty());
}

TEST(PrometheusParseTest, TrailingCommaInLabels) {
  const MetricsPage page = ParseOk("a{x=\"1\",} 1\nb{x=\"1\", y=\"2\" , } 2\nc{,} 3\n");
  EXPECT_THAT(Names(page), ElementsAre("a", "b"));
  EXPECT_THAT(page.samples[1].labels, ElementsAre(MetricLabel{"x", "1"}, MetricLabel{"y", "2"}));
  ASSERT_EQ(page.warnings.size(), 1u);
  EXPECT_THAT(page.warnings[0], StartsWith("line 3: expected a label name"));
}

TEST(PrometheusParseTest, MalformedLabelSetsAreSkipped) {
  const MetricsPage page = ParseOk(
      "a{x=1} 1\n"              // unquoted value
      "b{x=\"1\" 1\n"           // no closing brace
      "c{x=\"1} 1\n"            // unterminated value
      "d{x=\"1\",x=\"2\"} 1\n"  // duplicate label
      "e{1x=\"1\"} 1\n"         // bad label name
      "f{x:y=\"1\"} 1\n"        // colon not allowed in label names
      "g{x=\"1\"}1\n"           // no blank before the value
      "h-i 1\n"                 // bad metric name
      "ok 1\n");
  EXPECT_THAT(Names(page), ElementsAre("ok"));
  ASSERT_EQ(page.warnings.size(), 8u);
  EXPECT_THAT(page.warnings[0], HasSubstr("expected a quoted value for label x"));
  EXPECT_THAT(page.warnings[1], HasSubstr("expected ',' or '}'"));
  EXPECT_THAT(page.warnings[2], HasSubstr("unterminated label value"));
  EXPECT_THAT(page.warnings[3], HasSubstr("label x given twice"));
  EXPECT_THAT(page.warnings[4], HasSubstr("expected a label name"));
  EXPECT_THAT(page.warnings[5], HasSubstr("expected '=' after label x"));
  EXPECT_THAT(page.warnings[6], HasSubstr("expected a blank and a value"));
  EXPECT_EQ(page.warnings[7], "line 8: character \"-\" not allowed in metric name \"h-i\"");
}

TEST(PrometheusParseTest, NamesWithColons) {
  const MetricsPage page = ParseOk(
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"m\"} 3\n"
      ":leading_colon 1\n");
  EXPECT_THAT(Names(page), ElementsAre("vllm:num_requests_running", ":leading_colon"));
  ASSERT_NE(page.Family("vllm:num_requests_running"), nullptr);
  EXPECT_EQ(page.Family("vllm:num_requests_running")->type, MetricType::kGauge);
}

TEST(PrometheusParseTest, QuotedUtf8NamesOfPrometheus3) {
  const MetricsPage page = ParseOk(
      "# TYPE \"http.server.duration\" gauge\n"
      "{\"http.server.duration\", \"service.name\"=\"api\", code=\"200\"} 1.5\n"
      "plain{\"odd label\"=\"v\"} 2\n"
      "{\"a\", \"b\"} 3\n"  // two names
      "x{\"y\"} 4\n");      // name twice
  EXPECT_THAT(Names(page), ElementsAre("http.server.duration", "plain"));
  EXPECT_THAT(page.samples[0].labels,
              ElementsAre(MetricLabel{"service.name", "api"}, MetricLabel{"code", "200"}));
  EXPECT_EQ(page.samples[1].Label("odd label"), "v");
  ASSERT_NE(page.Family("http.server.duration"), nullptr);
  EXPECT_EQ(page.warnings.size(), 2u);
}

TEST(PrometheusParseTest, HelpTypeAndUnitLines) {
  const MetricsPage page = ParseOk(
      "# HELP rt Request time; path \\\\ and\\nnewline, \\\"quoted\\\", \\q kept.\n"
      "# TYPE rt HISTOGRAM\n"
      "# UNIT rt seconds\n"
      "# HELP empty\n"
      "# TYPE g gaugehistogram\n# TYPE i info\n# TYPE s stateset\n# TYPE u untyped\n"
      "# TYPE k unknown\n# TYPE su summary\n# TYPE c counter\n"
      "# HELPFUL not a help line\n"
      "#TYPE nospace gauge\n");
  ASSERT_EQ(page.families.size(), 10u);
  EXPECT_EQ(page.families[0].help, "Request time; path \\ and\nnewline, \"quoted\", \\q kept.");
  EXPECT_EQ(page.families[0].type, MetricType::kHistogram);
  EXPECT_EQ(page.families[0].unit, "seconds");
  EXPECT_EQ(page.families[1].name, "empty");
  EXPECT_EQ(page.families[1].help, "");
  EXPECT_EQ(page.Family("g")->type, MetricType::kGaugeHistogram);
  EXPECT_EQ(page.Family("i")->type, MetricType::kInfo);
  EXPECT_EQ(page.Family("s")->type, MetricType::kStateSet);
  EXPECT_EQ(page.Family("u")->type, MetricType::kUntyped);
  EXPECT_EQ(page.Family("k")->type, MetricType::kUnknown);
  EXPECT_EQ(page.Family("su")->type, MetricType::kSummary);
  EXPECT_EQ(page.Family("c")->type, MetricType::kCounter);
  EXPECT_EQ(page.Family("nospace")->type, MetricType::kGauge);
  EXPECT_EQ(page.Family("HELPFUL"), nullptr);
  EXPECT_THAT(page.warnings, IsEmpty());
}

TEST(PrometheusParseTest, MalformedMetadataLinesAreWarningsNotSamples) {
  const MetricsPage page = ParseOk(
      "# TYPE a blob\n# TYPE\n# HELP 9bad text\n# TYPE b gauge extra\n# UNIT c two words\nx 1\n");
  EXPECT_THAT(Names(page), ElementsAre("x"));
  ASSERT_EQ(page.warnings.size(), 5u);
  EXPECT_EQ(page.warnings[0], "line 1: unknown metric type \"blob\" for a");
  EXPECT_THAT(page.warnings[1], StartsWith("line 2: TYPE line without a metric name"));
  EXPECT_THAT(page.warnings[2], StartsWith("line 3: bad HELP line"));
  EXPECT_THAT(page.warnings[3], StartsWith("line 4: unknown metric type"));
  EXPECT_THAT(page.warnings[4], StartsWith("line 5: bad UNIT line"));
}

TEST(PrometheusParseTest, DuplicateTypeLinesKeepTheFirst) {
  const MetricsPage page = ParseOk(
      "# TYPE a counter\n# HELP a First.\na 1\n# TYPE a gauge\n# HELP a Second.\n# TYPE a "
      "counter\n# UNIT a s\n# UNIT a ms\n");
  ASSERT_EQ(page.families.size(), 1u);
  EXPECT_EQ(page.families[0].type, MetricType::kCounter);
  EXPECT_EQ(page.families[0].help, "First.");
  EXPECT_EQ(page.families[0].unit, "s");
  EXPECT_THAT(page.warnings,
              ElementsAre("line 4: second TYPE line for a ignored (line 1 says counter)",
                          "line 5: second HELP line for a ignored (first on line 2)",
                          "line 6: second TYPE line for a ignored (line 1 says counter)",
                          "line 8: second UNIT line for a ignored (first on line 7)"));
}

TEST(PrometheusParseTest, ExemplarsAreCheckedAndDropped) {
  const MetricsPage page = ParseOk(
      "# TYPE rt histogram\n"
      "rt_bucket{le=\"0.1\"} 8 # {trace_id=\"KOO5S4vxi0o\"} 0.067 1520879607.789\n"
      "rt_bucket{le=\"+Inf\"} 9 1520879607 # {trace_id=\"x\",span_id=\"y\"} 1.0\n"
      "rt_count 9 #   {}   2\n"
      "rt_sum 1.5 # not an exemplar\n"
      "# EOF\n");
  ASSERT_EQ(page.samples.size(), 4u);
  EXPECT_EQ(page.samples[0].value, 8.0);
  EXPECT_FALSE(page.samples[0].timestamp_ms);
  EXPECT_EQ(page.samples[1].timestamp_ms, 1520879607000);
  EXPECT_EQ(page.samples[3].value, 1.5);
  ASSERT_EQ(page.warnings.size(), 1u);
  EXPECT_THAT(page.warnings[0], StartsWith("line 5: exemplar ignored: expected '{'"));
}

TEST(PrometheusParseTest, OpenMetricsEofAndTextAfterIt) {
  const MetricsPage page = ParseOk(
      "# TYPE a counter\n# UNIT a seconds\na_total 1 1520879607.789\na_created 1520870000\n"
      "# EOF\n\nb 2\nc 3\n");
  EXPECT_TRUE(page.openmetrics);
  EXPECT_THAT(Names(page), ElementsAre("a_total", "a_created"));
  EXPECT_EQ(page.samples[0].timestamp_ms, 1520879607789);
  EXPECT_THAT(page.warnings, ElementsAre("line 7: text after # EOF ignored"));
  EXPECT_EQ(page.Family("a_total")->unit, "seconds");
  EXPECT_EQ(page.Family("a_created")->name, "a");
}

TEST(PrometheusParseTest, OpenMetricsWithoutTextAfterEofHasNoWarning) {
  const MetricsPage page = ParseOk("a 1\n# EOF\n\n");
  EXPECT_TRUE(page.openmetrics);
  EXPECT_THAT(page.warnings, IsEmpty());
  EXPECT_TRUE(ParseOk("# EOF").openmetrics);
  EXPECT_FALSE(ParseOk("a 1\n# EOF with words is a comment\n").openmetrics);
}

TEST(PrometheusParseTest, LeadingByteOrderMarkIsSkipped) {
  const MetricsPage page = ParseOk("\xEF\xBB\xBFup 1\n");
  EXPECT_THAT(Names(page), ElementsAre("up"));
}

// ---- Pages that fail.

TEST(PrometheusParseTest, GarbagePageFailsNamingTheLine) {
  const std::string message = ParseError("# just a comment\nhello world, this is not metrics\n");
  EXPECT_THAT(message, HasSubstr("no line is a valid sample"));
  EXPECT_THAT(message, HasSubstr("line 2: "));
  EXPECT_THAT(ParseError("<!DOCTYPE html>\n<html><body>Not Found</body></html>\n"),
              HasSubstr("line 1: "));
  EXPECT_THAT(ParseError("{\"error\": \"not found\"}"), HasSubstr("line 1: "));
}

TEST(PrometheusParseTest, OneGoodLineAmongGarbageIsAValidPage) {
  const MetricsPage page = ParseOk("garbage here\nup 1\nmore garbage\n");
  EXPECT_THAT(Names(page), ElementsAre("up"));
  ASSERT_EQ(page.warnings.size(), 2u);
  EXPECT_THAT(page.warnings[0], StartsWith("line 1: "));
  EXPECT_THAT(page.warnings[1], StartsWith("line 3: "));
}

TEST(PrometheusParseTest, NulByteMeansNotText) {
  const std::string message = ParseError(std::string("up 1\nbinary\0junk\n", 17));
  EXPECT_THAT(message, HasSubstr("line 2: NUL byte at offset 11"));
}

TEST(PrometheusParseTest, StrictModeFailsOnTheFirstProblem) {
  PrometheusParseOptions strict;
  strict.strict = true;
  EXPECT_EQ(ParseError("up 1\nbad line\nok 2\n", strict), "line 2: bad value \"line\" for \"bad\"");
  EXPECT_THAT(ParseError("# TYPE a gauge\n# TYPE a gauge\n", strict),
              StartsWith("line 2: second TYPE"));
  EXPECT_THAT(ParseError("a 1\n# EOF\nb 2\n", strict), StartsWith("line 3: text after # EOF"));
  EXPECT_THAT(ParseError("a 1 # {x=1} 1\n", strict), StartsWith("line 1: exemplar"));
  EXPECT_EQ(ParseOk("# TYPE a gauge\na{x=\"1\"} 1\n", strict).samples.size(), 1u);
}

TEST(PrometheusParseTest, PageOverTheLimitIsRefused) {
  const std::string page(PrometheusParseOptions::kDefaultMaxPageBytes + 1, '\n');
  EXPECT_EQ(ParseError(page), "metrics page of 67108865 bytes is over the limit of 67108864 bytes");
  // Exactly the limit: 65,536 comment lines of 1 KiB.
  std::string block(1024, ' ');
  block.front() = '#';
  block.back() = '\n';
  std::string at_limit;
  at_limit.reserve(PrometheusParseOptions::kDefaultMaxPageBytes);
  while (at_limit.size() < PrometheusParseOptions::kDefaultMaxPageBytes) at_limit += block;
  EXPECT_EQ(ParseOk(at_limit).samples.size(), 0u);
}

TEST(PrometheusParseTest, LineOverTheLimitIsRefused) {
  std::string page = "up 1\n# ";
  page += std::string(PrometheusParseOptions::kDefaultMaxLineBytes - 2, 'x');  // exactly the limit
  page += "\nx{a=\"";
  page += std::string(PrometheusParseOptions::kDefaultMaxLineBytes, 'y');
  page += "\"} 1\n";
  EXPECT_EQ(ParseError(page), "line 3: 1048585 bytes, over the limit of 1048576 bytes per line");
  PrometheusParseOptions small;
  small.max_line_bytes = 8;
  EXPECT_EQ(ParseOk("abc 1\r\n", small).samples.size(), 1u);
  EXPECT_THAT(ParseError("abcdefgh 1\n", small), StartsWith("line 1: 10 bytes"));
}

TEST(PrometheusParseTest, WarningsAreCapped) {
  std::string text = "up 1\n";
  for (int i = 0; i < 250; ++i) text += "bad\n";
  const MetricsPage page = ParseOk(text);
  ASSERT_EQ(page.warnings.size(), PrometheusParseOptions::kDefaultMaxWarnings + 1);
  EXPECT_THAT(page.warnings[0], StartsWith("line 2: "));
  EXPECT_EQ(page.warnings.back(), "150 more warnings not listed (at most 100 are kept)");
}

// ---- Queries.

TEST(PrometheusPageTest, FamilyOfSuffixedSamples) {
  const MetricsPage page = ParseOk(
      "# TYPE rt histogram\n# TYPE q summary\n# TYPE reqs_total counter\n# TYPE g gauge\n"
      "# TYPE gh gaugehistogram\n# TYPE build info\n");
  for (const char* name : {"rt", "rt_bucket", "rt_sum", "rt_count", "rt_created"}) {
    ASSERT_NE(page.Family(name), nullptr) << name;
    EXPECT_EQ(page.Family(name)->name, "rt");
  }
  EXPECT_EQ(page.Family("q_sum")->name, "q");
  EXPECT_EQ(page.Family("reqs_total")->name, "reqs_total");
  EXPECT_EQ(page.Family("reqs")->name, "reqs_total");  // prometheus_client's counter naming
  EXPECT_EQ(page.Family("reqs_created")->name, "reqs_total");
  EXPECT_EQ(page.Family("gh_gcount")->name, "gh");
  EXPECT_EQ(page.Family("build_info")->name, "build");
  EXPECT_EQ(page.Family("g_total"), page.Family("g"));
  EXPECT_EQ(page.Family("nothing"), nullptr);
  EXPECT_EQ(page.Family("_sum"), nullptr);
  EXPECT_EQ(page.Family(""), nullptr);
}

TEST(PrometheusPageTest, SumMatchesLabelsExactly) {
  const MetricsPage page = ParseOk(
      "r_total{reason=\"stop\",model=\"a\"} 5\nr_total{reason=\"length\",model=\"a\"} 2\n"
      "r_total{reason=\"stop\",model=\"b\"} 1\nr_total{reason=\"stop\",model=\"ab\"} 100\n"
      "r_total 1000\n");
  EXPECT_EQ(page.Sum("r_total"), 1108.0);
  EXPECT_EQ(page.Sum("r_total", {{"reason", "stop"}}), 106.0);
  EXPECT_EQ(page.Sum("r_total", {{"reason", "stop"}, {"model", "a"}}), 5.0);
  EXPECT_EQ(page.Sum("r_total", {{"model", "A"}}), std::nullopt);
  EXPECT_EQ(page.Sum("r_total", {{"model", ""}}), 1000.0);  // empty matches absent
  EXPECT_EQ(page.Sum("r"), std::nullopt);
  EXPECT_EQ(page.Sum("missing"), std::nullopt);
  EXPECT_EQ(ParseOk("z 0\n").Sum("z"), 0.0);
}

TEST(PrometheusPageTest, HistogramOfMergesSeriesAndEquivalentBounds) {
  const MetricsPage page = ParseOk(
      "h_bucket{le=\"1\",pod=\"a\"} 1\nh_bucket{le=\"1.0\",pod=\"b\"} 2\n"
      "h_bucket{le=\"+Inf\",pod=\"a\"} 3\nh_bucket{le=\"+Inf\",pod=\"b\"} 4\n"
      "h_bucket{le=\"oops\",pod=\"b\"} 99\nh_bucket{pod=\"b\"} 99\n"
      "h_sum{pod=\"a\"} 2\nh_sum{pod=\"b\"} 3\n");  // no _count
  const std::optional<MetricsPage::Histogram> all = page.HistogramOf("h");
  ASSERT_TRUE(all);
  using Bucket = std::pair<double, double>;
  EXPECT_THAT(all->buckets, ElementsAre(Bucket{1, 3}, Bucket{kInf, 7}));
  EXPECT_EQ(all->sum, 5.0);
  EXPECT_EQ(all->count, 7.0);  // from the +Inf bucket
  const std::optional<MetricsPage::Histogram> b = page.HistogramOf("h", {{"pod", "b"}});
  ASSERT_TRUE(b);
  EXPECT_THAT(b->buckets, ElementsAre(Bucket{1, 2}, Bucket{kInf, 4}));
  EXPECT_FALSE(page.HistogramOf("h", {{"pod", "c"}}));
  EXPECT_FALSE(page.HistogramOf("nothing"));
}

TEST(PrometheusPageTest, GaugeHistogramReadsGsumAndGcount) {
  const MetricsPage page = ParseOk(
      "# TYPE q gaugehistogram\nq_bucket{le=\"1\"} 2\nq_bucket{le=\"+Inf\"} 3\nq_gcount 3\n"
      "q_gsum 2.5\n# EOF\n");
  const std::optional<MetricsPage::Histogram> h = page.HistogramOf("q");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->count, 3.0);
  EXPECT_EQ(h->sum, 2.5);
}

// A page shaped like vLLM's (tests/testdata/metrics/vllm_two_models.txt, written for this test):
// two models behind one server, figures chosen so the answers can be worked out by hand.
TEST(PrometheusPageTest, VllmShapedPage) {
  const MetricsPage page = ParseOk(ReadTestData("metrics/vllm_two_models.txt"));
  EXPECT_THAT(page.warnings, IsEmpty());
  EXPECT_FALSE(page.openmetrics);
  EXPECT_EQ(page.samples.size(), 37u);
  const std::vector<MetricLabel> llama = {{"model_name", "meta-llama/Llama-3.1-8B-Instruct"}};
  const std::vector<MetricLabel> qwen = {{"model_name", "Qwen/Qwen2.5-7B"}};

  EXPECT_EQ(page.Sum("vllm:num_requests_running"), 7.0);
  EXPECT_EQ(page.Sum("vllm:kv_cache_usage_perc", qwen), 0.5);
  EXPECT_EQ(page.Sum("vllm:request_success_total"), 200.0);
  EXPECT_EQ(page.Sum("vllm:request_success_total", {{"finished_reason", "abort"}}), 4.0);
  EXPECT_EQ(page.Sum("vllm:prompt_tokens_total", llama), 51200.0);
  ASSERT_NE(page.Family("vllm:request_success_total"), nullptr);
  EXPECT_EQ(page.Family("vllm:request_success")->type, MetricType::kCounter);
  EXPECT_EQ(page.Family("vllm:e2e_request_latency_seconds_bucket")->type, MetricType::kHistogram);
  EXPECT_EQ(page.Family("python_info")->help, "Python platform information");

  const std::optional<MetricsPage::Histogram> e2e =
      page.HistogramOf("vllm:e2e_request_latency_seconds", llama);
  ASSERT_TRUE(e2e);
  ASSERT_EQ(e2e->buckets.size(), 10u);
  EXPECT_EQ(e2e->buckets.front(), std::make_pair(0.3, 0.0));
  EXPECT_EQ(e2e->buckets.back(), std::make_pair(kInf, 100.0));
  EXPECT_EQ(e2e->count, 100.0);
  EXPECT_EQ(e2e->sum, 142.5);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*e2e, 0.05), 0.4);    // 0.3 + 0.2 * 5/10
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*e2e, 0.25), 0.725);  // 0.5 + 0.3 * 15/20
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*e2e, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*e2e, 0.9), 2.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*e2e, 0.99), 4.5);  // 2.5 + 2.5 * 4/5
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*e2e, 1.0), 5.0);

  const std::optional<MetricsPage::Histogram> q =
      page.HistogramOf("vllm:e2e_request_latency_seconds", qwen);
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*q, 0.5), 0.9);  // all 20 in (0.8, 1.0]

  const std::optional<MetricsPage::Histogram> both =
      page.HistogramOf("vllm:e2e_request_latency_seconds");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->count, 120.0);
  EXPECT_EQ(both->sum, 160.5);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(*both, 0.5), 0.95);  // 0.8 + 0.2 * 30/40
}

// ---- HistogramQuantile on its own.

MetricsPage::Histogram Buckets(std::vector<std::pair<double, double>> buckets) {
  MetricsPage::Histogram h;
  h.buckets = std::move(buckets);
  h.count = h.buckets.empty() ? 0 : h.buckets.back().second;
  return h;
}

TEST(PrometheusHistogramQuantileTest, InterpolatesInsideTheBucket) {
  const MetricsPage::Histogram h = Buckets({{1, 10}, {2, 30}, {4, 40}, {kInf, 40}});
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.1), 0.4);  // first bucket starts at 0
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.25), 1.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.875), 3.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.0), 0.0);
}

TEST(PrometheusHistogramQuantileTest, RankInTheInfBucketGivesTheHighestFiniteBound) {
  const MetricsPage::Histogram h = Buckets({{1, 5}, {2, 8}, {kInf, 10}});
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.95), 2.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 1.0), 2.0);
}

TEST(PrometheusHistogramQuantileTest, QuantileZeroIsTheLowerEdgeOfTheFirstNonEmptyBucket) {
  EXPECT_DOUBLE_EQ(*HistogramQuantile(Buckets({{1, 0}, {2, 0}, {3, 4}, {kInf, 4}}), 0.0), 2.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(Buckets({{1, 0}, {kInf, 4}}), 0.0), 1.0);
}

TEST(PrometheusHistogramQuantileTest, NonPositiveFirstBound) {
  const MetricsPage::Histogram h = Buckets({{-1, 2}, {0, 4}, {1, 8}, {kInf, 8}});
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.25), -1.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.75), 0.5);
}

TEST(PrometheusHistogramQuantileTest, OutOfRangeQuantiles) {
  const MetricsPage::Histogram h = Buckets({{1, 1}, {kInf, 1}});
  EXPECT_EQ(*HistogramQuantile(h, -0.1), -kInf);
  EXPECT_EQ(*HistogramQuantile(h, 1.1), kInf);
  EXPECT_FALSE(HistogramQuantile(h, std::nan("")));
}

TEST(PrometheusHistogramQuantileTest, DecreasingCountsAreRaisedToTheRunningMaximum) {
  // A scrape racing an observation can read a later bucket lower than an earlier one.
  const MetricsPage::Histogram h = Buckets({{1, 10}, {2, 8}, {3, 20}, {kInf, 20}});
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.75), 2.5);
}

TEST(PrometheusHistogramQuantileTest, UnsortedBucketsAreSorted) {
  const MetricsPage::Histogram h = Buckets({{kInf, 40}, {2, 30}, {1, 10}, {4, 40}});
  EXPECT_DOUBLE_EQ(*HistogramQuantile(h, 0.5), 1.5);
}

TEST(PrometheusHistogramQuantileTest, NoAnswerWithoutData) {
  EXPECT_FALSE(HistogramQuantile(Buckets({}), 0.5));
  EXPECT_FALSE(HistogramQuantile(Buckets({{1, 0}, {kInf, 0}}), 0.5));  // count 0
  EXPECT_FALSE(HistogramQuantile(Buckets({{1, 3}, {2, 4}}), 0.5));     // no +Inf
  EXPECT_FALSE(HistogramQuantile(Buckets({{kInf, 4}}), 0.5));          // +Inf only
  EXPECT_FALSE(HistogramQuantile(Buckets({{1, std::nan("")}, {kInf, 4}}), 0.5));
  EXPECT_FALSE(HistogramQuantile(Buckets({{1, 1}, {kInf, kInf}}), 0.5));
}

}  // namespace
}  // namespace bakeoff::target

namespace bakeoff::target {
namespace {

// A quoted metric or label name that is empty names nothing, so it makes no family (the fuzz
// corpus keeps such a page: tests/fuzz/corpus/prometheus/regression-empty-quoted-type-name).
TEST(PrometheusParseTest, AnEmptyQuotedNameMakesNoFamily) {
  for (const std::string_view text : {"# TYPE \"\" summary\nup 1\n", "# HELP \"\" text\nup 1\n", "{\"\"} 1\n"}) {
    Result<MetricsPage> page = ParsePrometheusText(text);
    if (!page.ok()) {
      EXPECT_NE(page.error().message.find("empty"), std::string::npos) << page.error().message;
      continue;
    }
    for (const MetricFamilyInfo& family : page->families) EXPECT_FALSE(family.name.empty()) << text;
    for (const MetricSample& sample : page->samples) EXPECT_FALSE(sample.name.empty()) << text;
  }
}

}  // namespace
}  // namespace bakeoff::target

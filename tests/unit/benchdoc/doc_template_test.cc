// tests/unit/benchdoc/doc_template_test.cc
//
// Owns: tests of the template language documents are rendered with (benchdoc/doc_template.h):
// arithmetic element by element, aggregates, formats, lazy branches, and every mistake named.
#include "benchdoc/doc_template.h"

#include <gtest/gtest.h>

namespace bakeoff::benchdoc {
namespace {

Facts Sample() {
  return Facts{{"a.rate", FactValue{1884100.4, 1353711.0, 1924045.0}},
               {"a.cpu", FactValue{2.0, 4.0, 8.0}},
               {"cmd", FactValue{std::string("bakeoff bench --rate 2000")}},
               {"one", FactValue{0.5}}};
}

std::string Render(std::string_view text) {
  Result<std::string> out = RenderTemplate(text, Sample());
  return out ? *out : "ERROR " + out.error().message;
}

TEST(DocTemplateTest, FillsHolesWithFormattedValues) {
  EXPECT_EQ(Render("{median(a.rate):int}/s ({min(a.rate):int}-{max(a.rate):int})"),
            "1,884,100/s (1,353,711-1,924,045)");
  EXPECT_EQ(Render("`{cmd}`"), "`bakeoff bench --rate 2000`");
  EXPECT_EQ(Render("{one:.3} {one} {1e9 / 3:g} {count(a.rate)}"), "0.500 0.5 3.33333e+08 3");
  EXPECT_EQ(Render("{{literal}} {1 + 2 * 3}"), "{literal} 7");
}

TEST(DocTemplateTest, ArithmeticRunsElementByElementAndBroadcasts) {
  EXPECT_EQ(Render("{a.cpu * 10}"), "20 40 80");
  EXPECT_EQ(Render("{a.rate / a.cpu:int}"), "942,050 338,428 240,506");
  EXPECT_EQ(Render("{join(fmt(a.cpu, '.1') + ' s', '; ')}"), "2.0 s; 4.0 s; 8.0 s");
  EXPECT_EQ(Render("{-one + 1}"), "0.5");
}

TEST(DocTemplateTest, TheFormatColonIsNotATernarysColon) {
  Facts facts = Sample();
  facts["g"] = FactValue{2.5};
  Result<std::string> out =
      RenderTemplate("{one > 1 ? one : g} {one > 1 ? 'x' : one:.2} {fmt(g, '.1')}", facts);
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, "2.5 0.50 2.5");
}

TEST(DocTemplateTest, AnEmptyListBroadcastsToNothing) {
  Facts facts{{"none", FactValue{}}};
  Result<FactValue> sum = EvaluateExpression("count(none + 1) + count(1 * none)", facts);
  ASSERT_TRUE(sum) << sum.error().message;
  EXPECT_EQ(std::get<double>(sum->front()), 0);
}

TEST(DocTemplateTest, DivisionByZeroIsNotANumber) {
  EXPECT_EQ(Render("{1 / 0:int} {1 / 0}"), "n/a n/a");
}

TEST(DocTemplateTest, OnlyTheBranchTakenIsEvaluated) {
  EXPECT_EQ(Render("{has(missing) ? missing : 'n/a'}"), "n/a");
  EXPECT_EQ(Render("{median(a.rate) >= 1000000 ? 'above' : 'below'} the target"),
            "above the target");
  EXPECT_EQ(Render("{has(missing) && missing > 1}"), "0");
  EXPECT_EQ(Render("{!has(missing) || missing}"), "1");
}

TEST(DocTemplateTest, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  Facts facts{{"x", FactValue{4.0, 1.0, 3.0, 2.0}}};
  Result<FactValue> median = EvaluateExpression("median(x)", facts);
  ASSERT_TRUE(median);
  EXPECT_EQ(std::get<double>(median->front()), 2.5);
}

TEST(DocTemplateTest, MistakesAreNamed) {
  EXPECT_EQ(Render("{median(a.x)}"), "ERROR {median(a.x)}: no fact 'a.x'");
  EXPECT_EQ(Render("{a.rate + a.cpu + cmd * 2}"),
            "ERROR {a.rate + a.cpu + cmd * 2}: '*' on a string ('bakeoff bench --rate 2000')");
  EXPECT_EQ(Render("{a.rate + fmt(a.cpu, 'int') + [}"),
            "ERROR {a.rate + fmt(a.cpu, 'int') + [}: column 30: unexpected '['");
  EXPECT_EQ(Render("{sqrt(one)}"), "ERROR {sqrt(one)}: unknown function 'sqrt'");
  EXPECT_EQ(Render("{median(cmd)}"),
            "ERROR {median(cmd)}: median() of a string ('bakeoff bench --rate 2000')");
  EXPECT_EQ(Render("{a.rate + FactValue}"), "ERROR {a.rate + FactValue}: no fact 'FactValue'");
  EXPECT_EQ(Render("{one:pct}"), "ERROR {one:pct}: column 4: unexpected ':'");
  EXPECT_EQ(Render("open { here"), "ERROR an unclosed '{' at offset 5");
  EXPECT_EQ(Render("a } b"), "ERROR a lone '}' at offset 2 (write }})");
  Facts lists{{"x", FactValue{1.0, 2.0}}, {"y", FactValue{1.0, 2.0, 3.0}}};
  Result<FactValue> mismatch = EvaluateExpression("x + y", lists);
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().message, "'+' on lists of 2 and 3 values");
}

TEST(DocTemplateTest, DeepNestingIsRefusedNotACrash) {
  std::string deep(5000, '(');
  Result<FactValue> value = EvaluateExpression(deep + "1" + std::string(5000, ')'), {});
  ASSERT_FALSE(value);
  EXPECT_NE(value.error().message.find("nested too deeply"), std::string::npos);
  std::string chain;
  for (int i = 0; i < 5000; ++i) chain += "1 ? ";
  value = EvaluateExpression(chain + "1", {});
  ASSERT_FALSE(value);
  EXPECT_NE(value.error().message.find("nested too deeply"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::benchdoc

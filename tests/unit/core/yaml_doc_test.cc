// Tests for core/yaml_doc.h: every mistake of a document is reported at once, in line order, as
// FILE:LINE: FIELD: what; unknown keys get the nearest known key; keys given twice are refused;
// quoted numbers are text; durations, dates and the other scalar kinds read as documented; a
// document yaml-cpp would never finish (",") is refused.
#include "core/yaml_doc.h"

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace bakeoff::yaml {
namespace {

using namespace std::chrono_literals;

YAML::Node Load(const std::string& text) {
  Result<YAML::Node> node = LoadDocument(text, "t.yaml");
  EXPECT_TRUE(node.ok()) << node.error().message;
  return node.ok() ? node.value() : YAML::Node();
}

// The lines of the diagnostics' text.
std::vector<std::string> Lines(const Diagnostics& d) {
  std::vector<std::string> lines;
  std::string text = d.Text();
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (text.empty()) lines.clear();
  return lines;
}

TEST(YamlDocTest, DiagnosticTextNamesFileLineAndField) {
  EXPECT_EQ((Diagnostic{"c.yaml", 7, "runtimes[2].image", "is wrong"}).Text(),
            "c.yaml:7: runtimes[2].image: is wrong");
  EXPECT_EQ((Diagnostic{"c.yaml", 3, "", "not valid"}).Text(), "c.yaml:3: not valid");
  EXPECT_EQ((Diagnostic{"c.yaml", 0, "x", "bad"}).Text(), "c.yaml: x: bad");
  // A quoted value may hold line breaks; the diagnostic stays one line.
  EXPECT_EQ((Diagnostic{"c.yaml", 2, "k\r", "'a\nb' is bad"}).Text(), "c.yaml:2: k\\r: 'a\\nb' is bad");
}

TEST(YamlDocTest, DiagnosticsAreListedInLineOrderAndBecomeOneError) {
  Diagnostics d;
  EXPECT_TRUE(d.empty());
  d.Add("f.yaml", 9, "b", "second");
  d.Add("f.yaml", 2, "a", "first");
  d.Add("f.yaml", 9, "c", "third");
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.Text(), "f.yaml:2: a: first\nf.yaml:9: b: second\nf.yaml:9: c: third");
  const Error e = d.ToError();
  EXPECT_EQ(e.code, ErrorCode::kInvalidInput);
  EXPECT_EQ(e.message, d.Text());
}

TEST(YamlDocTest, DiagnosticsBeyondTheCapAreCounted) {
  Diagnostics d;
  for (std::size_t i = 0; i < Diagnostics::kMaxKept + 5; ++i) d.Add("f.yaml", 1, "k", "x");
  EXPECT_EQ(d.size(), Diagnostics::kMaxKept + 5);
  EXPECT_EQ(d.items().size(), Diagnostics::kMaxKept);
  EXPECT_NE(d.Text().find("f.yaml: 5 more mistakes not shown"), std::string::npos);
}

TEST(YamlDocTest, EveryMistakeOfADocumentIsReportedAtOnceWithItsLine) {
  const YAML::Node root = Load(
      "name: ok\n"                 // 1
      "count: many\n"              // 2
      "ratio: .inf\n"              // 3
      "enabled: 'true'\n"          // 4
      "nested:\n"                  // 5
      "  depth: -3\n"              // 6
      "  colour: red\n"            // 7
      "items:\n"                   // 8
      "  - a\n"                    // 9
      "  - [b]\n"                  // 10
      "cuont: 3\n");               // 11
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  EXPECT_EQ(m.Text("name", Need::kRequired), "ok");
  EXPECT_FALSE(m.Integer("count", 0, 100));
  EXPECT_FALSE(m.Number("ratio", 0, 1));
  EXPECT_FALSE(m.Bool("enabled"));
  std::optional<MapReader> nested = m.Map("nested");
  ASSERT_TRUE(nested);
  EXPECT_FALSE(nested->Integer("depth", 0, 10));
  nested->Finish();
  EXPECT_FALSE(m.TextList("items"));
  EXPECT_FALSE(m.Text("missing", Need::kRequired));
  m.Finish();
  EXPECT_EQ(Lines(d), (std::vector<std::string>{
                          "t.yaml:1: missing: missing (required)",
                          "t.yaml:2: count: expected a whole number, got 'many'",
                          "t.yaml:3: ratio: expected a finite number, got '.inf'",
                          "t.yaml:4: enabled: expected true or false, got the string 'true' (drop "
                          "the quotes)",
                          "t.yaml:6: nested.depth: must be between 0 and 10, got -3",
                          "t.yaml:7: nested.colour: unknown key (known keys of nested: depth)",
                          "t.yaml:10: items[1]: expected text, got a list",
                          "t.yaml:11: cuont: unknown key; did you mean count?",
                      }));
}

TEST(YamlDocTest, UnknownKeysSuggestTheNearestKnownKeyOrListThem) {
  const YAML::Node root = Load("max_context: 1\nverison: 2\nzzzzzzzz: 3\n");
  Diagnostics d;
  MapReader m(root, "runtimes[0]", "t.yaml", &d);
  m.Integer("max_context_tokens", 0, 10);
  m.Text("version");
  m.Allow("image");
  m.Finish();
  EXPECT_EQ(Lines(d),
            (std::vector<std::string>{
                "t.yaml:1: runtimes[0].max_context: unknown key (known keys of runtimes[0]: "
                "max_context_tokens, version, image)",
                "t.yaml:2: runtimes[0].verison: unknown key; did you mean version?",
                "t.yaml:3: runtimes[0].zzzzzzzz: unknown key (known keys of runtimes[0]: "
                "max_context_tokens, version, image)",
            }));
}

TEST(YamlDocTest, KeysGivenTwiceAreRefusedAndTheFirstIsRead) {
  const YAML::Node root = Load("a: 1\nb: 2\na: 3\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  EXPECT_EQ(m.Integer("a", 0, 9), 1);
  EXPECT_EQ(m.Integer("b", 0, 9), 2);
  m.Finish();
  EXPECT_EQ(d.Text(), "t.yaml:3: a: given twice (first on line 1)");
}

TEST(YamlDocTest, QuotedNumbersAreTextNotNumbers) {
  const YAML::Node root = Load("n: '12'\nx: \"1.5\"\nversion: 0.10\ncuda: '12.4'\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  EXPECT_FALSE(m.Integer("n", 0, 100));
  EXPECT_FALSE(m.Number("x", 0, 100));
  EXPECT_EQ(m.Text("version"), "0.10");  // as written, not 0.1
  EXPECT_EQ(m.Text("cuda"), "12.4");
  m.Finish();
  EXPECT_EQ(Lines(d), (std::vector<std::string>{
                          "t.yaml:1: n: expected a whole number, got the string '12' (drop the "
                          "quotes)",
                          "t.yaml:2: x: expected a number, got the string '1.5' (drop the quotes)",
                      }));
}

TEST(YamlDocTest, ScalarKindsReadAsDocumented) {
  const YAML::Node root = Load(
      "i: +42\n"
      "r: 2.5e-1\n"
      "t: True\n"
      "f: false\n"
      "one: single\n"
      "many: [a, b]\n"
      "none: []\n"
      "kind: radix\n"
      "kind2: radx\n"
      "empty:\n"
      "blank: ''\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  EXPECT_EQ(m.Integer("i", 0, 100), 42);
  EXPECT_EQ(m.Number("r", 0, 1), 0.25);
  EXPECT_EQ(m.Bool("t"), true);
  EXPECT_EQ(m.Bool("f"), false);
  EXPECT_EQ(m.TextList("one"), (std::vector<std::string>{"single"}));
  EXPECT_EQ(m.TextList("many"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.TextList("none"), (std::vector<std::string>{}));
  constexpr std::string_view kKinds[] = {"none", "hashed-blocks", "radix"};
  EXPECT_EQ(m.Enum("kind", kKinds), 2u);
  EXPECT_FALSE(m.Enum("kind2", kKinds));
  EXPECT_FALSE(m.Text("empty"));
  EXPECT_FALSE(m.Text("blank"));
  EXPECT_FALSE(m.Text("absent"));  // optional and absent: no diagnostic
  m.Finish();
  EXPECT_EQ(Lines(d), (std::vector<std::string>{
                          "t.yaml:9: kind2: 'radx' is not one of none, hashed-blocks, radix; did "
                          "you mean radix?",
                          "t.yaml:10: empty: expected text, got nothing",
                          "t.yaml:11: blank: must not be empty",
                      }));
}

TEST(YamlDocTest, DurationsTakeUnitsOrSeconds) {
  const YAML::Node root = Load(
      "a: 250ms\nb: 30s\nc: 5min\nd: 1h\ne: 2.5\nf: '1.5s'\n"
      "g: '30'\nh: -1s\ni: 3 days\nj: -2\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  EXPECT_EQ(m.Duration("a"), Nanos(250ms));
  EXPECT_EQ(m.Duration("b"), Nanos(30s));
  EXPECT_EQ(m.Duration("c"), Nanos(5min));
  EXPECT_EQ(m.Duration("d"), Nanos(1h));
  EXPECT_EQ(m.Duration("e"), Nanos(2500ms));
  EXPECT_EQ(m.Duration("f"), Nanos(1500ms));
  EXPECT_FALSE(m.Duration("g"));
  EXPECT_FALSE(m.Duration("h"));
  EXPECT_FALSE(m.Duration("i"));
  EXPECT_FALSE(m.Duration("j"));
  m.Finish();
  const std::vector<std::string> lines = Lines(d);
  ASSERT_EQ(lines.size(), 4u) << d.Text();
  EXPECT_EQ(lines[0].rfind("t.yaml:7: g: expected a duration", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("(drop the quotes or add a unit)"), std::string::npos);
  EXPECT_EQ(lines[1].rfind("t.yaml:8: h: expected a duration", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("t.yaml:9: i: expected a duration", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3], "t.yaml:10: j: must not be negative, got -2");
}

TEST(YamlDocTest, DatesAreCalendarDates) {
  const YAML::Node root =
      Load("a: 2026-12-01\nb: '2024-02-29'\nc: 2023-02-29\nd: 2026-13-01\ne: 1/2/2026\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  EXPECT_EQ(m.Date("a"), "2026-12-01");
  EXPECT_EQ(m.Date("b"), "2024-02-29");
  EXPECT_FALSE(m.Date("c"));
  EXPECT_FALSE(m.Date("d"));
  EXPECT_FALSE(m.Date("e"));
  m.Finish();
  EXPECT_EQ(Lines(d), (std::vector<std::string>{
                          "t.yaml:3: c: '2023-02-29' is not a calendar date",
                          "t.yaml:4: d: '2026-13-01' is not a calendar date",
                          "t.yaml:5: e: expected a date YYYY-MM-DD, got '1/2/2026'",
                      }));
  EXPECT_EQ(ParseIsoDate("1970-01-01"), 0);
  EXPECT_EQ(ParseIsoDate("2026-12-01"), 20788);
  EXPECT_EQ(FormatIsoDate(20788), "2026-12-01");
  EXPECT_EQ(FormatIsoDate(*ParseIsoDate("2000-02-29") + 1), "2000-03-01");
  EXPECT_FALSE(ParseIsoDate("2026-12-1"));
  EXPECT_FALSE(ParseIsoDate("0000-01-01"));
}

TEST(YamlDocTest, ListsGiveIndexedPathsAndLines) {
  const YAML::Node root = Load("runtimes:\n  - id: a\n  - id: b\n    colour: 1\n  - 7\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  std::optional<std::vector<ListItem>> items = m.List("runtimes", Need::kRequired);
  ASSERT_TRUE(items);
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[1].path, "runtimes[1]");
  EXPECT_EQ((*items)[1].line, 3);
  for (const ListItem& item : *items) {
    MapReader entry(item, "t.yaml", &d);
    entry.Text("id");
    entry.Finish();
  }
  m.Finish();
  EXPECT_EQ(Lines(d), (std::vector<std::string>{
                          "t.yaml:4: runtimes[1].colour: unknown key (known keys of runtimes[1]: id)",
                          "t.yaml:5: runtimes[2]: expected a mapping, got '7'",
                      }));
}

TEST(YamlDocTest, FreeFormMappingsListTheirKeys) {
  const YAML::Node root = Load("q:\n  nvidia: [bf16]\n  cpu: q4_k_m\n");
  Diagnostics d;
  MapReader m(root, "", "t.yaml", &d);
  std::optional<MapReader> q = m.Map("q");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->Keys(), (std::vector<std::string>{"nvidia", "cpu"}));
  EXPECT_EQ(q->LineOf("cpu"), 3);
  EXPECT_EQ(q->Field("cpu"), "q.cpu");
  q->Finish();
  m.Finish();
  EXPECT_TRUE(d.empty()) << d.Text();
}

TEST(YamlDocTest, LoadDocumentRefusesWhatIsNotOneDocument) {
  DocumentKind kind;
  kind.noun = "catalog";
  kind.empty_hint = ": expected runtimes";
  kind.expect_mapping = "a mapping";
  auto message = [&](const std::string& text) {
    Result<YAML::Node> node = LoadDocument(text, "d.yaml", kind);
    return node.ok() ? std::string("ok") : node.error().message;
  };
  EXPECT_EQ(message("a: 1\n"), "ok");
  EXPECT_EQ(message(""), "d.yaml:1: empty catalog: expected runtimes");
  EXPECT_EQ(message("# only a comment\n"), "d.yaml:1: empty catalog: expected runtimes");
  EXPECT_EQ(message("- 1\n"), "d.yaml:1: expected a mapping, got a list");
  EXPECT_EQ(message("a: 1\n---\nb: 2\n"),
            "d.yaml:3: a catalog is one YAML document; a second one starts here");
  EXPECT_EQ(message("a: [1\n").rfind("d.yaml:", 0), 0u);
  EXPECT_NE(message("a: b: c\n").find("not valid YAML"), std::string::npos);
}

// yaml-cpp 0.7 never returns from loading a document that is only ","; LoadDocument must refuse
// it instead of hanging.
TEST(YamlDocTest, ACommaDocumentIsRefusedNotLoadedForever) {
  for (const char* text : {",\n", ",", "- ,\n,\n"}) {
    Result<YAML::Node> node = LoadDocument(text, "comma.yaml");
    ASSERT_FALSE(node.ok()) << text;
    EXPECT_EQ(node.error().message.rfind("comma.yaml:", 0), 0u) << node.error().message;
  }
}

TEST(YamlDocTest, SuggestionsNeedACloseName) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  const std::vector<std::string> names = {"streaming", "seed", "logprobs"};
  EXPECT_EQ(NearestName("straeming", names), "streaming");
  EXPECT_EQ(NearestName("sed", names), "seed");
  EXPECT_FALSE(NearestName("tensorrt", names));
  constexpr std::string_view kViews[] = {"engine", "serving-platform"};
  EXPECT_EQ(NearestName("engnie", kViews), "engine");
  EXPECT_EQ(JoinNames(names), "streaming, seed, logprobs");
}

}  // namespace
}  // namespace bakeoff::yaml

// Tests for study/catalog.h and study/features.h: a catalog parses into its entries with the line
// of every field; every mistake of a file is reported at once with its line; duplicate ids,
// unknown engines, features and accelerator kinds are refused; each lint code fires when it
// should and stays quiet otherwise; the shipped catalogs parse (the demo one lints clean).
#include "study/catalog.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "study/features.h"
#include "target/adapters.h"
#include "support/scratch.h"

namespace bakeoff::study {
namespace {

namespace fs = std::filesystem;

constexpr char kToday[] = "2026-12-01";
const std::string kDigest = "sha256:" + std::string(64, 'a');

// One entry that lints clean on kToday, as the lines of a list element.
std::string CleanEntry(const std::string& id = "vllm-0.6.3") {
  return "  - id: " + id +
         "\n"
         "    engine: vllm\n"
         "    version: 0.6.3\n"
         "    image: vllm/vllm-openai:v0.6.3\n"
         "    image_digest: " +
         kDigest +
         "\n"
         "    cuda: '12.4'\n"
         "    architectures: [LlamaForCausalLM]\n"
         "    weight_formats: [safetensors]\n"
         "    quantizations:\n"
         "      nvidia: [bf16, fp8]\n"
         "    hardware: [nvidia]\n"
         "    features: [streaming, seed]\n"
         "    max_context: 32768\n"
         "    last_verified_version: 0.6.3\n"
         "    last_verified_date: 2026-11-20\n"
         "    verified_against: a live run\n";
}

Catalog ParsedCatalog(const std::string& text) {
  Result<Catalog> catalog = ParseCatalog(text, "c.yaml");
  EXPECT_TRUE(catalog.ok()) << catalog.error().message;
  return catalog.ok() ? catalog.value() : Catalog{};
}

std::string ErrorOf(const std::string& text) {
  Result<Catalog> catalog = ParseCatalog(text, "c.yaml");
  if (catalog.ok()) return "ok";
  EXPECT_EQ(catalog.error().code, ErrorCode::kInvalidInput);
  return catalog.error().message;
}

std::vector<LintFinding> Lint(const std::string& text, const std::string& today = kToday,
                              int max_age = 180) {
  LintOptions options;
  options.today = today;
  options.max_verification_age_days = max_age;
  return LintCatalog(ParsedCatalog(text), options);
}

// The codes of `findings`, in order.
std::vector<std::string> Codes(const std::vector<LintFinding>& findings) {
  std::vector<std::string> codes;
  for (const LintFinding& f : findings) codes.push_back(f.code);
  return codes;
}

// CleanEntry with the line starting with `key` replaced (or removed when `line` is empty).
std::string With(const std::string& key, const std::string& line) {
  std::string entry = CleanEntry();
  const std::size_t at = entry.find("    " + key + ":");
  EXPECT_NE(at, std::string::npos) << key;
  std::size_t end = entry.find('\n', at) + 1;
  if (key == "quantizations") end = entry.find('\n', end) + 1;  // and its one kind
  entry.replace(at, end - at, line.empty() ? "" : "    " + line + "\n");
  return "runtimes:\n" + entry;
}

fs::path SourceDir() { return fs::path(BAKEOFF_SOURCE_DIR); }

// --- Parsing ---

TEST(CatalogTest, AnEntryParsesWithEveryFieldAndItsLine) {
  const Catalog catalog = ParsedCatalog(
      "runtimes:\n"                                   // 1
      "  - id: llama-b4748\n"                         // 2
      "    engine: llamacpp\n"                        // 3
      "    version: b4748\n"                          // 4
      "    layer: engine\n"                           // 5
      "    image: ghcr.io/ggml-org/llama.cpp:server-b4748@" +
      kDigest +
      "\n"                                            // 6
      "    driver: none\n"                            // 7
      "    architectures: [llama]\n"                  // 8
      "    weight_formats: gguf\n"                    // 9
      "    quantizations:\n"                          // 10
      "      cpu: [f16, q4_k_m]\n"                    // 11
      "    hardware: [cpu]\n"                         // 12
      "    features: [streaming, usage_in_stream]\n"  // 13
      "    max_context: 4096\n"                       // 14
      "    known_limits: [no min_tokens, {limit: generation goes on after a disconnect, finding: cancellation.keeps_generating_after_*_cancel}]\n"  // 15
      "    bundles: [results/llama]\n"                // 16
      "    last_verified_version: b4748\n"            // 17
      "    last_verified_date: 2026-12-01\n"          // 18
      "    verified_against: live llama.cpp b4748 on CPU\n"  // 19
      "    sunset: 2027-06-30\n");                    // 20
  ASSERT_EQ(catalog.entries.size(), 1u);
  const CatalogEntry& e = catalog.entries[0];
  EXPECT_EQ(e.id, "llama-b4748");
  EXPECT_EQ(e.engine, "llama.cpp");  // the alias becomes the adapter's name
  EXPECT_EQ(e.version, "b4748");
  EXPECT_EQ(e.layer, Layer::kEngine);
  EXPECT_EQ(e.image_digest, kDigest);  // from the image reference
  EXPECT_EQ(e.driver, "none");
  EXPECT_EQ(e.architectures, std::vector<std::string>{"llama"});
  EXPECT_EQ(e.weight_formats, std::vector<std::string>{"gguf"});
  EXPECT_EQ(e.quantizations.at("cpu"), (std::vector<std::string>{"f16", "q4_k_m"}));
  EXPECT_EQ(e.features, (std::vector<Feature>{Feature::kStreaming, Feature::kUsageInStream}));
  EXPECT_TRUE(e.HasFeature(Feature::kStreaming));
  EXPECT_FALSE(e.HasFeature(Feature::kSeed));
  EXPECT_EQ(e.max_context, 4096u);
  EXPECT_EQ(e.known_limits, (std::vector<CatalogEntry::KnownLimit>{
                                {"no min_tokens", ""},
                                {"generation goes on after a disconnect", "cancellation.keeps_generating_after_*_cancel"}}));
  EXPECT_EQ(e.bundles, std::vector<std::string>{"results/llama"});
  EXPECT_EQ(e.last_verified_date, "2026-12-01");
  EXPECT_EQ(e.verified_against, "live llama.cpp b4748 on CPU");
  EXPECT_EQ(e.sunset, "2027-06-30");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.LineOf("id"), 2);
  EXPECT_EQ(e.LineOf("image"), 6);
  EXPECT_EQ(e.LineOf("quantizations"), 10);
  EXPECT_EQ(e.LineOf("quantizations.cpu"), 11);
  EXPECT_EQ(e.LineOf("features"), 13);
  EXPECT_EQ(e.LineOf("sunset"), 20);
  EXPECT_EQ(e.LineOf("rocm"), 2);  // not set: the entry's line
  EXPECT_EQ(catalog.Find("llama-b4748"), &catalog.entries[0]);
  EXPECT_EQ(catalog.Find("nope"), nullptr);
  EXPECT_EQ(catalog.source, "c.yaml");
}

TEST(CatalogTest, EveryMistakeIsReportedAtOnceWithItsLine) {
  const std::string message = ErrorOf(
      "runtimes:\n"                              // 1
      "  - id: a\n"                              // 2
      "    engine: vlm\n"                        // 3
      "    layer: platform\n"                    // 4
      "    image_digest: sha256:abc\n"           // 5
      "    features: [streming, seed, seed]\n"   // 6
      "    max_context: 0\n"                     // 7
      "    quantizations:\n"                     // 8
      "      nvidai: [fp8]\n"                    // 9
      "    last_verified_date: 2026-02-30\n"     // 10
      "    imagee: x\n"                          // 11
      "  - id: a\n"                              // 12
      "    engine: tgi\n"                        // 13
      "    image: builtin\n"                     // 14
      "    emulated_preset: radix-lpm\n"         // 15
      "  - engine: emulated\n"                   // 16
      "    id: 'has space'\n");                  // 17
  const std::vector<std::string> expected = {
      "c.yaml:3: runtimes[0].engine: 'vlm' is no engine adapter; did you mean vllm? (one of: ",
      "c.yaml:4: runtimes[0].layer: 'platform' is not one of engine, serving-platform, "
      "local-platform, weight-format",
      "c.yaml:5: runtimes[0].image_digest: expected sha256: and 64 lower-case hex digits, got "
      "'sha256:abc'",
      "c.yaml:6: runtimes[0].features[0]: 'streming' is not a feature; did you mean streaming?",
      "c.yaml:6: runtimes[0].features[2]: lists 'seed' twice",
      "c.yaml:7: runtimes[0].max_context: must be between 1 and 4294967295, got 0",
      "c.yaml:9: runtimes[0].quantizations.nvidai: 'nvidai' is no accelerator kind; did you mean "
      "nvidia?",
      "c.yaml:10: runtimes[0].last_verified_date: '2026-02-30' is not a calendar date",
      "c.yaml:11: runtimes[0].imagee: unknown key; did you mean image?",
      "c.yaml:12: runtimes[1].id: 'a' is given twice (first on line 2)",
      "c.yaml:14: runtimes[1].image: builtin is the emulated engine's image",
      "c.yaml:15: runtimes[1].emulated_preset: only for engine: emulated",
      "c.yaml:16: runtimes[2].emulated_preset: missing (required for engine: emulated",
      "c.yaml:17: runtimes[2].id: 'has space' is not an id",
  };
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < message.size();) {
    std::size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    lines.push_back(message.substr(start, end - start));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), expected.size()) << message;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(lines[i].rfind(expected[i], 0), 0u) << lines[i] << "\nexpected: " << expected[i];
  }
}

TEST(CatalogTest, TheDocumentMustBeOneMappingWithRuntimes) {
  EXPECT_EQ(ErrorOf("").rfind("c.yaml:1: empty runtime catalog", 0), 0u);
  EXPECT_EQ(ErrorOf("- id: a\n").rfind("c.yaml:1: expected a mapping with `runtimes:`", 0), 0u);
  EXPECT_EQ(ErrorOf("runtime: []\n"),
            "c.yaml:1: runtimes: missing (required)\n"
            "c.yaml:1: runtime: unknown key; did you mean runtimes?");
  EXPECT_EQ(ErrorOf("runtimes: []\n"), "c.yaml:1: runtimes: lists no runtimes");
  EXPECT_EQ(ErrorOf("runtimes: 3\n"), "c.yaml:1: runtimes: expected a list, got '3'");
  EXPECT_EQ(ErrorOf("runtimes:\n" + CleanEntry() + "---\nruntimes: []\n")
                .rfind("c.yaml:19: a runtime catalog is one YAML document", 0),
            0u);
  // yaml-cpp 0.7 would never return from this one.
  EXPECT_EQ(ErrorOf(",\n").rfind("c.yaml:", 0), 0u);
}

TEST(CatalogTest, EmulatedEntriesAreBuiltinWithAPreset) {
  const Catalog catalog = ParsedCatalog(
      "runtimes:\n"
      "  - id: emulated-paged\n"
      "    engine: emulated\n"
      "    emulated_preset: continuous-paged\n");
  ASSERT_EQ(catalog.entries.size(), 1u);
  EXPECT_TRUE(catalog.entries[0].emulated());
  EXPECT_EQ(catalog.entries[0].image, "builtin");
  EXPECT_EQ(catalog.entries[0].emulated_preset, "continuous-paged");
  EXPECT_NE(ErrorOf("runtimes:\n  - id: e\n    engine: emulated\n    emulated_preset: p\n"
                    "    image: vllm/vllm-openai:v1\n")
                .find("image: an emulated runtime's image is builtin"),
            std::string::npos);
  EXPECT_NE(ErrorOf("runtimes:\n  - id: e\n    engine: emulated\n    emulated_preset: p\n"
                    "    image_digest: " +
                    kDigest + "\n")
                .find("image_digest: an emulated runtime has no image digest"),
            std::string::npos);
}

TEST(CatalogTest, AnImageDigestMustAgreeWithTheImage) {
  const std::string other = "sha256:" + std::string(64, 'b');
  EXPECT_NE(ErrorOf("runtimes:\n  - id: a\n    engine: vllm\n    image: v/v:1@" + kDigest +
                    "\n    image_digest: " + other + "\n")
                .find("is not the digest the image names"),
            std::string::npos);
  EXPECT_NE(ErrorOf("runtimes:\n  - id: a\n    engine: vllm\n    image: v/v:1@sha256:zz\n")
                .find("the digest in 'v/v:1@sha256:zz' is not sha256:"),
            std::string::npos);
}

// --- Lint ---

TEST(CatalogLintTest, ACompleteEntryLintsClean) {
  const std::vector<LintFinding> findings = Lint("runtimes:\n" + CleanEntry());
  EXPECT_TRUE(findings.empty()) << FormatLintFinding(findings.front());
  EXPECT_FALSE(HasLintErrors(findings));
}

TEST(CatalogLintTest, LatestOrNoTagIsFlagged) {
  for (const char* image : {"vllm/vllm-openai:latest", "vllm/vllm-openai",
                            "registry.local:5000/vllm"}) {
    const std::vector<LintFinding> findings =
        Lint(With("image", std::string("image: ") + image));
    ASSERT_EQ(Codes(findings), std::vector<std::string>{"latest_tag"}) << image;
    EXPECT_EQ(findings[0].severity, LintSeverity::kError);
    EXPECT_EQ(findings[0].line, 5);
    EXPECT_EQ(findings[0].entry, "vllm-0.6.3");
    EXPECT_EQ(findings[0].source, "c.yaml");
  }
  EXPECT_TRUE(Lint(With("image", "image: registry.local:5000/vllm:v0.6.3")).empty());
}

TEST(CatalogLintTest, AnImageWithoutDigestIsFlagged) {
  const std::vector<LintFinding> findings = Lint(With("image_digest", ""));
  ASSERT_EQ(Codes(findings), std::vector<std::string>{"missing_digest"});
  EXPECT_EQ(FormatLintFinding(findings[0]).rfind("c.yaml:5: [vllm-0.6.3] missing_digest: image ", 0),
            0u);
  // A digest in the image reference pins it too.
  std::string pinned = With("image_digest", "");
  pinned.replace(pinned.find("v0.6.3\n"), 7, "v0.6.3@" + kDigest + "\n");
  EXPECT_TRUE(Lint(pinned).empty());
}

TEST(CatalogLintTest, SunsetsPassedAndComing) {
  std::vector<LintFinding> passed = Lint(With("cuda", "cuda: '12.4'\n    sunset: 2026-11-30"));
  ASSERT_EQ(Codes(passed), std::vector<std::string>{"sunset_passed"});
  EXPECT_EQ(passed[0].severity, LintSeverity::kError);
  EXPECT_NE(passed[0].message.find("1 days ago"), std::string::npos) << passed[0].message;
  EXPECT_EQ(Codes(Lint(With("cuda", "cuda: '12.4'\n    sunset: 2026-12-01"))),
            std::vector<std::string>{"sunset_passed"});
  std::vector<LintFinding> soon = Lint(With("cuda", "cuda: '12.4'\n    sunset: 2026-12-31"));
  ASSERT_EQ(Codes(soon), std::vector<std::string>{"sunset_soon"});
  EXPECT_EQ(soon[0].severity, LintSeverity::kWarning);
  EXPECT_EQ(FormatLintFinding(soon[0]),
            "c.yaml:8: [vllm-0.6.3] sunset_soon: warning: sunset on 2026-12-31, in 30 days");
  EXPECT_TRUE(Lint(With("cuda", "cuda: '12.4'\n    sunset: 2027-01-01")).empty());
}

TEST(CatalogLintTest, VerificationStaleNeverOrInTheFuture) {
  // 2026-06-04 is 180 days before 2026-12-01.
  EXPECT_TRUE(Lint(With("last_verified_date", "last_verified_date: 2026-06-04")).empty());
  std::vector<LintFinding> stale = Lint(With("last_verified_date", "last_verified_date: 2026-06-03"));
  ASSERT_EQ(Codes(stale), std::vector<std::string>{"verification_stale"});
  EXPECT_EQ(stale[0].severity, LintSeverity::kWarning);
  EXPECT_EQ(stale[0].line, 16);
  EXPECT_TRUE(Lint(With("last_verified_date", "last_verified_date: 2026-06-03"), kToday, 181).empty());
  EXPECT_EQ(Codes(Lint(With("last_verified_date", "last_verified_date: 2026-11-20"), kToday, 5)),
            std::vector<std::string>{"verification_stale"});

  std::string never = With("last_verified_date", "");
  never = never.replace(never.find("    last_verified_version: 0.6.3\n"), 33, "");
  std::vector<LintFinding> findings = Lint(never);
  ASSERT_EQ(Codes(findings), std::vector<std::string>{"never_verified"});
  EXPECT_EQ(findings[0].severity, LintSeverity::kWarning);
  EXPECT_NE(findings[0].message.find("verified against: a live run"), std::string::npos);

  std::vector<LintFinding> future = Lint(With("last_verified_date", "last_verified_date: 2026-12-02"));
  ASSERT_EQ(Codes(future), std::vector<std::string>{"verified_in_future"});
  EXPECT_EQ(future[0].severity, LintSeverity::kError);

  std::vector<LintFinding> other = Lint(With("last_verified_version", "last_verified_version: 0.6.2"));
  ASSERT_EQ(Codes(other), std::vector<std::string>{"verified_other_version"});
  EXPECT_EQ(other[0].severity, LintSeverity::kWarning);
}

TEST(CatalogLintTest, EachMissingDecisionFieldIsOneFinding) {
  for (const char* key : {"version", "image", "architectures", "weight_formats", "quantizations",
                          "hardware", "features", "max_context", "cuda"}) {
    std::vector<LintFinding> findings = Lint(With(key, ""));
    if (std::string(key) == "version") {
      // last_verified_version still names 0.6.3: only the missing version is an error.
      findings.erase(std::remove_if(findings.begin(), findings.end(),
                                    [](const LintFinding& f) {
                                      return f.code == "verified_other_version";
                                    }),
                     findings.end());
    }
    if (std::string(key) == "quantizations") {
      // Without quantizations nothing names nvidia, so cuda is not asked for.
    }
    ASSERT_EQ(Codes(findings), std::vector<std::string>{"missing_field"}) << key;
    EXPECT_EQ(findings[0].severity, LintSeverity::kError);
    EXPECT_EQ(findings[0].line, 2);
    EXPECT_EQ(findings[0].message.rfind(std::string(key) + " is not given", 0), 0u)
        << findings[0].message;
  }
  // An empty list is a statement, not a missing fact.
  EXPECT_TRUE(Lint(With("features", "features: []")).empty());
  // rocm is asked for when quantizations names amd.
  EXPECT_EQ(Codes(Lint(With("quantizations", "quantizations:\n      nvidia: [bf16]\n      amd: [fp16]"))),
            std::vector<std::string>{"missing_field"});
  // verified_against is asked for once a date is given.
  EXPECT_EQ(Codes(Lint(With("verified_against", ""))), std::vector<std::string>{"missing_field"});
  // A local platform needs no image.
  std::string local = With("image", "layer: local-platform");
  local.erase(local.find("    image_digest:"), local.find('\n', local.find("    image_digest:")) -
                                                    local.find("    image_digest:") + 1);
  EXPECT_TRUE(Lint(local).empty()) << FormatLintFinding(Lint(local).front());
}

TEST(CatalogLintTest, EmulatedEntriesSkipImageAndWeightChecks) {
  const std::vector<LintFinding> findings = Lint(
      "runtimes:\n"
      "  - id: emulated-paged\n"
      "    engine: emulated\n"
      "    emulated_preset: continuous-paged\n"
      "    version: 0.1.0\n"
      "    features: [streaming]\n"
      "    max_context: 32768\n"
      "    last_verified_version: 0.1.0\n"
      "    last_verified_date: 2026-12-01\n"
      "    verified_against: bakeoff's own emulator tests\n");
  EXPECT_TRUE(findings.empty()) << FormatLintFinding(findings.front());
  // Still asks for what a decision needs.
  EXPECT_EQ(Codes(Lint("runtimes:\n  - id: e\n    engine: emulated\n    emulated_preset: p\n")),
            (std::vector<std::string>{"missing_field", "missing_field", "missing_field",
                                      "never_verified"}));
}

TEST(CatalogLintTest, BundlesThatDoNotExistAreFlagged) {
  const fs::path dir = bakeoff::testing::ScratchRoot() / ("bakeoff_catalog_" + std::to_string(::getpid()));
  fs::create_directories(dir / "results" / "old");
  const fs::path file = dir / "catalog.yaml";
  std::ofstream(file) << "runtimes:\n" << CleanEntry() << "    bundles: [results/old, results/gone]\n";
  Result<Catalog> catalog = LoadCatalog(file);
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  EXPECT_EQ(catalog->file, file);
  EXPECT_EQ(catalog->source, file.string());
  LintOptions options;
  options.today = kToday;
  const std::vector<LintFinding> findings = LintCatalog(catalog.value(), options);
  ASSERT_EQ(Codes(findings), std::vector<std::string>{"bundle_not_found"});
  EXPECT_NE(findings[0].message.find("'results/gone'"), std::string::npos);
  EXPECT_EQ(findings[0].source, file.string());
  fs::remove_all(dir);

  Result<Catalog> missing = LoadCatalog(dir / "nothing.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
}

// --- The shipped catalogs ---

TEST(CatalogShippedTest, TheDemoCatalogLintsClean) {
  Result<Catalog> catalog = LoadCatalog(SourceDir() / "examples/demo/catalog.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  std::set<std::string> ids;
  for (const CatalogEntry& e : catalog->entries) {
    ids.insert(e.id);
    EXPECT_TRUE(e.emulated()) << e.id;
    EXPECT_EQ(e.version, BAKEOFF_VERSION) << e.id;
  }
  for (const char* id : {"emulated-paged", "emulated-radix", "emulated-static"}) {
    EXPECT_TRUE(ids.count(id)) << id;
  }
  EXPECT_EQ(catalog->Find("emulated-paged")->emulated_preset, "continuous-paged");
  EXPECT_EQ(catalog->Find("emulated-radix")->emulated_preset, "radix-lpm");
  EXPECT_EQ(catalog->Find("emulated-static")->emulated_preset, "static-batch");
  EXPECT_FALSE(catalog->Find("emulated-static")->HasFeature(Feature::kPrefixCaching));
  EXPECT_TRUE(catalog->Find("emulated-radix")->HasFeature(Feature::kPrefixCaching));
  LintOptions options;
  options.today = kToday;
  const std::vector<LintFinding> findings = LintCatalog(catalog.value(), options);
  EXPECT_TRUE(findings.empty()) << FormatLintFinding(findings.front());
}

TEST(CatalogShippedTest, TheStarterCatalogHasOneEntryPerEngineAndNoInventedDigests) {
  Result<Catalog> catalog = LoadCatalog(SourceDir() / "examples/catalog.yaml");
  ASSERT_TRUE(catalog.ok()) << catalog.error().message;
  std::set<std::string> engines;
  for (const CatalogEntry& e : catalog->entries) {
    engines.insert(e.engine);
    EXPECT_TRUE(e.image_digest.empty()) << e.id << ": digests are not invented";
    EXPECT_FALSE(e.verified_against.empty()) << e.id;
  }
  std::set<std::string> adapters;
  for (const target::EngineAdapter& a : target::AllAdapters()) adapters.insert(std::string(a.name));
  adapters.erase("generic-openai");
  EXPECT_EQ(engines, adapters);
  LintOptions options;
  options.today = kToday;
  const std::vector<LintFinding> findings = LintCatalog(catalog.value(), options);
  EXPECT_TRUE(HasLintErrors(findings));
  std::set<std::string> digestless;
  for (const LintFinding& f : findings) {
    EXPECT_NE(f.code, "latest_tag") << FormatLintFinding(f);
    if (f.code == "missing_digest") digestless.insert(f.entry);
  }
  for (const CatalogEntry& e : catalog->entries) {
    if (e.layer == Layer::kEngine || e.layer == Layer::kServingPlatform) {
      EXPECT_TRUE(digestless.count(e.id)) << e.id;
    }
  }
}

// --- Features ---

TEST(FeaturesTest, EveryFeatureHasANameThatParsesBack) {
  const std::vector<std::string_view> expected = {
      "streaming",      "streaming_cancel",     "usage_in_stream",   "seed",
      "logprobs",       "structured_output",    "tool_calls",        "multi_lora",
      "prefix_caching", "chunked_prefill",      "speculative_decoding", "pd_disaggregation",
      "openai_chat",    "openai_completions",   "embeddings",        "rerank"};
  ASSERT_EQ(AllFeatures().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Feature f = AllFeatures()[i];
    EXPECT_EQ(FeatureName(f), expected[i]);
    EXPECT_EQ(FeatureNames()[i], expected[i]);
    EXPECT_EQ(ParseFeature(expected[i]), f);
    EXPECT_FALSE(FeatureMeaning(f).empty());
  }
  EXPECT_FALSE(ParseFeature("Streaming"));
  EXPECT_EQ(SuggestFeature("tool_call"), "tool_calls");
  EXPECT_FALSE(SuggestFeature("quantum"));
  EXPECT_EQ(UnknownFeatureMessage("prefix_cache"),
            "'prefix_cache' is not a feature; did you mean prefix_caching?");
  EXPECT_EQ(UnknownFeatureMessage("quantum").rfind("'quantum' is not a feature (features: streaming, ", 0),
            0u);
  EXPECT_EQ(LayerName(Layer::kServingPlatform), "serving-platform");
  EXPECT_EQ(ParseLayer("weight-format"), Layer::kWeightFormat);
}

}  // namespace
}  // namespace bakeoff::study

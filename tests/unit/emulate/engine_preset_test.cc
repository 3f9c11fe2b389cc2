// Tests for emulate/engine_preset.h: every shipped preset loads and validates, every key reaches
// its EngineConfig field and back, each kind of mistake is reported as FILE:LINE: KEY: what, and
// presets are found by name.
#include "emulate/engine_preset.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/file.h"

namespace bakeoff::emulate {
namespace {

namespace fs = std::filesystem;

fs::path SourceDir() { return fs::path(BAKEOFF_SOURCE_DIR); }
fs::path PresetsDir() { return SourceDir() / "examples/engines"; }
fs::path TestPresets() { return SourceDir() / "tests/unit/emulate/testdata/presets"; }

// The message of parsing `yaml` as "e.yaml", or "ok".
std::string ErrorOf(const std::string& yaml) {
  Result<EnginePreset> p = ParseEnginePreset(yaml, "e.yaml");
  if (p.ok()) return "ok";
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidInput) << p.error().message;
  return p.error().message;
}

// Every field of two configs, compared one by one, naming the one that differs.
void ExpectSameConfig(const EngineConfig& a, const EngineConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.max_num_seqs, b.max_num_seqs);
  EXPECT_EQ(a.max_batched_tokens, b.max_batched_tokens);
  EXPECT_EQ(a.max_model_len, b.max_model_len);
  EXPECT_EQ(a.policy, b.policy);
  EXPECT_EQ(a.chunked_prefill, b.chunked_prefill);
  EXPECT_EQ(a.prefill_chunk_tokens, b.prefill_chunk_tokens);
  EXPECT_EQ(a.kv.block_tokens, b.kv.block_tokens);
  EXPECT_EQ(a.kv.num_blocks, b.kv.num_blocks);
  EXPECT_EQ(a.kv.watermark, b.kv.watermark);
  EXPECT_EQ(a.kv.prefix_caching, b.kv.prefix_caching);
  EXPECT_EQ(a.cost.base_ms, b.cost.base_ms);
  EXPECT_EQ(a.cost.prefill_ms_per_token, b.cost.prefill_ms_per_token);
  EXPECT_EQ(a.cost.decode_ms_per_seq, b.cost.decode_ms_per_seq);
  EXPECT_EQ(a.cost.kv_ms_per_1k_tokens, b.cost.kv_ms_per_1k_tokens);
  EXPECT_EQ(a.step_noise_cv, b.step_noise_cv);
  EXPECT_EQ(a.eos_probability, b.eos_probability);
  EXPECT_EQ(a.seed, b.seed);
}

// --- The shipped presets ---

TEST(EnginePresetTest, EveryExamplePresetLoadsAndValidates) {
  // Iterates the folder, so a preset added later is checked too.
  int presets = 0;
  for (const auto& entry : fs::directory_iterator(PresetsDir())) {
    if (entry.path().extension() != ".yaml") continue;
    ++presets;
    SCOPED_TRACE(entry.path().string());
    Result<EnginePreset> p = LoadEnginePreset(entry.path());
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_TRUE(ValidateEngineConfig(p->config).ok());
    EXPECT_EQ(p->config.name, entry.path().stem().string()) << "a preset's name is its file name";
    EXPECT_FALSE(p->description.empty()) << "say what the preset imitates";
    EXPECT_FALSE(p->hardware.empty()) << "say which hardware/model class its numbers suit";
    EXPECT_EQ(p->file, entry.path());
    // The file states its reasoning in a header comment.
    Result<std::string> text = ReadFile(entry.path());
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text->rfind("# ", 0), 0u) << "starts with a header comment";
    // Written out and read back, nothing changes.
    Result<EnginePreset> again = ParseEnginePreset(RenderEnginePreset(*p), "rendered.yaml");
    ASSERT_TRUE(again.ok()) << again.error().message;
    ExpectSameConfig(again->config, p->config);
  }
  EXPECT_GE(presets, 4);
}

TEST(EnginePresetTest, TheFourBehavioursAreWhatTheirNamesSay) {
  EXPECT_EQ(
      ListEnginePresets(PresetsDir()),
      (std::vector<std::string>{"continuous-paged", "radix-lpm", "small-cpu", "static-batch"}));
  auto load = [](const char* name) {
    Result<EnginePreset> p = LoadEnginePreset(PresetsDir() / (std::string(name) + ".yaml"));
    EXPECT_TRUE(p.ok()) << name << ": " << (p.ok() ? "" : p.error().message);
    return p.ok() ? p->config : EngineConfig{};
  };
  const EngineConfig paged = load("continuous-paged");
  EXPECT_EQ(paged.policy, SchedulingPolicy::kFcfs);
  EXPECT_TRUE(paged.chunked_prefill);
  EXPECT_EQ(paged.kv.prefix_caching, PrefixCaching::kHashedBlocks);
  EXPECT_EQ(paged.kv.block_tokens, 16);

  const EngineConfig radix = load("radix-lpm");
  EXPECT_EQ(radix.policy, SchedulingPolicy::kLongestPrefixMatch);
  EXPECT_EQ(radix.kv.prefix_caching, PrefixCaching::kRadix);
  // Same hardware assumptions as continuous-paged: a comparison isolates scheduling and caching.
  EXPECT_EQ(radix.cost.base_ms, paged.cost.base_ms);
  EXPECT_EQ(radix.cost.prefill_ms_per_token, paged.cost.prefill_ms_per_token);
  EXPECT_EQ(radix.cost.decode_ms_per_seq, paged.cost.decode_ms_per_seq);
  EXPECT_EQ(radix.cost.kv_ms_per_1k_tokens, paged.cost.kv_ms_per_1k_tokens);
  EXPECT_EQ(radix.kv.num_blocks * radix.kv.block_tokens,
            paged.kv.num_blocks * paged.kv.block_tokens);

  const EngineConfig fixed = load("static-batch");
  EXPECT_EQ(fixed.policy, SchedulingPolicy::kStaticBatch);
  EXPECT_FALSE(fixed.chunked_prefill);
  EXPECT_EQ(fixed.kv.prefix_caching, PrefixCaching::kNone);
  // A static batcher reserves a whole batch of max-length requests.
  EXPECT_GE(fixed.kv.num_blocks * fixed.kv.block_tokens, fixed.max_num_seqs * fixed.max_model_len);

  const EngineConfig cpu = load("small-cpu");
  EXPECT_LE(cpu.max_num_seqs, 8);
  EXPECT_GE(cpu.cost.base_ms, 5 * paged.cost.base_ms);
  EXPECT_GE(cpu.cost.prefill_ms_per_token, 100 * paged.cost.prefill_ms_per_token);
  EXPECT_LT(cpu.kv.num_blocks * cpu.kv.block_tokens,
            paged.kv.num_blocks * paged.kv.block_tokens / 10);
}

TEST(EnginePresetTest, EveryKeyIsDocumented) {
  Result<std::string> doc = ReadFile(SourceDir() / "docs/engine-presets.md");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  for (std::string_view key : EnginePresetKeys()) {
    EXPECT_NE(doc->find("`" + std::string(key) + "`"), std::string::npos)
        << key << " is not in the docs";
  }
  for (const std::string& name : ListEnginePresets(PresetsDir())) {
    EXPECT_NE(doc->find(name + ".yaml"), std::string::npos) << name << " is not in the docs";
  }
}

// --- Keys and values ---

// Every key set to a value other than its default.
constexpr const char* kEveryKey = R"(name: every-key
description: "all keys: set"
hardware: >-
  a folded
  line
max_num_seqs: 12
max_batched_tokens: 3000
max_model_len: 2500
policy: decode-first
chunked_prefill: false
prefill_chunk_tokens: 64
slots_keep_kv: true
kv:
  block_tokens: 32
  num_blocks: 4000
  watermark: 0.125
  prefix_caching: radix
cost:
  base_ms: 1.5
  multi_token_ms: 4.5
  prefill_ms_per_token: 2.5e-2
  prefill_ms_per_1m_pairs: 0.5
  whole_batch_attention: true
  decode_ms_per_seq: 0.75
  decode_ms_per_1m_pairs: 40
  kv_ms_per_1k_tokens: 3
  grammar_ms_per_token: 0.25
  lora_load_ms: 12
max_loras: 3
step_noise_cv: 0.3
eos_probability: 0.001
seed: 18446744073709551615
)";

TEST(EnginePresetTest, EveryKeyReachesItsField) {
  Result<EnginePreset> p = ParseEnginePreset(kEveryKey, "every.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  const EngineConfig& c = p->config;
  EXPECT_EQ(c.name, "every-key");
  EXPECT_EQ(p->description, "all keys: set");
  EXPECT_EQ(p->hardware, "a folded line");
  EXPECT_EQ(c.max_num_seqs, 12);
  EXPECT_EQ(c.max_batched_tokens, 3000);
  EXPECT_EQ(c.max_model_len, 2500);
  EXPECT_EQ(c.policy, SchedulingPolicy::kDecodeFirst);
  EXPECT_FALSE(c.chunked_prefill);
  EXPECT_EQ(c.prefill_chunk_tokens, 64);
  EXPECT_TRUE(c.slots_keep_kv);
  EXPECT_EQ(c.kv.block_tokens, 32);
  EXPECT_EQ(c.kv.num_blocks, 4000);
  EXPECT_EQ(c.kv.watermark, 0.125);
  EXPECT_EQ(c.kv.prefix_caching, PrefixCaching::kRadix);
  EXPECT_EQ(c.cost.base_ms, 1.5);
  EXPECT_EQ(c.cost.prefill_ms_per_token, 0.025);
  EXPECT_EQ(c.cost.prefill_ms_per_1m_pairs, 0.5);
  EXPECT_TRUE(c.cost.whole_batch_attention);
  EXPECT_EQ(c.cost.multi_token_ms, 4.5);
  EXPECT_EQ(c.cost.decode_ms_per_seq, 0.75);
  EXPECT_EQ(c.cost.decode_ms_per_1m_pairs, 40.0);
  EXPECT_EQ(c.cost.kv_ms_per_1k_tokens, 3.0);
  EXPECT_EQ(c.cost.grammar_ms_per_token, 0.25);
  EXPECT_EQ(c.cost.lora_load_ms, 12.0);
  EXPECT_EQ(c.max_loras, 3);
  EXPECT_EQ(c.step_noise_cv, 0.3);
  EXPECT_EQ(c.eos_probability, 0.001);
  EXPECT_EQ(c.seed, 18446744073709551615ULL);
  EXPECT_TRUE(p->file.empty());

  // The text above sets every key there is, so a key added later must be added to this test.
  const std::string text = kEveryKey;
  for (std::string_view key : EnginePresetKeys()) {
    const std::string_view leaf = key.substr(key.find('.') + 1);
    EXPECT_NE(text.find(std::string(leaf) + ":"), std::string::npos) << key << " is not tested";
  }
}

TEST(EnginePresetTest, RenderedPresetReadsBackExactly) {
  Result<EnginePreset> p = ParseEnginePreset(kEveryKey, "every.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  p->description = "quotes \" backslash \\ newline\n tab\t and unicode \xc3\xa9";
  p->config.cost.prefill_ms_per_token = 0.1 + 0.2;  // not a short decimal
  p->config.kv.watermark = 1e-7;
  const std::string rendered = RenderEnginePreset(*p);
  Result<EnginePreset> again = ParseEnginePreset(rendered, "rendered.yaml");
  ASSERT_TRUE(again.ok()) << again.error().message << "\n" << rendered;
  ExpectSameConfig(again->config, p->config);
  EXPECT_EQ(again->description, p->description);
  EXPECT_EQ(again->hardware, p->hardware);
  EXPECT_EQ(RenderEnginePreset(*again), rendered);
  // Every key appears in the rendering.
  for (std::string_view key : EnginePresetKeys()) {
    const std::string_view leaf = key.substr(key.find('.') + 1);
    EXPECT_NE(rendered.find(std::string(leaf) + ": "), std::string::npos) << key;
  }
}

// bakeoff calibrate's record (run/calibrate.h) rides in the preset: read past, never settings;
// anything but a mapping there is refused like any wrong key.
TEST(EnginePresetTest, ACalibrationRecordIsReadPastAndMustBeAMapping) {
  Result<EnginePreset> with = ParseEnginePreset(
      "name: fitted\ncost:\n  base_ms: 9\ncalibration:\n  by: \"bakeoff calibrate\"\n  fits:\n    decode:\n"
      "      points:\n        - [128, 4, 152.0, 6.26, 4]\n",
      "fitted.yaml");
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_DOUBLE_EQ(with->config.cost.base_ms, 9.0);
  Result<EnginePreset> scalar = ParseEnginePreset("name: x\ncalibration: yes\n", "x.yaml");
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.error().message.find("x.yaml:2: calibration: expected the mapping bakeoff calibrate writes"),
            std::string::npos)
      << scalar.error().message;
}

TEST(EnginePresetTest, DefaultsRenderAndReadBack) {
  const EnginePreset defaults;
  Result<EnginePreset> again = ParseEnginePreset(RenderEnginePreset(defaults), "defaults.yaml");
  ASSERT_TRUE(again.ok()) << again.error().message;
  ExpectSameConfig(again->config, defaults.config);
}

TEST(EnginePresetTest, MissingKeysTakeTheDefaults) {
  Result<EnginePreset> p =
      ParseEnginePreset("max_num_seqs: 8\nkv:\n  num_blocks: 4096\n", "few.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EngineConfig expected;
  expected.max_num_seqs = 8;
  expected.kv.num_blocks = 4096;
  ExpectSameConfig(p->config, expected);
  EXPECT_EQ(p->config.name, "default");
  EXPECT_TRUE(p->description.empty());
  EXPECT_TRUE(p->hardware.empty());

  // An empty section is allowed and changes nothing.
  Result<EnginePreset> empty_sections = ParseEnginePreset("kv: {}\ncost: {}\n", "s.yaml");
  ASSERT_TRUE(empty_sections.ok()) << empty_sections.error().message;
  ExpectSameConfig(empty_sections->config, EngineConfig{});
}

TEST(EnginePresetTest, ANamelessFileIsNamedAfterItself) {
  Result<EnginePreset> p = LoadEnginePreset(TestPresets() / "no-name.yaml");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->config.name, "no-name");
  EXPECT_EQ(p->config.max_num_seqs, 8);
  EXPECT_EQ(p->file, TestPresets() / "no-name.yaml");
}

TEST(EnginePresetTest, NumberSpellings) {
  auto config = [](const std::string& yaml) {
    Result<EnginePreset> p = ParseEnginePreset(yaml, "n.yaml");
    EXPECT_TRUE(p.ok()) << yaml << ": " << (p.ok() ? "" : p.error().message);
    return p.ok() ? p->config : EngineConfig{};
  };
  EXPECT_EQ(config("max_num_seqs: +7\n").max_num_seqs, 7);
  EXPECT_EQ(config("prefill_chunk_tokens: -0\n").prefill_chunk_tokens, 0);
  EXPECT_EQ(config("cost: {base_ms: 2}\n").cost.base_ms, 2.0);
  EXPECT_EQ(config("cost: {base_ms: .5}\n").cost.base_ms, 0.5);
  EXPECT_EQ(config("cost: {base_ms: 1E1}\n").cost.base_ms, 10.0);
  EXPECT_EQ(config("cost: {base_ms: +1.5}\n").cost.base_ms, 1.5);
  EXPECT_FALSE(config("chunked_prefill: False\nmax_model_len: 8192\n").chunked_prefill);
  EXPECT_EQ(config("policy: 'prefill-first'\n").policy, SchedulingPolicy::kPrefillFirst);
  EXPECT_EQ(config("name: 42\n").name, "42");
}

// --- Errors: FILE:LINE: KEY: what ---

TEST(EnginePresetTest, UnknownKeysSuggestTheNearestKnownOne) {
  EXPECT_EQ(
      ErrorOf("max_num_seqs: 8\nmax_num_seq: 8\n")
          .rfind(
              "e.yaml:2: max_num_seq: unknown key; did you mean max_num_seqs? (known keys: name, ",
              0),
      0u);
  // A key of a section given at the top level, or in the wrong section.
  EXPECT_NE(ErrorOf("num_blocks: 100\n")
                .find("e.yaml:1: num_blocks: unknown key; did you mean kv.num_blocks?"),
            std::string::npos);
  EXPECT_NE(ErrorOf("kv:\n  base_ms: 1\n")
                .find("e.yaml:2: kv.base_ms: unknown key; did you mean cost.base_ms?"),
            std::string::npos);
  EXPECT_NE(ErrorOf("kv:\n  block_tokens: 16\n  prefix_cache: radix\n")
                .find("e.yaml:3: kv.prefix_cache: unknown key; did you mean kv.prefix_caching?"),
            std::string::npos);
  // Nothing close: no suggestion, but the known keys are listed.
  const std::string colour = ErrorOf("name: x\ncolour: red\n");
  EXPECT_EQ(colour.substr(0, 31), "e.yaml:2: colour: unknown key (");
  EXPECT_EQ(colour.find("did you mean"), std::string::npos) << colour;
  EXPECT_NE(colour.find("max_num_seqs"), std::string::npos) << colour;
  EXPECT_NE(ErrorOf("cost:\n  colour: 1\n")
                .find("e.yaml:2: cost.colour: unknown key (known keys of cost: base_ms, "),
            std::string::npos);
}

TEST(EnginePresetTest, WrongTypesNameLineAndKey) {
  EXPECT_EQ(ErrorOf("name: x\nmax_num_seqs: lots\n"),
            "e.yaml:2: max_num_seqs: expected a whole number, got 'lots'");
  EXPECT_EQ(
      ErrorOf("max_num_seqs: \"8\"\n"),
      "e.yaml:1: max_num_seqs: expected a whole number, got the string '8' (drop the quotes)");
  EXPECT_EQ(ErrorOf("name: x\nkv:\n  block_tokens: 16\n  num_blocks: 1.5\n"),
            "e.yaml:4: kv.num_blocks: expected a whole number, got '1.5'");
  EXPECT_EQ(ErrorOf("max_model_len: 1e4\n"),
            "e.yaml:1: max_model_len: expected a whole number, got '1e4'");
  EXPECT_EQ(ErrorOf("max_num_seqs: -3\n"), "e.yaml:1: max_num_seqs: must not be negative, got -3");
  EXPECT_EQ(ErrorOf("prefill_chunk_tokens: -2.5\n"),
            "e.yaml:1: prefill_chunk_tokens: must not be negative, got -2.5");
  EXPECT_EQ(ErrorOf("name: x\n\ncost:\n  base_ms: -1\n"),
            "e.yaml:4: cost.base_ms: must not be negative, got -1");
  EXPECT_EQ(ErrorOf("cost: {decode_ms_per_seq: fast}\n"),
            "e.yaml:1: cost.decode_ms_per_seq: expected a number, got 'fast'");
  EXPECT_EQ(ErrorOf("step_noise_cv: .inf\n"),
            "e.yaml:1: step_noise_cv: expected a finite number, got '.inf'");
  EXPECT_EQ(ErrorOf("eos_probability: nan\n"),
            "e.yaml:1: eos_probability: expected a finite number, got 'nan'");
  EXPECT_EQ(ErrorOf("kv:\n  watermark: '0.1'\n"),
            "e.yaml:2: kv.watermark: expected a number, got the string '0.1' (drop the quotes)");
  EXPECT_EQ(ErrorOf("chunked_prefill: yes\n"),
            "e.yaml:1: chunked_prefill: expected true or false, got 'yes'");
  EXPECT_EQ(
      ErrorOf("chunked_prefill: \"true\"\n"),
      "e.yaml:1: chunked_prefill: expected true or false, got the string 'true' (drop the quotes)");
  EXPECT_EQ(ErrorOf("max_num_seqs: [1, 2]\n"),
            "e.yaml:1: max_num_seqs: expected a whole number, got a list");
  EXPECT_EQ(ErrorOf("seed: {a: 1}\n"), "e.yaml:1: seed: expected a whole number, got a mapping");
  EXPECT_EQ(ErrorOf("seed: 18446744073709551616\n"),
            "e.yaml:1: seed: 18446744073709551616 is too large (at most 18446744073709551615)");
  EXPECT_EQ(
      ErrorOf("max_num_seqs: 9223372036854775808\n"),
      "e.yaml:1: max_num_seqs: 9223372036854775808 is too large (at most 9223372036854775807)");
  EXPECT_EQ(ErrorOf("description: [a, b]\n"), "e.yaml:1: description: expected text, got a list");
  EXPECT_EQ(ErrorOf("name: ''\n"), "e.yaml:1: name: must not be empty");
  // An empty value is reported on its key's line, not the next one.
  EXPECT_EQ(ErrorOf("name: x\nmax_num_seqs:\nmax_model_len: 100\n"),
            "e.yaml:2: max_num_seqs: expected a whole number, got nothing");
  // A section that is not a mapping.
  EXPECT_EQ(ErrorOf("name: x\nkv: 5\n"),
            "e.yaml:2: kv: expected a mapping of block_tokens, num_blocks, watermark, "
            "prefix_caching, got '5'");
  EXPECT_EQ(
      ErrorOf("cost:\n"),
      "e.yaml:1: cost: expected a mapping of base_ms, multi_token_ms, prefill_ms_per_token, prefill_ms_per_1m_pairs, "
      "whole_batch_attention, decode_ms_per_seq, decode_ms_per_1m_pairs, kv_ms_per_1k_tokens, grammar_ms_per_token, lora_load_ms, got nothing");
}

TEST(EnginePresetTest, UnknownPolicyAndCachingNamesListTheValidOnes) {
  EXPECT_EQ(
      ErrorOf("name: x\npolicy: prefil-first\n"),
      "e.yaml:2: policy: 'prefil-first' is not one of fcfs, prefill-first, decode-first, lpm, "
      "static-batch; did you mean prefill-first?");
  EXPECT_EQ(ErrorOf("policy: round-robin\n"),
            "e.yaml:1: policy: 'round-robin' is not one of fcfs, prefill-first, decode-first, lpm, "
            "static-batch");
  EXPECT_EQ(ErrorOf("kv:\n  prefix_caching: radx\n"),
            "e.yaml:2: kv.prefix_caching: 'radx' is not one of none, hashed-blocks, radix; did you "
            "mean radix?");
  EXPECT_EQ(ErrorOf("kv: {prefix_caching: [radix]}\n"),
            "e.yaml:1: kv.prefix_caching: expected one of none, hashed-blocks, radix, got a list");
}

TEST(EnginePresetTest, DocumentShapeErrors) {
  EXPECT_EQ(ErrorOf("").substr(0, 26), "e.yaml:1: empty preset: ex");
  EXPECT_EQ(ErrorOf("# only a comment\n\n").substr(0, 26), "e.yaml:1: empty preset: ex");
  EXPECT_EQ(ErrorOf("---\n").substr(0, 26), "e.yaml:1: empty preset: ex");
  EXPECT_EQ(ErrorOf("- max_num_seqs: 8\n"),
            "e.yaml:1: expected a mapping of engine settings, got a list");
  EXPECT_EQ(ErrorOf("# c\ncontinuous-paged\n"),
            "e.yaml:2: expected a mapping of engine settings, got 'continuous-paged'");
  EXPECT_EQ(ErrorOf("name: a\n---\nname: b\n"),
            "e.yaml:3: a preset is one YAML document; a second one starts here");
  EXPECT_EQ(ErrorOf("name: a\nmax_num_seqs: 8\nmax_num_seqs: 9\n"),
            "e.yaml:3: max_num_seqs: given twice (first on line 2)");
  EXPECT_EQ(ErrorOf("kv:\n  num_blocks: 8\n  num_blocks: 9\n"),
            "e.yaml:3: kv.num_blocks: given twice (first on line 2)");
  EXPECT_EQ(ErrorOf("kv: {}\nkv: {}\n"), "e.yaml:2: kv: given twice (first on line 1)");
  EXPECT_EQ(ErrorOf("[a]: 1\n").substr(0, 40), "e.yaml:1: ?: keys must be plain names, g");
}

TEST(EnginePresetTest, SyntaxErrorsGiveTheirLine) {
  EXPECT_EQ(ErrorOf("name: x\nmax_num_seqs: 8: 9\n"),
            "e.yaml:2: not valid YAML: illegal map value");
  EXPECT_EQ(
      ErrorOf("name: x\nmax_num_seqs: 8\nkv: {block_tokens: 16\npolicy: fcfs\n").substr(0, 26),
      "e.yaml:4: not valid YAML: ");
  EXPECT_EQ(ErrorOf("name: x\n\tmax_num_seqs: 8\n").substr(0, 26), "e.yaml:2: not valid YAML: ");
}

// --- Validation errors carry the file, and the line of the key they name ---

TEST(EnginePresetTest, ImpossibleBlockBudgetNamesNumBlocks) {
  const std::string message =
      ErrorOf("name: x\nmax_model_len: 4096\nkv:\n  block_tokens: 16\n  num_blocks: 100\n");
  EXPECT_EQ(
      message.rfind("e.yaml:5: kv.num_blocks (100) minus the watermark (1 blocks) cannot hold one "
                    "max_model_len (4096) request",
                    0),
      0u)
      << message;

  // From a file: the message starts with the file's path.
  const fs::path file = TestPresets() / "impossible-kv.yaml";
  Result<EnginePreset> p = LoadEnginePreset(file);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(p.error().message.rfind(file.string() + ":8: kv.num_blocks (100)", 0), 0u)
      << p.error().message;
}

TEST(EnginePresetTest, ValidationErrorsPointAtTheKeyTheyName) {
  EXPECT_EQ(ErrorOf("name: x\nmax_num_seqs: 64\nmax_batched_tokens: 32\n"),
            "e.yaml:3: max_batched_tokens (32) must be >= max_num_seqs (64)");
  // The first key the message names is not in the file: the next one that is.
  EXPECT_EQ(ErrorOf("name: x\nmax_num_seqs: 10000\n"),
            "e.yaml:2: max_batched_tokens (8192) must be >= max_num_seqs (10000)");
  EXPECT_EQ(ErrorOf("max_num_seqs: 0\n"), "e.yaml:1: max_num_seqs must be >= 1, got 0");
  EXPECT_EQ(ErrorOf("name: x\nmax_model_len: 1\n"), "e.yaml:2: max_model_len must be >= 2, got 1");
  EXPECT_EQ(ErrorOf("name: x\nkv:\n  watermark: 1\n"),
            "e.yaml:3: kv.watermark must be in [0, 1), got 1");
  EXPECT_EQ(ErrorOf("kv:\n  block_tokens: 0\n"), "e.yaml:2: kv.block_tokens must be >= 1, got 0");
  EXPECT_EQ(ErrorOf("name: x\npolicy: lpm\n"),
            "e.yaml:2: policy lpm needs a prefix cache (kv.prefix_caching hashed-blocks or radix)");
  EXPECT_EQ(ErrorOf("name: x\nstep_noise_cv: 11\n"),
            "e.yaml:2: step_noise_cv must be in [0, 10], got 11");
  EXPECT_EQ(ErrorOf("name: x\neos_probability: 1.5\n"),
            "e.yaml:2: eos_probability must be in [0, 1], got 1.5");
  EXPECT_EQ(ErrorOf("name: x\nmax_batched_tokens: 4096\nchunked_prefill: false\n")
                .rfind("e.yaml:2: max_batched_tokens (4096) must be >= max_model_len (32768) "
                       "without chunked_prefill",
                       0),
            0u);
  // A too-long context with the default pool: the line of max_model_len, the only key it names
  // that the file sets.
  EXPECT_EQ(
      ErrorOf("name: x\nmax_model_len: 300000\n").rfind("e.yaml:2: kv.num_blocks (16384) minus", 0),
      0u);
  // No key the message names is in the file: the file alone.
  EXPECT_EQ(ErrorOf("name: x\nkv:\n  watermark: 0.999\n")
                .rfind("e.yaml: kv.num_blocks (16384) minus the watermark", 0),
            0u)
      << ErrorOf("name: x\nkv:\n  watermark: 0.999\n");
}

TEST(EnginePresetTest, FileErrorsNameThePath) {
  const fs::path file = TestPresets() / "wrong-type.yaml";
  Result<EnginePreset> p = LoadEnginePreset(file);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message,
            file.string() + ":5: kv.num_blocks: expected a whole number, got 'many'");

  Result<EnginePreset> missing = LoadEnginePreset(TestPresets() / "no-such-file.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
  EXPECT_NE(missing.error().message.find("no-such-file.yaml"), std::string::npos);
}

// --- Finding presets ---

TEST(EnginePresetTest, ResolvesNamesInThePresetsFolder) {
  Result<fs::path> path = ResolveEnginePreset("continuous-paged", PresetsDir());
  ASSERT_TRUE(path.ok()) << path.error().message;
  EXPECT_EQ(*path, PresetsDir() / "continuous-paged.yaml");
  Result<EnginePreset> p = LoadEnginePreset(*path);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->config.name, "continuous-paged");
}

TEST(EnginePresetTest, UnknownNamesListTheAvailableOnes) {
  Result<fs::path> typo = ResolveEnginePreset("continous-paged", PresetsDir());
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(
      typo.error().message,
      "unknown engine preset 'continous-paged'; did you mean continuous-paged? (available in " +
          PresetsDir().string() +
          ": continuous-paged, radix-lpm, small-cpu, static-batch; or give a path to a .yaml "
          "file)");
  Result<fs::path> far = ResolveEnginePreset("tensorrt", PresetsDir());
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().message.find("did you mean"), std::string::npos);
  EXPECT_NE(far.error().message.find("radix-lpm, small-cpu"), std::string::npos);

  Result<fs::path> nowhere =
      ResolveEnginePreset("continuous-paged", TestPresets() / "no-such-folder");
  ASSERT_FALSE(nowhere.ok());
  EXPECT_NE(nowhere.error().message.find("holds no presets"), std::string::npos);

  Result<fs::path> empty = ResolveEnginePreset("", PresetsDir());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidInput);
}

TEST(EnginePresetTest, ValuesWithASlashOrYamlSuffixArePaths) {
  const fs::path file = TestPresets() / "no-name.yaml";
  Result<fs::path> path = ResolveEnginePreset(file.string(), PresetsDir());
  ASSERT_TRUE(path.ok()) << path.error().message;
  EXPECT_EQ(*path, file);
  // A .yaml suffix makes it a path even without a slash: not looked up in the presets folder.
  Result<fs::path> bare = ResolveEnginePreset("continuous-paged.yaml", PresetsDir());
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.error().message, "continuous-paged.yaml: no such engine preset file");
  Result<fs::path> missing = ResolveEnginePreset("./nothing/here.yml", PresetsDir());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "./nothing/here.yml: no such engine preset file");
  Result<fs::path> folder = ResolveEnginePreset(PresetsDir().string() + "/", PresetsDir());
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.error().message.find("is not a regular file"), std::string::npos);
}

// yaml-cpp 0.7 never returns from LoadAll on a document that is only "," (the fuzz corpus keeps
// a preset with such a comma: tests/fuzz/corpus/engine_preset/regression-yaml-cpp-hang); the
// preset reader must refuse it instead of hanging.
TEST(EnginePresetTest, AStrayFlowCommaIsRefusedNotAHang) {
  for (const char* text : {",\n", ",", "- ,\n,\n"}) {
    Result<EnginePreset> preset = ParseEnginePreset(text, "comma.yaml");
    ASSERT_FALSE(preset.ok()) << text;
    EXPECT_EQ(preset.error().message.rfind("comma.yaml:", 0), 0u) << preset.error().message;
  }
}

}  // namespace
}  // namespace bakeoff::emulate

// emulate/engine_preset.cc: reading, finding and writing engine preset files (engine_preset.h).
#include "emulate/engine_preset.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <utility>
#include <variant>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/file.h"
#include "core/json_text.h"
#include "core/yaml_doc.h"

namespace bakeoff::emulate {

namespace {

// --- The keys ---
// One table drives parsing, the known-key lists of error messages, the suggestions, and
// RenderEnginePreset, so a new EngineConfig field is added in one place.

using TextRef = std::string& (*)(EnginePreset&);
using CountRef = std::int64_t& (*)(EnginePreset&);  // a non-negative whole number
using SeedRef = std::uint64_t& (*)(EnginePreset&);  // a whole number in [0, 2^64)
using RealRef = double& (*)(EnginePreset&);         // a finite, non-negative number
using BoolRef = bool& (*)(EnginePreset&);
using PolicyRef = SchedulingPolicy& (*)(EnginePreset&);
using CachingRef = PrefixCaching& (*)(EnginePreset&);
using FieldRef = std::variant<TextRef, CountRef, SeedRef, RealRef, BoolRef, PolicyRef, CachingRef>;

struct KeySpec {
  std::string_view key;  // dotted: "kv.num_blocks"
  FieldRef field;
};

// The order is RenderEnginePreset's; the keys of one section are contiguous.
const KeySpec kKeys[] = {
    {"name", TextRef([](EnginePreset& p) -> std::string& { return p.config.name; })},
    {"description", TextRef([](EnginePreset& p) -> std::string& { return p.description; })},
    {"hardware", TextRef([](EnginePreset& p) -> std::string& { return p.hardware; })},
    {"max_num_seqs",
     CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.max_num_seqs; })},
    {"max_batched_tokens",
     CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.max_batched_tokens; })},
    {"max_model_len",
     CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.max_model_len; })},
    {"policy", PolicyRef([](EnginePreset& p) -> SchedulingPolicy& { return p.config.policy; })},
    {"chunked_prefill", BoolRef([](EnginePreset& p) -> bool& { return p.config.chunked_prefill; })},
    {"prefill_chunk_tokens",
     CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.prefill_chunk_tokens; })},
    {"slots_keep_kv", BoolRef([](EnginePreset& p) -> bool& { return p.config.slots_keep_kv; })},
    {"kv.block_tokens",
     CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.kv.block_tokens; })},
    {"kv.num_blocks",
     CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.kv.num_blocks; })},
    {"kv.watermark", RealRef([](EnginePreset& p) -> double& { return p.config.kv.watermark; })},
    {"kv.prefix_caching",
     CachingRef([](EnginePreset& p) -> PrefixCaching& { return p.config.kv.prefix_caching; })},
    {"cost.base_ms", RealRef([](EnginePreset& p) -> double& { return p.config.cost.base_ms; })},
    {"cost.multi_token_ms", RealRef([](EnginePreset& p) -> double& { return p.config.cost.multi_token_ms; })},
    {"cost.prefill_ms_per_token",
     RealRef([](EnginePreset& p) -> double& { return p.config.cost.prefill_ms_per_token; })},
    {"cost.prefill_ms_per_1m_pairs",
     RealRef([](EnginePreset& p) -> double& { return p.config.cost.prefill_ms_per_1m_pairs; })},
    {"cost.whole_batch_attention",
     BoolRef([](EnginePreset& p) -> bool& { return p.config.cost.whole_batch_attention; })},
    {"cost.decode_ms_per_seq",
     RealRef([](EnginePreset& p) -> double& { return p.config.cost.decode_ms_per_seq; })},
    {"cost.decode_ms_per_1m_pairs",
     RealRef([](EnginePreset& p) -> double& { return p.config.cost.decode_ms_per_1m_pairs; })},
    {"cost.kv_ms_per_1k_tokens",
     RealRef([](EnginePreset& p) -> double& { return p.config.cost.kv_ms_per_1k_tokens; })},
    {"cost.grammar_ms_per_token",
     RealRef([](EnginePreset& p) -> double& { return p.config.cost.grammar_ms_per_token; })},
    {"cost.lora_load_ms", RealRef([](EnginePreset& p) -> double& { return p.config.cost.lora_load_ms; })},
    {"max_loras", CountRef([](EnginePreset& p) -> std::int64_t& { return p.config.max_loras; })},
    {"step_noise_cv", RealRef([](EnginePreset& p) -> double& { return p.config.step_noise_cv; })},
    {"eos_probability",
     RealRef([](EnginePreset& p) -> double& { return p.config.eos_probability; })},
    {"seed", SeedRef([](EnginePreset& p) -> std::uint64_t& { return p.config.seed; })},
};

constexpr std::string_view kSections[] = {"kv", "cost"};
constexpr std::string_view kCalibrationKey = "calibration";  // skipped: bakeoff calibrate's record

// "kv.num_blocks" -> "kv"; "max_num_seqs" -> "".
std::string_view SectionOf(std::string_view key) {
  const std::size_t dot = key.find('.');
  return dot == std::string_view::npos ? std::string_view() : key.substr(0, dot);
}

std::string_view LeafOf(std::string_view key) {
  const std::size_t dot = key.find('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

std::string Qualified(std::string_view section, std::string_view leaf) {
  return section.empty() ? std::string(leaf) : fmt::format("{}.{}", section, leaf);
}

const KeySpec* FindKey(std::string_view qualified) {
  for (const KeySpec& spec : kKeys) {
    if (spec.key == qualified) return &spec;
  }
  return nullptr;
}

bool IsSection(std::string_view name) {
  return std::find(std::begin(kSections), std::end(kSections), name) != std::end(kSections);
}

// The leaf names a mapping may hold: the keys of `section`, and at the top level the sections.
std::vector<std::string_view> KeysIn(std::string_view section) {
  std::vector<std::string_view> keys;
  for (const KeySpec& spec : kKeys) {
    if (SectionOf(spec.key) == section) keys.push_back(LeafOf(spec.key));
  }
  if (section.empty()) keys.insert(keys.end(), std::begin(kSections), std::end(kSections));
  return keys;
}

// --- Suggestions ---

// For an unknown key: the known dotted key nearest by its full name or by its leaf, so that
// `num_blocks` at the top level suggests kv.num_blocks and `kv.base_ms` suggests cost.base_ms.
std::optional<std::string> SuggestKey(std::string_view section, std::string_view leaf) {
  const std::string typed = Qualified(section, leaf);
  std::optional<std::string> best;
  std::size_t best_distance = SIZE_MAX;
  auto consider = [&](std::string_view candidate, std::size_t d, std::string_view against) {
    if (yaml::CloseEnoughToSuggest(against, d) && d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  };
  for (const KeySpec& spec : kKeys) {
    consider(spec.key, yaml::EditDistance(typed, spec.key), typed);
    consider(spec.key, yaml::EditDistance(leaf, LeafOf(spec.key)), leaf);
  }
  for (std::string_view s : kSections) consider(s, yaml::EditDistance(typed, s), typed);
  if (best && *best == typed) return std::nullopt;
  return best;
}

template <typename Enum, typename NameFn>
std::vector<std::string> EnumNames(NameFn name_of) {
  // The enums are contiguous from 0; engine_config.cc names every value and answers "?" past
  // the last, so a new enumerator is listed without a change here.
  std::vector<std::string> names;
  for (int i = 0; i < 256; ++i) {
    const std::string_view name = name_of(static_cast<Enum>(i));
    if (name == "?") break;
    names.emplace_back(name);
  }
  return names;
}

// --- Values ---


// --- The reader ---

class PresetReader {
 public:
  explicit PresetReader(std::string_view source) : source_(source) {}

  Error Fail(const YAML::Mark& mark, std::string_view key, std::string_view what) const {
    return InvalidInput(fmt::format("{}:{}: {}: {}", source_, LineOf(mark), key, what));
  }

  // Reads the entries of `map` (the document, or the value of section `section`) into `out`.
  Status ReadMapping(const YAML::Node& map, std::string_view section, EnginePreset& out) {
    for (const auto& entry : map) {
      const YAML::Node& key_node = entry.first;
      const YAML::Node& value = entry.second;
      if (!key_node.IsScalar()) {
        return Fail(key_node.Mark(), section.empty() ? "?" : section,
                    fmt::format("keys must be plain names, got {}", yaml::Describe(key_node)));
      }
      const std::string leaf = key_node.Scalar();
      const std::string key = Qualified(section, leaf);
      if (const auto seen = lines_.find(key); seen != lines_.end()) {
        return Fail(key_node.Mark(), key,
                    fmt::format("given twice (first on line {})", seen->second));
      }
      lines_.emplace(key, LineOf(key_node.Mark()));
      if (section.empty() && leaf == kCalibrationKey) {
        // What bakeoff calibrate measured and fitted: a record for people, not engine settings.
        if (!value.IsMap()) {
          return Fail(ValueMark(key_node, value), key,
                      fmt::format("expected the mapping bakeoff calibrate writes, got {}", yaml::Describe(value)));
        }
        continue;
      }
      if (section.empty() && IsSection(leaf)) {
        if (!value.IsMap()) {
          return Fail(ValueMark(key_node, value), key,
                      fmt::format("expected a mapping of {}, got {}", yaml::JoinNames(KeysIn(leaf)),
                                  yaml::Describe(value)));
        }
        if (Status st = ReadMapping(value, leaf, out); !st.ok()) return st;
        continue;
      }
      const KeySpec* spec = FindKey(key);
      if (spec == nullptr) {
        const std::optional<std::string> suggestion = SuggestKey(section, leaf);
        return Fail(key_node.Mark(), key,
                    fmt::format("unknown key{} (known {}: {})",
                                suggestion ? fmt::format("; did you mean {}?", *suggestion) : "",
                                section.empty() ? "keys" : fmt::format("keys of {}", section),
                                yaml::JoinNames(KeysIn(section))));
      }
      if (Status st = ReadValue(*spec, key_node, value, out); !st.ok()) return st;
    }
    return Ok{};
  }

  // 1-based line of each key read, dotted: where a validation message's key points.
  const std::map<std::string, int, std::less<>>& lines() const { return lines_; }

 private:
  static int LineOf(const YAML::Mark& mark) { return std::max(0, mark.line) + 1; }

  // The value's position, or its key's when the value is empty (yaml-cpp marks an empty value
  // at the start of whatever follows it, often the next line).
  static YAML::Mark ValueMark(const YAML::Node& key_node, const YAML::Node& value) {
    return value.IsNull() || value.Mark().is_null() ? key_node.Mark() : value.Mark();
  }

  template <typename Int>
  Result<Int> WholeNumber(const YAML::Mark& mark, std::string_view key,
                          const YAML::Node& value) const {
    if (!value.IsScalar())
      return Fail(mark, key, fmt::format("expected a whole number, got {}", yaml::Describe(value)));
    const std::string& text = value.Scalar();
    if (yaml::IsQuotedOrString(value)) {
      return Fail(
          mark, key,
          fmt::format("expected a whole number, got the string '{}' (drop the quotes)", text));
    }
    if (!yaml::LooksWhole(text)) {
      const std::optional<double> real = yaml::ReadReal(text);
      if (real && *real < 0)
        return Fail(mark, key, fmt::format("must not be negative, got {}", text));
      return Fail(mark, key, fmt::format("expected a whole number, got '{}'", text));
    }
    if (text[0] == '-') {
      // "-0" is zero; anything else below zero is refused for every whole-number key.
      if (text.find_first_not_of("-0") != std::string::npos) {
        return Fail(mark, key, fmt::format("must not be negative, got {}", text));
      }
      return Int{0};
    }
    const std::string_view digits =
        text[0] == '+' ? std::string_view(text).substr(1) : std::string_view(text);
    Int n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc::result_out_of_range) {
      return Fail(
          mark, key,
          fmt::format("{} is too large (at most {})", text, std::numeric_limits<Int>::max()));
    }
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      return Fail(mark, key, fmt::format("expected a whole number, got '{}'", text));
    }
    return n;
  }

  Result<double> RealNumber(const YAML::Mark& mark, std::string_view key,
                            const YAML::Node& value) const {
    if (!value.IsScalar())
      return Fail(mark, key, fmt::format("expected a number, got {}", yaml::Describe(value)));
    const std::string& text = value.Scalar();
    if (yaml::IsQuotedOrString(value)) {
      return Fail(mark, key,
                  fmt::format("expected a number, got the string '{}' (drop the quotes)", text));
    }
    const std::optional<double> x = yaml::ReadReal(text);
    if (!x) return Fail(mark, key, fmt::format("expected a number, got '{}'", text));
    if (!std::isfinite(*x))
      return Fail(mark, key, fmt::format("expected a finite number, got '{}'", text));
    if (*x < 0) return Fail(mark, key, fmt::format("must not be negative, got {}", text));
    return *x;
  }

  template <typename Enum>
  Result<Enum> Named(const YAML::Mark& mark, std::string_view key, const YAML::Node& value,
                     std::optional<Enum> (*parse)(std::string_view),
                     const std::vector<std::string>& names) const {
    if (!value.IsScalar()) {
      return Fail(mark, key,
                  fmt::format("expected one of {}, got {}", yaml::JoinNames(names), yaml::Describe(value)));
    }
    if (const std::optional<Enum> parsed = parse(value.Scalar())) return *parsed;
    const std::optional<std::string> suggestion = yaml::NearestName(value.Scalar(), names);
    return Fail(mark, key,
                fmt::format("'{}' is not one of {}{}", value.Scalar(), yaml::JoinNames(names),
                            suggestion ? fmt::format("; did you mean {}?", *suggestion) : ""));
  }

  Status ReadValue(const KeySpec& spec, const YAML::Node& key_node, const YAML::Node& value,
                   EnginePreset& out) const {
    const YAML::Mark mark = ValueMark(key_node, value);
    const std::string_view key = spec.key;
    return std::visit(
        [&](auto ref) -> Status {
          using Ref = decltype(ref);
          if constexpr (std::is_same_v<Ref, TextRef>) {
            if (!value.IsScalar())
              return Fail(mark, key, fmt::format("expected text, got {}", yaml::Describe(value)));
            if (key == "name" && value.Scalar().empty())
              return Fail(mark, key, "must not be empty");
            if (key == "name" && value.Scalar().find('\n') != std::string::npos) {
              return Fail(mark, key, "must be one line");
            }
            ref(out) = value.Scalar();
          } else if constexpr (std::is_same_v<Ref, CountRef> || std::is_same_v<Ref, SeedRef>) {
            using Int =
                std::conditional_t<std::is_same_v<Ref, CountRef>, std::int64_t, std::uint64_t>;
            Result<Int> n = WholeNumber<Int>(mark, key, value);
            if (!n.ok()) return n.error();
            ref(out) = *n;
          } else if constexpr (std::is_same_v<Ref, RealRef>) {
            Result<double> x = RealNumber(mark, key, value);
            if (!x.ok()) return x.error();
            ref(out) = *x;
          } else if constexpr (std::is_same_v<Ref, BoolRef>) {
            const std::string text = value.IsScalar() ? value.Scalar() : "";
            const bool plain = value.IsScalar() && !yaml::IsQuotedOrString(value);
            if (plain && (text == "true" || text == "True" || text == "TRUE")) {
              ref(out) = true;
            } else if (plain && (text == "false" || text == "False" || text == "FALSE")) {
              ref(out) = false;
            } else if (value.IsScalar() && !plain) {
              return Fail(
                  mark, key,
                  fmt::format("expected true or false, got the string '{}' (drop the quotes)",
                              text));
            } else {
              return Fail(mark, key,
                          fmt::format("expected true or false, got {}", yaml::Describe(value)));
            }
          } else if constexpr (std::is_same_v<Ref, PolicyRef>) {
            Result<SchedulingPolicy> p = Named<SchedulingPolicy>(
                mark, key, value, &ParsePolicy, EnumNames<SchedulingPolicy>(&PolicyName));
            if (!p.ok()) return p.error();
            ref(out) = *p;
          } else {
            static_assert(std::is_same_v<Ref, CachingRef>);
            Result<PrefixCaching> c =
                Named<PrefixCaching>(mark, key, value, &ParsePrefixCaching,
                                     EnumNames<PrefixCaching>(&PrefixCachingName));
            if (!c.ok()) return c.error();
            ref(out) = *c;
          }
          return Ok{};
        },
        spec.field);
  }

  std::string source_;
  std::map<std::string, int, std::less<>> lines_;
};

// ValidateEngineConfig names the field first ("kv.num_blocks (8) minus ..."), the cost model
// without its section ("base_ms must be ..."). Returns the message with the field spelled as in
// the file, prefixed by the file and by the line of the first key it mentions that the file sets.
std::string LocateValidationError(std::string message, std::string_view source,
                                  const std::map<std::string, int, std::less<>>& lines) {
  auto is_word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  };
  std::vector<std::string> words;
  for (std::size_t i = 0; i < message.size();) {
    if (!is_word(message[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < message.size() && is_word(message[j])) ++j;
    std::string word = message.substr(i, j - i);
    while (!word.empty() && word.back() == '.') word.pop_back();
    words.push_back(std::move(word));
    i = j;
  }
  if (!words.empty() && FindKey(words[0]) == nullptr && FindKey("cost." + words[0]) != nullptr &&
      message.rfind(words[0], 0) == 0) {
    message = "cost." + message;
  }
  for (const std::string& word : words) {
    for (const std::string& key : {word, "cost." + word}) {
      if (const auto found = lines.find(key); found != lines.end() && FindKey(key) != nullptr) {
        return fmt::format("{}:{}: {}", source, found->second, message);
      }
    }
  }
  return fmt::format("{}: {}", source, message);
}

Result<EnginePreset> Parse(std::string_view yaml_text, std::string_view source,
                           std::optional<std::string> default_name) {
  // The messages of the preset format (docs/engine-presets.md) around yaml_doc.h's checks.
  yaml::DocumentKind kind;
  kind.noun = "preset";
  kind.with_article = "an engine preset";
  kind.empty_hint =
      ": expected a mapping of engine settings (docs/engine-presets.md lists the keys)";
  kind.expect_mapping = "a mapping of engine settings";
  Result<YAML::Node> document = yaml::LoadDocument(yaml_text, source, kind);
  if (!document.ok()) return document.error();
  const YAML::Node& root = document.value();
  EnginePreset preset;
  if (default_name) preset.config.name = std::move(*default_name);
  PresetReader reader(source);
  if (Status st = reader.ReadMapping(root, "", preset); !st.ok()) return st.error();
  if (Status valid = ValidateEngineConfig(preset.config); !valid.ok()) {
    return InvalidInput(LocateValidationError(valid.error().message, source, reader.lines()));
  }
  return preset;
}

void AppendYamlString(std::string& out, std::string_view text) {
  // A JSON string literal is a valid YAML double-quoted scalar (YAML 1.2, section 7.3.1).
  AppendJsonString(out, text);
}

}  // namespace

std::span<const std::string_view> EnginePresetKeys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> out;
    for (const KeySpec& spec : kKeys) out.push_back(spec.key);
    return out;
  }();
  return keys;
}

Result<EnginePreset> ParseEnginePreset(std::string_view yaml_text, std::string_view source_name) {
  return Parse(yaml_text, source_name, std::nullopt);
}

Result<EnginePreset> LoadEnginePreset(const std::filesystem::path& file) {
  Result<std::string> text = ReadFile(file);
  if (!text.ok()) return text.error();
  Result<EnginePreset> preset = Parse(*text, file.string(), file.stem().string());
  if (!preset.ok()) return preset;
  preset->file = file;
  return preset;
}

std::vector<std::string> ListEnginePresets(const std::filesystem::path& presets_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(presets_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::filesystem::path& path = it->path();
    std::error_code file_ec;
    if (path.extension() == ".yaml" && std::filesystem::is_regular_file(path, file_ec)) {
      names.push_back(path.stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::filesystem::path> ResolveEnginePreset(std::string_view name_or_path,
                                                  const std::filesystem::path& presets_dir) {
  if (name_or_path.empty())
    return InvalidInput("engine preset: expected a preset name or a .yaml file, got nothing");
  const bool is_path = name_or_path.find('/') != std::string_view::npos ||
                       name_or_path.ends_with(".yaml") || name_or_path.ends_with(".yml");
  std::error_code ec;
  if (is_path) {
    const std::filesystem::path path(name_or_path);
    if (std::filesystem::is_regular_file(path, ec)) return path;
    return InvalidInput(fmt::format("{}: {}", path.string(),
                               std::filesystem::exists(path, ec) ? "is not a regular file"
                                                                 : "no such engine preset file"));
  }
  const std::filesystem::path path = presets_dir / fmt::format("{}.yaml", name_or_path);
  if (std::filesystem::is_regular_file(path, ec)) return path;
  const std::vector<std::string> names = ListEnginePresets(presets_dir);
  if (names.empty()) {
    return InvalidInput(fmt::format("unknown engine preset '{}': {} holds no presets (*.yaml)",
                               name_or_path, presets_dir.string()));
  }
  const std::optional<std::string> suggestion = yaml::NearestName(name_or_path, names);
  return InvalidInput(fmt::format(
      "unknown engine preset '{}'{} (available in {}: {}; or give a path to a .yaml file)",
      name_or_path, suggestion ? fmt::format("; did you mean {}?", *suggestion) : "",
      presets_dir.string(), yaml::JoinNames(names)));
}

std::string RenderEnginePreset(const EnginePreset& preset) {
  EnginePreset copy = preset;  // the key table hands out mutable references
  std::string out;
  std::string_view section;
  for (const KeySpec& spec : kKeys) {
    const std::string_view this_section = SectionOf(spec.key);
    if (this_section != section && !this_section.empty()) out += fmt::format("{}:\n", this_section);
    section = this_section;
    out += fmt::format("{}{}: ", section.empty() ? "" : "  ", LeafOf(spec.key));
    std::visit(
        [&](auto ref) {
          using Ref = decltype(ref);
          if constexpr (std::is_same_v<Ref, TextRef>) {
            AppendYamlString(out, ref(copy));
          } else if constexpr (std::is_same_v<Ref, BoolRef>) {
            out += ref(copy) ? "true" : "false";
          } else if constexpr (std::is_same_v<Ref, PolicyRef>) {
            out += PolicyName(ref(copy));
          } else if constexpr (std::is_same_v<Ref, CachingRef>) {
            out += PrefixCachingName(ref(copy));
          } else {
            // fmt's shortest round-trip form for doubles ("0.045", "1e-05"), plain decimal for
            // whole numbers: both read back exactly.
            out += fmt::format("{}", ref(copy));
          }
        },
        spec.field);
    out += '\n';
  }
  return out;
}

}  // namespace bakeoff::emulate

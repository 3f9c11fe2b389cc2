// study/catalog.cc: reading and linting runtime catalogs (catalog.h, docs/formats/catalog.md).
#include "study/catalog.h"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "core/check.h"
#include "core/file.h"
#include "core/yaml_doc.h"
#include "study/contracts.h"
#include "target/adapters.h"

namespace bakeoff::study {

namespace {

constexpr std::array<std::string_view, 4> kLayerNames = {"engine", "serving-platform",
                                                         "local-platform", "weight-format"};

constexpr std::array<std::string_view, 8> kAcceleratorKinds = {
    "nvidia", "amd", "intel", "gaudi", "neuron", "tpu", "apple", "cpu"};

// Every key an entry may have, in the order docs/formats/catalog.md lists them.
constexpr std::string_view kEntryKeys[] = {
    "id",           "engine",         "version",        "layer",
    "image",        "image_digest",   "driver",         "cuda",
    "rocm",         "architectures",  "weight_formats", "quantizations",
    "hardware",     "features",       "max_context",    "known_limits",
    "bundles",      "last_verified_version",            "last_verified_date",
    "verified_against",               "sunset",         "emulated_preset",
};

constexpr std::size_t kMaxIdLength = 128;
constexpr int kSunsetSoonDays = 30;

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '+';
}

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// "sha256:" and 64 lower-case hex digits.
bool IsDigest(std::string_view text) {
  constexpr std::string_view kPrefix = "sha256:";
  if (!text.starts_with(kPrefix) || text.size() != kPrefix.size() + 64) return false;
  return std::all_of(text.begin() + kPrefix.size(), text.end(), IsLowerHex);
}

bool HasSpace(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  });
}

// An image reference split as container tools read it: [registry[:port]/]path[:tag][@digest].
struct ImageRef {
  std::string_view tag;     // "" when none
  std::string_view digest;  // "" when none
};

ImageRef SplitImage(std::string_view image) {
  ImageRef ref;
  std::string_view rest = image;
  if (const std::size_t at = rest.find('@'); at != std::string_view::npos) {
    ref.digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  const std::size_t slash = rest.rfind('/');
  const std::size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    ref.tag = rest.substr(colon + 1);
  }
  return ref;
}

// Engine names a catalog accepts, for suggestions: the adapters' names and aliases, "emulated".
std::vector<std::string> EngineSpellings() {
  std::vector<std::string> names;
  for (const target::EngineAdapter& adapter : target::AllAdapters()) {
    names.emplace_back(adapter.name);
    for (std::string_view alias : adapter.aliases) names.emplace_back(alias);
  }
  names.emplace_back(kEmulatedEngine);
  return names;
}

// Reports the first repeat in `values` (read from `key`).
void RefuseRepeats(yaml::MapReader& m, std::string_view key, const std::vector<std::string>& values) {
  std::set<std::string_view> seen;
  for (const std::string& value : values) {
    if (!seen.insert(value).second) {
      m.Error(key, fmt::format("lists '{}' twice", value));
      return;
    }
  }
}

class EntryReader {
 public:
  EntryReader(const yaml::ListItem& item, std::string_view source, yaml::Diagnostics* diagnostics)
      : m_(item, source, diagnostics), node_(item.node) {
    entry_.line = item.line;
  }

  // Reads every key; the entry is usable only when the diagnostics stayed empty.
  CatalogEntry Read() {
    ReadIdentity();
    ReadImage();
    ReadFacts();
    ReadVerification();
    m_.Finish();
    for (std::string_view key : kEntryKeys) {
      if (m_.Has(key)) entry_.field_lines.emplace(std::string(key), m_.LineOf(key));
    }
    return std::move(entry_);
  }

 private:
  void ReadIdentity() {
    if (std::optional<std::string> id = m_.Text("id", yaml::Need::kRequired)) {
      if (id->size() > kMaxIdLength) {
        m_.Error("id", fmt::format("is longer than {} characters", kMaxIdLength));
      } else if (!IsIdChar((*id)[0]) || (*id)[0] == '.' || (*id)[0] == '-' || (*id)[0] == '+' ||
                 !std::all_of(id->begin(), id->end(), IsIdChar)) {
        m_.Error("id", fmt::format("'{}' is not an id: letters, digits and . _ - + only, starting "
                                   "with a letter, digit or _",
                                   *id));
      } else {
        entry_.id = std::move(*id);
      }
    }
    if (std::optional<std::string> engine = m_.Text("engine", yaml::Need::kRequired)) {
      if (*engine == kEmulatedEngine) {
        entry_.engine = std::string(kEmulatedEngine);
      } else if (const target::EngineAdapter* adapter = target::FindAdapter(*engine)) {
        entry_.engine = std::string(adapter->name);
      } else {
        const std::optional<std::string> suggestion =
            yaml::NearestName(*engine, EngineSpellings());
        m_.Error("engine", fmt::format("'{}' is no engine adapter{} (one of: {}, {})", *engine,
                                       suggestion ? fmt::format("; did you mean {}?", *suggestion)
                                                  : "",
                                       target::AdapterNames(), kEmulatedEngine));
      }
    }
    if (std::optional<std::string> version = m_.Text("version")) entry_.version = *version;
    if (std::optional<std::size_t> layer = m_.Enum("layer", kLayerNames)) {
      entry_.layer = static_cast<Layer>(*layer);
    }
    std::optional<std::string> preset = m_.Text("emulated_preset");
    const bool emulated = entry_.engine == kEmulatedEngine;
    if (preset && !entry_.engine.empty() && !emulated) {
      m_.Error("emulated_preset", "only for engine: emulated");
    } else if (preset) {
      if (preset->find('\n') != std::string::npos) {
        m_.Error("emulated_preset", "must be one line");
      } else {
        entry_.emulated_preset = std::move(*preset);
      }
    } else if (emulated && !m_.Has("emulated_preset")) {
      m_.ErrorAt(entry_.line, m_.Field("emulated_preset"),
                 "missing (required for engine: emulated; a preset name such as continuous-paged)");
    }
  }

  void ReadImage() {
    const bool emulated = entry_.engine == kEmulatedEngine;
    std::optional<std::string> image = m_.Text("image");
    std::optional<std::string> digest = m_.Text("image_digest");
    if (emulated) {
      if (image && *image != kBuiltinImage) {
        m_.Error("image", fmt::format("an emulated runtime's image is {}, got '{}'", kBuiltinImage,
                                      *image));
      }
      if (m_.Has("image_digest")) m_.Error("image_digest", "an emulated runtime has no image digest");
      entry_.image = std::string(kBuiltinImage);
      return;
    }
    if (image) {
      const ImageRef ref = SplitImage(*image);
      // An unknown engine is reported already; whether builtin fits it cannot be said.
      if (*image == kBuiltinImage && !entry_.engine.empty()) {
        m_.Error("image", "builtin is the emulated engine's image (engine: emulated); name the "
                          "runtime's container image");
      } else if (HasSpace(*image)) {
        m_.Error("image", fmt::format("'{}' is not an image reference (it has whitespace)", *image));
      } else if (image->find('@') != std::string::npos && !IsDigest(ref.digest)) {
        m_.Error("image", fmt::format("the digest in '{}' is not sha256: and 64 lower-case hex "
                                      "digits",
                                      *image));
      } else {
        entry_.image = *image;
        if (!ref.digest.empty()) entry_.image_digest = std::string(ref.digest);
      }
    }
    if (digest) {
      if (!IsDigest(*digest)) {
        m_.Error("image_digest",
                 fmt::format("expected sha256: and 64 lower-case hex digits, got '{}'", *digest));
      } else if (!entry_.image_digest.empty() && entry_.image_digest != *digest) {
        m_.Error("image_digest",
                 fmt::format("'{}' is not the digest the image names ({})", *digest,
                             entry_.image_digest));
      } else {
        entry_.image_digest = std::move(*digest);
      }
    }
    for (auto [key, out] : {std::pair{"driver", &entry_.driver}, std::pair{"cuda", &entry_.cuda},
                            std::pair{"rocm", &entry_.rocm}}) {
      if (std::optional<std::string> text = m_.Text(key)) *out = std::move(*text);
    }
  }

  void ReadList(std::string_view key, std::vector<std::string>& out) {
    if (std::optional<std::vector<std::string>> values = m_.TextList(key)) {
      RefuseRepeats(m_, key, *values);
      out = std::move(*values);
    }
  }

  // known_limits: a text, or a list whose items are texts or {limit: TEXT, finding: CODE}.
  void ReadKnownLimits() {
    const YAML::Node value = node_.IsMap() ? node_["known_limits"] : YAML::Node();
    if (!value.IsDefined() || !value.IsSequence()) {
      std::vector<std::string> texts;
      ReadList("known_limits", texts);
      for (std::string& text : texts) entry_.known_limits.push_back({std::move(text), ""});
      return;
    }
    std::optional<std::vector<yaml::ListItem>> items = m_.List("known_limits");
    for (const yaml::ListItem& item : items.value_or(std::vector<yaml::ListItem>{})) {
      if (item.node.IsScalar() && !item.node.Scalar().empty()) {
        entry_.known_limits.push_back({item.node.Scalar(), ""});
        continue;
      }
      if (!item.node.IsMap()) {
        m_.ErrorAt(item.line, item.path,
                   fmt::format("expected a text or {{limit: TEXT, finding: CODE}}, got {}", yaml::Describe(item.node)));
        continue;
      }
      yaml::MapReader r(item, m_.source(), &m_.diagnostics());
      CatalogEntry::KnownLimit limit;
      if (auto v = r.Text("limit", yaml::Need::kRequired)) limit.text = *v;
      if (auto v = r.Text("finding")) {
        if (RuleFor(*v) != nullptr) {
          limit.finding = *v;
        } else {
          r.Error("finding", UnknownFindingMessage(*v));
        }
      }
      r.Finish();
      entry_.known_limits.push_back(std::move(limit));
    }
  }

  void ReadFacts() {
    ReadList("architectures", entry_.architectures);
    ReadList("weight_formats", entry_.weight_formats);
    ReadList("hardware", entry_.hardware);
    ReadKnownLimits();
    ReadList("bundles", entry_.bundles);
    if (std::optional<yaml::MapReader> q = m_.Map("quantizations")) {
      for (const std::string& kind : q->Keys()) {
        if (std::find(kAcceleratorKinds.begin(), kAcceleratorKinds.end(), kind) ==
            kAcceleratorKinds.end()) {
          const std::optional<std::string> suggestion = yaml::NearestName(kind, kAcceleratorKinds);
          q->Error(kind, fmt::format("'{}' is no accelerator kind{} (one of: {})", kind,
                                     suggestion ? fmt::format("; did you mean {}?", *suggestion)
                                                : "",
                                     yaml::JoinNames(kAcceleratorKinds)));
          continue;
        }
        if (std::optional<std::vector<std::string>> precisions = q->TextList(kind)) {
          RefuseRepeats(*q, kind, *precisions);
          entry_.quantizations[kind] = std::move(*precisions);
          entry_.field_lines.emplace("quantizations." + kind, q->LineOf(kind));
        }
      }
      q->Finish();
    }
    if (std::optional<std::vector<yaml::ListItem>> features = m_.List("features")) {
      std::set<Feature> seen;
      for (const yaml::ListItem& item : *features) {
        if (!item.node.IsScalar() || item.node.Scalar().empty()) {
          m_.ErrorAt(item.line, item.path,
                     fmt::format("expected a feature name, got {}", yaml::Describe(item.node)));
          continue;
        }
        const std::string& name = item.node.Scalar();
        const std::optional<Feature> feature = ParseFeature(name);
        if (!feature) {
          m_.ErrorAt(item.line, item.path, UnknownFeatureMessage(name));
        } else if (!seen.insert(*feature).second) {
          m_.ErrorAt(item.line, item.path, fmt::format("lists '{}' twice", name));
        } else {
          entry_.features.push_back(*feature);
        }
      }
    }
    if (std::optional<std::int64_t> context =
            m_.Integer("max_context", 1, std::numeric_limits<std::uint32_t>::max())) {
      entry_.max_context = static_cast<std::uint32_t>(*context);
    }
  }

  void ReadVerification() {
    if (std::optional<std::string> v = m_.Text("last_verified_version")) {
      entry_.last_verified_version = std::move(*v);
    }
    if (std::optional<std::string> d = m_.Date("last_verified_date")) {
      entry_.last_verified_date = std::move(*d);
    }
    if (std::optional<std::string> a = m_.Text("verified_against")) {
      entry_.verified_against = std::move(*a);
    }
    if (std::optional<std::string> s = m_.Date("sunset")) entry_.sunset = std::move(*s);
  }

  yaml::MapReader m_;
  YAML::Node node_;
  CatalogEntry entry_;
};

// --- Lint ---

class Linter {
 public:
  Linter(const Catalog& catalog, const LintOptions& options, std::int64_t today)
      : catalog_(catalog),
        options_(options),
        today_(today),
        source_(catalog.source.empty() ? catalog.file.string() : catalog.source) {}

  void Entry(const CatalogEntry& e) {
    entry_ = &e;
    Image(e);
    Fields(e);
    Dates(e);
    Bundles(e);
  }

  std::vector<LintFinding> Take() {
    std::stable_sort(findings_.begin(), findings_.end(),
                     [](const LintFinding& a, const LintFinding& b) { return a.line < b.line; });
    return std::move(findings_);
  }

 private:
  void Add(LintSeverity severity, std::string_view field, std::string code, std::string message) {
    findings_.push_back(LintFinding{severity, source_, entry_->LineOf(field), entry_->id,
                                    std::move(code), std::move(message)});
  }

  static bool NeedsImage(const CatalogEntry& e) {
    return !e.emulated() && (e.layer == Layer::kEngine || e.layer == Layer::kServingPlatform);
  }

  void Image(const CatalogEntry& e) {
    if (e.emulated()) return;
    if (!e.image.empty()) {
      const ImageRef ref = SplitImage(e.image);
      if (ref.tag.empty()) {
        Add(LintSeverity::kError, "image", "latest_tag",
            fmt::format("image '{}' has no tag, which means :latest; pin the version's tag",
                        e.image));
      } else if (ref.tag == "latest") {
        Add(LintSeverity::kError, "image", "latest_tag",
            fmt::format("image '{}' is tagged latest, which moves; pin the version's tag", e.image));
      }
    }
    if (!e.image_digest.empty() || (e.image.empty() && !NeedsImage(e))) return;
    Add(LintSeverity::kError, "image", "missing_digest",
        e.image.empty()
            ? std::string("no image_digest (sha256:...) pins what runs")
            : fmt::format("image '{}' is not pinned by a digest (image_digest: sha256:...); a "
                          "tag can be moved to other bits",
                          e.image));
  }

  void Missing(const CatalogEntry& e, std::string_view field, std::string_view why) {
    if (e.field_lines.count(field) != 0) return;
    Add(LintSeverity::kError, "", "missing_field", fmt::format("{} is not given: {}", field, why));
  }

  void Fields(const CatalogEntry& e) {
    Missing(e, "version", "the gate cannot tell which release it is");
    if (NeedsImage(e)) Missing(e, "image", "nothing pins what runs");
    if (!e.emulated()) {
      Missing(e, "architectures", "the gate cannot tell which models it runs");
      Missing(e, "weight_formats", "the gate cannot tell which weight files it loads");
      Missing(e, "quantizations", "the gate cannot tell which precisions it runs, on what");
      Missing(e, "hardware", "the gate cannot tell what it runs on");
      if (e.quantizations.count("nvidia") != 0) {
        Missing(e, "cuda", "quantizations names nvidia, so the CUDA version matters");
      }
      if (e.quantizations.count("amd") != 0) {
        Missing(e, "rocm", "quantizations names amd, so the ROCm version matters");
      }
    }
    Missing(e, "features", "the gate cannot check required features (an empty list says none)");
    Missing(e, "max_context", "the gate cannot check the study's context length");
    if (!e.last_verified_date.empty()) {
      Missing(e, "last_verified_version", "say which version was verified on that date");
      Missing(e, "verified_against", "say what it was verified against");
    } else if (!e.last_verified_version.empty()) {
      Missing(e, "last_verified_date", "say when that version was verified");
    }
  }

  void Dates(const CatalogEntry& e) {
    if (!e.sunset.empty()) {
      const std::int64_t sunset = *yaml::ParseIsoDate(e.sunset);
      const std::int64_t left = sunset - today_;
      if (left <= 0) {
        Add(LintSeverity::kError, "sunset", "sunset_passed",
            left == 0 ? fmt::format("sunset is today ({}): replace this runtime", e.sunset)
                      : fmt::format("sunset was {} ({} days ago): replace this runtime", e.sunset,
                                    -left));
      } else if (left <= kSunsetSoonDays) {
        Add(LintSeverity::kWarning, "sunset", "sunset_soon",
            fmt::format("sunset on {}, in {} day{}", e.sunset, left, left == 1 ? "" : "s"));
      }
    }
    if (e.last_verified_date.empty()) {
      Add(LintSeverity::kWarning, "", "never_verified",
          e.verified_against.empty()
              ? std::string("no last_verified_date: its facts were never checked")
              : fmt::format("no last_verified_date: its facts were never checked (verified "
                            "against: {})",
                            e.verified_against));
    } else {
      const std::int64_t verified = *yaml::ParseIsoDate(e.last_verified_date);
      const std::int64_t age = today_ - verified;
      if (age < 0) {
        Add(LintSeverity::kError, "last_verified_date", "verified_in_future",
            fmt::format("last_verified_date {} is after today ({})", e.last_verified_date,
                        options_.today));
      } else if (age > options_.max_verification_age_days) {
        Add(LintSeverity::kWarning, "last_verified_date", "verification_stale",
            fmt::format("last verified on {}, {} days ago (more than {}): verify it again",
                        e.last_verified_date, age, options_.max_verification_age_days));
      }
    }
    if (!e.last_verified_version.empty() && !e.version.empty() &&
        e.last_verified_version != e.version) {
      Add(LintSeverity::kWarning, "last_verified_version", "verified_other_version",
          fmt::format("the verified version {} is not the entry's version {}",
                      e.last_verified_version, e.version));
    }
  }

  void Bundles(const CatalogEntry& e) {
    if (catalog_.file.empty()) return;
    for (const std::string& bundle : e.bundles) {
      std::filesystem::path path(bundle);
      if (path.is_relative()) path = catalog_.file.parent_path() / path;
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) {
        Add(LintSeverity::kWarning, "bundles", "bundle_not_found",
            fmt::format("bundle '{}' does not exist ({})", bundle, path.string()));
      }
    }
  }

  const Catalog& catalog_;
  const LintOptions& options_;
  std::int64_t today_;
  std::string source_;
  const CatalogEntry* entry_ = nullptr;
  std::vector<LintFinding> findings_;
};

}  // namespace

std::string_view LayerName(Layer layer) { return kLayerNames[static_cast<std::size_t>(layer)]; }

std::optional<Layer> ParseLayer(std::string_view name) {
  for (std::size_t i = 0; i < kLayerNames.size(); ++i) {
    if (kLayerNames[i] == name) return static_cast<Layer>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> AcceleratorKinds() { return kAcceleratorKinds; }

bool CatalogEntry::HasFeature(Feature feature) const {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

int CatalogEntry::LineOf(std::string_view field) const {
  const auto found = field_lines.find(field);
  return found != field_lines.end() ? found->second : line;
}

const CatalogEntry* Catalog::Find(std::string_view id) const {
  for (const CatalogEntry& entry : entries) {
    if (entry.id == id) return &entry;
  }
  return nullptr;
}

Result<Catalog> ParseCatalog(std::string_view text, std::string_view source) {
  yaml::DocumentKind kind;
  kind.noun = "runtime catalog";
  kind.with_article = "a runtime catalog";
  kind.empty_hint = ": expected `runtimes:`, a list of runtime entries (docs/formats/catalog.md)";
  kind.expect_mapping = "a mapping with `runtimes:`, a list of runtime entries";
  Result<YAML::Node> document = yaml::LoadDocument(text, source, kind);
  if (!document.ok()) return document.error();

  yaml::Diagnostics diagnostics;
  yaml::MapReader root(document.value(), "", source, &diagnostics);
  std::optional<std::vector<yaml::ListItem>> items = root.List("runtimes", yaml::Need::kRequired);
  root.Finish();
  Catalog catalog;
  catalog.source = std::string(source);
  if (items && items->empty()) root.Error("runtimes", "lists no runtimes");
  std::map<std::string, int, std::less<>> id_lines;
  for (const yaml::ListItem& item : items.value_or(std::vector<yaml::ListItem>{})) {
    EntryReader reader(item, source, &diagnostics);
    CatalogEntry entry = reader.Read();
    if (entry.id.empty()) continue;  // already reported
    if (const auto seen = id_lines.find(entry.id); seen != id_lines.end()) {
      diagnostics.Add(source, entry.LineOf("id"), item.path + ".id",
                      fmt::format("'{}' is given twice (first on line {})", entry.id,
                                  seen->second));
      continue;
    }
    id_lines.emplace(entry.id, entry.LineOf("id"));
    catalog.entries.push_back(std::move(entry));
  }
  if (!diagnostics.empty()) return diagnostics.ToError();
  return catalog;
}

Result<Catalog> LoadCatalog(const std::filesystem::path& file) {
  Result<std::string> text = ReadFile(file);
  if (!text.ok()) return text.error();
  Result<Catalog> catalog = ParseCatalog(*text, file.string());
  if (!catalog.ok()) return catalog;
  catalog->file = file;
  return catalog;
}

std::string_view LintSeverityName(LintSeverity severity) {
  return severity == LintSeverity::kError ? "error" : "warning";
}

std::vector<LintFinding> LintCatalog(const Catalog& catalog, const LintOptions& options) {
  const std::optional<std::int64_t> today = yaml::ParseIsoDate(options.today);
  BAKEOFF_CHECK(today.has_value()) << "LintOptions::today is not YYYY-MM-DD: " << options.today;
  BAKEOFF_CHECK(options.max_verification_age_days >= 0);
  Linter linter(catalog, options, *today);
  for (const CatalogEntry& entry : catalog.entries) linter.Entry(entry);
  return linter.Take();
}

std::string FormatLintFinding(const LintFinding& finding) {
  return fmt::format("{}:{}: [{}] {}: {}{}", finding.source, finding.line, finding.entry,
                     finding.code, finding.severity == LintSeverity::kWarning ? "warning: " : "",
                     yaml::OneLine(finding.message));
}

bool HasLintErrors(std::span<const LintFinding> findings) {
  return std::any_of(findings.begin(), findings.end(), [](const LintFinding& f) {
    return f.severity == LintSeverity::kError;
  });
}

}  // namespace bakeoff::study

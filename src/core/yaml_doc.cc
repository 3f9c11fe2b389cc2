// core/yaml_doc.cc: strict YAML documents with every mistake at once (yaml_doc.h).
#include "core/yaml_doc.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

namespace bakeoff::yaml {

namespace {


// Counts parse events and gives up past a bound (CheckYamlTerminates).
class BoundedEventCounter final : public YAML::EventHandler {
 public:
  explicit BoundedEventCounter(std::string_view with_article) : with_article_(with_article) {}

  void OnDocumentStart(const YAML::Mark& mark) override { Count(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(mark);
  }
  void OnMapEnd() override {}

 private:
  // A hand-written file has a few hundred nodes; a million events is no such file.
  static constexpr int kMaxEvents = 1'000'000;
  void Count(const YAML::Mark& mark) {
    if (++events_ > kMaxEvents) {
      throw YAML::ParserException(mark, fmt::format("too many YAML nodes for {}", with_article_));
    }
  }
  std::string_view with_article_;
  int events_ = 0;
};

// The value's line, or its key's when the value is empty (yaml-cpp marks an empty value at the
// start of whatever follows it, often the next line).
int ValueLine(const YAML::Node& key_node, const YAML::Node& value) {
  return value.IsNull() || value.Mark().is_null() ? LineOf(key_node.Mark()) : LineOf(value.Mark());
}

bool IsPlainTrue(std::string_view text) { return text == "true" || text == "True" || text == "TRUE"; }
bool IsPlainFalse(std::string_view text) {
  return text == "false" || text == "False" || text == "FALSE";
}

// "250ms", "30s", "5min", "1h" as seconds; nullopt when not that shape.
std::optional<double> DurationSeconds(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double seconds;
  };
  // "ms" and "min" before "s" and "h" would matter only for "s"; longest suffixes first.
  constexpr Unit kUnits[] = {{"min", 60}, {"ms", 1e-3}, {"s", 1}, {"h", 3600}};
  for (const Unit& unit : kUnits) {
    if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix)) {
      const std::string_view number = text.substr(0, text.size() - unit.suffix.size());
      // Only plain decimals before a unit: no sign, no exponent, no .inf.
      if (!std::all_of(number.begin(), number.end(),
                       [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
        return std::nullopt;
      }
      const std::optional<double> value = ReadReal(number);
      if (!value) return std::nullopt;
      return *value * unit.seconds;
    }
  }
  return std::nullopt;
}

}  // namespace

// --- Diagnostics ---

std::string Diagnostic::Text() const {
  std::string out = source;
  if (line > 0) out += fmt::format(":{}", line);
  out += ": ";
  if (!field.empty()) out += OneLine(field) + ": ";
  out += OneLine(message);
  return out;
}

void Diagnostics::Add(Diagnostic diagnostic) {
  ++count_;
  if (items_.size() < kMaxKept) items_.push_back(std::move(diagnostic));
}

void Diagnostics::Add(std::string_view source, int line, std::string field, std::string message) {
  Add(Diagnostic{std::string(source), line, std::move(field), std::move(message)});
}

std::vector<Diagnostic> Diagnostics::Sorted() const {
  std::vector<Diagnostic> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Diagnostic& a, const Diagnostic& b) { return a.line < b.line; });
  return sorted;
}

std::string Diagnostics::Text() const {
  std::string out;
  for (const Diagnostic& d : Sorted()) {
    if (!out.empty()) out += '\n';
    out += d.Text();
  }
  if (count_ > items_.size()) {
    out += fmt::format("\n{}: {} more mistakes not shown", items_.empty() ? "" : items_[0].source,
                       count_ - items_.size());
  }
  return out;
}

Error Diagnostics::ToError() const {
  BAKEOFF_CHECK(!empty()) << "ToError() without diagnostics";
  return InvalidInput(Text());
}

// --- Suggestions ---

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool CloseEnoughToSuggest(std::string_view typed, std::size_t distance) {
  return distance <= std::max<std::size_t>(2, typed.size() / 4);
}

namespace {

template <typename Names>
std::optional<std::string> Nearest(std::string_view typed, const Names& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    const std::size_t d = EditDistance(typed, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  if (!best || !CloseEnoughToSuggest(typed, best_distance)) return std::nullopt;
  return best;
}

template <typename Names>
std::string Join(const Names& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

std::optional<std::string> NearestName(std::string_view typed,
                                       const std::vector<std::string>& candidates) {
  return Nearest(typed, candidates);
}

std::optional<std::string> NearestName(std::string_view typed,
                                       std::span<const std::string_view> candidates) {
  return Nearest(typed, candidates);
}

std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string JoinNames(std::span<const std::string> names) { return Join(names); }
std::string JoinNames(std::span<const std::string_view> names) { return Join(names); }

// --- Documents ---

Status CheckYamlTerminates(std::string_view text, std::string_view source,
                           const DocumentKind& kind, int max_documents) {
  std::istringstream stream{std::string(text)};
  YAML::Parser parser(stream);
  BoundedEventCounter counter(kind.with_article);
  try {
    for (int documents = 0; parser.HandleNextDocument(counter);) {
      if (++documents > max_documents) {
        return InvalidInput(max_documents == kMaxDocumentsOfOneFile
                           ? fmt::format("{}:1: more than one YAML document", source)
                           : fmt::format("{}:1: more than {} YAML documents", source, max_documents));
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidInput(
        fmt::format("{}:{}: not valid YAML: {}", source, LineOf(e.mark), OneLine(e.msg)));
  }
  return Ok{};
}

Result<YAML::Node> LoadDocument(std::string_view text, std::string_view source,
                                const DocumentKind& kind) {
  if (Status terminates = CheckYamlTerminates(text, source, kind); !terminates.ok()) {
    return terminates.error();
  }
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidInput(
        fmt::format("{}:{}: not valid YAML: {}", source, LineOf(e.mark), OneLine(e.msg)));
  }
  if (documents.empty() || documents[0].IsNull()) {
    return InvalidInput(fmt::format("{}:1: empty {}{}", source, kind.noun, kind.empty_hint));
  }
  const YAML::Node& root = documents[0];
  if (!kind.expect_mapping.empty() && !root.IsMap()) {
    return InvalidInput(fmt::format("{}:{}: expected {}, got {}", source, LineOf(root.Mark()),
                               kind.expect_mapping, OneLine(Describe(root))));
  }
  if (documents.size() > 1) {
    return InvalidInput(fmt::format("{}:{}: a {} is one YAML document; a second one starts here",
                               source, LineOf(documents[1].Mark()), kind.noun));
  }
  return root;
}

// --- Scalars ---

bool IsQuotedOrString(const YAML::Node& node) {
  return node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      break;
  }
  return fmt::format("'{}'", node.Scalar());
}

std::optional<double> ReadReal(std::string_view text) {
  if (text == ".inf" || text == ".Inf" || text == ".INF" || text == "+.inf" || text == "+.Inf" ||
      text == "+.INF") {
    return HUGE_VAL;
  }
  if (text == "-.inf" || text == "-.Inf" || text == "-.INF") return -HUGE_VAL;
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return std::nan("");
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);  // from_chars takes no '+'
  if (text.empty()) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool LooksWhole(std::string_view text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int LineOf(const YAML::Mark& mark) { return std::max(0, mark.line) + 1; }

std::optional<std::int64_t> ParseIsoDate(std::string_view text) {
  if (text.size() != 10 || text[4] != '-' || text[7] != '-') return std::nullopt;
  auto number = [&](std::size_t at, std::size_t length) -> std::optional<int> {
    int n = 0;
    for (std::size_t i = at; i < at + length; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      n = n * 10 + (text[i] - '0');
    }
    return n;
  };
  const std::optional<int> y = number(0, 4);
  const std::optional<int> m = number(5, 2);
  const std::optional<int> d = number(8, 2);
  if (!y || !m || !d || *y < 1) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year(*y),
                                         std::chrono::month(static_cast<unsigned>(*m)),
                                         std::chrono::day(static_cast<unsigned>(*d))};
  if (!date.ok()) return std::nullopt;
  return std::chrono::sys_days(date).time_since_epoch().count();
}

std::string FormatIsoDate(std::int64_t days) {
  const std::chrono::year_month_day date{
      std::chrono::sys_days(std::chrono::days(static_cast<std::chrono::days::rep>(days)))};
  return fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
}

// --- MapReader ---

MapReader::MapReader(const YAML::Node& node, std::string path, std::string_view source,
                     Diagnostics* diagnostics, int line)
    : path_(std::move(path)), source_(source), diagnostics_(diagnostics) {
  BAKEOFF_CHECK(diagnostics_ != nullptr);
  line_ = line > 0 ? line : yaml::LineOf(node.Mark());
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    ErrorAt(line_, path_, fmt::format("expected a mapping, got {}", Describe(node)));
    return;
  }
  for (const auto& pair : node) {
    const YAML::Node& key_node = pair.first;
    const YAML::Node& value = pair.second;
    if (!key_node.IsScalar()) {
      ErrorAt(yaml::LineOf(key_node.Mark()), path_.empty() ? "?" : path_,
              fmt::format("keys must be plain names, got {}", Describe(key_node)));
      continue;
    }
    Entry entry;
    entry.key = key_node.Scalar();
    entry.value = value;
    entry.line = yaml::LineOf(key_node.Mark());
    entry.value_line = ValueLine(key_node, value);
    entries_.push_back(std::move(entry));
  }
}

MapReader::MapReader(const ListItem& item, std::string_view source, Diagnostics* diagnostics)
    : MapReader(item.node, item.path, source, diagnostics, item.line) {}

const MapReader::Entry* MapReader::Find(std::string_view key) const {
  for (const Entry& entry : entries_) {
    if (entry.key == key) return &entry;  // the first occurrence
  }
  return nullptr;
}

const MapReader::Entry* MapReader::Lookup(std::string_view key, Need need) {
  Allow(key);
  const Entry* entry = Find(key);
  if (entry == nullptr && need == Need::kRequired) ErrorAt(line_, Field(key), "missing (required)");
  return entry;
}

void MapReader::Allow(std::string_view key) {
  if (known_set_.insert(std::string(key)).second) known_.emplace_back(key);
}

bool MapReader::Has(std::string_view key) const { return Find(key) != nullptr; }

int MapReader::LineOf(std::string_view key) const {
  const Entry* entry = Find(key);
  return entry != nullptr ? entry->line : line_;
}

std::string MapReader::Field(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void MapReader::Error(std::string_view key, std::string message) {
  ErrorAt(LineOf(key), Field(key), std::move(message));
}

void MapReader::ErrorAt(int line, std::string field, std::string message) {
  diagnostics_->Add(source_, line, std::move(field), std::move(message));
}

void MapReader::Fail(const Entry& entry, std::string_view field, std::string message) {
  ErrorAt(entry.value_line, std::string(field), std::move(message));
}

std::optional<std::string> MapReader::ScalarText(const YAML::Node& value, int line,
                                                 const std::string& field) {
  if (!value.IsScalar()) {
    ErrorAt(line, field, fmt::format("expected text, got {}", Describe(value)));
    return std::nullopt;
  }
  if (value.Scalar().empty()) {
    ErrorAt(line, field, "must not be empty");
    return std::nullopt;
  }
  return value.Scalar();
}

std::optional<std::string> MapReader::Text(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  return ScalarText(entry->value, entry->value_line, Field(key));
}

std::optional<std::int64_t> MapReader::Integer(std::string_view key, std::int64_t min,
                                               std::int64_t max, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (!value.IsScalar()) {
    Fail(*entry, field, fmt::format("expected a whole number, got {}", Describe(value)));
    return std::nullopt;
  }
  const std::string& text = value.Scalar();
  if (IsQuotedOrString(value)) {
    Fail(*entry, field,
         fmt::format("expected a whole number, got the string '{}' (drop the quotes)", text));
    return std::nullopt;
  }
  auto range = [&] {
    if (max == std::numeric_limits<std::int64_t>::max()) return fmt::format("at least {}", min);
    return fmt::format("between {} and {}", min, max);
  };
  if (!LooksWhole(text)) {
    Fail(*entry, field, fmt::format("expected a whole number, got '{}'", text));
    return std::nullopt;
  }
  const std::string_view digits =
      text[0] == '+' ? std::string_view(text).substr(1) : std::string_view(text);
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < min || n > max) {
    Fail(*entry, field, fmt::format("must be {}, got {}", range(), text));
    return std::nullopt;
  }
  return n;
}

std::optional<double> MapReader::Number(std::string_view key, double min, double max, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (!value.IsScalar()) {
    Fail(*entry, field, fmt::format("expected a number, got {}", Describe(value)));
    return std::nullopt;
  }
  const std::string& text = value.Scalar();
  if (IsQuotedOrString(value)) {
    Fail(*entry, field, fmt::format("expected a number, got the string '{}' (drop the quotes)", text));
    return std::nullopt;
  }
  const std::optional<double> x = ReadReal(text);
  if (!x) {
    Fail(*entry, field, fmt::format("expected a number, got '{}'", text));
    return std::nullopt;
  }
  if (!std::isfinite(*x)) {
    Fail(*entry, field, fmt::format("expected a finite number, got '{}'", text));
    return std::nullopt;
  }
  if (*x < min || *x > max) {
    Fail(*entry, field, fmt::format("must be between {} and {}, got {}", min, max, text));
    return std::nullopt;
  }
  return *x;
}

std::optional<bool> MapReader::Bool(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (value.IsScalar() && !IsQuotedOrString(value)) {
    if (IsPlainTrue(value.Scalar())) return true;
    if (IsPlainFalse(value.Scalar())) return false;
  }
  if (value.IsScalar() && IsQuotedOrString(value)) {
    Fail(*entry, field,
         fmt::format("expected true or false, got the string '{}' (drop the quotes)",
                     value.Scalar()));
  } else {
    Fail(*entry, field, fmt::format("expected true or false, got {}", Describe(value)));
  }
  return std::nullopt;
}

std::optional<std::vector<std::string>> MapReader::TextList(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (value.IsScalar()) {
    std::optional<std::string> one = ScalarText(value, entry->value_line, field);
    if (!one) return std::nullopt;
    return std::vector<std::string>{std::move(*one)};
  }
  if (!value.IsSequence()) {
    Fail(*entry, field, fmt::format("expected text or a list of text, got {}", Describe(value)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  std::size_t i = 0;
  for (const YAML::Node& element : value) {
    const int line = element.IsNull() ? entry->value_line : yaml::LineOf(element.Mark());
    std::optional<std::string> text = ScalarText(element, line, fmt::format("{}[{}]", field, i));
    if (text) {
      out.push_back(std::move(*text));
    } else {
      ok = false;
    }
    ++i;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<Nanos> MapReader::Duration(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  constexpr std::string_view kShape = "a duration (250ms, 30s, 5min, 1h, or a number of seconds)";
  if (!value.IsScalar()) {
    Fail(*entry, field, fmt::format("expected {}, got {}", kShape, Describe(value)));
    return std::nullopt;
  }
  const std::string& text = value.Scalar();
  std::optional<double> seconds = DurationSeconds(text);
  if (!seconds && !IsQuotedOrString(value)) seconds = ReadReal(text);
  if (!seconds && IsQuotedOrString(value) && ReadReal(text)) {
    Fail(*entry, field,
         fmt::format("expected {}, got the string '{}' (drop the quotes or add a unit)", kShape,
                     text));
    return std::nullopt;
  }
  if (!seconds || !std::isfinite(*seconds)) {
    Fail(*entry, field, fmt::format("expected {}, got '{}'", kShape, text));
    return std::nullopt;
  }
  if (*seconds < 0) {
    Fail(*entry, field, fmt::format("must not be negative, got {}", text));
    return std::nullopt;
  }
  if (*seconds > kMaxDurationSeconds) {
    Fail(*entry, field,
         fmt::format("{} is longer than bakeoff accepts ({:g} s)", text, kMaxDurationSeconds));
    return std::nullopt;
  }
  return FromSeconds(*seconds);
}

std::optional<std::string> MapReader::Date(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (!value.IsScalar()) {
    Fail(*entry, field, fmt::format("expected a date YYYY-MM-DD, got {}", Describe(value)));
    return std::nullopt;
  }
  const std::string& text = value.Scalar();
  if (!ParseIsoDate(text)) {
    const bool shaped = text.size() == 10 && text[4] == '-' && text[7] == '-';
    Fail(*entry, field,
         shaped ? fmt::format("'{}' is not a calendar date", text)
                : fmt::format("expected a date YYYY-MM-DD, got '{}'", text));
    return std::nullopt;
  }
  return text;
}

std::optional<std::size_t> MapReader::Enum(std::string_view key,
                                           std::span<const std::string_view> allowed, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (!value.IsScalar()) {
    Fail(*entry, field,
         fmt::format("expected one of {}, got {}", JoinNames(allowed), Describe(value)));
    return std::nullopt;
  }
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i] == value.Scalar()) return i;
  }
  const std::optional<std::string> suggestion = NearestName(value.Scalar(), allowed);
  Fail(*entry, field,
       fmt::format("'{}' is not one of {}{}", value.Scalar(), JoinNames(allowed),
                   suggestion ? fmt::format("; did you mean {}?", *suggestion) : ""));
  return std::nullopt;
}

std::optional<MapReader> MapReader::Map(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  if (!entry->value.IsMap() && !entry->value.IsNull()) {
    Fail(*entry, Field(key), fmt::format("expected a mapping, got {}", Describe(entry->value)));
    return std::nullopt;
  }
  return MapReader(entry->value, Field(key), source_, diagnostics_, entry->line);
}

std::optional<std::vector<ListItem>> MapReader::List(std::string_view key, Need need) {
  const Entry* entry = Lookup(key, need);
  if (entry == nullptr) return std::nullopt;
  const std::string field = Field(key);
  const YAML::Node& value = entry->value;
  if (value.IsNull()) return std::vector<ListItem>{};
  if (!value.IsSequence()) {
    Fail(*entry, field, fmt::format("expected a list, got {}", Describe(value)));
    return std::nullopt;
  }
  std::vector<ListItem> items;
  std::size_t i = 0;
  for (const YAML::Node& element : value) {
    const int line = element.IsNull() || element.Mark().is_null() ? entry->value_line
                                                                  : yaml::LineOf(element.Mark());
    items.push_back(ListItem{element, fmt::format("{}[{}]", field, i), line});
    ++i;
  }
  return items;
}

std::vector<std::string> MapReader::Keys() {
  std::vector<std::string> keys;
  for (const Entry& entry : entries_) {
    if (Find(entry.key) != &entry) continue;  // a later occurrence
    Allow(entry.key);
    keys.push_back(entry.key);
  }
  return keys;
}

void MapReader::Finish() {
  for (const Entry& entry : entries_) {
    const std::string field = Field(entry.key);
    if (const Entry* first = Find(entry.key); first != &entry) {
      ErrorAt(entry.line, field,
              first->line == entry.line ? "given twice on this line"
                                        : fmt::format("given twice (first on line {})", first->line));
      continue;
    }
    if (known_set_.count(entry.key) != 0) continue;
    const std::optional<std::string> suggestion = NearestName(entry.key, known_);
    if (suggestion) {
      ErrorAt(entry.line, field, fmt::format("unknown key; did you mean {}?", *suggestion));
    } else if (known_.empty()) {
      ErrorAt(entry.line, field, "unknown key (this mapping takes no keys)");
    } else {
      ErrorAt(entry.line, field,
              fmt::format("unknown key (known keys{}: {})",
                          path_.empty() ? "" : fmt::format(" of {}", path_), JoinNames(known_)));
    }
  }
}

}  // namespace bakeoff::yaml

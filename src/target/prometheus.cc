// target/prometheus.cc
//
// Owns: the line parser behind ParsePrometheusText and the page queries (contract in
// prometheus.h). Wire formats: "Exposition formats", prometheus.io (text format 0.0.4: `# HELP`,
// `# TYPE`, `name{label="value",...} value [timestamp_ms]`, tokens separated by blanks and tabs,
// label values escaping `\\`, `\"` and `\n`), and OpenMetrics 1.0 (`# UNIT`, `# EOF`, exemplars
// after ` # `, timestamps in float seconds, the types unknown/gaugehistogram/stateset/info).
// Prometheus 3's quoted names (`{"name", "label"="v"}`) are read wherever a name may stand.
// Each line is parsed where it lies in the page; only names and unescaped values are copied.
#include "target/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>

namespace bakeoff::target {
namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";
// Longest piece of the page quoted in a warning.
constexpr std::size_t kMaxQuotedBytes = 40;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsMetricNameStart(char c) { return IsLetter(c) || c == '_' || c == ':'; }
bool IsMetricNameChar(char c) { return IsMetricNameStart(c) || IsDigit(c); }
bool IsLabelNameStart(char c) { return IsLetter(c) || c == '_'; }
bool IsLabelNameChar(char c) { return IsLabelNameStart(c) || IsDigit(c); }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  // A CR before the LF (CRLF pages) is line end, not content.
  while (!s.empty() && (IsBlank(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// `text` for a message: in quotes, cut to kMaxQuotedBytes.
std::string QuoteInMessage(std::string_view text) {
  if (text.size() <= kMaxQuotedBytes) return fmt::format("\"{}\"", text);
  return fmt::format("\"{}...\"", text.substr(0, kMaxQuotedBytes));
}

// A sample value or an OpenMetrics timestamp: a decimal float with an optional sign, or Inf,
// +Inf, -Inf, NaN in any case (Go's strconv.ParseFloat, which Prometheus uses, minus hex floats
// and underscores, which no exporter writes). Values beyond double's range are refused, as there.
std::optional<double> ParseFloat(std::string_view token) {
  if (!token.empty() && token.front() == '+') {
    token.remove_prefix(1);
    if (!token.empty() && token.front() == '-') return std::nullopt;
  }
  if (token.empty()) return std::nullopt;
  double value = 0;
  const auto [end, ec] =
      std::from_chars(token.data(), token.data() + token.size(), value, std::chars_format::general);
  if (ec != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return value;
}

// A 0.0.4 timestamp: a base-ten int64 of milliseconds with an optional sign.
std::optional<std::int64_t> ParseMillis(std::string_view token) {
  if (!token.empty() && token.front() == '+') {
    token.remove_prefix(1);
    if (!token.empty() && token.front() == '-') return std::nullopt;
  }
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size()) return std::nullopt;
  return value;
}

// An OpenMetrics timestamp: float seconds, converted to the nearest millisecond.
std::optional<std::int64_t> ParseSecondsAsMillis(std::string_view token) {
  const std::optional<double> seconds = ParseFloat(token);
  if (!seconds || !std::isfinite(*seconds)) return std::nullopt;
  const double ms = std::round(*seconds * 1000.0);
  // 2^63 is exact in a double; every double below it in magnitude converts without overflow.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(ms > -kLimit && ms < kLimit)) return std::nullopt;
  return static_cast<std::int64_t>(ms);
}

// "# EOF" alone on its line (blanks and a CR around it allowed).
bool IsEofLine(std::string_view line) {
  line = TrimBlanks(line);
  if (line.empty() || line.front() != '#') return false;
  line.remove_prefix(1);
  return TrimBlanks(line) == "EOF";
}

// Walks one line, already trimmed of surrounding blanks. Every Read* either consumes what it
// reads and returns it, or returns an error saying what was expected; the caller then drops the
// line, so the cursor's position after an error does not matter.
class LineCursor {
 public:
  explicit LineCursor(std::string_view line) : line_(line) {}

  bool AtEnd() const { return pos_ == line_.size(); }
  char Peek() const { return AtEnd() ? '\0' : line_[pos_]; }
  std::size_t pos() const { return pos_; }
  void set_pos(std::size_t pos) { pos_ = pos; }
  std::string_view Rest() const { return line_.substr(pos_); }

  bool Consume(char c) {
    if (Peek() != c || AtEnd()) return false;
    ++pos_;
    return true;
  }
  // Skips blanks; true when there was at least one.
  bool SkipBlanks() {
    const std::size_t start = pos_;
    while (!AtEnd() && IsBlank(line_[pos_])) ++pos_;
    return pos_ > start;
  }
  // The bytes up to the next blank or the end of the line.
  std::string_view Token() {
    const std::size_t start = pos_;
    while (!AtEnd() && !IsBlank(line_[pos_])) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  // A quoted name (UTF-8 names), which must not be empty: `""` names nothing.
  Result<std::string> ReadQuotedName(std::string_view what) {
    Result<std::string> name = ReadQuoted(what);
    if (name.ok() && name->empty()) return MakeError(ErrorCode::kInvalidInput, fmt::format("an empty {}", what));
    return name;
  }

  // A metric name: [a-zA-Z_:][a-zA-Z0-9_:]*, or a quoted one.
  Result<std::string> ReadMetricName() {
    if (Peek() == '"') return ReadQuotedName("metric name");
    if (AtEnd() || !IsMetricNameStart(Peek())) return Expected("a metric name");
    const std::size_t start = pos_;
    while (!AtEnd() && IsMetricNameChar(line_[pos_])) ++pos_;
    return std::string(line_.substr(start, pos_ - start));
  }

  // A label name: [a-zA-Z_][a-zA-Z0-9_]*, or a quoted one.
  Result<std::string> ReadLabelName() {
    if (Peek() == '"') return ReadQuotedName("label name");
    if (AtEnd() || !IsLabelNameStart(Peek())) return Expected("a label name");
    const std::size_t start = pos_;
    while (!AtEnd() && IsLabelNameChar(line_[pos_])) ++pos_;
    return std::string(line_.substr(start, pos_ - start));
  }

  // A double-quoted string, unescaped: `\\`, `\"` and `\n` stand for a backslash, a quote and a
  // line feed; any other backslash pair is kept as written (Prometheus keeps it too).
  // REQUIRES: Peek() == '"'.
  Result<std::string> ReadQuoted(std::string_view what) {
    BAKEOFF_CHECK(Peek() == '"');
    ++pos_;
    std::string out;
    for (;;) {
      // Copy the run up to the next quote or backslash in one go.
      const std::size_t stop = line_.find_first_of("\"\\", pos_);
      if (stop == std::string_view::npos) {
        return MakeError(ErrorCode::kInvalidInput, fmt::format("unterminated {}", what));
      }
      out.append(line_.substr(pos_, stop - pos_));
      pos_ = stop + 1;
      if (line_[stop] == '"') return out;
      if (AtEnd()) return MakeError(ErrorCode::kInvalidInput, fmt::format("unterminated {}", what));
      const char escaped = line_[pos_++];
      if (escaped == 'n') {
        out.push_back('\n');
      } else if (escaped == '\\' || escaped == '"') {
        out.push_back(escaped);
      } else {
        out.push_back('\\');
        out.push_back(escaped);
      }
    }
  }

  Error Expected(std::string_view what) const {
    if (AtEnd()) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("expected {} at the end of the line", what));
    }
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("expected {} at column {}, found {}", what, pos_ + 1,
                                 QuoteInMessage(line_.substr(pos_))));
  }

 private:
  std::string_view line_;
  std::size_t pos_ = 0;
};

// The inside of `{...}` after the `{`, up to and including the `}`: label pairs separated by
// commas, blanks allowed around every token, a trailing comma allowed. A quoted string standing
// alone is the metric name (Prometheus 3); it is stored in `*name` when `name` is not null and
// still empty. Label names must be unique.
Status ReadLabelSet(LineCursor& cursor, std::string* name, std::vector<MetricLabel>* labels) {
  for (;;) {
    cursor.SkipBlanks();
    if (cursor.Consume('}')) return Ok{};
    const bool quoted = cursor.Peek() == '"';
    Result<std::string> key = cursor.ReadLabelName();
    if (!key.ok()) return key.error();
    if (key->empty()) return MakeError(ErrorCode::kInvalidInput, "empty quoted name");
    cursor.SkipBlanks();
    if (quoted && cursor.Peek() != '=') {
      if (name == nullptr || !name->empty()) {
        return MakeError(ErrorCode::kInvalidInput,
                         fmt::format("quoted name {} where a label was expected", QuoteInMessage(*key)));
      }
      *name = std::move(key).value();
    } else {
      if (!cursor.Consume('=')) return cursor.Expected(fmt::format("'=' after label {}", *key));
      cursor.SkipBlanks();
      if (cursor.Peek() != '"')
        return cursor.Expected(fmt::format("a quoted value for label {}", *key));
      Result<std::string> value = cursor.ReadQuoted("label value");
      if (!value.ok()) return value.error();
      for (const MetricLabel& seen : *labels) {
        if (seen.name == *key) {
          return MakeError(ErrorCode::kInvalidInput, fmt::format("label {} given twice", *key));
        }
      }
      labels->push_back(MetricLabel{std::move(key).value(), std::move(value).value()});
    }
    cursor.SkipBlanks();
    if (cursor.Consume(',')) continue;
    if (cursor.Consume('}')) return Ok{};
    return cursor.Expected("',' or '}'");
  }
}

// An OpenMetrics exemplar after its ` # `: `{labels} value [timestamp]`. Checked, then dropped.
Status CheckExemplar(LineCursor& cursor) {
  if (!cursor.Consume('{')) return cursor.Expected("'{' opening the exemplar's labels");
  std::vector<MetricLabel> labels;
  if (Status s = ReadLabelSet(cursor, nullptr, &labels); !s.ok()) return s;
  if (!cursor.SkipBlanks()) return cursor.Expected("a blank before the exemplar's value");
  const std::string_view value = cursor.Token();
  if (!ParseFloat(value)) {
    return MakeError(ErrorCode::kInvalidInput, fmt::format("bad exemplar value {}", QuoteInMessage(value)));
  }
  cursor.SkipBlanks();
  if (cursor.AtEnd()) return Ok{};
  const std::string_view timestamp = cursor.Token();
  if (!ParseSecondsAsMillis(timestamp)) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("bad exemplar timestamp {}", QuoteInMessage(timestamp)));
  }
  cursor.SkipBlanks();
  if (!cursor.AtEnd()) return cursor.Expected("the end of the line after the exemplar");
  return Ok{};
}

struct ParsedSample {
  MetricSample sample;
  std::optional<std::string> exemplar_problem;  // the sample is kept; the exemplar is not
};

// One sample line: name [{labels}] value [timestamp] [# exemplar].
Result<ParsedSample> ParseSampleLine(std::string_view line, bool openmetrics) {
  LineCursor cursor(line);
  ParsedSample parsed;
  MetricSample& sample = parsed.sample;
  if (cursor.Peek() != '{') {
    Result<std::string> name = cursor.ReadMetricName();
    if (!name.ok()) return name.error();
    sample.name = std::move(name).value();
    if (!cursor.AtEnd() && !IsBlank(cursor.Peek()) && cursor.Peek() != '{') {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("character {} not allowed in metric name {}",
                                   QuoteInMessage(std::string_view(&line[cursor.pos()], 1)),
                                   QuoteInMessage(line.substr(0, line.find_first_of(" \t{")))));
    }
    const std::size_t after_name = cursor.pos();
    cursor.SkipBlanks();
    if (cursor.Peek() != '{') cursor.set_pos(after_name);
  }
  if (cursor.Consume('{')) {
    if (Status s = ReadLabelSet(cursor, &sample.name, &sample.labels); !s.ok()) return s.error();
  }
  if (sample.name.empty()) {
    return MakeError(ErrorCode::kInvalidInput, "no metric name before or inside the braces");
  }
  if (!cursor.SkipBlanks()) {
    return cursor.Expected(fmt::format("a blank and a value after {}", QuoteInMessage(sample.name)));
  }
  const std::string_view value = cursor.Token();
  const std::optional<double> parsed_value = ParseFloat(value);
  if (!parsed_value) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("bad value {} for {}", QuoteInMessage(value), QuoteInMessage(sample.name)));
  }
  sample.value = *parsed_value;
  cursor.SkipBlanks();
  if (!cursor.AtEnd() && cursor.Peek() != '#') {
    const std::string_view timestamp = cursor.Token();
    sample.timestamp_ms = openmetrics ? ParseSecondsAsMillis(timestamp) : ParseMillis(timestamp);
    if (!sample.timestamp_ms) {
      return MakeError(
          ErrorCode::kInvalidInput,
          fmt::format("bad timestamp {} for {} ({})", QuoteInMessage(timestamp), QuoteInMessage(sample.name),
                      openmetrics ? "OpenMetrics: seconds" : "integer milliseconds"));
    }
    cursor.SkipBlanks();
  }
  if (cursor.AtEnd()) return parsed;
  if (!cursor.Consume('#')) {
    return cursor.Expected(
        fmt::format("the end of the line after the value of {}", QuoteInMessage(sample.name)));
  }
  if (!cursor.SkipBlanks()) {
    parsed.exemplar_problem = "expected a blank after the '#' of an exemplar";
  } else if (Status s = CheckExemplar(cursor); !s.ok()) {
    parsed.exemplar_problem = s.error().message;
  }
  return parsed;
}

std::optional<MetricType> ParseType(std::string_view word) {
  std::string lower(word);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (lower == "counter") return MetricType::kCounter;
  if (lower == "gauge") return MetricType::kGauge;
  if (lower == "histogram") return MetricType::kHistogram;
  if (lower == "summary") return MetricType::kSummary;
  if (lower == "untyped") return MetricType::kUntyped;
  if (lower == "unknown") return MetricType::kUnknown;
  if (lower == "gaugehistogram") return MetricType::kGaugeHistogram;
  if (lower == "info") return MetricType::kInfo;
  if (lower == "stateset") return MetricType::kStateSet;
  return std::nullopt;
}

// HELP text: `\\` and `\n` (0.0.4), and `\"` (OpenMetrics) unescaped; other pairs kept.
std::string UnescapeHelp(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out.push_back(text[i]);
      continue;
    }
    const char next = text[++i];
    if (next == 'n') {
      out.push_back('\n');
    } else if (next == '\\' || next == '"') {
      out.push_back(next);
    } else {
      out.push_back('\\');
      out.push_back(next);
    }
  }
  return out;
}

// Builds a page line by line; owns the warning list, the family index and the failure rules.
class PageBuilder {
 public:
  PageBuilder(const PrometheusParseOptions& options, bool openmetrics) : options_(options) {
    page_.openmetrics = openmetrics;
  }

  // Returns an error only in strict mode (the first problem).
  Status Line(std::size_t number, std::string_view line) {
    if (line.front() == '#') return Comment(number, line);
    saw_sample_text_ = true;
    Result<ParsedSample> parsed = ParseSampleLine(line, page_.openmetrics);
    if (!parsed.ok()) {
      if (!first_failure_)
        first_failure_ = fmt::format("line {}: {}", number, parsed.error().message);
      return Warn(number, parsed.error().message);
    }
    page_.samples.push_back(std::move(parsed->sample));
    if (parsed->exemplar_problem) {
      return Warn(number, fmt::format("exemplar ignored: {}", *parsed->exemplar_problem));
    }
    return Ok{};
  }

  Status Warn(std::size_t number, std::string_view why) {
    if (options_.strict) {
      return MakeError(ErrorCode::kInvalidInput, fmt::format("line {}: {}", number, why));
    }
    if (page_.warnings.size() < options_.max_warnings) {
      page_.warnings.push_back(fmt::format("line {}: {}", number, why));
    } else {
      ++unlisted_warnings_;
    }
    return Ok{};
  }

  Result<MetricsPage> Finish() && {
    if (page_.samples.empty() && saw_sample_text_) {
      return MakeError(ErrorCode::kInvalidInput,
                       fmt::format("not a metrics page: no line is a valid sample ({})",
                                   first_failure_.value_or("")));
    }
    if (unlisted_warnings_ > 0) {
      page_.warnings.push_back(fmt::format("{} more warnings not listed (at most {} are kept)",
                                           unlisted_warnings_, options_.max_warnings));
    }
    return std::move(page_);
  }

 private:
  struct FamilySeen {
    std::size_t type_line = 0, help_line = 0, unit_line = 0;  // 0: no such line yet
  };

  // # HELP / # TYPE / # UNIT / any other comment. "# EOF" is handled by the caller.
  Status Comment(std::size_t number, std::string_view line) {
    LineCursor cursor(line);
    cursor.Consume('#');
    cursor.SkipBlanks();
    const std::string_view keyword = cursor.Token();
    if (keyword != "HELP" && keyword != "TYPE" && keyword != "UNIT") return Ok{};  // a comment
    if (!cursor.SkipBlanks())
      return Warn(number, fmt::format("{} line without a metric name", keyword));
    Result<std::string> name = cursor.ReadMetricName();
    if (!name.ok())
      return Warn(number, fmt::format("bad {} line: {}", keyword, name.error().message));
    const bool blank = cursor.SkipBlanks();
    if (!cursor.AtEnd() && !blank) {
      return Warn(number, fmt::format("bad {} line: {}", keyword,
                                      cursor.Expected("a blank after the metric name").message));
    }
    const std::string_view rest = cursor.Rest();
    if (keyword == "TYPE") {
      const std::optional<MetricType> type = ParseType(rest);
      if (!type)
        return Warn(number, fmt::format("unknown metric type {} for {}", QuoteInMessage(rest), *name));
      auto [family, seen] = FamilyFor(*name);
      if (seen.type_line != 0) {
        return Warn(number, fmt::format("second TYPE line for {} ignored (line {} says {})", *name,
                                        seen.type_line, MetricTypeName(family.type)));
      }
      seen.type_line = number;
      family.type = *type;
    } else if (keyword == "HELP") {
      auto [family, seen] = FamilyFor(*name);
      if (seen.help_line != 0) {
        return Warn(number, fmt::format("second HELP line for {} ignored (first on line {})", *name,
                                        seen.help_line));
      }
      seen.help_line = number;
      family.help = UnescapeHelp(rest);
    } else {
      if (rest.find_first_of(" \t") != std::string_view::npos) {
        return Warn(number, fmt::format("bad UNIT line for {}: {}", *name, QuoteInMessage(rest)));
      }
      auto [family, seen] = FamilyFor(*name);
      if (seen.unit_line != 0) {
        return Warn(number, fmt::format("second UNIT line for {} ignored (first on line {})", *name,
                                        seen.unit_line));
      }
      seen.unit_line = number;
      family.unit = std::string(rest);
    }
    return Ok{};
  }

  std::pair<MetricFamilyInfo&, FamilySeen&> FamilyFor(const std::string& name) {
    auto [it, inserted] = family_index_.try_emplace(name, page_.families.size());
    if (inserted) {
      page_.families.emplace_back();
      page_.families.back().name = name;
      seen_.emplace_back();
    }
    return {page_.families[it->second], seen_[it->second]};
  }

  const PrometheusParseOptions& options_;
  MetricsPage page_;
  std::unordered_map<std::string, std::size_t> family_index_;
  std::vector<FamilySeen> seen_;  // parallel to page_.families
  bool saw_sample_text_ = false;
  std::optional<std::string> first_failure_;
  std::size_t unlisted_warnings_ = 0;
};

// Calls `on_line(number, line)` for each line of `text` (LF-terminated; the last line may lack
// its LF), the LF removed, until it returns false.
template <typename OnLine>
void ForEachLine(std::string_view text, OnLine on_line) {
  std::size_t number = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const void* lf = std::memchr(text.data() + at, '\n', text.size() - at);
    const std::size_t end =
        lf == nullptr ? text.size()
                      : static_cast<std::size_t>(static_cast<const char*>(lf) - text.data());
    if (!on_line(++number, text.substr(at, end - at))) return;
    at = end + 1;
  }
}

bool Matches(const MetricSample& sample, const std::vector<MetricLabel>& match) {
  for (const MetricLabel& m : match) {
    if (sample.Label(m.name) != m.value) return false;
  }
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kUnknown:
      return "unknown";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
    case MetricType::kGaugeHistogram:
      return "gaugehistogram";
    case MetricType::kInfo:
      return "info";
    case MetricType::kStateSet:
      return "stateset";
    case MetricType::kUntyped:
      return "untyped";
  }
  return "unknown";
}

std::string_view MetricSample::Label(std::string_view name) const {
  for (const MetricLabel& label : labels) {
    if (label.name == name) return label.value;
  }
  return {};
}

const MetricFamilyInfo* MetricsPage::Family(std::string_view name) const {
  const auto exact = [this](std::string_view wanted) -> const MetricFamilyInfo* {
    for (const MetricFamilyInfo& family : families) {
      if (family.name == wanted) return &family;
    }
    return nullptr;
  };
  // `base`, or the counter family prometheus_client names `base`_total.
  const auto lookup = [&exact](std::string_view base) -> const MetricFamilyInfo* {
    if (const MetricFamilyInfo* family = exact(base)) return family;
    const MetricFamilyInfo* total = exact(std::string(base) + "_total");
    return total != nullptr && total->type == MetricType::kCounter ? total : nullptr;
  };
  if (const MetricFamilyInfo* family = lookup(name)) return family;
  for (const std::string_view suffix :
       {"_bucket", "_sum", "_count", "_total", "_created", "_gsum", "_gcount", "_info"}) {
    if (!EndsWith(name, suffix)) continue;
    if (const MetricFamilyInfo* family = lookup(name.substr(0, name.size() - suffix.size()))) {
      return family;
    }
  }
  return nullptr;
}

std::optional<double> MetricsPage::Sum(std::string_view name,
                                       const std::vector<MetricLabel>& match) const {
  std::optional<double> sum;
  for (const MetricSample& sample : samples) {
    if (sample.name == name && Matches(sample, match)) sum = sum.value_or(0.0) + sample.value;
  }
  return sum;
}

std::optional<MetricsPage::Histogram> MetricsPage::HistogramOf(
    std::string_view family, const std::vector<MetricLabel>& match) const {
  const std::string base(family);
  const std::string bucket_name = base + "_bucket";
  std::map<double, double> by_le;
  const std::optional<double> sum = Sum(base + "_sum", match);
  const std::optional<double> count = Sum(base + "_count", match);
  const std::optional<double> gauge_sum = sum ? std::nullopt : Sum(base + "_gsum", match);
  const std::optional<double> gauge_count = count ? std::nullopt : Sum(base + "_gcount", match);
  for (const MetricSample& sample : samples) {
    if (sample.name != bucket_name || !Matches(sample, match)) continue;
    const std::optional<double> le = ParseFloat(sample.Label("le"));
    if (!le || std::isnan(*le)) continue;
    by_le[*le] += sample.value;
  }
  if (by_le.empty() && !sum && !count && !gauge_sum && !gauge_count) return std::nullopt;
  Histogram histogram;
  histogram.buckets.assign(by_le.begin(), by_le.end());
  histogram.sum = sum.value_or(gauge_sum.value_or(0.0));
  if (count || gauge_count) {
    histogram.count = count.value_or(gauge_count.value_or(0.0));
  } else if (!histogram.buckets.empty() && std::isinf(histogram.buckets.back().first) &&
             histogram.buckets.back().first > 0) {
    histogram.count = histogram.buckets.back().second;
  }
  return histogram;
}

Result<MetricsPage> ParsePrometheusText(std::string_view text,
                                        const PrometheusParseOptions& options) {
  if (text.size() > options.max_page_bytes) {
    return MakeError(ErrorCode::kInvalidInput,
                     fmt::format("metrics page of {} bytes is over the limit of {} bytes",
                                 text.size(), options.max_page_bytes));
  }
  if (const void* nul = std::memchr(text.data(), '\0', text.size()); nul != nullptr) {
    const auto offset = static_cast<std::size_t>(static_cast<const char*>(nul) - text.data());
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
    return MakeError(
        ErrorCode::kInvalidInput,
        fmt::format("line {}: NUL byte at offset {}: not a text metrics page", line, offset));
  }
  if (text.substr(0, kBom.size()) == kBom) text.remove_prefix(kBom.size());

  // The timestamp unit depends on the flavour, which only the "# EOF" line at the end tells.
  bool openmetrics = false;
  ForEachLine(text, [&openmetrics](std::size_t, std::string_view line) {
    openmetrics = IsEofLine(line);
    return !openmetrics;
  });

  PageBuilder builder(options, openmetrics);
  std::optional<Error> error;
  bool after_eof = false;
  ForEachLine(text, [&](std::size_t number, std::string_view raw) {
    if (raw.size() > options.max_line_bytes) {
      error = MakeError(ErrorCode::kInvalidInput,
                        fmt::format("line {}: {} bytes, over the limit of {} bytes per line",
                                    number, raw.size(), options.max_line_bytes));
      return false;
    }
    const std::string_view line = TrimBlanks(raw);
    if (line.empty()) return true;
    if (after_eof) {
      if (Status s = builder.Warn(number, "text after # EOF ignored"); !s.ok()) error = s.error();
      return false;
    }
    if (IsEofLine(line)) {
      after_eof = true;
      return true;
    }
    if (Status s = builder.Line(number, line); !s.ok()) {
      error = s.error();
      return false;
    }
    return true;
  });
  if (error) return *error;
  return std::move(builder).Finish();
}

std::optional<double> HistogramQuantile(const MetricsPage::Histogram& histogram, double q) {
  if (std::isnan(q)) return std::nullopt;
  std::vector<std::pair<double, double>> buckets = histogram.buckets;
  for (const auto& [le, count] : buckets) {
    if (std::isnan(le) || std::isnan(count)) return std::nullopt;
  }
  std::sort(buckets.begin(), buckets.end());
  // The +Inf bucket last, after at least one finite one.
  if (buckets.size() < 2 || buckets.back().first != std::numeric_limits<double>::infinity() ||
      !std::isfinite(buckets[buckets.size() - 2].first)) {
    return std::nullopt;
  }
  for (std::size_t i = 1; i < buckets.size(); ++i) {
    buckets[i].second = std::max(buckets[i].second, buckets[i - 1].second);
  }
  const double total = buckets.back().second;
  if (!(total > 0) || !std::isfinite(total)) return std::nullopt;
  if (q < 0) return -std::numeric_limits<double>::infinity();
  if (q > 1) return std::numeric_limits<double>::infinity();

  const std::size_t finite = buckets.size() - 1;  // buckets before +Inf
  const auto lower_edge = [&buckets](std::size_t b) {
    if (b > 0) return buckets[b - 1].first;
    return buckets[0].first <= 0 ? buckets[0].first : 0.0;
  };
  double rank = q * total;
  std::size_t b = 0;
  if (q == 0) {
    while (b < finite && !(buckets[b].second > 0)) ++b;
    if (b == finite) return buckets[finite - 1].first;
    return lower_edge(b);
  }
  while (b < finite && buckets[b].second < rank) ++b;
  if (b == finite) return buckets[finite - 1].first;
  if (b == 0 && buckets[0].first <= 0) return buckets[0].first;
  double in_bucket = buckets[b].second;
  if (b > 0) {
    in_bucket -= buckets[b - 1].second;
    rank -= buckets[b - 1].second;
  }
  const double start = lower_edge(b);
  const double end = buckets[b].first;
  const double result = start + (end - start) * (rank / in_bucket);
  if (std::isnan(result)) return std::nullopt;
  // Rounding may carry the sum an ulp past the bucket's edge; keep estimates ordered like q.
  return std::min(std::max(result, start), end);
}

}  // namespace bakeoff::target

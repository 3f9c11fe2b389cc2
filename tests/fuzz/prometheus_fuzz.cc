// tests/fuzz/prometheus_fuzz.cc
//
// Owns: the libFuzzer harness for target::ParsePrometheusText and the page queries. The first
// input byte picks the options (bit 0: strict; bit 1: small line and warning limits); the rest is
// the page. Invariants checked on every page that parses:
//   - samples have a name, label names are non-empty and unique; family names are unique;
//   - warnings stay within the cap, each naming its line; a strict parse has none;
//   - the page rendered back to text (0.0.4, every value, label, timestamp and family field
//     escaped as the format says) parses strictly, without a warning, to the same page;
//   - the same page with CRLF line ends parses to the same verdict, samples, families, warnings;
//   - Sum finds every sample name; HistogramQuantile never decreases as q grows.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "target/prometheus.h"

namespace {

using bakeoff::Result;
using bakeoff::target::HistogramQuantile;
using bakeoff::target::MetricFamilyInfo;
using bakeoff::target::MetricLabel;
using bakeoff::target::MetricSample;
using bakeoff::target::MetricsPage;
using bakeoff::target::MetricTypeName;
using bakeoff::target::ParsePrometheusText;
using bakeoff::target::PrometheusParseOptions;

bool IsPlainName(std::string_view name, bool metric) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void AppendQuoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '"';
}

void AppendName(std::string& out, std::string_view name, bool metric) {
  if (IsPlainName(name, metric)) {
    out += name;
  } else {
    AppendQuoted(out, name);
  }
}

void AppendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[64];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    BAKEOFF_CHECK(ec == std::errc());
    out.append(buffer, end);
  }
}

// The page in the 0.0.4 text format.
std::string Render(const MetricsPage& page) {
  std::string out;
  for (const MetricFamilyInfo& family : page.families) {
    out += "# TYPE ";
    AppendName(out, family.name, true);
    out += ' ';
    out += MetricTypeName(family.type);
    out += "\n# HELP ";
    AppendName(out, family.name, true);
    out += ' ';
    for (const char c : family.help) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\n# UNIT ";
    AppendName(out, family.name, true);
    out += ' ';
    out += family.unit;
    out += '\n';
  }
  for (const MetricSample& sample : page.samples) {
    const bool plain = IsPlainName(sample.name, true);
    if (plain) out += sample.name;
    out += '{';
    if (!plain) {
      AppendQuoted(out, sample.name);
      out += ',';
    }
    for (const MetricLabel& label : sample.labels) {
      AppendName(out, label.name, false);
      out += '=';
      AppendQuoted(out, label.value);
      out += ',';
    }
    out += "} ";
    AppendNumber(out, sample.value);
    if (sample.timestamp_ms) out += ' ' + std::to_string(*sample.timestamp_ms);
    out += '\n';
  }
  return out;
}

bool SameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;  // tells -0 from +0
}

void ExpectSameSamples(const MetricsPage& a, const MetricsPage& b, const char* how) {
  BAKEOFF_CHECK(a.samples.size() == b.samples.size())
      << how << ": " << a.samples.size() << " vs " << b.samples.size() << " samples";
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    const MetricSample& x = a.samples[i];
    const MetricSample& y = b.samples[i];
    BAKEOFF_CHECK(x.name == y.name) << how << ": sample " << i << " name";
    BAKEOFF_CHECK(x.labels == y.labels) << how << ": sample " << i << " labels";
    BAKEOFF_CHECK(SameValue(x.value, y.value)) << how << ": sample " << i << " value";
    BAKEOFF_CHECK(x.timestamp_ms == y.timestamp_ms) << how << ": sample " << i << " timestamp";
  }
}

void ExpectSameFamilies(const MetricsPage& a, const MetricsPage& b, const char* how) {
  BAKEOFF_CHECK(a.families.size() == b.families.size()) << how << ": family count";
  for (std::size_t i = 0; i < a.families.size(); ++i) {
    const MetricFamilyInfo& x = a.families[i];
    const MetricFamilyInfo& y = b.families[i];
    BAKEOFF_CHECK(x.name == y.name && x.type == y.type && x.help == y.help && x.unit == y.unit)
        << how << ": family " << i << " (" << x.name << ")";
  }
}

void CheckPage(const MetricsPage& page, const PrometheusParseOptions& options) {
  for (const MetricSample& sample : page.samples) {
    BAKEOFF_CHECK(!sample.name.empty());
    for (std::size_t i = 0; i < sample.labels.size(); ++i) {
      BAKEOFF_CHECK(!sample.labels[i].name.empty());
      for (std::size_t j = 0; j < i; ++j) {
        BAKEOFF_CHECK(sample.labels[i].name != sample.labels[j].name) << "duplicate label";
      }
    }
    BAKEOFF_CHECK(page.Sum(sample.name).has_value());
  }
  for (std::size_t i = 0; i < page.families.size(); ++i) {
    BAKEOFF_CHECK(!page.families[i].name.empty());
    for (std::size_t j = 0; j < i; ++j) {
      BAKEOFF_CHECK(page.families[i].name != page.families[j].name) << "duplicate family";
    }
    BAKEOFF_CHECK(page.Family(page.families[i].name) == &page.families[i]);
  }
  BAKEOFF_CHECK(page.warnings.size() <= options.max_warnings + 1);
  for (std::size_t i = 0; i < page.warnings.size() && i < options.max_warnings; ++i) {
    BAKEOFF_CHECK(page.warnings[i].rfind("line ", 0) == 0) << page.warnings[i];
  }
  if (options.strict) BAKEOFF_CHECK(page.warnings.empty());

  for (const MetricFamilyInfo& family : page.families) {
    const std::optional<MetricsPage::Histogram> h = page.HistogramOf(family.name);
    if (!h) continue;
    bool moderate = true;  // bounds far from overflow, so interpolation cannot reach infinity
    for (const auto& [le, count] : h->buckets) {
      if (std::isfinite(le) && std::fabs(le) > 1e300) moderate = false;
    }
    std::optional<double> previous;
    for (const double q : {-0.5, 0.0, 0.01, 0.5, 0.9, 0.99, 1.0, 2.0}) {
      const std::optional<double> v = HistogramQuantile(*h, q);
      if (v) BAKEOFF_CHECK(!std::isnan(*v));
      if (moderate && v && previous)
        BAKEOFF_CHECK(*previous <= *v) << "quantile decreased at " << q;
      if (v) previous = v;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t control = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  PrometheusParseOptions options;
  options.strict = (control & 1) != 0;
  const bool small_limits = (control & 2) != 0;
  if (small_limits) {
    options.max_line_bytes = 64;
    options.max_warnings = 3;
  }

  const Result<MetricsPage> parsed = ParsePrometheusText(text, options);
  if (!parsed.ok()) {
    BAKEOFF_CHECK(parsed.error().code == bakeoff::ErrorCode::kInvalidInput);
    BAKEOFF_CHECK(!parsed.error().message.empty());
  } else {
    CheckPage(*parsed, options);
    PrometheusParseOptions strict;
    strict.strict = true;
    const Result<MetricsPage> again = ParsePrometheusText(Render(*parsed), strict);
    BAKEOFF_CHECK(again.ok()) << "rendered page failed: " << again.error().message;
    ExpectSameSamples(*parsed, *again, "rendered");
    ExpectSameFamilies(*parsed, *again, "rendered");
  }

  // CRLF line ends change nothing but line lengths, so compare only under the default limits.
  if (!small_limits) {
    std::string crlf;
    crlf.reserve(text.size() * 2);
    for (const char c : text) {
      if (c == '\n') crlf += '\r';
      crlf += c;
    }
    const Result<MetricsPage> from_crlf = ParsePrometheusText(crlf, options);
    BAKEOFF_CHECK(from_crlf.ok() == parsed.ok()) << "CRLF changed the verdict";
    if (parsed.ok()) {
      ExpectSameSamples(*parsed, *from_crlf, "CRLF");
      ExpectSameFamilies(*parsed, *from_crlf, "CRLF");
      BAKEOFF_CHECK(parsed->warnings == from_crlf->warnings) << "CRLF changed the warnings";
      BAKEOFF_CHECK(parsed->openmetrics == from_crlf->openmetrics);
    } else if (parsed.error().message.find("NUL byte") == std::string::npos) {
      BAKEOFF_CHECK(parsed.error().message == from_crlf.error().message)
          << "CRLF changed the error: " << parsed.error().message << " vs "
          << from_crlf.error().message;
    }
  }
  return 0;
}

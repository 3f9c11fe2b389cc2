#include "core/clock.h"

#include <algorithm>
#include <ctime>

#include "core/yaml_doc.h"

namespace bakeoff {
namespace {

std::string UtcFormatted(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, format, &utc);
  return text;
}

}  // namespace

std::string UtcNowIso() { return UtcFormatted("%Y-%m-%dT%H:%M:%SZ"); }
std::string UtcTodayIso() { return UtcFormatted("%Y-%m-%d"); }

const Clock& RealClock() {
  static const SteadyClock clock;
  return clock;
}

std::optional<std::int64_t> ParseInstant(std::string_view text) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (text.size() > 11) return std::nullopt;
    return std::stoll(std::string(text)) * 1'000'000'000;
  }
  if (text.size() < 20 || text[10] != 'T' || text.back() != 'Z' || text[13] != ':' || text[16] != ':') return std::nullopt;
  const std::optional<std::int64_t> days = yaml::ParseIsoDate(text.substr(0, 10));
  auto two = [&](size_t at) -> int {
    const char a = text[at], b = text[at + 1];
    return a >= '0' && a <= '9' && b >= '0' && b <= '9' ? (a - '0') * 10 + (b - '0') : -1;
  };
  const int h = two(11), m = two(14), sec = two(17);
  if (!days || h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 59) return std::nullopt;
  std::int64_t fraction_ns = 0;
  std::string_view rest = text.substr(19, text.size() - 20);
  if (!rest.empty()) {
    if (rest.front() != '.' || rest.size() < 2 || rest.size() > 10) return std::nullopt;
    std::int64_t scale = 100'000'000;
    for (char c : rest.substr(1)) {
      if (c < '0' || c > '9') return std::nullopt;
      fraction_ns += (c - '0') * scale;
      scale /= 10;
    }
  }
  return ((*days * 24 + h) * 60 + m) * 60'000'000'000LL + sec * 1'000'000'000LL + fraction_ns;
}

}  // namespace bakeoff

#include "core/clock.h"

#include <ctime>

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

}  // namespace bakeoff

// target/clock_offset.cc: this machine's clock against the target's Date headers (clock_offset.h).
#include "target/clock_offset.h"

#include <array>
#include <thread>

#include <fmt/format.h>

namespace bakeoff::target {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// Between GETs, so a second's worth is a few hundred requests, not thousands: the bound grows by
// half of it.
constexpr Nanos kPause = std::chrono::milliseconds(2);

std::int64_t WallNowNs() {
  return std::chrono::duration_cast<Nanos>(RealClock().WallNow().time_since_epoch()).count();
}

}  // namespace

std::optional<std::int64_t> ParseHttpDate(std::string_view text) {
  // IMF-fixdate, the form every server must send: "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes).
  if (text.size() != 29 || text.substr(3, 2) != ", " || text.substr(25) != " GMT" || text[7] != ' ' ||
      text[11] != ' ' || text[16] != ' ' || text[19] != ':' || text[22] != ':') {
    return std::nullopt;
  }
  auto number = [&](size_t at, size_t len) -> int {
    int v = 0;
    for (size_t i = at; i < at + len; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  unsigned month = 0;
  for (unsigned i = 0; i < kMonths.size(); ++i) {
    if (text.substr(8, 3) == kMonths[i]) month = i + 1;
  }
  const int day = number(5, 2), year = number(12, 4), h = number(17, 2), m = number(20, 2), s = number(23, 2);
  if (month == 0 || day < 1 || day > 31 || year < 1970 || h < 0 || h > 23 || m < 0 || m > 59 || s < 0 || s > 60) {
    return std::nullopt;
  }
  const std::int64_t days = DaysFromCivil(year, month, static_cast<unsigned>(day));
  return ((days * 24 + h) * 60 + m) * 60'000'000'000LL + s * 1'000'000'000LL;
}

Result<ClockOffset> MeasureClockOffset(const net::Endpoint& endpoint, const net::ClientOptions& client,
                                       std::string path, Nanos budget) {
  const MonoTime deadline = RealClock().Now() + budget;
  std::optional<std::int64_t> last_date;
  std::int64_t last_sent_ns = 0;
  ClockOffset out;
  out.path = path;
  while (RealClock().Now() < deadline) {
    net::HttpRequest request;
    request.method = "GET";
    request.path = path;
    const std::int64_t sent_ns = WallNowNs();
    Result<net::FetchedResponse> response = net::Fetch(endpoint, std::move(request), client);
    const std::int64_t received_ns = WallNowNs();
    if (!response.ok()) return response.error();
    ++out.requests;
    const std::optional<std::int64_t> date = ParseHttpDate(response->head.Header("date"));
    if (!date) {
      return MakeError(ErrorCode::kUnavailable,
                       fmt::format("GET {} answered without a Date header to read the target's clock from", path));
    }
    if (last_date && *date > *last_date) {
      // The second turned between the last answer dated before it was sent and this one's receipt.
      const double middle_ns = (static_cast<double>(last_sent_ns) + static_cast<double>(received_ns)) / 2;
      out.offset_ms = (static_cast<double>(*date) - middle_ns) / 1e6;
      out.uncertainty_ms = static_cast<double>(received_ns - last_sent_ns) / 2e6;
      return out;
    }
    last_date = date;
    last_sent_ns = sent_ns;
    std::this_thread::sleep_for(kPause);
  }
  return MakeError(ErrorCode::kUnavailable,
                   fmt::format("the target's Date header did not turn over within {:.1f} s of GETs to {}",
                               ToSeconds(budget), path));
}

}  // namespace bakeoff::target

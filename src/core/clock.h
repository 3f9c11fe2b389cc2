// core/clock.h
//
// Owns: the one seam for time (leveldb's Env::NowMicros, nighthawk's TimeSource). Every duration
// in bakeoff is measured on the monotonic clock through this interface; the wall clock is for
// display and file stamps only. Tests and the simulator use ManualClock.
//
// Thread-safety: SteadyClock is stateless and safe everywhere. ManualClock is safe to read from
// many threads while one thread advances it.
// Units: std::chrono::nanoseconds (alias Nanos).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace bakeoff {

using Nanos = std::chrono::nanoseconds;
using MonoTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual MonoTime Now() const = 0;       // monotonic; all durations use this
  virtual WallTime WallNow() const = 0;  // display only
};

// The real clocks.
class SteadyClock final : public Clock {
 public:
  MonoTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
};

// Process-wide real clock.
const Clock& RealClock();

// An instant as `--start-at` takes it: "YYYY-MM-DDTHH:MM:SS[.fraction]Z" (UTC) or whole Unix
// seconds, as nanoseconds since 1970; nullopt for anything else.
std::optional<std::int64_t> ParseInstant(std::string_view text);

// Time moves only when Advance() or Set() is called.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(MonoTime start = MonoTime{}) : now_ns_(start.time_since_epoch().count()) {}
  MonoTime Now() const override { return MonoTime(Nanos(now_ns_.load(std::memory_order_acquire))); }
  WallTime WallNow() const override { return WallTime(Now().time_since_epoch()); }
  void Advance(Nanos by) { now_ns_.fetch_add(by.count(), std::memory_order_acq_rel); }
  void Set(MonoTime at) { now_ns_.store(at.time_since_epoch().count(), std::memory_order_release); }

 private:
  std::atomic<std::int64_t> now_ns_;
};

// Converts a duration to floating-point milliseconds or seconds (for reports and JSON).
inline double ToMillis(Nanos d) { return static_cast<double>(d.count()) / 1e6; }
inline double ToSeconds(Nanos d) { return static_cast<double>(d.count()) / 1e9; }
// Seconds or milliseconds as Nanos. A value past what Nanos holds (about +-292 years) saturates
// at Nanos::max() or Nanos::min(), and NaN gives 0: converting it as is would be undefined
// behaviour. Inputs from users are refused long before (kMaxDurationSeconds).
inline Nanos FromSeconds(double s) {
  constexpr double kLimit = 9.2e9;  // seconds; just under INT64_MAX nanoseconds
  if (!(s == s)) return Nanos(0);
  if (s >= kLimit) return Nanos::max();
  if (s <= -kLimit) return Nanos::min();
  return std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(s));
}
inline Nanos FromMillis(double ms) { return FromSeconds(ms / 1e3); }

// The longest duration bakeoff accepts from a user or derives from user input (a flag, a trace's
// arrival times scaled, a schedule's last instant): about 3 years, far inside what Nanos holds.
inline constexpr double kMaxDurationSeconds = 1e8;

// The wall clock now in UTC, ISO 8601 to the second ("2026-12-01T11:32:02Z"), and today's date
// ("2026-12-01"), for records that say when they were made.
std::string UtcNowIso();
std::string UtcTodayIso();

}  // namespace bakeoff

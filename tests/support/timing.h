// tests/support/timing.h
//
// Owns: the rule for tests that assert *timing fidelity* (a measured TTFT matches a scripted
// delay within 2 ms, the emulator keeps its cost formula within 5%). Such assertions are about
// correctness, not speed, but they only mean something on an optimised, uninstrumented build:
// under ASan/UBSan/TSan every instruction is several times slower and the timing claims are
// void. Those tests call BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS() first; the sanitizer run still
// executes every other test (and these run in the release build of the same `make test`).
#pragma once

#include <gtest/gtest.h>

namespace bakeoff::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace bakeoff::testing

#define BAKEOFF_SKIP_TIMING_UNDER_SANITIZERS()                                               \
  do {                                                                                       \
    if (::bakeoff::testing::kSanitizedBuild) {                                               \
      GTEST_SKIP() << "timing fidelity is only asserted on the optimised, uninstrumented build"; \
    }                                                                                        \
  } while (false)

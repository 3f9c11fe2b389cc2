// tests/unit/net/event_loop_test.cc
//
// Tests for net/event_loop.h: timers at an instant, cancellation, Run and Stop across threads.
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "net/event_loop.h"

namespace bakeoff::net {
namespace {

using namespace std::chrono_literals;

TEST(EventLoopTimingTest, RunAtFiresInOrderAtItsInstant) {
  EventLoop loop;
  const MonoTime base = std::chrono::steady_clock::now() + 20ms;
  std::vector<std::pair<int, Nanos>> fired;  // (id, lateness)
  for (int id : {3, 1, 2}) {
    const MonoTime at = base + id * 5ms;
    loop.RunAt(at,
               [&fired, id, at] { fired.emplace_back(id, std::chrono::steady_clock::now() - at); });
  }
  loop.RunUntilIdle();
  ASSERT_EQ(fired.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fired[i].first, i + 1);
    EXPECT_GE(fired[i].second.count(), 0);
    // Typically a few tens of microseconds; generous for a loaded CI machine.
    EXPECT_LT(fired[i].second, 10ms) << "timer " << fired[i].first;
  }
}

TEST(EventLoopTest, PastInstantRunsAtOnceAndCancelPreventsTheCall) {
  EventLoop loop;
  bool ran_past = false;
  bool ran_cancelled = false;
  loop.RunAt(std::chrono::steady_clock::now() - 1s, [&] { ran_past = true; });
  EventLoop::TimerPtr timer =
      loop.RunAt(std::chrono::steady_clock::now() + 10ms, [&] { ran_cancelled = true; });
  EventLoop::Cancel(timer);
  loop.RunUntilIdle();
  EXPECT_TRUE(ran_past);
  EXPECT_FALSE(ran_cancelled);
}

TEST(EventLoopTest, RunKeepsGoingUntilStopFromAnotherThread) {
  EventLoop loop;
  std::atomic<int> ran{0};
  std::thread other([&] {
    std::this_thread::sleep_for(20ms);
    loop.Post([&] { ++ran; });
    std::this_thread::sleep_for(20ms);
    loop.Post([&] { ++ran; });
    loop.Stop();
  });
  loop.Run();  // would return at once without the work guard: nothing is queued yet
  other.join();
  EXPECT_TRUE(loop.stopped());
  EXPECT_GE(ran.load(), 1);
}

TEST(EventLoopTest, StopBeforeRunReturnsAtOnce) {
  EventLoop loop;
  loop.Stop();
  bool ran = false;
  loop.Post([&] { ran = true; });
  loop.Run();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace bakeoff::net

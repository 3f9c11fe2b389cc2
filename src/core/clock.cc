#include "core/clock.h"

namespace bakeoff {

const Clock& RealClock() {
  static const SteadyClock clock;
  return clock;
}

}  // namespace bakeoff

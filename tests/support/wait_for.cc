#include "tests/support/wait_for.h"

#include <algorithm>
#include <cstdlib>

#include "absl/time/clock.h"

namespace egress::testing {

bool WaitFor(const std::function<bool()>& condition, absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (!condition()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

int TestTimeScale() {
  const char* scale = std::getenv("EGRESS_TEST_TIME_SCALE");
  return scale ? std::max(1, std::atoi(scale)) : 1;
}

absl::Duration Scaled(absl::Duration duration) { return duration * TestTimeScale(); }

}  // namespace egress::testing

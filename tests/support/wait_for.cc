#include "tests/support/wait_for.h"

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

}  // namespace egress::testing

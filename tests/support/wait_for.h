#ifndef EGRESS_TESTS_SUPPORT_WAIT_FOR_H_
#define EGRESS_TESTS_SUPPORT_WAIT_FOR_H_

#include <functional>

#include "absl/time/time.h"

namespace egress::testing {

// Asks `condition` every few milliseconds until it holds or `limit` has passed; whether it
// held. The one polling loop of the tests: they wait for a state (a count, a gauge, a log
// line), then assert on the state, never on how long it took. `limit` only bounds how long
// a test that is going to fail hangs, so it is generous.
bool WaitFor(const std::function<bool()>& condition, absl::Duration limit = absl::Seconds(5));

// EGRESS_TEST_TIME_SCALE (1 when unset): the sanitizer configs set it, as their builds run
// several times slower, and tests stretch their pauses and timeouts by it so that their
// scenarios keep their shape.
int TestTimeScale();
// `duration` stretched by TestTimeScale().
absl::Duration Scaled(absl::Duration duration);

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_WAIT_FOR_H_

#ifndef EGRESS_SERVICE_TRANSPORT_RESILIENCE_CIRCUIT_BREAKER_H_
#define EGRESS_SERVICE_TRANSPORT_RESILIENCE_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/transport/observer.h"
#include "service/transport/http/origin.h"
#include "service/transport/settings.h"

namespace egress::transport {

// What the end of a fetch says of its origin's health.
enum class FetchHealth {
  kSuccess,
  kFailure,  // the origin failed: connect, TLS, reset, protocol error, its own timeout, 5xx
  kNeutral,  // nothing: the caller cancelled or ran out of time, the policy or a local limit
};

// The health a fetch's end shows: `status` is the fetch's error, or OK with the response's
// `http_status`. The reason attached to the error decides (see ErrorReason): a caller's
// own deadline or cancellation, a policy denial or a local limit says nothing of the
// origin, so no caller can open another's breaker with short deadlines.
FetchHealth HealthOf(const absl::Status& status, int http_status, bool count_5xx);

// One origin's breaker, for GetPoolStats.
struct BreakerStats {
  std::string origin;
  BreakerState state = BreakerState::kClosed;
  uint32_t consecutive_failures = 0;
  absl::Duration open_remaining;  // kOpen only
  std::string last_failure;
};

// The breakers of every origin (CircuitBreakerSettings). Only origins with failures
// counted, or a breaker not closed, hold state (at most max_tracked). A full table makes
// room from the breaker that has held nothing back the longest, found in O(log n): a
// closed one (the least recently failed), an open one whose time is up, a half-open one
// whose probe no longer holds its slot. An open breaker, or a probe's slot, is never
// given up for room: past that, new origins are not tracked and their fetches go as
// without a breaker. A half-open breaker's probe holds its slot for kProbeHold at most
// (open_for if shorter): the others are refused with that retry delay, and the first to
// come back after it probes. Thread-safe.
class CircuitBreakers {
 public:
  // How long a half-open breaker's probe holds its slot at most: about a round trip.
  static constexpr absl::Duration kProbeHold = absl::Seconds(1);

  explicit CircuitBreakers(TransportObserver& observer, size_t max_tracked = 10000);

  // Whether a fetch to `origin` may go now. OK, with `probe` set when it is the
  // half-open breaker's probe; else UNAVAILABLE (reason CIRCUIT_OPEN, with a retry delay)
  // naming the origin and why. Every admitted fetch's end is given to Record.
  struct Admission {
    absl::Status status;
    uint64_t generation = 0;  // of the Reset it came after: older ends are not counted
    uint64_t probe = 0;       // the probe's number; 0: not a probe
  };
  Admission Admit(const Origin& origin, const CircuitBreakerSettings& settings, absl::Time now);
  // The end of an admitted fetch. `failure` says what failed, for the refusals' message.
  // Only the latest probe decides a half-open breaker; a fetch admitted before the last
  // Reset is ignored (it ran under thresholds that may no longer hold).
  void Record(const Origin& origin, const CircuitBreakerSettings& settings,
              const Admission& admission, FetchHealth health, absl::string_view failure,
              absl::Time now);
  // The breakers not closed, and closed ones with failures counted.
  std::vector<BreakerStats> Stats(absl::Time now) const;
  // Every breaker closed and forgotten (new breaker settings: their thresholds differ).
  void Reset();

 private:
  struct Breaker {
    Origin origin;
    BreakerState state = BreakerState::kClosed;
    uint32_t consecutive_failures = 0;
    absl::Time open_until;      // kOpen
    uint64_t probe = 0;         // kHalfOpen: the number of the probe under way, 0 if none
    absl::Time probe_started;   // ... since then
    std::string last_failure;
    // From when it holds nothing back (its place in evictable_); InfiniteFuture: never.
    absl::Time evictable_at = absl::InfiniteFuture();
  };
  // The breaker of `key`, made if there is room; null if not.
  Breaker* Track(const Origin& origin, const std::string& key, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `breaker` to its place in evictable_: from `at` on it may make room.
  void Index(const std::string& key, Breaker& breaker, absl::Time at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the breaker of `key` (closed, or given up for room).
  void Forget(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Open(const Origin& origin, Breaker& breaker, const CircuitBreakerSettings& settings,
            absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TransportObserver& observer_;
  const size_t max_tracked_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Breaker> breakers_ ABSL_GUARDED_BY(mu_);
  // The breakers that may make room, by when they may (see Breaker::evictable_at).
  std::set<std::pair<absl::Time, std::string>> evictable_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_probe_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_RESILIENCE_CIRCUIT_BREAKER_H_

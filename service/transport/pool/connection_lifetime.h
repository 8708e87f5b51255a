#ifndef EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_LIFETIME_H_
#define EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_LIFETIME_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "service/transport/http1/keep_alive_hint.h"
#include "service/transport/observer.h"

namespace egress::transport {

// How long a pooled connection may be reused: egressd's own limits beyond the idle
// timeout, and the margin kept from what the server announced.
struct LifetimeLimits {
  absl::Duration max_age = absl::ZeroDuration();  // 0 = unlimited
  uint32_t max_age_jitter_percent = 10;           // each connection's age is up to this shorter
  uint32_t max_requests = 0;                      // per connection; 0 = unlimited
  // An idle connection expires this long before the server's announced timeout (the
  // request must reach the server before it closes: a round trip and then some).
  absl::Duration hint_margin = absl::Seconds(1);
  bool honor_hints = true;  // false: the server's hint is not looked at
};

// What the decisions look at, of one connection.
struct ConnectionFacts {
  absl::Time created;
  int requests = 0;  // carried so far
  std::optional<KeepAliveHint> hint;
  double age_draw = 0;  // in [0, 1): where in the jitter range this connection's age falls
};

// max_age, shortened by age_draw * max_age_jitter_percent; infinite when unlimited.
absl::Duration AgeLimit(const LifetimeLimits& limits, double age_draw);

// At the end of an exchange (the response read or drained to its end): none when the
// connection may idle for the next request, else why it is retired. Never mid-exchange.
std::optional<CloseReason> RetireAfterExchange(const ConnectionFacts& connection,
                                               const LifetimeLimits& limits, absl::Time now);

// When a connection idle since `since` stops being reusable, and why: the idle timeout,
// the server's announced timeout less the margin (never later than the idle timeout),
// or its age limit, whichever comes first.
struct IdleDeadline {
  absl::Time at;
  CloseReason reason;
};
IdleDeadline IdleDeadlineOf(const ConnectionFacts& connection, absl::Time since,
                            absl::Duration idle_timeout, const LifetimeLimits& limits);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_LIFETIME_H_

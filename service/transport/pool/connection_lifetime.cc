#include "service/transport/pool/connection_lifetime.h"

namespace egress::transport {

absl::Duration AgeLimit(const LifetimeLimits& limits, double age_draw) {
  if (limits.max_age <= absl::ZeroDuration()) return absl::InfiniteDuration();
  const double shorter = age_draw * limits.max_age_jitter_percent / 100.0;
  return limits.max_age * (1.0 - shorter);
}

std::optional<CloseReason> RetireAfterExchange(const ConnectionFacts& connection,
                                               const LifetimeLimits& limits, absl::Time now) {
  if (const auto& hint = connection.hint; hint && limits.honor_hints) {
    if (hint->max && connection.requests >= static_cast<int64_t>(*hint->max)) {
      return CloseReason::kServerHint;
    }
    if (hint->timeout && *hint->timeout <= limits.hint_margin) return CloseReason::kServerHint;
  }
  if (limits.max_requests > 0 && connection.requests >= static_cast<int64_t>(limits.max_requests)) {
    return CloseReason::kMaxRequests;
  }
  if (now - connection.created >= AgeLimit(limits, connection.age_draw)) {
    return CloseReason::kMaxAge;
  }
  return std::nullopt;
}

IdleDeadline IdleDeadlineOf(const ConnectionFacts& connection, absl::Time since,
                            absl::Duration idle_timeout, const LifetimeLimits& limits) {
  IdleDeadline deadline{since + idle_timeout, CloseReason::kIdleTimeout};
  if (limits.honor_hints && connection.hint && connection.hint->timeout) {
    const absl::Time hinted = since + *connection.hint->timeout - limits.hint_margin;
    if (hinted < deadline.at) deadline = {hinted, CloseReason::kServerHint};
  }
  const absl::Time aged = connection.created + AgeLimit(limits, connection.age_draw);
  if (aged < deadline.at) deadline = {aged, CloseReason::kMaxAge};
  return deadline;
}

}  // namespace egress::transport

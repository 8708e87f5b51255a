#ifndef EGRESS_SERVICE_TRANSPORT_POOL_POOL_LIMITS_H_
#define EGRESS_SERVICE_TRANSPORT_POOL_POOL_LIMITS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/transport/policy/address_policy.h"
#include "service/transport/pool/connection_lifetime.h"
#include "service/transport/settings.h"

namespace egress::transport {

// What the pool keeps and allows, per origin.
struct PoolLimits {
  uint32_t max_idle_per_origin = 100;
  uint32_t max_conns_per_origin = 0;  // 0 = unlimited
  absl::Duration idle_timeout = absl::Seconds(90);
  uint32_t max_waiting = 256;  // requests queued for a connection; more fail at once
  // ADAPTIVE: a request finding no idle connection may wait for a draining one.
  bool drain_aware = false;
  absl::Duration min_dial_cost = absl::ZeroDuration();  // see DrainSettings::min_dial_cost
  // Max age and requests per connection, and the margin kept from the server's hints.
  LifetimeLimits lifetime{};
  // Idle connections kept ready (dialed in the background), within max_conns_per_origin.
  uint32_t min_idle = 0;
  // Whether connections may speak HTTP/2 (transport.http2.mode), and how long one may
  // idle before it is checked with a PING (0: never).
  Http2Mode http2_mode = Http2Mode::kAuto;
  absl::Duration http2_ping_interval = absl::ZeroDuration();
};

// The limits of each origin: the defaults, or those of the first matching host pattern.
struct PoolLimitsByHost {
  PoolLimits defaults;
  std::vector<std::pair<HostPattern, PoolLimits>> overrides;

  const PoolLimits& For(absl::string_view host) const {
    for (const auto& [pattern, limits] : overrides) {
      if (pattern.Matches(host)) return limits;
    }
    return defaults;
  }
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POOL_POOL_LIMITS_H_

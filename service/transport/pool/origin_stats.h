#ifndef EGRESS_SERVICE_TRANSPORT_POOL_ORIGIN_STATS_H_
#define EGRESS_SERVICE_TRANSPORT_POOL_ORIGIN_STATS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "service/transport/http1/keep_alive_hint.h"

namespace egress::transport {

// Per-origin counts, as GetPoolStats and tests see them.
struct OriginStats {
  std::string origin;
  int connecting = 0;
  int active = 0;
  int draining = 0;
  int idle = 0;
  int waiting = 0;      // requests queued for a connection
  int streams = 0;      // HTTP/2 streams leased on its connections
  // Response body bytes its HTTP/2 streams have received and callers not yet read.
  uint64_t http2_buffered_body_bytes = 0;
  uint64_t opened = 0;  // connections created for this origin
  uint64_t reused = 0;  // requests that got an idle connection
  absl::Duration oldest_idle_age;  // of the idle connection made longest ago; 0 when none
  uint64_t requests_served = 0;    // by the origin's open connections, together
  std::optional<KeepAliveHint> server_hint;  // the last one a returning connection had
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POOL_ORIGIN_STATS_H_

#ifndef EGRESS_SERVICE_TRANSPORT_DRAIN_DECISION_H_
#define EGRESS_SERVICE_TRANSPORT_DRAIN_DECISION_H_

#include <cstdint>
#include <optional>
#include <variant>

#include "service/transport/observer.h"
#include "service/transport/settings.h"

namespace egress::transport {

// What is known about an unfinished response body when its caller lets go of it.
struct UnreadBody {
  bool keep_alive = true;                     // neither side said Connection: close
  std::optional<uint64_t> remaining_length;   // Content-Length still unread; none if chunked
};

struct Drain {
  uint64_t max_bytes;  // give up once more than this has been read
  absl::Duration max_duration;
  friend bool operator==(const Drain& a, const Drain& b) {
    return a.max_bytes == b.max_bytes && a.max_duration == b.max_duration;
  }
};

// Either drain within the given caps, or skip (and close the connection) for a reason.
using DrainDecision = std::variant<Drain, DrainSkipReason>;

// Go 1.27's rule: drain unless the connection cannot be reused anyway
// (Connection: close), draining is off, or the known remaining length is over the cap.
DrainDecision DecideDrain(const DrainSettings& settings, const UnreadBody& body);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DRAIN_DECISION_H_

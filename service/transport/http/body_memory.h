#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_BODY_MEMORY_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_BODY_MEMORY_H_

#include <cstdint>

#include "absl/status/status.h"

namespace egress::transport {

// The response body memory a request may make egress hold, as the transport's user
// accounts for it (egressd: limits.buffered_body_budget_bytes). The transport reserves
// bytes before it lets a server send them to it (an HTTP/2 stream's flow-control window
// opens only as far as is reserved) and releases them as they are read or dropped.
// Thread-safe: called from the transport's loops. Held by shared_ptr by whatever holds
// bytes for the request, so it outlives them.
class BodyMemory {
 public:
  virtual ~BodyMemory() = default;

  // OK with `bytes` reserved, or why not, with nothing reserved: the status a request
  // that cannot reserve its first bytes fails with (the user's code and reason).
  virtual absl::Status TryReserve(uint64_t bytes) = 0;
  virtual void Release(uint64_t bytes) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_BODY_MEMORY_H_

#ifndef EGRESS_SERVICE_FETCH_OBSERVER_H_
#define EGRESS_SERVICE_FETCH_OBSERVER_H_

#include <cstdint>

#include "absl/time/time.h"
#include "grpcpp/support/status_code_enum.h"

namespace egress {

// What the gRPC front end reports: one call per finished Fetch or FetchStream.
// Thread-safe and non-blocking, like transport::TransportObserver.
class FetchObserver {
 public:
  virtual ~FetchObserver() = default;
  virtual void OnFetchDone(grpc::StatusCode code, absl::Duration duration) = 0;
  // Response body bytes that fetches hold now (limits.buffered_body_budget_bytes).
  virtual void OnBufferedBodyBytes(uint64_t in_use) = 0;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_OBSERVER_H_

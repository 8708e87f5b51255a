#ifndef EGRESS_SERVICE_STATUS_MAPPING_H_
#define EGRESS_SERVICE_STATUS_MAPPING_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace egress {

// The one place where the transport's errors become gRPC statuses. The codes are the
// same; the message is passed through unchanged, since it was written for the caller.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace egress

#endif  // EGRESS_SERVICE_STATUS_MAPPING_H_

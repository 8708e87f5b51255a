#ifndef EGRESS_SERVICE_FETCH_STATUS_MAPPING_H_
#define EGRESS_SERVICE_FETCH_STATUS_MAPPING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"
#include "service/base/error_reason.h"

namespace egress {

// The one place where egress's errors become gRPC statuses. The codes are the same; the
// message is passed through unchanged, since it was written for the caller. Every error
// carries google.rpc.ErrorInfo (domain "egress.v1") in its details: its reason (see
// ReasonOrDefault), and google.rpc.RetryInfo when a retry may succeed.
grpc::Status ToGrpcStatus(const absl::Status& status);
// The same with `reason` already decoded (ReasonOrDefault's, perhaps with more metadata),
// so that a failed fetch's reason is decoded once for its answer and its log line.
grpc::Status ToGrpcStatus(const absl::Status& status, const transport::ErrorReason& reason);

// The ErrorInfo reason of `status`: the one attached with transport::WithReason, or one
// that names the code's kind when none was (see egress.proto's list of reasons). Decodes
// the status's payloads; an empty reason when it is OK.
transport::ErrorReason ReasonOrDefault(const absl::Status& status);

// `status` with another message, its code and payloads (the error's reason) kept.
absl::Status WithMessage(const absl::Status& status, absl::string_view message);

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_STATUS_MAPPING_H_

#ifndef EGRESS_SERVICE_FETCH_STATUS_MAPPING_H_
#define EGRESS_SERVICE_FETCH_STATUS_MAPPING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace egress {

// The one place where egress's errors become gRPC statuses. The codes are the same; the
// message is passed through unchanged, since it was written for the caller. Every error
// carries google.rpc.ErrorInfo (domain "egress.v1") in its details: the reason attached
// with transport::WithReason, or one that names the code's kind when none was (see
// egress.proto's list of reasons), and google.rpc.RetryInfo when a retry may succeed.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The ErrorInfo reason ToGrpcStatus gives `status` (empty when it is OK).
std::string ReasonFor(const absl::Status& status);

// `status` with another message, its code and payloads (the error's reason) kept.
absl::Status WithMessage(const absl::Status& status, absl::string_view message);

// `status` with `trace_id` (the fetch's trace) in its ErrorInfo's metadata; OK unchanged.
absl::Status WithTraceId(absl::Status status, const std::string& trace_id);

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_STATUS_MAPPING_H_

#ifndef EGRESS_TESTS_SUPPORT_STATUS_DETAILS_H_
#define EGRESS_TESTS_SUPPORT_STATUS_DETAILS_H_

// What a gRPC status's details say, as a caller reads them.

#include <optional>

#include "absl/time/time.h"
#include "google/rpc/error_details.pb.h"
#include "grpcpp/support/status.h"

namespace egress::testing {

// The google.rpc.ErrorInfo in a status's details, if there is one.
std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const grpc::Status& status);
// The google.rpc.RetryInfo's delay in a status's details, if there is one.
std::optional<absl::Duration> RetryDelayOf(const grpc::Status& status);

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_STATUS_DETAILS_H_

#include "tests/support/status_details.h"

#include "google/rpc/status.pb.h"
#include "service/config/proto_time.h"

namespace egress::testing {
namespace {

// The details of a status, as google.rpc.Status; empty when it has none.
google::rpc::Status DetailsOf(const grpc::Status& status) {
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) details.Clear();
  return details;
}

}  // namespace

std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const grpc::Status& status) {
  const google::rpc::Status details = DetailsOf(status);
  for (const auto& detail : details.details()) {
    google::rpc::ErrorInfo info;
    if (detail.UnpackTo(&info)) return info;
  }
  return std::nullopt;
}

std::optional<absl::Duration> RetryDelayOf(const grpc::Status& status) {
  const google::rpc::Status details = DetailsOf(status);
  for (const auto& detail : details.details()) {
    google::rpc::RetryInfo retry;
    if (detail.UnpackTo(&retry)) return FromProto(retry.retry_delay());
  }
  return std::nullopt;
}

}  // namespace egress::testing

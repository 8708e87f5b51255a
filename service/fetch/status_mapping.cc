#include "service/fetch/status_mapping.h"

#include <optional>
#include <string>
#include <utility>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "service/config/proto_time.h"
#include "service/base/error_reason.h"
#include "service/fetch/utf8_text.h"

namespace egress {
namespace {

constexpr char kDomain[] = "egress.v1";

grpc::StatusCode GrpcCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case absl::StatusCode::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case absl::StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case absl::StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case absl::StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case absl::StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case absl::StatusCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case absl::StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case absl::StatusCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case absl::StatusCode::kUnauthenticated: return grpc::StatusCode::UNAUTHENTICATED;
    default: return grpc::StatusCode::INTERNAL;
  }
}

// The reason of an error that was given none where it was made: its code's kind.
const char* ReasonForCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_REQUEST";
    case grpc::StatusCode::PERMISSION_DENIED: return "POLICY_DENIED";
    case grpc::StatusCode::UNAVAILABLE: return "UPSTREAM_UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "LIMIT_EXCEEDED";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "INTERNAL";
  }
}

}  // namespace

transport::ErrorReason ReasonOrDefault(const absl::Status& status) {
  if (status.ok()) return {};
  auto reason = transport::ReasonOf(status);
  if (reason) return *std::move(reason);
  return transport::ErrorReason{ReasonForCode(GrpcCode(status.code())), {}, std::nullopt};
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return ToGrpcStatus(status, ReasonOrDefault(status));
}

grpc::Status ToGrpcStatus(const absl::Status& status, const transport::ErrorReason& reason) {
  if (status.ok()) return grpc::Status::OK;
  const grpc::StatusCode code = GrpcCode(status.code());
  // Messages may quote what a caller or upstream sent (a method's :path, a header): the
  // status details' message is a proto3 string, which must be UTF-8.
  const std::string message = EscapeNonUtf8(status.message());

  google::rpc::ErrorInfo info;
  info.set_domain(kDomain);
  info.set_reason(reason.reason);
  // Metadata may quote what a caller or upstream sent: proto3 strings must be UTF-8.
  for (const auto& [key, value] : reason.metadata) {
    (*info.mutable_metadata())[key] = EscapeNonUtf8(value);
  }
  google::rpc::Status details;
  details.set_code(code);
  details.set_message(message);
  details.add_details()->PackFrom(info);
  if (reason.retry_delay) {
    google::rpc::RetryInfo retry;
    ToProto(*reason.retry_delay, retry.mutable_retry_delay());
    details.add_details()->PackFrom(retry);
  }
  return grpc::Status(code, message, details.SerializeAsString());
}

absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  absl::Status result(status.code(), message);
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { result.SetPayload(url, payload); });
  return result;
}

}  // namespace egress

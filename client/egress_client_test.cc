// The client's reading of egressd's error details: a grpc::Status carrying a serialized
// google.rpc.Status, as in the grpc-status-details-bin trailer, becomes an absl::Status
// from which ErrorInfoOf and RetryDelayOf read the details back.
#include "client/egress_client.h"

#include <string>
#include <vector>

#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace egress::client {
namespace {

// What egressd sends for `code` and `message` with `details`.
grpc::Status WithDetails(grpc::StatusCode code, const std::string& message,
                         const std::vector<const google::protobuf::Message*>& details) {
  google::rpc::Status status;
  status.set_code(code);
  status.set_message(message);
  for (const auto* detail : details) status.add_details()->PackFrom(*detail);
  return grpc::Status(code, message, status.SerializeAsString());
}

google::rpc::ErrorInfo PolicyDenied() {
  google::rpc::ErrorInfo info;
  info.set_reason("POLICY_DENIED");
  info.set_domain("egress.v1");
  (*info.mutable_metadata())["rule"] = "builtin:loopback";
  (*info.mutable_metadata())["host"] = "::1";
  return info;
}

TEST(ErrorDetailsTest, ErrorInfoOfGivesTheReasonDomainAndMetadataEgressdSent) {
  const google::rpc::ErrorInfo sent = PolicyDenied();
  const absl::Status status = FromGrpcStatus(
      WithDetails(grpc::StatusCode::PERMISSION_DENIED, "egress policy denies it", {&sent}));
  EXPECT_TRUE(absl::IsPermissionDenied(status));
  EXPECT_EQ(status.message(), "egress policy denies it");
  const auto info = ErrorInfoOf(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "POLICY_DENIED");
  EXPECT_EQ(info->domain(), "egress.v1");
  EXPECT_EQ(info->metadata().at("rule"), "builtin:loopback");
  EXPECT_EQ(info->metadata().at("host"), "::1");
  EXPECT_FALSE(RetryDelayOf(status).has_value());
}

TEST(ErrorDetailsTest, RetryDelayOfGivesTheDelayOfRetryInfo) {
  google::rpc::ErrorInfo limit;
  limit.set_reason("CONCURRENCY_LIMIT");
  google::rpc::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(1);
  retry.mutable_retry_delay()->set_nanos(500'000'000);
  const absl::Status status = FromGrpcStatus(
      WithDetails(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many fetches", {&limit, &retry}));
  ASSERT_TRUE(ErrorInfoOf(status).has_value());
  EXPECT_EQ(ErrorInfoOf(status)->reason(), "CONCURRENCY_LIMIT");
  EXPECT_EQ(RetryDelayOf(status), absl::Milliseconds(1500));
}

TEST(ErrorDetailsTest, AnErrorWithoutDetailsHasNoErrorInfo) {
  const absl::Status status =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect"));
  EXPECT_TRUE(absl::IsUnavailable(status));
  EXPECT_EQ(status.message(), "failed to connect");
  EXPECT_FALSE(ErrorInfoOf(status).has_value());
  EXPECT_FALSE(RetryDelayOf(status).has_value());
}

TEST(ErrorDetailsTest, DetailsThatDoNotParseKeepTheCodeAndMessage) {
  const absl::Status status = FromGrpcStatus(
      grpc::Status(grpc::StatusCode::INTERNAL, "broken", std::string("\xff\xff\xff", 3)));
  EXPECT_TRUE(absl::IsInternal(status));
  EXPECT_EQ(status.message(), "broken");
  EXPECT_FALSE(ErrorInfoOf(status).has_value());
}

TEST(ErrorDetailsTest, AnOkStatusStaysOk) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace egress::client

// A failed fetch's reason is decoded from its status once, and that decoded reason (with
// what the call adds to it) is what the caller's ErrorInfo says.
#include "service/fetch/status_mapping.h"

#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "google/rpc/status.pb.h"
#include "tests/support/status_details.h"

namespace egress {
namespace {

TEST(StatusMappingTest, TheDecodedReasonWithMetadataAddedToItIsWhatTheCallerGets) {
  const absl::Status status = transport::WithReason(absl::UnavailableError("refused"),
                                                    "CONNECT_FAILED", {{"host", "a.test"}});
  transport::ErrorReason reason = ReasonOrDefault(status);
  reason.metadata.emplace_back("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736");
  const grpc::Status answer = ToGrpcStatus(status, reason);
  EXPECT_EQ(answer.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(answer.error_message(), "refused");
  const auto info = testing::ErrorInfoOf(answer);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "CONNECT_FAILED");
  EXPECT_EQ(info->metadata().count("host"), 1u);
  EXPECT_EQ(info->metadata().count("trace_id"), 1u);
  EXPECT_EQ(info->metadata().at("host"), "a.test");
  EXPECT_EQ(info->metadata().at("trace_id"), "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST(StatusMappingTest, ToGrpcStatusSendsTheReasonItIsGivenWithoutDecodingTheStatusAgain) {
  const absl::Status status = transport::WithReason(absl::UnavailableError("refused"), "ATTACHED");
  const transport::ErrorReason carried{"CARRIED", {}, absl::Seconds(2)};
  const grpc::Status answer = ToGrpcStatus(status, carried);
  EXPECT_EQ(testing::ErrorInfoOf(answer).value_or(google::rpc::ErrorInfo()).reason(), "CARRIED");
  EXPECT_EQ(testing::RetryDelayOf(answer), absl::Seconds(2));
}

TEST(StatusMappingTest, AnErrorWithoutAReasonIsGivenItsCodesKind) {
  EXPECT_EQ(ReasonOrDefault(absl::UnavailableError("down")).reason, "UPSTREAM_UNAVAILABLE");
  EXPECT_EQ(ReasonOrDefault(absl::DataLossError("lost")).reason, "INTERNAL");
  EXPECT_EQ(ReasonOrDefault(absl::OkStatus()).reason, "");
}

TEST(StatusMappingTest, AnOkStatusIsOkWhateverReasonItIsGiven) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus(), transport::ErrorReason{"X", {}, {}}).ok());
}

// A message may quote a caller's bytes (an unknown method's :path): the status details'
// message is a proto3 string, so bytes that are not UTF-8 are escaped, in both copies.
TEST(StatusMappingTest, AMessageQuotingBytesThatAreNotUtf8IsEscaped) {
  const grpc::Status answer = ToGrpcStatus(absl::UnimplementedError("no method /a\xff\xfe"));
  EXPECT_EQ(answer.error_message(), "no method /a\\xFF\\xFE");
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(answer.error_details()));
  EXPECT_EQ(details.message(), "no method /a\\xFF\\xFE");
}

}  // namespace
}  // namespace egress

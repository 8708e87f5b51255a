// The reason attached where an error is made reaches the caller as google.rpc.ErrorInfo.
#include "service/base/error_reason.h"

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "service/fetch/status_mapping.h"

namespace egress {
namespace {

google::rpc::Status DetailsOf(const grpc::Status& status) {
  google::rpc::Status details;
  EXPECT_TRUE(details.ParseFromString(status.error_details()));
  return details;
}

TEST(ErrorReasonTest, AReasonWithMetadataAndARetryDelayBecomesErrorInfoAndRetryInfo) {
  const absl::Status status = transport::WithReason(
      absl::ResourceExhaustedError("busy"), "ORIGIN_BUSY",
      {{"origin", "http://a:80"}, {"empty", ""}}, absl::Milliseconds(250));
  const grpc::Status answer = ToGrpcStatus(status);
  EXPECT_EQ(answer.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(answer.error_message(), "busy");
  const google::rpc::Status details = DetailsOf(answer);
  EXPECT_EQ(details.code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(details.message(), "busy");
  ASSERT_EQ(details.details_size(), 2);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "ORIGIN_BUSY");
  EXPECT_EQ(info.domain(), "egress.v1");
  EXPECT_EQ(info.metadata().at("origin"), "http://a:80");
  EXPECT_EQ(info.metadata().count("empty"), 0u);  // empty values are left out
  google::rpc::RetryInfo retry;
  ASSERT_TRUE(details.details(1).UnpackTo(&retry));
  EXPECT_EQ(retry.retry_delay().nanos(), 250'000'000);
}

TEST(ErrorReasonTest, ALaterReasonReplacesAnEarlierOneWhole) {
  const absl::Status first = transport::WithReason(absl::UnavailableError("x"), "FIRST",
                                                   {{"a", "1"}}, absl::Seconds(1));
  const auto reason = transport::ReasonOf(transport::WithReason(first, "SECOND", {{"b", "2"}}));
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(reason->reason, "SECOND");
  ASSERT_EQ(reason->metadata.size(), 1u);
  EXPECT_EQ(reason->metadata[0].first, "b");
  EXPECT_FALSE(reason->retry_delay.has_value());
}

TEST(ErrorReasonTest, AnErrorWithoutAReasonGetsItsCodesKindAndNoRetryInfo) {
  const google::rpc::Status details = DetailsOf(ToGrpcStatus(absl::UnavailableError("down")));
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.reason(), "UPSTREAM_UNAVAILABLE");
}

// A caller's identity from binary metadata, quoted back: every client's protobuf parser
// must still read the details.
TEST(ErrorReasonTest, MetadataThatIsNotUtf8IsEscapedSoThatTheDetailsParse) {
  const grpc::Status answer = ToGrpcStatus(transport::WithReason(
      absl::PermissionDeniedError("no"), "POLICY_DENIED", {{"caller", "\xff\xfe"}}));
  google::rpc::ErrorInfo info;
  ASSERT_TRUE(DetailsOf(answer).details(0).UnpackTo(&info));
  EXPECT_EQ(info.metadata().at("caller"), "\\xFF\\xFE");
}

TEST(ErrorReasonTest, OkStaysOkWithoutDetails) {
  EXPECT_TRUE(transport::WithReason(absl::OkStatus(), "X").ok());
  const grpc::Status answer = ToGrpcStatus(absl::OkStatus());
  EXPECT_TRUE(answer.ok());
  EXPECT_TRUE(answer.error_details().empty());
}

}  // namespace
}  // namespace egress

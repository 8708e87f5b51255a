#include "service/fetch/request_mapping.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "service/transport/settings.h"

namespace egress::fetch {
namespace {

using ::testing::Contains;
using ::testing::Pair;

egress::v1::FetchRequest Fetch(const std::string& url) {
  egress::v1::FetchRequest request;
  request.set_url(url);
  return request;
}

std::string ReasonOf(const absl::Status& status) {
  const auto reason = transport::ReasonOf(status);
  return reason ? reason->reason : "";
}

TEST(ToHttpRequest, TheBodyMovesIntoTheHttpRequest) {
  auto request = Fetch("http://a.test/upload");
  request.set_method("POST");
  request.set_body("payload");
  auto http = ToHttpRequest(request, FetchLimits());
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->method, "POST");
  EXPECT_EQ(http->body.view(), "payload");
  EXPECT_TRUE(request.body().empty());
}

TEST(ToHttpRequest, ValueBytesWinOverValue) {
  auto request = Fetch("http://a.test/");
  auto* header = request.add_headers();
  header->set_name("X-Latin");
  header->set_value("caf\xc3\xa9");
  header->set_value_bytes("caf\xe9");
  auto http = ToHttpRequest(request, FetchLimits());
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_THAT(http->headers, Contains(Pair("X-Latin", "caf\xe9")));
  EXPECT_EQ(HeaderValue(request, "x-latin"), "caf\xe9");
}

TEST(ToHttpRequest, ABodyOverTheLimitIsResourceExhaustedAndRequestTooLarge) {
  FetchLimits limits;
  limits.max_request_body_bytes = 4;
  auto request = Fetch("http://a.test/");
  request.set_body("12345");
  auto http = ToHttpRequest(request, limits);
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(http.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(http.status()), "REQUEST_TOO_LARGE");
}

TEST(ToHttpRequest, HeadersOverTheLimitCountNameValueAndFourBytesEach) {
  FetchLimits limits;
  limits.max_request_header_bytes = 10;  // "ab" + "cdef" + 4 fits exactly
  auto request = Fetch("http://a.test/");
  auto* header = request.add_headers();
  header->set_name("ab");
  header->set_value("cdef");
  EXPECT_TRUE(ToHttpRequest(request, limits).ok());
  header->set_value("cdefg");
  auto http = ToHttpRequest(request, limits);
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(http.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(http.status()), "REQUEST_TOO_LARGE");
}

TEST(ToHttpRequest, MaxAttemptsAboveTheLimitIsInvalidArgument) {
  auto request = Fetch("http://a.test/");
  request.set_max_attempts(transport::kMaxAttempts + 1);
  auto http = ToHttpRequest(request, FetchLimits());
  ASSERT_FALSE(http.ok());
  EXPECT_EQ(http.status().code(), absl::StatusCode::kInvalidArgument);
  request.set_max_attempts(transport::kMaxAttempts);
  http = ToHttpRequest(request, FetchLimits());
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->max_attempts, transport::kMaxAttempts);
}

}  // namespace
}  // namespace egress::fetch

#include "service/fetch/redirects.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"

namespace egress::fetch {
namespace {

using ::testing::Contains;
using ::testing::Not;
using ::testing::Pair;

transport::HttpRequest Request(const std::string& method, const std::string& url,
                               transport::HeaderList headers, std::string body) {
  auto request = transport::MakeRequest(method, url, std::move(headers), std::move(body));
  EXPECT_TRUE(request.ok()) << request.status();
  return *std::move(request);
}

const std::vector<std::string> kStrip = {"authorization", "cookie"};

TEST(NextHop, ARelativeLocationResolvesAgainstTheCurrentUrl) {
  const auto current = Request("GET", "http://a.test/x/y?q=1", {}, "");
  std::string location = "../z?r=2";
  auto next = NextHop(current, "http://a.test/x/y?q=1", location, 302, kStrip);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(location, "http://a.test/z?r=2");
  EXPECT_EQ(next->target, "/z?r=2");
  EXPECT_EQ(next->method, "GET");
}

TEST(NextHop, A303AfterAPostBecomesAGetWithoutABody) {
  const auto current = Request("POST", "http://a.test/form", {}, "payload");
  std::string location = "/done";
  auto next = NextHop(current, "http://a.test/form", location, 303, kStrip);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->method, "GET");
  EXPECT_TRUE(next->body.empty());
}

TEST(NextHop, A307KeepsTheMethodAndTheBody) {
  const auto current = Request("POST", "http://a.test/form", {}, "payload");
  std::string location = "/again";
  auto next = NextHop(current, "http://a.test/form", location, 307, kStrip);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->method, "POST");
  EXPECT_EQ(next->body.view(), "payload");
}

TEST(NextHop, AHopToAnotherOriginDropsTheStrippedHeadersAndKeepsTheRest) {
  const auto current = Request(
      "GET", "http://a.test/", {{"Authorization", "secret"}, {"X-Trace", "t"}}, "");
  std::string location = "http://b.test/";
  auto next = NextHop(current, "http://a.test/", location, 302, kStrip);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(next->headers, Not(Contains(Pair("Authorization", "secret"))));
  EXPECT_THAT(next->headers, Contains(Pair("X-Trace", "t")));
}

TEST(NextHop, AHopWithinTheOriginKeepsTheStrippedHeaders) {
  const auto current = Request("GET", "http://a.test/", {{"Authorization", "secret"}}, "");
  std::string location = "/elsewhere";
  auto next = NextHop(current, "http://a.test/", location, 302, kStrip);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_THAT(next->headers, Contains(Pair("Authorization", "secret")));
}

TEST(NextHop, AnUnparsableLocationIsUnavailableWithReasonInvalidRedirect) {
  const auto current = Request("GET", "http://a.test/", {}, "");
  std::string location = "http://a b/";
  auto next = NextHop(current, "http://a.test/", location, 302, kStrip);
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable);
  const auto reason = transport::ReasonOf(next.status());
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(reason->reason, "INVALID_REDIRECT");
}

TEST(RedirectLocation, OnlyARedirectStatusWithALocationIsARedirect) {
  transport::Response response;
  response.head.headers = {{"Location", "/next"}};
  for (int code : {301, 302, 303, 307, 308}) {
    response.head.status_code = code;
    EXPECT_EQ(RedirectLocation(response), "/next") << code;
  }
  for (int code : {200, 300, 304, 404}) {
    response.head.status_code = code;
    EXPECT_EQ(RedirectLocation(response), std::nullopt) << code;
  }
  response.head.status_code = 302;
  response.head.headers.clear();
  EXPECT_EQ(RedirectLocation(response), std::nullopt);
}

}  // namespace
}  // namespace egress::fetch

#include "service/transport/http2/request_headers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace egress::transport::http2 {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Field = std::pair<std::string, std::string>;

HttpRequest Request(const std::string& method, const std::string& url, HeaderList headers = {},
                    std::string body = "") {
  auto request = MakeRequest(method, url, std::move(headers), std::move(body));
  EXPECT_TRUE(request.ok()) << request.status();
  return request.value_or(HttpRequest{});
}

TEST(RequestHeaderBlock, PseudoHeadersComeFirstAndTheAuthorityLeavesOutTheDefaultPort) {
  auto block = RequestHeaderBlock(Request("GET", "https://Example.com/a?b=c", {{"Accept", "*/*"}}));
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_THAT(*block, ElementsAre(Field(":method", "GET"), Field(":scheme", "https"),
                                  Field(":authority", "example.com"), Field(":path", "/a?b=c"),
                                  Field("accept", "*/*")));
}

// A caller's worst shape within the default 64 KiB of headers: a Connection field naming
// one option 16,000 times and 6,000 fields besides. Each field is looked up among the
// options: in a list, 10^8 comparisons per fetch (hours at the configurable 16 MiB); in
// a set, one lookup each.
TEST(RequestHeaderBlock, ManyConnectionOptionsAndManyFieldsAreSortedOut) {
  std::string options = "x-hop";
  for (int i = 0; i < 16000; ++i) options += ",b";
  HeaderList headers = {{"Connection", options}};
  for (int i = 0; i < 6000; ++i) headers.emplace_back(i % 2 ? "b" : "a", "");
  headers.emplace_back("X-Hop", "1");
  auto block = RequestHeaderBlock(Request("GET", "http://h/", std::move(headers)));
  ASSERT_TRUE(block.ok()) << block.status();
  ASSERT_EQ(block->size(), 4u + 3000u);  // the pseudo-headers and the fields named "a"
  EXPECT_EQ(block->back(), Field("a", ""));
}

TEST(RequestHeaderBlock, AuthorityKeepsAnotherPortAndBracketsIpv6) {
  auto block = RequestHeaderBlock(Request("GET", "http://[::1]:8080/"));
  ASSERT_TRUE(block.ok());
  EXPECT_EQ((*block)[2], Field(":authority", "[::1]:8080"));
}

TEST(RequestHeaderBlock, ConnectionSpecificFieldsAreLeftOut) {
  auto block = RequestHeaderBlock(Request(
      "GET", "http://h/",
      {{"Connection", "keep-alive, X-Hop"}, {"X-Hop", "1"}, {"Keep-Alive", "timeout=5"},
       {"Proxy-Connection", "keep-alive"}, {"TE", "gzip"}, {"X-Kept", "yes"}}));
  ASSERT_TRUE(block.ok());
  EXPECT_THAT(*block, ElementsAre(Field(":method", "GET"), Field(":scheme", "http"),
                                  Field(":authority", "h"), Field(":path", "/"),
                                  Field("x-kept", "yes")));
}

TEST(RequestHeaderBlock, TeTrailersIsKept) {
  auto block = RequestHeaderBlock(Request("GET", "http://h/", {{"TE", " Trailers "}}));
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->back(), Field("te", "Trailers"));
}

TEST(RequestHeaderBlock, ContentLengthAsOnHttp11) {
  auto post = RequestHeaderBlock(Request("POST", "http://h/", {}, ""));
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->back(), Field("content-length", "0"));
  auto body = RequestHeaderBlock(Request("PATCH", "http://h/", {}, "12345"));
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(body->back(), Field("content-length", "5"));
  auto get = RequestHeaderBlock(Request("GET", "http://h/"));
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->back(), Field(":path", "/"));
}

TEST(RequestHeaderBlock, RequestChangedAfterMakeRequestIsRefusedAsOnHttp11) {
  HttpRequest request = Request("GET", "http://h/");
  request.headers.emplace_back("X-Evil", "a\r\nb");
  auto block = RequestHeaderBlock(request);
  EXPECT_TRUE(absl::IsInvalidArgument(block.status())) << block.status();
  EXPECT_THAT(block.status().message(), HasSubstr("forbidden character (CR)"));
}

}  // namespace
}  // namespace egress::transport::http2

#include "service/transport/http/request.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"

namespace egress::transport {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MakeRequest, EmptyMethodMeansGetAndTargetKeepsPathAndQuery) {
  auto request = MakeRequest("", "https://Example.com/a/b?c=d#frag", {}, "");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->method, "GET");
  EXPECT_TRUE(request->origin.tls);
  EXPECT_EQ(request->origin.host, "example.com");
  EXPECT_EQ(request->origin.port, 443);
  EXPECT_EQ(request->target, "/a/b?c=d");
  EXPECT_EQ(request->origin.Key(), "https://example.com:443");
  EXPECT_EQ(request->origin.HostHeader(), "example.com");
}

TEST(MakeRequest, ExplicitPortAndEmptyPath) {
  auto request = MakeRequest("GET", "http://127.0.0.1:8080", {}, "");
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->target, "/");
  EXPECT_EQ(request->origin.Key(), "http://127.0.0.1:8080");
  EXPECT_EQ(request->origin.HostHeader(), "127.0.0.1:8080");
}

TEST(MakeRequest, Ipv6LiteralIsBracketedInKeyAndHostHeader) {
  auto request = MakeRequest("GET", "http://[::1]:8080/x", {}, "");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->origin.host, "::1");
  EXPECT_EQ(request->origin.Key(), "http://[::1]:8080");
  EXPECT_EQ(request->origin.HostHeader(), "[::1]:8080");
}

// Every spelling of an address is that address from the URL on: the rules, the pool and
// the dial see one host (as WHATWG URL parsers make it), and so does the Host header.
TEST(MakeRequest, EverySpellingOfAnAddressBecomesItsOneText) {
  for (const char* host : {"127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.1"}) {
    auto request = MakeRequest("GET", absl::StrCat("http://", host, ":8080/"), {}, "");
    ASSERT_TRUE(request.ok()) << host << ": " << request.status();
    EXPECT_EQ(request->origin.host, "127.0.0.1") << host;
    EXPECT_EQ(request->origin.HostHeader(), "127.0.0.1:8080") << host;
  }
  auto mapped = MakeRequest("GET", "http://[0:0::ffff:7f00:1]/", {}, "");
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(mapped->origin.host, "::ffff:127.0.0.1");
}

// A host of an address's shape that is no address is refused, never looked up as a name.
TEST(MakeRequest, AHostShapedLikeAnAddressThatIsNoneIsInvalidArgument) {
  for (const char* host : {"1.2.3.999", "10.0.0.256", "a.0x7g"}) {
    auto request = MakeRequest("GET", absl::StrCat("http://", host, "/"), {}, "");
    ASSERT_FALSE(request.ok()) << host;
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(request.status().message()),
                HasSubstr("is neither an IP address nor a name"))
        << host;
  }
}

TEST(MakeRequest, UserinfoIsNeverSent) {
  auto request = MakeRequest("GET", "http://user:pw@example.com/p", {}, "");
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->origin.host, "example.com");
  EXPECT_EQ(request->target, "/p");
}

struct BadCase {
  const char* name;
  const char* method;
  const char* url;
  HeaderList headers;
  const char* words;
};

class BadRequestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestTest, IsInvalidArgumentNamingTheProblem) {
  const BadCase& c = GetParam();
  auto request = MakeRequest(c.method, c.url, c.headers, "");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()), HasSubstr(c.words));
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadRequestTest,
    ::testing::Values(
        BadCase{"not_a_url", "GET", "not a url", {}, "not a valid absolute URL"},
        BadCase{"relative", "GET", "/path", {}, "not a valid absolute URL"},
        BadCase{"ftp", "GET", "ftp://h/x", {}, "only http and https"},
        BadCase{"no_host", "GET", "http:///x", {}, "has no host"},
        BadCase{"port_zero", "GET", "http://h:0/", {}, "invalid port"},
        // Found by fuzz/request_fuzzer.cc: Boost.URL wraps the number, and reads
        // "8p80" as port 8 followed by the path "p80/a".
        BadCase{"port_over_65535", "GET", "http://h:99999/", {}, "99999/\" has an invalid port"},
        BadCase{"port_not_digits", "GET", "http://[::1]:8p80/a", {}, "path must start with"},
        BadCase{"method_space", "GE T", "http://h/", {}, "method"},
        BadCase{"header_cr", "GET", "http://h/", {{"X-A", "v\rX"}}, "(CR)"},
        BadCase{"header_lf", "GET", "http://h/", {{"X-A", "v\nX-B: 1"}}, "(LF)"},
        BadCase{"header_nul", "GET", "http://h/", {{"X-A", std::string("v\0", 2)}}, "(NUL)"},
        BadCase{"header_name_space", "GET", "http://h/", {{"X A", "v"}}, "not a valid HTTP token"},
        BadCase{"header_name_colon", "GET", "http://h/", {{"X:A", "v"}}, "not a valid HTTP token"},
        BadCase{"header_name_empty", "GET", "http://h/", {{"", "v"}}, "not a valid HTTP token"},
        BadCase{"host_header", "GET", "http://h/", {{"Host", "evil"}}, "set by egress"},
        BadCase{"content_length", "GET", "http://h/", {{"content-length", "5"}}, "set by egress"},
        BadCase{"transfer_encoding", "GET", "http://h/", {{"Transfer-Encoding", "chunked"}},
                "set by egress"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

// What egress cannot send as asked is refused before anything is sent; Beast would
// throw on some of it while writing the request.
TEST(MakeRequest, ConnectIsInvalidArgumentWhateverItsCase) {
  for (const char* method : {"CONNECT", "connect"}) {
    auto request = MakeRequest(method, "http://h:443/", {}, "");
    ASSERT_FALSE(request.ok()) << method;
    EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
    EXPECT_THAT(std::string(request.status().message()),
                HasSubstr("method CONNECT asks for a tunnel, which egress does not open"));
  }
}

// A method is a token of any length to HTTP; egress sends at most 64 bytes of one (the
// longest registered is 17), so that a caller cannot fill the request line.
TEST(MakeRequest, AMethodOver64BytesIsInvalidArgument) {
  EXPECT_TRUE(MakeRequest(std::string(64, 'M'), "http://h/", {}, "").ok());
  auto request = MakeRequest(std::string(65, 'M'), "http://h/", {}, "");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()),
              HasSubstr("is longer than the 64 bytes egress sends"));
  const std::optional<ErrorReason> reason = ReasonOf(request.status());
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(reason->reason, "INVALID_METHOD");
}

TEST(MakeRequest, TraceWithABodyIsInvalidArgument) {
  auto request = MakeRequest("TRACE", "http://h/", {}, "x");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()),
              HasSubstr("method TRACE must not have a body (RFC 9110 9.3.8), and this one has 1 "
                        "bytes"));
}

TEST(MakeRequest, TraceWithoutABodyIsAccepted) {
  EXPECT_TRUE(MakeRequest("TRACE", "http://h/", {}, "").ok());
}

TEST(MakeRequest, AnUpgradeHeaderIsInvalidArgument) {
  auto request = MakeRequest("GET", "http://h/", {{"Upgrade", "websocket"}}, "");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()),
              HasSubstr("header \"Upgrade\" asks to switch protocols"));
}

TEST(MakeRequest, ConnectionUpgradeAmongOtherOptionsIsInvalidArgument) {
  auto request = MakeRequest("GET", "http://h/", {{"Connection", "keep-alive, Upgrade"}}, "");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()), HasSubstr("asks to switch protocols"));
}

TEST(MakeRequest, ConnectionKeepAliveIsAccepted) {
  EXPECT_TRUE(MakeRequest("GET", "http://h/", {{"Connection", "keep-alive"}}, "").ok());
}

TEST(MakeRequest, AHeaderValueOverWhatOneFieldHoldsIsInvalidArgument) {
  auto request = MakeRequest("GET", "http://h/", {{"X-Big", std::string(65534, 'v')}}, "");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()),
              HasSubstr("header \"X-Big\" is 65534 bytes long; a header name or value may have "
                        "at most 65533"));
}

TEST(MakeRequest, APathAndQueryOverWhatOneFieldHoldsIsInvalidArgument) {
  const std::string path = "/" + std::string(65531, 'p');  // "?q" makes it 65534
  EXPECT_TRUE(MakeRequest("GET", "http://h" + path + "?", {}, "").ok());
  auto request = MakeRequest("GET", "http://h" + path + "?q", {}, "");
  ASSERT_FALSE(request.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(request.status()));
  EXPECT_THAT(std::string(request.status().message()),
              HasSubstr("the URL's path and query are 65534 bytes; egress sends at most 65533"));
}

TEST(HttpRequest, IdempotentMethodsAreTheRfcOnes) {
  for (const char* method : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
    EXPECT_TRUE(MakeRequest(method, "http://h/", {}, "")->IsIdempotent()) << method;
  }
  for (const char* method : {"POST", "PATCH", "get"}) {
    EXPECT_FALSE(MakeRequest(method, "http://h/", {}, "")->IsIdempotent()) << method;
  }
}

// The bytes on the wire, as Beast's serializer wrote them before: Host first, the
// caller's headers in order, Content-Length only with a body or for a method that
// announces one.
TEST(SerializeRequestHead, WritesTheRequestLineHostHeadersAndLengthButLeavesTheBodyOut) {
  auto get = MakeRequest("GET", "http://example.com:8080/a?b", {{"X-One", "1"}, {"x-two", "2"}}, "");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(*SerializeRequestHead(*get),
            "GET /a?b HTTP/1.1\r\nHost: example.com:8080\r\nX-One: 1\r\nx-two: 2\r\n\r\n");
  auto post = MakeRequest("POST", "https://example.com/p", {}, "hello");
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(*SerializeRequestHead(*post),
            "POST /p HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(post->body.view(), "hello");
  for (const char* method : {"POST", "PUT", "OPTIONS"}) {
    EXPECT_THAT(*SerializeRequestHead(*MakeRequest(method, "http://h/", {}, "")),
                HasSubstr("\r\nContent-Length: 0\r\n\r\n"))
        << method;
  }
  for (const char* method : {"GET", "DELETE", "PATCH"}) {
    EXPECT_THAT(*SerializeRequestHead(*MakeRequest(method, "http://h/", {}, "")),
                Not(HasSubstr("Content-Length")))
        << method;
  }
  EXPECT_THAT(*SerializeRequestHead(*MakeRequest("DELETE", "http://h/", {}, "x")),
              HasSubstr("\r\nContent-Length: 1\r\n\r\n"));
  // Spaces and tabs around a value are not part of it (Beast trimmed them too).
  EXPECT_THAT(*SerializeRequestHead(*MakeRequest("GET", "http://h/", {{"X-Sig", " a b\t"}, {"X-E", "  "}}, "")),
              HasSubstr("\r\nX-Sig: a b\r\nX-E: \r\n\r\n"));
}

// A redirect's next hop and every retry attempt are copies of the request: they send
// the one body, not bytes of their own.
TEST(RequestBody, CopiesOfARequestShareItsBodyBytes) {
  auto put = MakeRequest("PUT", "http://h/", {}, std::string(1 << 20, 'b'));
  ASSERT_TRUE(put.ok());
  const HttpRequest attempt = *put;
  EXPECT_EQ(attempt.body.size(), size_t{1} << 20);
  EXPECT_EQ(attempt.body.view().data(), put->body.view().data());
  EXPECT_TRUE(MakeRequest("GET", "http://h/", {}, "")->body.empty());
}

// The defence behind MakeRequest: a request changed after it was made cannot put a CR
// or LF, or a body where HTTP forbids one, on the wire.
TEST(SerializeRequestHead, RefusesWhatMakeRequestWouldHaveRefused) {
  auto base = MakeRequest("GET", "http://h/", {}, "");
  ASSERT_TRUE(base.ok());
  std::vector<HttpRequest> bad(7, *base);
  bad[0].headers = {{"X", "a\r\nInjected: 1"}};
  bad[1].headers = {{"Bad Name", "v"}};
  bad[2].target = "/a HTTP/1.1\r\nX: y";
  bad[3].method = "GET /x";
  bad[4].method = "TRACE";
  bad[4].body = "x";
  bad[5].headers = {{"Content-Length", "5"}};
  bad[6].origin.host = "h\r\nX: y";
  for (size_t i = 0; i < bad.size(); ++i) {
    const auto wire = SerializeRequestHead(bad[i]);
    EXPECT_TRUE(absl::IsInvalidArgument(wire.status())) << i << ": " << wire.status();
  }
}

TEST(KeepsAlive, UnlessAConnectionHeaderNamesClose) {
  EXPECT_TRUE(KeepsAlive(*MakeRequest("GET", "http://h/", {{"Connection", "keep-alive"}}, "")));
  EXPECT_FALSE(KeepsAlive(*MakeRequest("GET", "http://h/", {{"connection", "foo, Close"}}, "")));
  EXPECT_FALSE(
      KeepsAlive(*MakeRequest("GET", "http://h/", {{"X", "1"}, {"Connection", "close"}}, "")));
  EXPECT_TRUE(KeepsAlive(*MakeRequest("GET", "http://h/", {{"X-Connection", "close"}}, "")));
}

}  // namespace
}  // namespace egress::transport

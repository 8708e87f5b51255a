// What the access log shows of a caller's URL: credentials redacted, and bounded, whether
// or not the URL parses.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "service/access_log/access_log.h"
#include "service/base/error_reason.h"

namespace egress {
namespace {

constexpr size_t kMax = AccessLog::kMaxLoggedBytes;

TEST(LoggedUrlTest, UserinfoAndQueryAreRedactedAndTheFragmentDropped) {
  EXPECT_EQ(AccessLog::LoggedUrl("http://user:secret@h.test/x?token=1#f", false),
            "http://REDACTED@h.test/x?REDACTED");
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/x?page=2#f", true), "http://h.test/x?page=2");
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/x", false), "http://h.test/x");
}

// A megabyte path parses: it was logged whole, one line of a megabyte per refused call.
TEST(LoggedUrlTest, ALongUrlThatParsesIsCut) {
  const std::string logged =
      AccessLog::LoggedUrl("http://h.test/" + std::string(1 << 20, 'a'), false);
  EXPECT_EQ(logged.size(), kMax + 3);
  EXPECT_EQ(logged.substr(0, 14), "http://h.test/");
  EXPECT_EQ(logged.substr(kMax), "...");
  const std::string with_query =
      AccessLog::LoggedUrl("http://h.test/" + std::string(1 << 20, 'a') + "?k=secret", false);
  EXPECT_EQ(with_query.size(), kMax + 3);
  EXPECT_EQ(with_query.find("secret"), std::string::npos);
}

// "%zz" is no escape: the URL does not parse, and its credentials are redacted anyway.
TEST(LoggedUrlTest, AUrlThatDoesNotParseLosesItsCredentials) {
  EXPECT_EQ(AccessLog::LoggedUrl("http://user:secret@h.test/%zz", false),
            "http://REDACTED@h.test/%zz");
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/%zz?token=secret#f", false), "http://h.test/%zz");
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/%zz?page=2#f", true), "http://h.test/%zz?page=2");
  EXPECT_EQ(AccessLog::LoggedUrl("user:secret@h.test/%zz", false), "REDACTED@h.test/%zz");
  const std::string long_one =
      AccessLog::LoggedUrl("http://" + std::string(1 << 20, 'a') + "/%zz", false);
  EXPECT_EQ(long_one.size(), kMax + 3);
}

// URLs that parse as something else than the caller meant: no userinfo to the parser,
// credentials to the caller.
TEST(LoggedUrlTest, UserinfoTheParserDoesNotSeeIsRedactedToo) {
  // The '#' may begin a fragment holding the '@': what follows the '@' goes too.
  EXPECT_EQ(AccessLog::LoggedUrl("http://bob:pass#word@h.test/x", false), "http://REDACTED@");
  EXPECT_EQ(AccessLog::LoggedUrl("http://bob:pa?ss@h.test/x", true), "http://REDACTED@h.test/x");
  EXPECT_EQ(AccessLog::LoggedUrl("user:secret@h.test/zz", false), "REDACTED@h.test/zz");
  EXPECT_EQ(AccessLog::LoggedUrl("http:user:secret@h.test/x", false), "REDACTED@h.test/x");
  // Found by fuzz/url_redaction_fuzzer.cc: a second '@' in the authority (the parser's
  // userinfo ends at the first), an '@' before the first "://", and a query holding the
  // last '@' in a URL that does not parse.
  EXPECT_EQ(AccessLog::LoggedUrl("https://u@v:secret@h.test/", false), "https://REDACTED@h.test/");
  EXPECT_EQ(AccessLog::LoggedUrl("u:secret@h://x@y", false), "REDACTED@y");
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/a b?token=x@secret", false), "http://REDACTED@");
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/a b?token=x", false), "http://h.test/a b");
  // An '@' in a path is no userinfo.
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/users/a@b.test", false),
            "http://h.test/users/a@b.test");
}

// Error messages quote the caller's URL, and upstreams' Locations: each is logged as the
// url field is, whatever it holds (a space, a quote, no scheme).
TEST(LoggedUrlTest, TheUrlAnErrorMessageQuotesIsRedacted) {
  const auto logged = [](absl::string_view url) {
    return AccessLog::LoggedMessage(
        transport::UrlError(absl::StatusCode::kInvalidArgument, "URL ", url, " is bad"), false);
  };
  EXPECT_EQ(logged("http://user:secret@h.test/%zz"), "URL \"http://REDACTED@h.test/%zz\" is bad");
  EXPECT_EQ(logged("https://h.test/cb?token=secret"), "URL \"https://h.test/cb?REDACTED\" is bad");
  EXPECT_EQ(logged("http://h.test/a b?token=secret"), "URL \"http://h.test/a b\" is bad");
  EXPECT_EQ(logged("http://h.test/a\"b?token=secret"), "URL \"http://h.test/a\\\"b\" is bad");
  EXPECT_EQ(logged("/a<b?token=secret#f"), "URL \"/a<b\" is bad");
  // The caller's message is the same with the URL as it came.
  EXPECT_EQ(transport::UrlError(absl::StatusCode::kInvalidArgument, "URL ",
                                "/a b?token=secret", " is bad")
                .message(),
            "URL \"/a b?token=secret\" is bad");
}

// A message is cut after its URL is redacted, and nothing else in it is read as a URL.
TEST(LoggedUrlTest, AnErrorMessageIsBoundedAndQuotesNoOtherUrl) {
  EXPECT_EQ(AccessLog::LoggedMessage(absl::InternalError(std::string(1 << 20, 'x')), false).size(),
            kMax);
  EXPECT_EQ(AccessLog::LoggedMessage(absl::UnavailableError("connect to http://h.test:80 failed"),
                                     false),
            "connect to http://h.test:80 failed");
  // A quote across the cut: cut first, it would no longer be the URL's whole quote.
  const std::string message = AccessLog::LoggedMessage(
      transport::UrlError(absl::StatusCode::kInvalidArgument, std::string(kMax - 30, 'x'),
                          "http://h.test/?token=secret", ""),
      false);
  EXPECT_EQ(message, std::string(kMax - 30, 'x') + "\"http://h.test/?REDACTED\"");
}

}  // namespace
}  // namespace egress

// What the access log shows of a caller's URL: credentials redacted, and bounded, whether
// or not the URL parses.
#include <string>

#include "gtest/gtest.h"
#include "service/access_log.h"

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
  EXPECT_EQ(AccessLog::LoggedUrl("http://bob:pass#word@h.test/x", false),
            "http://REDACTED@h.test/x");
  EXPECT_EQ(AccessLog::LoggedUrl("http://bob:pa?ss@h.test/x", true), "http://REDACTED@h.test/x");
  EXPECT_EQ(AccessLog::LoggedUrl("user:secret@h.test/zz", false), "REDACTED@h.test/zz");
  EXPECT_EQ(AccessLog::LoggedUrl("http:user:secret@h.test/x", false), "REDACTED@h.test/x");
  // An '@' in a path is no userinfo.
  EXPECT_EQ(AccessLog::LoggedUrl("http://h.test/users/a@b.test", false),
            "http://h.test/users/a@b.test");
}

// Error messages quote the caller's URL, and upstreams' Locations: each is logged as the
// url field is.
TEST(LoggedUrlTest, UrlsInAnErrorMessageAreRedacted) {
  EXPECT_EQ(AccessLog::LoggedMessage(
                "URL \"http://user:secret@h.test/%zz\" is not a valid absolute URL", false),
            "URL \"http://REDACTED@h.test/%zz\" is not a valid absolute URL");
  EXPECT_EQ(AccessLog::LoggedMessage(
                "more than 5 redirects; the last to https://h.test/cb?token=secret, "
                "then http://a:b@c.test/?q=1",
                false),
            "more than 5 redirects; the last to https://h.test/cb?REDACTED "
            "then http://REDACTED@c.test/?REDACTED");
  EXPECT_EQ(AccessLog::LoggedMessage("no URL here", false), "no URL here");
  EXPECT_EQ(AccessLog::LoggedMessage(std::string(1 << 20, 'x'), false).size(), kMax);
  for (const char* odd : {"://", "://@", "a://", "@://x", "x://\"", "://://@@"}) {
    EXPECT_EQ(AccessLog::LoggedMessage(odd, false).find("secret"), std::string::npos);
  }
}

}  // namespace
}  // namespace egress

#include "service/transport/http1/keep_alive_hint.h"

#include <string>

#include "gtest/gtest.h"

namespace egress::transport {
namespace {

TEST(KeepAliveHint, TimeoutAndMaxAreRead) {
  const auto hint = ParseKeepAlive("timeout=5, max=100");
  ASSERT_TRUE(hint);
  EXPECT_EQ(hint->timeout, absl::Seconds(5));
  EXPECT_EQ(hint->max, 100u);
}

TEST(KeepAliveHint, EitherAloneIsAHint) {
  EXPECT_EQ(ParseKeepAlive("timeout=2"), (KeepAliveHint{absl::Seconds(2), std::nullopt}));
  EXPECT_EQ(ParseKeepAlive("max=0"), (KeepAliveHint{std::nullopt, 0u}));
}

TEST(KeepAliveHint, CaseSpacesQuotesAndUnknownParametersAreTolerated) {
  EXPECT_EQ(ParseKeepAlive(" Timeout = \"7\" ,foo=bar, MAX=3 ,, x"),
            (KeepAliveHint{absl::Seconds(7), 3u}));
}

TEST(KeepAliveHint, AMalformedParameterIsIgnoredAndTheOtherKept) {
  for (const char* value : {"timeout=-1, max=4", "timeout=1.5, max=4", "timeout=, max=4",
                            "timeout=5s, max=4", "timeout=+5, max=4",
                            "timeout=99999999999, max=4", "timeout=86401, max=4"}) {
    EXPECT_EQ(ParseKeepAlive(value), (KeepAliveHint{std::nullopt, 4u})) << value;
  }
  EXPECT_EQ(ParseKeepAlive("timeout=3, max=4294967296"),
            (KeepAliveHint{absl::Seconds(3), std::nullopt}));
}

TEST(KeepAliveHint, NothingAnnouncedIsNoHint) {
  for (const char* value : {"", "300", "foo=1", "timeout", "max=x", "timeout=-3"}) {
    EXPECT_FALSE(ParseKeepAlive(value)) << value;
  }
}

TEST(KeepAliveHint, AValueOverTheBoundIsIgnoredWhole) {
  const std::string value = "timeout=5, x=" + std::string(kMaxKeepAliveHeaderBytes, 'a');
  EXPECT_FALSE(ParseKeepAlive(value));
}

}  // namespace
}  // namespace egress::transport

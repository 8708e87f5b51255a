// The connection lifetime settings: keepalive_hint_margin, max_connection_age (and its
// jitter), max_requests_per_connection, on the transport and per origin.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/config/config.h"

namespace egress {
namespace {

using ::testing::HasSubstr;

TEST(LifetimeConfig, DefaultsAreInForceAndShown) {
  auto config = LoadConfigText("", "empty");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::TransportSettings& t = config->transport;
  EXPECT_EQ(t.keepalive_hint_margin, absl::Seconds(1));
  EXPECT_EQ(t.max_connection_age, absl::ZeroDuration());
  EXPECT_EQ(t.max_connection_age_jitter_percent, 10u);
  EXPECT_EQ(t.max_requests_per_connection, 0u);
  EXPECT_EQ(config->proto.transport().keepalive_hint_margin().seconds(), 1);
  EXPECT_TRUE(config->proto.transport().has_max_connection_age_jitter_percent());
  EXPECT_EQ(config->proto.transport().max_connection_age_jitter_percent(), 10u);
  EXPECT_TRUE(t.honor_keepalive_hints);
  EXPECT_TRUE(config->proto.transport().honor_keepalive_hints().value());
}

TEST(LifetimeConfig, KeepAliveHintsCanBeIgnoredEverywhereOrForOneOrigin) {
  auto everywhere = LoadConfigText("transport { honor_keepalive_hints { value: false } }", "off");
  ASSERT_TRUE(everywhere.ok()) << everywhere.status();
  EXPECT_FALSE(everywhere->transport.honor_keepalive_hints);
  auto one = LoadConfigText(
      "transport { origins { host: \"a.test\" honor_keepalive_hints { value: false } } }", "one");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->transport.ForHost("a.test").honor_keepalive_hints);
  EXPECT_TRUE(one->transport.ForHost("b.test").honor_keepalive_hints);
}

TEST(LifetimeConfig, ZeroMarginAndZeroJitterCanBeAskedFor) {
  auto config = LoadConfigText(
      "transport { keepalive_hint_margin { } max_connection_age_jitter_percent: 0 "
      "max_connection_age { seconds: 60 } max_requests_per_connection: 7 }",
      "given");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transport.keepalive_hint_margin, absl::ZeroDuration());
  EXPECT_EQ(config->transport.max_connection_age_jitter_percent, 0u);
  EXPECT_EQ(config->transport.max_connection_age, absl::Seconds(60));
  EXPECT_EQ(config->transport.max_requests_per_connection, 7u);
}

TEST(LifetimeConfig, AnOriginOverridesEachSettingItSets) {
  auto config = LoadConfigText(
      "transport { max_connection_age { seconds: 60 } max_requests_per_connection: 7\n"
      "  origins { host: \"a.test\" max_connection_age { } max_requests_per_connection: 0\n"
      "    keepalive_hint_margin { nanos: 200000000 } max_connection_age_jitter_percent: 0 }\n"
      "  origins { host: \"b.test\" max_requests_per_connection: 2 } }",
      "override");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::TransportSettings a = config->transport.ForHost("a.test");
  EXPECT_EQ(a.max_connection_age, absl::ZeroDuration());  // unlimited for a.test
  EXPECT_EQ(a.max_requests_per_connection, 0u);
  EXPECT_EQ(a.keepalive_hint_margin, absl::Milliseconds(200));
  EXPECT_EQ(a.max_connection_age_jitter_percent, 0u);
  const transport::TransportSettings b = config->transport.ForHost("b.test");
  EXPECT_EQ(b.max_connection_age, absl::Seconds(60));
  EXPECT_EQ(b.max_requests_per_connection, 2u);
  EXPECT_EQ(b.keepalive_hint_margin, absl::Seconds(1));
  EXPECT_EQ(b.max_connection_age_jitter_percent, 10u);
}

TEST(LifetimeConfig, MinIdleIsForTheOriginsOverridesName) {
  auto config = LoadConfigText(
      "transport { min_idle_per_origin: 2 origins { host: \"a.test\" }\n"
      "  origins { host: \"b.test\" min_idle_per_origin: 5 } }",
      "min_idle");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transport.ForHost("a.test").min_idle_per_origin, 2u);
  EXPECT_EQ(config->transport.ForHost("b.test").min_idle_per_origin, 5u);
}

struct Bad {
  const char* name;
  const char* text;
  const char* words;  // what the message must say, naming the field
};

class BadLifetimeConfigTest : public ::testing::TestWithParam<Bad> {};

TEST_P(BadLifetimeConfigTest, IsRejectedWithTheFieldNamed) {
  auto config = LoadConfigText(GetParam().text, "egress.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(config.status()));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(GetParam().words));
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadLifetimeConfigTest,
    ::testing::Values(
        Bad{"negative_margin", "transport { keepalive_hint_margin { seconds: -1 } }",
            "transport.keepalive_hint_margin: must not be negative (got -1s)"},
        Bad{"negative_age", "transport { max_connection_age { nanos: -5000000 } }",
            "transport.max_connection_age: must not be negative (got -5ms)"},
        Bad{"jitter_over_100", "transport { max_connection_age_jitter_percent: 101 }",
            "transport.max_connection_age_jitter_percent: must be at most 100 (got 101)"},
        Bad{"origin_negative_margin",
            "transport { origins { host: \"a.test\" keepalive_hint_margin { seconds: -2 } } }",
            "transport.origins[0].keepalive_hint_margin: must not be negative (got -2s)"},
        Bad{"origin_negative_age",
            "transport { origins { host: \"a.test\" } origins { host: \"b.test\" "
            "max_connection_age { seconds: -1 } } }",
            "transport.origins[1].max_connection_age: must not be negative (got -1s)"},
        Bad{"origin_jitter_over_100",
            "transport { origins { host: \"a.test\" max_connection_age_jitter_percent: 200 } }",
            "transport.origins[0].max_connection_age_jitter_percent: must be at most 100 (got "
            "200)"},
        Bad{"min_idle_over_max_idle",
            "transport { max_idle_per_origin: 4 origins { host: \"a.test\" min_idle_per_origin: 5 } }",
            "transport.origins[0]: min_idle_per_origin (5) must be at most max_idle_per_origin (4)"},
        Bad{"min_idle_over_max_conns",
            "transport { min_idle_per_origin: 3 origins { host: \"a.test\" max_conns_per_origin: 2 } }",
            "transport.origins[0]: min_idle_per_origin (3) must be at most max_conns_per_origin (2)"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

}  // namespace
}  // namespace egress

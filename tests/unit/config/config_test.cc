#include "service/config/config.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace egress {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(Config, EmptyTextGivesTheBuiltInDefaults) {
  auto config = LoadConfigText("", "empty");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transport.drain.max_bytes, 256u * 1024);
  EXPECT_EQ(config->transport.drain.max_duration, absl::Milliseconds(50));
  EXPECT_EQ(config->transport.idle_timeout, absl::Seconds(90));
  EXPECT_EQ(config->proto.drain().mode(), egress::v1::DRAIN_MODE_FIXED);
  EXPECT_EQ(config->callers.max_redirects, 5u);
  // The default policy denies loopback.
  auto loopback = boost::asio::ip::make_address("127.0.0.1");
  EXPECT_TRUE(config->transport.policy->Check("localhost", loopback).has_value());
}

TEST(Config, ValuesGivenAreKept) {
  auto config = LoadConfigText(
      "transport { max_conns_per_origin: 4 connect_timeout { seconds: 3 } }\n"
      "drain { mode: DRAIN_MODE_OFF max_bytes: 1000 }\n"
      "policy { allow_cidrs: \"127.0.0.0/8\" caller_header: \"X-Caller\" }\n",
      "given");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->transport.max_conns_per_origin, 4u);
  EXPECT_EQ(config->transport.connect_timeout, absl::Seconds(3));
  EXPECT_EQ(config->transport.drain.mode, transport::DrainMode::kOff);
  EXPECT_EQ(config->transport.drain.max_bytes, 1000u);
  EXPECT_EQ(config->callers.caller_header, "x-caller");
  EXPECT_FALSE(config->transport.policy->Check("h", boost::asio::ip::make_address("127.0.0.1")));
}

TEST(Config, AdaptiveGetsItsOwnCeilingsAndTheBudgetItsDefault) {
  auto config = LoadConfigText("drain { mode: DRAIN_MODE_ADAPTIVE }", "adaptive");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::DrainSettings& drain = config->transport.drain;
  EXPECT_EQ(drain.mode, transport::DrainMode::kAdaptive);
  EXPECT_EQ(drain.max_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(drain.max_duration, absl::Seconds(1));
  EXPECT_EQ(drain.cost_factor, 1.0);
  EXPECT_EQ(config->transport.drain_budget_bytes, 32u * 1024 * 1024);
  // GetConfig shows what is in force.
  EXPECT_EQ(config->proto.drain().max_bytes(), 4u * 1024 * 1024);
  EXPECT_EQ(config->proto.transport().drain_budget_bytes(), 32u * 1024 * 1024);
}

TEST(Config, AnOriginSwitchedToAdaptiveDoesNotInheritFixedCaps) {
  auto config = LoadConfigText(
      "drain { max_bytes: 1000 }\n"
      "transport { drain_budget_bytes: 5000000 origins { host: \"*.slow.test\"\n"
      "  drain { mode: DRAIN_MODE_ADAPTIVE cost_factor: 2.5 min_dial_cost { nanos: 200000000 } }\n"
      "} origins { host: \"fixed.test\" drain { max_duration { seconds: 2 } } } }",
      "override");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::DrainSettings& adaptive = config->transport.DrainFor("a.slow.test");
  EXPECT_EQ(adaptive.mode, transport::DrainMode::kAdaptive);
  EXPECT_EQ(adaptive.max_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(adaptive.cost_factor, 2.5);
  EXPECT_EQ(adaptive.min_dial_cost, absl::Milliseconds(200));
  // The same mode as the default: unset fields come from the default.
  const transport::DrainSettings& fixed = config->transport.DrainFor("fixed.test");
  EXPECT_EQ(fixed.max_bytes, 1000u);
  EXPECT_EQ(fixed.max_duration, absl::Seconds(2));
  EXPECT_EQ(config->transport.drain_budget_bytes, 5000000u);
}

TEST(Config, DnsLimitsDefaultAndNameserversTakeAnOptionalPort) {
  auto config = LoadConfigText(
      "transport { dns { servers: \"10.0.0.2\" servers: \"127.0.0.53:5353\" "
      "servers: \"[fd00::2]:54\" servers: \"fd00::3\" } }",
      "dns");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::DnsSettings& dns = config->transport.dns;
  EXPECT_EQ(dns.max_lookups_per_caller, 64u);
  EXPECT_EQ(dns.max_lookups, 1024u);
  EXPECT_EQ(config->proto.transport().dns().max_lookups_per_caller(), 64u);
  ASSERT_EQ(dns.servers.size(), 4u);
  EXPECT_EQ(dns.servers[0].address().to_string(), "10.0.0.2");
  EXPECT_EQ(dns.servers[0].port(), 53);
  EXPECT_EQ(dns.servers[1].port(), 5353);
  EXPECT_EQ(dns.servers[2].address().to_string(), "fd00::2");
  EXPECT_EQ(dns.servers[2].port(), 54);
  EXPECT_EQ(dns.servers[3].port(), 53);
}

struct Bad {
  const char* name;
  const char* text;
  const char* words;  // what the message must say, naming the field
};

class BadConfigTest : public ::testing::TestWithParam<Bad> {};

TEST_P(BadConfigTest, IsRejectedWithTheFieldNamed) {
  auto config = LoadConfigText(GetParam().text, "egress.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(config.status()));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("egress.conf"));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(GetParam().words));
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadConfigTest,
    ::testing::Values(
        Bad{"unknown_field", "transport { max_idle: 3 }", "no field named \"max_idle\""},
        Bad{"unknown_section", "pool { }", "no field named \"pool\""},
        Bad{"negative_cap", "drain { max_bytes: -1 }", "max_bytes: -1"},
        Bad{"cap_of_2_to_the_64_minus_1", "drain { max_bytes: 18446744073709551615 }",
            "drain.max_bytes: at most 1073741824 (got 18446744073709551615)"},
        Bad{"origin_cap_past_a_gigabyte",
            "transport { origins { host: \"a.test\" drain { max_bytes: 1073741825 } } }",
            "max_bytes: at most 1073741824"},
        Bad{"negative_duration", "drain { max_duration { seconds: -1 } }",
            "drain.max_duration: must not be negative"},
        Bad{"zero_timeout", "transport { connect_timeout { } }",
            "transport.connect_timeout: must be positive"},
        Bad{"zero_header_timeout", "transport { response_header_timeout { seconds: 0 } }",
            "transport.response_header_timeout: must be positive"},
        Bad{"malformed_cidr", "policy { allow_cidrs: \"10.0.0/8\" }",
            "policy.allow_cidrs[0]: \"10.0.0/8\" is not a CIDR"},
        Bad{"cidr_prefix_too_long", "policy { deny_cidrs: \"10.0.0.0/33\" }",
            "policy.deny_cidrs[0]"},
        Bad{"bad_host_pattern", "policy { deny_hosts: \"exa mple.com\" }",
            "policy.deny_hosts[0]"},
        Bad{"caller_without_identity", "policy { callers { allowed_hosts: \"a.com\" } }",
            "policy.callers[0].identity: must not be empty"},
        Bad{"small_header_limit", "transport { max_response_header_bytes: 10 }",
            "transport.max_response_header_bytes"},
        Bad{"small_chunk_line_limit", "transport { max_chunk_line_bytes: 100 }",
            "transport.max_chunk_line_bytes: must be from 256 to 1048576 (got 100)"},
        Bad{"huge_chunk_line_limit", "transport { max_chunk_line_bytes: 4294967295 }",
            "transport.max_chunk_line_bytes: must be from 256 to 1048576 (got 4294967295)"},
        Bad{"huge_header_limit", "transport { max_response_header_bytes: 4294967295 }",
            "transport.max_response_header_bytes: must be from 1024 to 16777216 (got 4294967295)"},
        Bad{"huge_io_threads", "transport { io_threads: 4294967295 }",
            "transport.io_threads: at most 1024 (got 4294967295)"},
        Bad{"huge_body_ceiling",
            "limits { max_body_bytes_ceiling: 18446744073709551615 "
            "buffered_body_budget_bytes: 18446744073709551615 }",
            "limits.max_body_bytes_ceiling: at most 1073741824 (got 18446744073709551615)"},
        Bad{"huge_body_budget", "limits { buffered_body_budget_bytes: 18446744073709551615 }",
            "limits.buffered_body_budget_bytes: at most 1099511627776"},
        Bad{"many_interim_responses", "transport { max_interim_responses: 101 }",
            "transport.max_interim_responses: must be at most 100 (got 101)"},
        Bad{"negative_cost_factor", "drain { mode: DRAIN_MODE_ADAPTIVE cost_factor: -1 }",
            "drain.cost_factor: must be between 0"},
        Bad{"huge_cost_factor", "drain { cost_factor: 1e9 }", "drain.cost_factor"},
        Bad{"negative_min_dial_cost",
            "transport { origins { host: \"a.com\" drain { min_dial_cost { seconds: -1 } } } }",
            "transport.origins[0].drain.min_dial_cost: must not be negative"},
        Bad{"dns_server_name", "transport { dns { servers: \"ns.example.com\" } }",
            "transport.dns.servers[0]: \"ns.example.com\" is not an IP address"},
        Bad{"dns_server_port", "transport { dns { servers: \"10.0.0.2:70000\" } }",
            "transport.dns.servers[0]"},
        Bad{"dns_server_v6_port_unbracketed",
            "transport { dns { servers: \"10.0.0.1\" servers: \"fd00::2:53x\" } }",
            "transport.dns.servers[1]"},
        Bad{"dns_min_ttl_above_max_ttl",
            "transport { dns { min_ttl { seconds: 60 } max_ttl { seconds: 30 } } }",
            "transport.dns.min_ttl (1m) must not be above transport.dns.max_ttl (30s)"},
        Bad{"dns_negative_stale_for", "transport { dns { stale_for { seconds: -1 } } }",
            "transport.dns.stale_for: must not be negative"},
        Bad{"happy_eyeballs_delay_below_floor",
            "transport { happy_eyeballs_delay { nanos: 5000000 } }",
            "transport.happy_eyeballs_delay: must be at least 10ms (RFC 8305's floor; got 5ms)"},
        Bad{"origin_happy_eyeballs_delay_zero",
            "transport { origins { host: \"a.com\" happy_eyeballs_delay { } } }",
            "transport.origins[0].happy_eyeballs_delay: must be at least 10ms"},
        Bad{"breaker_failures_too_many",
            "transport { circuit_breaker { consecutive_failures: 1001 } }",
            "transport.circuit_breaker.consecutive_failures: must be at most 1000 (got 1001)"},
        Bad{"breaker_open_for_zero", "transport { circuit_breaker { open_for { } } }",
            "transport.circuit_breaker.open_for: must be positive"},
        Bad{"origin_breaker_open_for_too_long",
            "transport { origins { host: \"a.com\" circuit_breaker { open_for { seconds: "
            "3601 } } } }",
            "transport.origins[0].circuit_breaker.open_for: must be between 1ms and 1h"},
        Bad{"not_text_format", "transport {", "line 1"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

TEST(Config, CircuitBreakerIsOffByDefaultAndAnOriginsEntryOverridesTheFieldsItSets) {
  auto config = LoadConfigText(
      "transport { origins { host: \"*.flaky.test\" circuit_breaker { "
      "consecutive_failures: 2 count_5xx { value: false } } } }",
      "breaker");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::CircuitBreakerSettings& defaults = config->transport.circuit_breaker;
  EXPECT_FALSE(defaults.enabled());
  EXPECT_EQ(defaults.open_for, absl::Seconds(30));
  EXPECT_TRUE(defaults.count_5xx);
  const auto& breaker = config->proto.transport().circuit_breaker();
  EXPECT_EQ(breaker.consecutive_failures(), 0u);  // GetConfig shows what applies
  EXPECT_EQ(breaker.open_for().seconds(), 30);
  EXPECT_TRUE(breaker.count_5xx().value());
  const transport::TransportSettings flaky = config->transport.ForHost("api.flaky.test");
  EXPECT_EQ(flaky.circuit_breaker.consecutive_failures, 2u);
  EXPECT_EQ(flaky.circuit_breaker.open_for, absl::Seconds(30));
  EXPECT_FALSE(flaky.circuit_breaker.count_5xx);
  EXPECT_FALSE(config->transport.ForHost("other.test").circuit_breaker.enabled());
}

TEST(Config, DnsCacheAndHappyEyeballsHaveDefaultsThatGetConfigShows) {
  auto config = LoadConfigText("", "empty");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::DnsSettings& dns = config->transport.dns;
  EXPECT_TRUE(dns.cache);
  EXPECT_EQ(dns.cache_max_entries, 10000u);
  EXPECT_EQ(dns.min_ttl, absl::ZeroDuration());
  EXPECT_EQ(dns.max_ttl, absl::Seconds(300));
  EXPECT_EQ(dns.negative_ttl, absl::Seconds(5));
  EXPECT_EQ(dns.stale_for, absl::Seconds(30));
  EXPECT_EQ(config->transport.happy_eyeballs_delay, absl::Milliseconds(250));
  const auto& proto = config->proto.transport();
  EXPECT_EQ(proto.dns().cache_max_entries(), 10000u);
  EXPECT_EQ(proto.dns().max_ttl().seconds(), 300);
  EXPECT_EQ(proto.dns().negative_ttl().seconds(), 5);
  EXPECT_EQ(proto.dns().stale_for().seconds(), 30);
  EXPECT_TRUE(proto.dns().has_min_ttl());
  EXPECT_EQ(proto.happy_eyeballs_delay().nanos(), 250'000'000);
}

TEST(Config, DnsZeroDurationsAreKeptAndAnOriginGetsItsOwnHappyEyeballsDelay) {
  auto config = LoadConfigText(
      "transport { dns { disable_cache: true negative_ttl { } stale_for { } } "
      "origins { host: \"a.com\" happy_eyeballs_delay { seconds: 1 } } }",
      "given");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->transport.dns.cache);
  EXPECT_EQ(config->transport.dns.negative_ttl, absl::ZeroDuration());
  EXPECT_EQ(config->transport.dns.stale_for, absl::ZeroDuration());
  EXPECT_EQ(config->transport.ForHost("a.com").happy_eyeballs_delay, absl::Seconds(1));
  EXPECT_EQ(config->transport.ForHost("b.com").happy_eyeballs_delay, absl::Milliseconds(250));
}

TEST(Config, CallerLimitsHaveDefaultsThatGetConfigShows) {
  auto config = LoadConfigText("", "empty");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->limits.max_body_bytes_ceiling, 64u << 20);
  EXPECT_EQ(config->limits.buffered_body_budget_bytes, 256u << 20);
  EXPECT_EQ(config->limits.max_timeout, absl::Minutes(5));
  EXPECT_EQ(config->limits.max_concurrent_fetches_per_caller, 0u);
  EXPECT_THAT(config->callers.redirect_strip_headers,
              ::testing::ElementsAre("authorization", "proxy-authorization", "cookie", "cookie2",
                                     "www-authenticate"));
  EXPECT_EQ(config->proto.limits().max_body_bytes_ceiling(), 64u << 20);
  EXPECT_EQ(config->proto.limits().buffered_body_budget_bytes(), 256u << 20);
  EXPECT_EQ(config->proto.limits().max_timeout().seconds(), 300);
  EXPECT_EQ(config->proto.policy().redirect_strip_headers_size(), 5);
}

TEST(Config, RedirectStripHeadersGivenReplaceTheDefaultsLowerCased) {
  auto config = LoadConfigText(
      "policy { redirect_strip_headers: \"X-Api-Key\" redirect_strip_headers: \"Cookie\" }",
      "strip");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->callers.redirect_strip_headers,
              ::testing::ElementsAre("x-api-key", "cookie"));
}

INSTANTIATE_TEST_SUITE_P(
    CallerLimits, BadConfigTest,
    ::testing::Values(
        Bad{"ceiling_below_default",
            "limits { default_max_body_bytes: 2000 max_body_bytes_ceiling: 1000 }",
            "limits.max_body_bytes_ceiling: must be at least limits.default_max_body_bytes "
            "(2000); got 1000"},
        Bad{"budget_below_ceiling", "limits { buffered_body_budget_bytes: 1000 }",
            "limits.buffered_body_budget_bytes: must be at least "
            "limits.max_body_bytes_ceiling (67108864); got 1000"},
        Bad{"request_body_over_a_gibibyte", "limits { max_request_body_bytes: 1073741825 }",
            "limits.max_request_body_bytes: at most 1073741824 (got 1073741825)"},
        Bad{"request_headers_over_16_mebibytes", "limits { max_request_header_bytes: 16777217 }",
            "limits.max_request_header_bytes: at most 16777216 (got 16777217)"},
        Bad{"zero_max_timeout", "limits { max_timeout { } }",
            "limits.max_timeout: must be positive"},
        Bad{"empty_strip_header", "policy { redirect_strip_headers: \"\" }",
            "policy.redirect_strip_headers[0]: must not be empty"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

// Each peer in its one spelling, so that every replica weighs the same names (an origin's
// owner is the member whose name weighs most for it).
TEST(Config, AffinityPeersAreWrittenInOneSpelling) {
  auto config = LoadConfigText(
      "affinity { peers: \"0x0a.1:7443\" peers: \"[0:0::1]:7443\" "
      "peers: \"Peer-3.Example.:7443\" peers: \"redis:80\" }",
      "egress.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->fleet.peers,
              ElementsAre("10.0.0.1:7443", "[::1]:7443", "peer-3.example:7443", "redis:80"));
  EXPECT_THAT(config->proto.affinity().peers(), ElementsAreArray(config->fleet.peers));
  EXPECT_TRUE(LoadConfigText("", "empty")->fleet.peers.empty());
  // Written again (GetConfig's answer sent back by UpdateConfig), nothing changes.
  const auto again = BuildConfig(config->proto);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->fleet.peers, config->fleet.peers);
}

// The Service is a name, read as peers are and shown in one spelling; its port is the
// one each of its addresses gets.
TEST(Config, AffinityServiceIsANameAndAPort) {
  auto config = LoadConfigText("affinity { service: \"EgressD-Peers.NS.svc.Cluster.Local.:7443\" }",
                               "egress.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->fleet.service_host, "egressd-peers.ns.svc.cluster.local");
  EXPECT_EQ(config->fleet.service_port, 7443);
  EXPECT_TRUE(config->fleet.peers.empty());
  EXPECT_EQ(config->proto.affinity().service(), "egressd-peers.ns.svc.cluster.local:7443");
  const auto again = BuildConfig(config->proto);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->fleet, config->fleet);
  EXPECT_TRUE(LoadConfigText("", "empty")->fleet.service_host.empty());
}

TEST(Config, RedisIsReadAsPeersAreAndShownInOneSpelling) {
  auto config = LoadConfigText("quota_store { redis: \"[::1]:6379\" }", "egress.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->quota_store.host, "::1");  // as getaddrinfo takes it
  EXPECT_EQ(config->quota_store.Address(), "[::1]:6379");
  EXPECT_EQ(config->proto.quota_store().redis(), "[::1]:6379");
  config = LoadConfigText("quota_store { redis: \"Redis_1.:6379\" }", "egress.conf");
  ASSERT_TRUE(config.ok()) << config.status();  // Docker Compose names hold '_'
  EXPECT_EQ(config->proto.quota_store().redis(), "redis_1:6379");
}

TEST(Config, AffinityHasAtMost256Peers) {
  std::string text = "affinity {";
  for (int i = 0; i < 257; ++i) absl::StrAppend(&text, " peers: \"p", i, ".example:7443\"");
  const auto config = LoadConfigText(text + " }", "egress.conf");
  EXPECT_TRUE(absl::IsInvalidArgument(config.status()));
  EXPECT_THAT(config.status().message(), HasSubstr("affinity.peers: at most 256 (got 257)"));
}

TEST(Config, QuotasAreReadInOrderAndABurstDefaultsToTheRateRoundedUp) {
  auto config = LoadConfigText(
      "quotas { name: \"billing-stripe\" caller: \"billing\" hosts: \"api.stripe.test\" "
      "  hosts: \"*.stripe.test\" requests_per_second: 2.5 }"
      "quotas { name: \"everyone\" caller: \"*\" hosts: \"*\" max_concurrent: 8 "
      "  requests_per_second: 0.5 }"
      "quotas { name: \"slots\" caller: \"*\" hosts: \"*\" max_concurrent: 2 }",
      "quotas");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->quotas.size(), 3u);
  const QuotaRule& billing = config->quotas[0];
  EXPECT_EQ(billing.name, "billing-stripe");
  EXPECT_EQ(billing.caller, "billing");
  EXPECT_EQ(billing.hosts.size(), 2u);
  EXPECT_EQ(billing.requests_per_second, 2.5);
  EXPECT_EQ(billing.burst, 3);
  EXPECT_EQ(config->proto.quotas(0).burst(), 3u);  // GetConfig shows what applies
  EXPECT_TRUE(config->quotas[1].hosts.empty());    // "*": every host
  EXPECT_EQ(config->quotas[1].burst, 1);
  EXPECT_EQ(config->quotas[2].burst, 0);
  EXPECT_EQ(config->proto.quotas(2).burst(), 0u);
}

TEST(Config, RetriesAreOffByDefaultAndAnOriginsEntryOverridesTheFieldsItSets) {
  auto config = LoadConfigText(
      "transport { retry { budget_percent: 0 } origins { host: \"*.flaky.test\" "
      "retry { max_attempts: 3 max_backoff { seconds: 1 } } } }",
      "retry");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::RetrySettings& defaults = config->transport.retry;
  EXPECT_FALSE(defaults.enabled());
  EXPECT_EQ(defaults.budget_percent, 0u);  // an explicit 0 is kept
  const auto& shown = config->proto.transport().retry();
  EXPECT_EQ(shown.max_attempts(), 1u);  // GetConfig shows what applies
  EXPECT_EQ(shown.base_backoff().nanos(), 25'000'000);
  EXPECT_EQ(shown.max_backoff().nanos(), 250'000'000);
  EXPECT_EQ(shown.min_retries_per_second(), 3u);
  const transport::TransportSettings flaky = config->transport.ForHost("api.flaky.test");
  EXPECT_EQ(flaky.retry.max_attempts, 3u);
  EXPECT_EQ(flaky.retry.max_backoff, absl::Seconds(1));
  EXPECT_EQ(flaky.retry.budget_percent, 0u);
  EXPECT_FALSE(config->transport.ForHost("other.test").retry.enabled());
}

INSTANTIATE_TEST_SUITE_P(
    Retries, BadConfigTest,
    ::testing::Values(
        Bad{"too_many_attempts", "transport { retry { max_attempts: 11 } }",
            "transport.retry.max_attempts: at most 10 (got 11)"},
        Bad{"max_below_base",
            "transport { retry { base_backoff { seconds: 2 } max_backoff { seconds: 1 } } }",
            "transport.retry.max_backoff: must be at least base_backoff (2s); got 1s"},
        Bad{"zero_backoff", "transport { retry { base_backoff { } } }",
            "transport.retry.base_backoff: must be positive"},
        Bad{"budget_over_100", "transport { retry { budget_percent: 101 } }",
            "transport.retry.budget_percent: at most 100 (got 101)"},
        Bad{"floor_over_1000", "transport { retry { min_retries_per_second: 1001 } }",
            "transport.retry.min_retries_per_second: at most 1000 (got 1001)"},
        Bad{"origin_attempts",
            "transport { origins { host: \"a.test\" retry { max_attempts: 12 } } }",
            "transport.origins[0].retry.max_attempts: at most 10 (got 12)"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

TEST(Config, Http2IsOfferedByDefaultAndAnOriginsEntryOverridesTheFieldsItSets) {
  auto config = LoadConfigText(
      "transport { http2 { stream_window_bytes: 65536 ping_interval { } } "
      "origins { host: \"*.h2c.test\" http2 { mode: HTTP2_MODE_PRIOR_KNOWLEDGE "
      "max_concurrent_streams: 8 } } origins { host: \"old.test\" "
      "http2 { mode: HTTP2_MODE_OFF } } }",
      "http2");
  ASSERT_TRUE(config.ok()) << config.status();
  const transport::Http2Settings& defaults = config->transport.http2;
  EXPECT_EQ(defaults.mode, transport::Http2Mode::kAuto);
  EXPECT_TRUE(defaults.OffersH2OverTls());
  EXPECT_FALSE(defaults.RequiresH2());
  EXPECT_EQ(defaults.stream_window_bytes, 65536u);
  EXPECT_EQ(defaults.ping_interval, absl::ZeroDuration());  // an explicit 0: never
  const auto& shown = config->proto.transport().http2();  // GetConfig shows what applies
  EXPECT_EQ(shown.mode(), v1::HTTP2_MODE_AUTO);
  EXPECT_EQ(shown.max_concurrent_streams(), 100u);
  EXPECT_EQ(shown.connection_window_bytes(), 1024u * 1024);
  EXPECT_EQ(shown.ping_timeout().seconds(), 5);
  const transport::TransportSettings h2c = config->transport.ForHost("api.h2c.test");
  EXPECT_EQ(h2c.http2.mode, transport::Http2Mode::kPriorKnowledge);
  EXPECT_TRUE(h2c.http2.RequiresH2());
  EXPECT_EQ(h2c.http2.max_concurrent_streams, 8u);
  EXPECT_EQ(h2c.http2.stream_window_bytes, 65536u);  // the transport's
  EXPECT_FALSE(config->transport.ForHost("old.test").http2.OffersH2OverTls());
}

// Durations outside google/protobuf/duration.proto's range (UpdateConfig takes them as
// sent; TextFormat parses them) are refused whole, wherever they stand.
INSTANTIATE_TEST_SUITE_P(
    Durations, BadConfigTest,
    ::testing::Values(
        Bad{"seconds_past_ten_thousand_years",
            "drain { max_duration { seconds: 315576000001 } }",
            "drain.max_duration: not a valid google.protobuf.Duration (seconds 315576000001"},
        Bad{"nanos_of_the_other_sign", "transport { connect_timeout { seconds: 1 nanos: -1 } }",
            "transport.connect_timeout: not a valid google.protobuf.Duration"},
        Bad{"nanos_of_a_whole_second",
            "transport { origins { host: \"a.test\" connect_timeout { nanos: 1000000000 } } }",
            "transport.origins[0].connect_timeout: not a valid google.protobuf.Duration"},
        Bad{"largest_seconds", "drain { max_duration { seconds: 9223372036854775807 } }",
            "drain.max_duration: not a valid google.protobuf.Duration"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Http2, BadConfigTest,
    ::testing::Values(
        Bad{"streams_over_1000", "transport { http2 { max_concurrent_streams: 1001 } }",
            "transport.http2.max_concurrent_streams: must be between 1 and 1000 (got 1001)"},
        Bad{"stream_window_too_small", "transport { http2 { stream_window_bytes: 1000 } }",
            "transport.http2.stream_window_bytes: must be between 16384 and 16777216 (got "
            "1000)"},
        Bad{"connection_window_below_stream",
            "transport { http2 { stream_window_bytes: 2000000 connection_window_bytes: 100000 } }",
            "transport.http2.connection_window_bytes: must be between 2000000 and 1073741824 "
            "(got 100000)"},
        Bad{"negative_ping_interval", "transport { http2 { ping_interval { seconds: -1 } } }",
            "transport.http2.ping_interval: must not be negative (got -1s)"},
        Bad{"ping_timeout_over_a_minute", "transport { http2 { ping_timeout { seconds: 61 } } }",
            "transport.http2.ping_timeout: must be between 1ms and 1m (got 1m1s)"},
        Bad{"unknown_mode", "transport { http2 { mode: 9 } }",
            "transport.http2.mode: unknown mode 9"},
        Bad{"origin_streams",
            "transport { origins { host: \"a.test\" http2 { max_concurrent_streams: 5000 } } }",
            "transport.origins[0].http2.max_concurrent_streams: must be between 1 and 1000 "
            "(got 5000)"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Quotas, BadConfigTest,
    ::testing::Values(
        Bad{"no_name", "quotas { caller: \"*\" hosts: \"*\" max_concurrent: 1 }",
            "quotas[0].name: 1-64 of a-z, 0-9, '_' and '-' (got \"\")"},
        Bad{"upper_case_name",
            "quotas { name: \"A\" caller: \"*\" hosts: \"*\" max_concurrent: 1 }",
            "quotas[0].name: 1-64 of a-z, 0-9, '_' and '-' (got \"A\")"},
        Bad{"name_taken",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" max_concurrent: 1 }"
            "quotas { name: \"a\" caller: \"x\" hosts: \"*\" max_concurrent: 1 }",
            "quotas[1].name: \"a\" is taken by an earlier rule"},
        Bad{"no_caller", "quotas { name: \"a\" hosts: \"*\" max_concurrent: 1 }",
            "quotas[0].caller: must not be empty"},
        Bad{"no_hosts", "quotas { name: \"a\" caller: \"*\" max_concurrent: 1 }",
            "quotas[0].hosts: empty"},
        Bad{"star_among_hosts",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" hosts: \"x.test\" "
            "max_concurrent: 1 }",
            "quotas[0].hosts: \"*\" covers every host; list it alone or not at all"},
        Bad{"bad_host", "quotas { name: \"a\" caller: \"*\" hosts: \"a b\" max_concurrent: 1 }",
            "quotas[0].hosts[0]: "},
        Bad{"limits_nothing", "quotas { name: \"a\" caller: \"*\" hosts: \"*\" }",
            "quotas[0]: limits nothing; set max_concurrent, requests_per_second or both"},
        Bad{"negative_rate",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" requests_per_second: -1 }",
            "quotas[0].requests_per_second: from 0 to 1e+06 (got -1)"},
        Bad{"nan_rate",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" requests_per_second: nan }",
            "quotas[0].requests_per_second: from 0 to 1e+06 (got nan)"},
        Bad{"burst_without_rate",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" max_concurrent: 1 burst: 5 }",
            "quotas[0].burst: only with requests_per_second"},
        Bad{"burst_too_large",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" requests_per_second: 1 "
            "burst: 2000000 }",
            "quotas[0].burst: at most 1e+06 (got 2000000)"},
        Bad{"global_without_store",
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" requests_per_second: 1 "
            "global: true }",
            "quotas[0].global: a global rule needs requests_per_second and quota_store.redis"},
        Bad{"global_without_rate",
            "quota_store { redis: \"127.0.0.1:6379\" } "
            "quotas { name: \"a\" caller: \"*\" hosts: \"*\" max_concurrent: 1 global: true }",
            "quotas[0].global: a global rule needs requests_per_second"},
        Bad{"redis_without_port", "quota_store { redis: \"redis.internal\" }",
            "quota_store.redis: a Redis server: \"redis.internal\" is not \"host:port\": no port"},
        Bad{"redis_port_out_of_range", "quota_store { redis: \"127.0.0.1:65536\" }",
            "quota_store.redis: a Redis server: \"127.0.0.1:65536\" is not \"host:port\": the "
            "port is not a number in 1..65535"},
        Bad{"redis_no_host", "quota_store { redis: \":6379\" }",
            "quota_store.redis: a Redis server: \":6379\" is not \"host:port\": no host"},
        Bad{"redis_ipv6_without_brackets", "quota_store { redis: \"::1:6379\" }",
            "an IPv6 address goes in brackets"},
        Bad{"peer_without_port", "affinity { peers: \"10.0.0.1\" }",
            "affinity.peers[0]: \"10.0.0.1\" is not \"host:port\": no port"},
        Bad{"peer_wildcard", "affinity { peers: \"*.example.com:7443\" }",
            "affinity.peers[0]: \"*.example.com:7443\" is not \"host:port\": the host is "
            "neither a name"},
        Bad{"peer_not_a_host", "affinity { peers: \"a b:7443\" }",
            "affinity.peers[0]: \"a b:7443\" is not \"host:port\": the host is neither a name "
            "(labels of letters, digits, '-' and '_') nor an IP address"},
        Bad{"peer_bracketed_name", "affinity { peers: \"[peer]:7443\" }",
            "an IPv6 address goes in brackets, and nothing else does"},
        Bad{"peer_unmatched_bracket", "affinity { peers: \"[peer:7443\" }",
            "an IPv6 address goes in brackets, and nothing else does"},
        Bad{"peer_double_brackets", "affinity { peers: \"[[::1]]:7443\" }",
            "an IPv6 address goes in brackets, and nothing else does"},
        Bad{"peer_brackets_hold_no_address", "affinity { peers: \"[zz::]:7443\" }",
            "what the brackets hold is no IPv6 address"},
        Bad{"peer_quoted_escaped", "affinity { peers: \"a\\nb\\033[2J:7443\" }",
            "affinity.peers[0]: \"a\\nb\\x1b[2J:7443\" is not \"host:port\""},
        Bad{"peer_empty_label", "affinity { peers: \"peer..:7443\" }",
            "the host is neither a name"},
        Bad{"peer_leading_dot", "affinity { peers: \".peer:7443\" }", "the host is neither a name"},
        Bad{"peer_label_over_63",
            "affinity { peers: "
            "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example:7443\" }",
            "the host is neither a name"},
        Bad{"service_and_peers", "affinity { service: \"peers:7443\" peers: \"10.0.0.1:7443\" }",
            "affinity.service (\"peers:7443\") and affinity.peers are both set"},
        Bad{"service_without_port", "affinity { service: \"peers\" }",
            "affinity.service: \"peers\" is not \"host:port\": no port"},
        Bad{"service_an_address", "affinity { service: \"10.0.0.1:7443\" }",
            "affinity.service: \"10.0.0.1:7443\" is an address, not a name"},
        Bad{"service_quoted_escaped", "affinity { service: \"a\\nb:7443\" }",
            "affinity.service: \"a\\nb:7443\" is not \"host:port\""},
        Bad{"peer_address_that_is_none", "affinity { peers: \"10.0.0.999:7443\" }",
            "the host is neither a name"},
        Bad{"peer_unspecified_v4", "affinity { peers: \"0:7443\" }", "the address names no server"},
        Bad{"peer_unspecified_v6", "affinity { peers: \"[::]:7443\" }",
            "the address names no server"},
        Bad{"peer_port_with_sign", "affinity { peers: \"peer:+7443\" }",
            "the port is not a number in 1..65535"},
        Bad{"peer_port_with_space", "affinity { peers: \"peer: 7443\" }",
            "the port is not a number in 1..65535"},
        Bad{"nameserver_port_with_sign", "transport { dns { servers: \"10.0.0.2:+53\" } }",
            "transport.dns.servers[0]: \"10.0.0.2:+53\" is not an IP address with an optional "
            "port"},
        Bad{"nameserver_port_with_newline", "transport { dns { servers: \"10.0.0.2:53\\n\" } }",
            "transport.dns.servers[0]"},
        Bad{"peer_port_zero", "affinity { peers: \"peer:0\" }",
            "the port is not a number in 1..65535"},
        Bad{"peer_mapped_v4_twice",
            "affinity { peers: \"10.0.0.1:7443\" peers: \"[::ffff:10.0.0.1]:7443\" }",
            "affinity.peers[1]: \"[::ffff:10.0.0.1]:7443\" names 10.0.0.1:7443 again"},
        Bad{"peer_named_twice_in_two_spellings",
            "affinity { peers: \"10.0.0.1:7443\" peers: \"0x0a000001:7443\" }",
            "affinity.peers[1]: \"0x0a000001:7443\" names 10.0.0.1:7443 again"},
        Bad{"peer_name_twice_in_two_cases",
            "affinity { peers: \"peer.example:7443\" peers: \"PEER.example.:7443\" }",
            "affinity.peers[1]: \"PEER.example.:7443\" names peer.example:7443 again"},
        Bad{"store_timeout_over_5s", "quota_store { timeout { seconds: 6 } }",
            "quota_store.timeout: at most 5s (got 6s)"},
        Bad{"store_timeout_zero", "quota_store { timeout { } }",
            "quota_store.timeout: must be positive"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.name; });

}  // namespace
}  // namespace egress

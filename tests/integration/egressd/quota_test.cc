// Quotas per caller and destination (Config.quotas) through a real egressd against the
// fault server: a caller over its rate or its concurrency gets RESOURCE_EXHAUSTED
// (QUOTA_EXCEEDED, RetryInfo) for the excess only, nothing of the excess reaches the
// upstream, other callers are not touched, and every redirect hop is checked; and what
// each caller's fetches cost.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/config/config.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;

class QuotaTest : public EgressFaultsTest {
 protected:
  void SetUp() override { faults().SetSwitch(FaultServer::Switch::kOk); }

  // egressd believing the caller header from loopback, with `rules` as its quotas.
  void StartWithQuotas(const std::vector<std::string>& rules) {
    StartEgress([&](egress::v1::Config& c) {
      c.mutable_policy()->set_caller_header("x-egress-caller");
      c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
      for (const auto& text : rules) {
        auto parsed = ParseConfigText("quotas { " + text + " }", "quota");
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        c.MergeFrom(*parsed);
      }
    });
  }

  grpc::Status FetchAs(const std::string& caller, const std::string& path,
                       bool follow_redirects = false) {
    auto request = Request(faults().Url(path));
    request.set_follow_redirects(follow_redirects);
    BackgroundFetch fetch(*stub_, std::move(request), caller);
    return fetch.Wait();
  }

  static std::map<std::string, std::string> Metadata(const grpc::Status& status) {
    auto info = ErrorInfoOf(status);
    if (!info) return {};
    return {info->metadata().begin(), info->metadata().end()};
  }
};

// A rate that does not refill within the test: the burst is all a caller gets.
TEST_F(QuotaTest, ACallerOverItsRateGetsResourceExhaustedForTheExcessOnly) {
  StartWithQuotas({R"(name: "per-caller" caller: "*" hosts: "127.0.0.1"
                      requests_per_second: 0.01 burst: 5)"});
  const int upstream_before = faults().switch_requests();
  int ok = 0;
  for (int i = 0; i < 20; ++i) {
    const grpc::Status status = FetchAs("noisy", "/switch");
    if (status.ok()) {
      ++ok;
      continue;
    }
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(),
                HasSubstr("caller \"noisy\" is over quota \"per-caller\": at most 0.01 "
                          "requests per second (burst 5)"));
    EXPECT_EQ(ErrorInfoOf(status)->reason(), "QUOTA_EXCEEDED");
    EXPECT_THAT(Metadata(status), ::testing::IsSupersetOf({Pair("rule", "per-caller"),
                                                            Pair("caller", "noisy"),
                                                            Pair("limit", "requests_per_second")}));
    // About 100 s until the next token (one at 0.01 per second).
    const auto delay = RetryDelayOf(status);
    ASSERT_TRUE(delay);
    EXPECT_GT(*delay, absl::Seconds(90));
    EXPECT_LE(*delay, absl::Seconds(100));
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(observer_.quota_rejected[static_cast<size_t>(QuotaLimit::kRequestsPerSecond)], 15);
  // Another caller has a bucket of its own; callers without an identity share one.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(FetchAs("quiet", "/switch").ok()) << i;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(FetchAs("", "/switch").ok()) << i;
  EXPECT_EQ(FetchAs("", "/switch").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Nothing refused reached the upstream.
  EXPECT_EQ(faults().switch_requests() - upstream_before, 15);
}

// A quota on an address counts that address in every spelling: writing it another way
// does not get a caller past the quota, and nothing refused reaches the upstream.
TEST_F(QuotaTest, AQuotaOnAnAddressCountsEverySpellingOfIt) {
  StartWithQuotas({R"(name: "loopback" caller: "*" hosts: "127.0.0.1"
                      requests_per_second: 0.01 burst: 1)"});
  const int upstream_before = faults().switch_requests();
  EXPECT_TRUE(FetchAs("noisy", "/switch").ok());
  for (const char* host : {"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1",
                           "[::ffff:127.0.0.1]"}) {
    BackgroundFetch fetch(
        *stub_, Request(absl::StrCat("http://", host, ":", faults().port(), "/switch")),
        "noisy");
    const grpc::Status status = fetch.Wait();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << host << ": " << status.error_message();
  }
  EXPECT_EQ(faults().switch_requests() - upstream_before, 1);
}

TEST_F(QuotaTest, ARuleNamingTheCallerComesBeforeTheDefault) {
  StartWithQuotas({R"(name: "default" caller: "*" hosts: "*" requests_per_second: 0.01
                      burst: 1)",
                   R"(name: "batch" caller: "batch" hosts: "127.0.0.1"
                      requests_per_second: 0.01 burst: 3)"});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(FetchAs("batch", "/switch").ok()) << i;
  const grpc::Status refused = FetchAs("batch", "/switch");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(Metadata(refused), ::testing::Contains(Pair("rule", "batch")));
  EXPECT_TRUE(FetchAs("web", "/switch").ok());
  EXPECT_THAT(Metadata(FetchAs("web", "/switch")), ::testing::Contains(Pair("rule", "default")));
}

// A place under max_concurrent is held while the fetch is under way, and given back when
// it ends (here, cancelled).
TEST_F(QuotaTest, ConcurrencyQuotaHoldsAPlaceUntilTheFetchEnds) {
  StartWithQuotas({R"(name: "two-at-once" caller: "*" hosts: "127.0.0.1" max_concurrent: 2)"});
  auto first = std::make_unique<BackgroundFetch>(*stub_, Request(faults().Url("/never")), "a");
  BackgroundFetch second(*stub_, Request(faults().Url("/never")), "a");
  ASSERT_TRUE(WaitFor([&] { return FaultOrigin().active == 2; }));

  const grpc::Status refused = FetchAs("a", "/switch");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("caller \"a\" is over quota \"two-at-once\": at most 2 requests "
                        "under way at once"));
  EXPECT_THAT(Metadata(refused), ::testing::Contains(Pair("limit", "max_concurrent")));
  EXPECT_EQ(RetryDelayOf(refused), absl::Milliseconds(100));
  EXPECT_TRUE(FetchAs("b", "/switch").ok());  // another caller's count

  first->Cancel();
  EXPECT_EQ(first->Wait().error_code(), grpc::StatusCode::CANCELLED);
  // The caller has its CANCELLED at once; egressd ends the fetch (and gives its place
  // back) once the exchange has stopped.
  ASSERT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 1; }));
  EXPECT_TRUE(FetchAs("a", "/switch").ok());
  EXPECT_EQ(observer_.quota_rejected[static_cast<size_t>(QuotaLimit::kMaxConcurrent)], 1);
  second.Cancel();
}

// A redirect to another host is an upstream request of its own, under that host's rule:
// a caller cannot escape a quota through an upstream that redirects.
TEST_F(QuotaTest, EachRedirectHopIsCheckedAgainstItsHostsQuota) {
  StartWithQuotas({R"(name: "localhost" caller: "*" hosts: "localhost"
                      requests_per_second: 0.01 burst: 1)"});
  EXPECT_TRUE(FetchAs("a", "/redirect-other-origin", /*follow_redirects=*/true).ok());
  const grpc::Status refused = FetchAs("a", "/redirect-other-origin", true);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(Metadata(refused), ::testing::Contains(Pair("rule", "localhost")));
  // The first hop, to 127.0.0.1, is under no rule.
  EXPECT_TRUE(FetchAs("a", "/redirect-other-origin", false).ok());
}

// What each caller's fetches cost, as the metrics' egress_caller_*_total get it: fetches,
// body bytes both ways, the connections and TLS handshakes dialed for it, and the bytes
// drained on its behalf.
TEST_F(QuotaTest, EachCallersCostIsItsOwn) {
  StartWithQuotas({});
  for (int i = 0; i < 2; ++i) {  // a TLS connection dialed, then reused
    BackgroundFetch fetch(*stub_, Request(nginx().HttpsUrl("/cl/1k")), "reader");
    ASSERT_TRUE(fetch.Wait().ok()) << fetch.Wait().error_message();
  }
  auto post = Request(faults().Url("/ok"));
  post.set_method("POST");
  post.set_body(std::string(100, 'p'));
  BackgroundFetch posted(*stub_, post, "writer");
  ASSERT_TRUE(posted.Wait().ok());
  // Head only: the 1 KiB body is drained on the caller's behalf.
  BackgroundFetch skipped(*stub_, Request(nginx().HttpUrl("/cl/1k"), egress::v1::BODY_MODE_NONE),
                          "skipper");
  ASSERT_TRUE(skipped.Wait().ok());

  const CallerCost reader = observer_.CostOf("reader");
  EXPECT_EQ(reader.fetches, 2u);
  EXPECT_EQ(reader.response_bytes, 2048u);
  EXPECT_EQ(reader.request_bytes, 0u);
  EXPECT_EQ(reader.connections_opened, 1u);
  EXPECT_EQ(reader.tls_handshakes, 1u);
  const CallerCost writer = observer_.CostOf("writer");
  EXPECT_EQ(writer.fetches, 1u);
  EXPECT_EQ(writer.request_bytes, 100u);
  EXPECT_EQ(writer.connections_opened, 1u);
  EXPECT_EQ(writer.tls_handshakes, 0u);
  EXPECT_TRUE(WaitFor([&] { return observer_.CostOf("skipper").drain_bytes == 1024; }));
  EXPECT_EQ(observer_.CostOf("skipper").response_bytes, 0u);
  EXPECT_EQ(observer_.CostOf("").fetches, 0u);
}

}  // namespace
}  // namespace egress::testing

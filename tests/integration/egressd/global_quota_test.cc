// Global quotas: two egressd replicas sharing a real redis-server hold one token bucket
// between them, and with Redis stopped each fails open or closed as configured, counted,
// and is back under the quota once Redis is.
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "service/config/config.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/redis_server.h"

namespace egress::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;

constexpr int kBurst = 6;

class GlobalQuotaTest : public EgressFaultsTest {
 protected:
  static void SetUpTestSuite() {
    EgressFaultsTest::SetUpTestSuite();
    const char* tmp = std::getenv("TEST_TMPDIR");
    redis_ = new RedisServer(tmp ? tmp : "/tmp");
  }
  static void TearDownTestSuite() {
    delete redis_;
    EgressFaultsTest::TearDownTestSuite();
  }
  // Each test starts with an empty Redis.
  void SetUp() override {
    faults().SetSwitch(FaultServer::Switch::kOk);
    redis_->Stop();
    redis_->Start();
  }
  void TearDown() override {
    second_stub_.reset();
    second_.reset();
    EgressFaultsTest::TearDown();
  }

  // A global rule of kBurst tokens that does not refill within the test, for the fault
  // server on 127.0.0.1 (ExpectHealthy's nginx, named localhost, is under no rule).
  static void Configure(egress::v1::Config& c, bool fail_closed) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
    auto* rule = c.add_quotas();
    rule->set_name("shared");
    rule->set_caller("*");
    rule->add_hosts("127.0.0.1");
    rule->set_requests_per_second(0.01);
    rule->set_burst(kBurst);
    rule->set_global(true);
    c.mutable_quota_store()->set_redis(redis_->address());
    c.mutable_quota_store()->set_fail_closed(fail_closed);
  }

  void StartReplicas(bool fail_closed = false) {
    StartEgress([&](egress::v1::Config& c) { Configure(c, fail_closed); });
    egress::v1::Config proto;
    proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
    Configure(proto, fail_closed);
    auto config = BuildConfig(proto);
    ASSERT_TRUE(config.ok()) << config.status();
    auto server = EgressServer::Start(*config, "127.0.0.1:0", second_observer_, second_observer_);
    ASSERT_TRUE(server.ok()) << server.status();
    second_ = *std::move(server);
    second_stub_ = egress::v1::Egress::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", second_->grpc_port()), grpc::InsecureChannelCredentials()));
  }

  // A fetch as `caller` through replica 0 (the fixture's) or 1.
  grpc::Status FetchAs(const std::string& caller, int replica) {
    BackgroundFetch fetch(replica == 0 ? *stub_ : *second_stub_,
                          Request(faults().Url("/switch")), caller);
    return fetch.Wait();
  }

  static RedisServer* redis_;
  CountingObserver second_observer_;
  std::unique_ptr<EgressServer> second_;
  std::unique_ptr<egress::v1::Egress::Stub> second_stub_;
};

RedisServer* GlobalQuotaTest::redis_ = nullptr;

TEST_F(GlobalQuotaTest, AGlobalQuotaHoldsAcrossTwoReplicas) {
  StartReplicas();
  const int upstream_before = faults().switch_requests();
  int ok = 0;
  for (int i = 0; i < 4 * kBurst; ++i) {
    const grpc::Status status = FetchAs("noisy", i % 2);
    if (status.ok()) {
      ++ok;
      continue;
    }
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(),
                HasSubstr("caller \"noisy\" is over quota \"shared\": at most 0.01 requests "
                          "per second (burst 6, shared by every replica)"));
    EXPECT_EQ(ErrorInfoOf(status)->reason(), "QUOTA_EXCEEDED");
    const auto delay = RetryDelayOf(status);
    ASSERT_TRUE(delay);
    EXPECT_GT(*delay, absl::Seconds(90));  // Redis's bucket: a token per 100 s
  }
  // Each replica alone would have let kBurst through.
  EXPECT_EQ(ok, kBurst);
  EXPECT_GT(observer_.quota_rejected[static_cast<size_t>(QuotaLimit::kRequestsPerSecond)], 0);
  EXPECT_GT(second_observer_.quota_rejected[static_cast<size_t>(QuotaLimit::kRequestsPerSecond)],
            0);
  // Another caller's bucket is its own, on either replica.
  EXPECT_TRUE(FetchAs("quiet", 0).ok());
  EXPECT_TRUE(FetchAs("quiet", 1).ok());
  EXPECT_EQ(faults().switch_requests() - upstream_before, kBurst + 2);
  EXPECT_EQ(observer_.quota_store_errors[0] + observer_.quota_store_errors[1], 0);
}

TEST_F(GlobalQuotaTest, WithRedisStoppedAReplicaFailsOpenAndCountsIt) {
  StartReplicas(/*fail_closed=*/false);
  redis_->Stop();
  // Unlimited by the rule while the store is away: more than a burst goes through.
  for (int i = 0; i < 2 * kBurst; ++i) EXPECT_TRUE(FetchAs("noisy", 0).ok()) << i;
  EXPECT_EQ(observer_.quota_store_errors[0], 2 * kBurst);
  EXPECT_EQ(observer_.quota_store_errors[1], 0);

  // Redis back (empty, as after a restart): within the reconnect interval the rule holds
  // again, and the burst is all that passes.
  redis_->Start();
  ASSERT_TRUE(WaitFor([&] {
    const int errors = observer_.quota_store_errors[0];
    FetchAs("probe", 0);
    return observer_.quota_store_errors[0] == errors;
  }));
  int ok = 0;
  for (int i = 0; i < 2 * kBurst; ++i) ok += FetchAs("noisy", i % 2).ok();
  EXPECT_EQ(ok, kBurst);
}

TEST_F(GlobalQuotaTest, WithRedisStoppedAFailClosedReplicaRefusesAndCountsIt) {
  StartReplicas(/*fail_closed=*/true);
  EXPECT_TRUE(FetchAs("noisy", 0).ok());
  redis_->Stop();
  const int upstream_before = faults().switch_requests();
  for (int i = 0; i < 3; ++i) {
    const grpc::Status status = FetchAs("noisy", 0);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(status.error_message(),
                HasSubstr("the quota store cannot say whether quota \"shared\" allows "
                          "this request, and it fails closed (quota_store.fail_closed)"));
    EXPECT_THAT(status.error_message(), HasSubstr("redis at " + redis_->address()));
    auto info = ErrorInfoOf(status);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->reason(), "QUOTA_STORE_UNAVAILABLE");
    const std::map<std::string, std::string> metadata(info->metadata().begin(),
                                                      info->metadata().end());
    EXPECT_THAT(metadata, ::testing::Contains(Pair("redis", redis_->address())));
  }
  EXPECT_EQ(faults().switch_requests(), upstream_before);
  EXPECT_EQ(observer_.quota_store_errors[1], 3);
  EXPECT_EQ(observer_.quota_store_errors[0], 0);
  // Fetches to hosts no global rule covers do not depend on Redis.
  ExpectHealthy();
}

// A Redis that takes the connection and never answers (the fault server's silent port):
// each fetch's check gives up after quota_store.timeout, and the replica fails closed.
TEST_F(GlobalQuotaTest, ARedisThatNeverAnswersTimesOutAndTheReplicaFailsClosed) {
  StartEgress([&](egress::v1::Config& c) {
    Configure(c, /*fail_closed=*/true);
    c.mutable_quota_store()->set_redis(absl::StrCat("127.0.0.1:", faults().silent_port()));
  });
  for (int i = 0; i < 3; ++i) {
    const grpc::Status status = FetchAs("noisy", 0);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(status.error_message(), HasSubstr("did not answer within 50ms"));
  }
  EXPECT_EQ(observer_.quota_store_errors[1], 3);
  ExpectHealthy();
}

// A "Redis" that answers with something else (an HTTP response): each check fails as a
// protocol error, and a fail-open replica lets the fetches through, counted.
TEST_F(GlobalQuotaTest, ARedisThatAnswersGarbageFailsOpen) {
  StartEgress([&](egress::v1::Config& c) {
    Configure(c, /*fail_closed=*/false);
    c.mutable_quota_store()->set_redis(absl::StrCat("127.0.0.1:", faults().garbage_port()));
  });
  for (int i = 0; i < 2 * kBurst; ++i) EXPECT_TRUE(FetchAs("noisy", 0).ok()) << i;
  EXPECT_EQ(observer_.quota_store_errors[0], 2 * kBurst);
  EXPECT_EQ(observer_.quota_store_errors[1], 0);
}

}  // namespace
}  // namespace egress::testing

// Circuit breaking per origin against a fault server that can be switched between
// failing and healthy: the breaker opens within the configured failures, refuses at once
// with no upstream traffic while open, leaves other origins alone, closes after the
// upstream recovers, and cannot be opened by a caller's short deadlines.
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/admin/admin_server.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchResponse;
using ::testing::HasSubstr;

constexpr int kFailures = 3;
constexpr absl::Duration kOpenFor = absl::Seconds(1);

class CircuitBreakingTest : public EgressFaultsTest {
 protected:
  void SetUp() override { faults().SetSwitch(FaultServer::Switch::kOk); }
  void TearDown() override {
    faults().SetSwitch(FaultServer::Switch::kOk);
    admin_.reset();
    EgressFaultsTest::TearDown();
  }

  // egressd with a breaker of kFailures and kOpenFor for every origin, and its admin API.
  void StartWithBreaker() {
    StartEgress([](egress::v1::Config& c) {
      auto* breaker = c.mutable_transport()->mutable_circuit_breaker();
      breaker->set_consecutive_failures(kFailures);
      breaker->mutable_open_for()->set_seconds(absl::ToInt64Seconds(kOpenFor));
      c.mutable_transport()->mutable_response_header_timeout()->set_nanos(300'000'000);
    });
    auto admin = AdminServer::Start(*server_, {"127.0.0.1:0", "", {}});
    ASSERT_TRUE(admin.ok()) << admin.status();
    admin_ = *std::move(admin);
    admin_stub_ = egress::v1::TransportAdmin::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", admin_->port()), grpc::InsecureChannelCredentials()));
  }

  grpc::Status FetchSwitch(FetchResponse* response = nullptr) {
    FetchResponse ignored;
    return Fetch(Request(faults().Url("/switch")), response ? response : &ignored);
  }

  // The fault server's origin as GetPoolStats shows it.
  egress::v1::OriginPoolStats AdminStats() {
    grpc::ClientContext context;
    egress::v1::PoolStats stats;
    EXPECT_TRUE(
        admin_stub_->GetPoolStats(&context, egress::v1::GetPoolStatsRequest(), &stats).ok());
    for (const auto& origin : stats.origins()) {
      if (origin.origin() == FaultKey()) return origin;
    }
    return {};
  }

  void ExpectRefusedAtOnce() {
    const int before = faults().switch_requests();
    const grpc::Status status = FetchSwitch();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("circuit breaker open for ", FaultKey())));
    const auto info = ErrorInfoOf(status);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->reason(), "CIRCUIT_OPEN");
    EXPECT_EQ(info->metadata().at("origin"), FaultKey());
    const auto delay = RetryDelayOf(status);
    ASSERT_TRUE(delay);
    EXPECT_GT(*delay, absl::ZeroDuration());
    EXPECT_LE(*delay, kOpenFor);
    EXPECT_EQ(faults().switch_requests(), before) << "a refused fetch reached the upstream";
  }

  // Applies `config` through the admin API; the config in force comes back.
  egress::v1::Config Update(const egress::v1::Config& config) {
    egress::v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    egress::v1::Config in_force;
    grpc::ClientContext context;
    const grpc::Status status = admin_stub_->UpdateConfig(&context, request, &in_force);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return in_force;
  }
  egress::v1::Config InForce() {
    egress::v1::Config config;
    grpc::ClientContext context;
    EXPECT_TRUE(admin_stub_->GetConfig(&context, egress::v1::GetConfigRequest(), &config).ok());
    return config;
  }

  std::unique_ptr<AdminServer> admin_;
  std::unique_ptr<egress::v1::TransportAdmin::Stub> admin_stub_;
};

TEST_F(CircuitBreakingTest, FiveHundredsOpenTheBreakerWhichClosesAfterTheUpstreamRecovers) {
  StartWithBreaker();
  faults().SetSwitch(FaultServer::Switch::k503);
  const int before = faults().switch_requests();
  for (int i = 0; i < kFailures; ++i) {
    FetchResponse response;
    ASSERT_TRUE(FetchSwitch(&response).ok());
    EXPECT_EQ(response.status_code(), 503);
  }
  EXPECT_EQ(faults().switch_requests(), before + kFailures);
  for (int i = 0; i < 5; ++i) ExpectRefusedAtOnce();
  EXPECT_EQ(observer_.BreakerTransitionsTo(transport::BreakerState::kOpen), 1);
  EXPECT_EQ(observer_.breaker_rejected, 5);
  const egress::v1::OriginPoolStats open = AdminStats();
  EXPECT_EQ(open.circuit_breaker(), egress::v1::CIRCUIT_BREAKER_OPEN);
  EXPECT_EQ(open.consecutive_failures(), static_cast<uint32_t>(kFailures));
  EXPECT_EQ(open.last_failure(), "HTTP 503");
  EXPECT_TRUE(open.has_circuit_open_remaining());
  ExpectHealthy();  // nginx, another origin, is not affected

  faults().SetSwitch(FaultServer::Switch::kOk);
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(kOpenFor + absl::Milliseconds(50)));
  FetchResponse probe;
  ASSERT_TRUE(FetchSwitch(&probe).ok());  // the probe
  EXPECT_EQ(probe.status_code(), 200);
  EXPECT_EQ(observer_.BreakerTransitionsTo(transport::BreakerState::kHalfOpen), 1);
  EXPECT_EQ(observer_.BreakerTransitionsTo(transport::BreakerState::kClosed), 1);
  EXPECT_EQ(AdminStats().circuit_breaker(), egress::v1::CIRCUIT_BREAKER_CLOSED);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(FetchSwitch().ok());
}

TEST_F(CircuitBreakingTest, ResetsOpenTheBreakerAndAFailedProbeOpensItAgain) {
  StartWithBreaker();
  faults().SetSwitch(FaultServer::Switch::kReset);
  for (int i = 0; i < kFailures; ++i) {
    const grpc::Status status = FetchSwitch();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr("circuit breaker")));
  }
  ExpectRefusedAtOnce();
  EXPECT_THAT(AdminStats().last_failure(), HasSubstr(FaultKey()));

  std::this_thread::sleep_for(absl::ToChronoMilliseconds(kOpenFor + absl::Milliseconds(50)));
  const int before = faults().switch_requests();
  const grpc::Status probe = FetchSwitch();
  EXPECT_EQ(probe.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(probe.error_message(), ::testing::Not(HasSubstr("circuit breaker")));
  EXPECT_EQ(faults().switch_requests(), before + 1) << "one probe, and only one";
  ExpectRefusedAtOnce();
  EXPECT_EQ(observer_.BreakerTransitionsTo(transport::BreakerState::kOpen), 2);
}

// A hostile caller's short deadlines fail its own fetches only: they say nothing of the
// origin, and the breaker stays closed for everyone else.
TEST_F(CircuitBreakingTest, ACallersShortDeadlinesDoNotOpenTheBreaker) {
  StartWithBreaker();
  for (int i = 0; i < 3 * kFailures; ++i) {
    auto request = Request(faults().Url("/never"));
    request.mutable_timeout()->set_nanos(50'000'000);
    FetchResponse response;
    EXPECT_EQ(Fetch(request, &response).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(FetchSwitch().ok());
  EXPECT_EQ(observer_.BreakerTransitionsTo(transport::BreakerState::kOpen), 0);
  EXPECT_EQ(AdminStats().circuit_breaker(), egress::v1::CIRCUIT_BREAKER_CLOSED);
  EXPECT_EQ(AdminStats().consecutive_failures(), 0u);
}

// The transport's own response_header_timeout is the origin's failure, unlike the
// caller's deadline.
TEST_F(CircuitBreakingTest, TheTransportsOwnTimeoutCounts) {
  StartWithBreaker();
  for (int i = 0; i < kFailures; ++i) {
    FetchResponse response;
    const grpc::Status status = Fetch(Request(faults().Url("/never")), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_EQ(ErrorInfoOf(status)->reason(), "UPSTREAM_TIMEOUT");
  }
  ExpectRefusedAtOnce();
}

// A GitOps loop re-applying the same config, or changing only the policy, must not
// close open breakers; new breaker settings do.
TEST_F(CircuitBreakingTest, ANewConfigClosesTheBreakersOnlyWhenTheirSettingsChange) {
  StartWithBreaker();
  faults().SetSwitch(FaultServer::Switch::k503);
  for (int i = 0; i < kFailures; ++i) EXPECT_TRUE(FetchSwitch().ok());
  ExpectRefusedAtOnce();
  egress::v1::Config config = InForce();
  config.mutable_transport()->set_max_idle_per_origin(5);
  Update(config);
  ExpectRefusedAtOnce();
  EXPECT_EQ(AdminStats().circuit_breaker(), egress::v1::CIRCUIT_BREAKER_OPEN);

  config.mutable_transport()->mutable_circuit_breaker()->set_consecutive_failures(kFailures + 1);
  Update(config);
  EXPECT_EQ(AdminStats().circuit_breaker(), egress::v1::CIRCUIT_BREAKER_CLOSED);
  EXPECT_EQ(observer_.BreakerTransitionsTo(transport::BreakerState::kClosed), 1);
  for (int i = 0; i < kFailures; ++i) EXPECT_TRUE(FetchSwitch().ok());
  EXPECT_EQ(AdminStats().circuit_breaker(), egress::v1::CIRCUIT_BREAKER_CLOSED);  // 3 of 4
  EXPECT_TRUE(FetchSwitch().ok());
  ExpectRefusedAtOnce();
}

TEST_F(CircuitBreakingTest, OffByDefault) {
  StartEgress();
  faults().SetSwitch(FaultServer::Switch::k503);
  const int before = faults().switch_requests();
  for (int i = 0; i < 20; ++i) {
    FetchResponse response;
    ASSERT_TRUE(FetchSwitch(&response).ok());
    EXPECT_EQ(response.status_code(), 503);
  }
  EXPECT_EQ(faults().switch_requests(), before + 20);
  EXPECT_EQ(observer_.breaker_rejected, 0);
}

TEST_F(CircuitBreakingTest, AnOriginsEntryTurnsItOffForItsHosts) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->mutable_circuit_breaker()->set_consecutive_failures(1);
    auto* origin = c.mutable_transport()->add_origins();
    origin->set_host("127.0.0.1");
    origin->mutable_circuit_breaker()->set_consecutive_failures(0);
  });
  faults().SetSwitch(FaultServer::Switch::k503);
  for (int i = 0; i < 5; ++i) {
    FetchResponse response;
    ASSERT_TRUE(FetchSwitch(&response).ok());
    EXPECT_EQ(response.status_code(), 503);
  }
  EXPECT_EQ(observer_.breaker_rejected, 0);
}

}  // namespace
}  // namespace egress::testing

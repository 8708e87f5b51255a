// A policy change (ApplyConfig, what UpdateConfig runs) reaches pooled connections at
// once: an idle connection the new policy denies is retired (close reason "policy") and
// the next fetch is PERMISSION_DENIED; a connection busy with a response when the policy
// changes finishes it and is then retired instead of idling. Origins that never got a
// connection leave no entry in the pool's stats.
#include <functional>
#include <future>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/transport/http/request.h"
#include "service/transport/transport.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchResponse;
using ::testing::HasSubstr;
using transport::CloseReason;
using transport::DenyReason;

class PolicyChangeTest : public EgressTest {
 protected:
  // The config in force, its policy changed by `change`, applied as UpdateConfig does.
  void ChangePolicy(const std::function<void(egress::v1::PolicyConfig&)>& change) {
    egress::v1::Config config = server_->config().Get()->proto;
    change(*config.mutable_policy());
    const auto applied = server_->ApplyConfig(config);
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  // Fetches `url` and waits for its connection to idle in the pool.
  void FetchAndPool(const std::string& url, const std::string& origin) {
    FetchResponse response;
    const grpc::Status status = Fetch(Request(url), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    WaitForQuietPool();
    ASSERT_EQ(PoolStatsFor(origin).idle, 1);
  }

  // A response straight from the transport, its body unread: its connection stays busy.
  transport::Response StartResponse(const std::string& url) {
    auto request = transport::MakeRequest("GET", url, {}, "");
    EXPECT_TRUE(request.ok()) << request.status();
    std::promise<absl::StatusOr<transport::Response>> promise;
    server_->transport().Fetch(*std::move(request), absl::Now() + absl::Seconds(20),
                               [&](absl::StatusOr<transport::Response> response) {
                                 promise.set_value(std::move(response));
                               });
    auto response = promise.get_future().get();
    EXPECT_TRUE(response.ok()) << response.status();
    return *std::move(response);
  }

  // Reads a body to its end; its size.
  static size_t ReadToEnd(transport::ResponseBody& body) {
    size_t size = 0;
    for (;;) {
      std::promise<absl::StatusOr<std::string>> promise;
      body.Read(64 * 1024, [&](absl::StatusOr<std::string> bytes) {
        promise.set_value(std::move(bytes));
      });
      const absl::StatusOr<std::string> bytes = promise.get_future().get();
      EXPECT_TRUE(bytes.ok()) << bytes.status();
      if (!bytes.ok() || bytes->empty()) return size;
      size += bytes->size();
    }
  }

  std::string HttpOrigin() const { return absl::StrCat("http://127.0.0.1:", nginx().http_port()); }
  std::string HttpsOrigin() const {
    return absl::StrCat("https://localhost:", nginx().https_port());
  }
};

TEST_F(PolicyChangeTest, AddingDenyHostsRetiresTheIdleConnectionAndTheNextFetchIsDenied) {
  StartEgress();
  FetchAndPool(nginx().HttpsUrl("/cl/1k"), HttpsOrigin());
  ChangePolicy([](egress::v1::PolicyConfig& p) { p.add_deny_hosts("localhost"); });
  EXPECT_EQ(PoolStatsFor(HttpsOrigin()).idle, 0);
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 1);

  FetchResponse response;
  const grpc::Status status = Fetch(Request(nginx().HttpsUrl("/cl/1k")), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("matches policy.deny_hosts"));
  EXPECT_EQ(observer_.Denied(DenyReason::kHostDenied), 1);
  EXPECT_EQ(observer_.requests_reused, 0);
  EXPECT_EQ(nginx().WaitForRequests(LoggedUri("/cl/1k"), 1).size(), 1u);  // only the first
}

TEST_F(PolicyChangeTest, AddingDenyCidrsRetiresTheIdleConnectionAndTheNextFetchIsDenied) {
  StartEgress();
  FetchAndPool(nginx().HttpUrl("/cl/1k"), HttpOrigin());
  ChangePolicy([](egress::v1::PolicyConfig& p) { p.add_deny_cidrs("127.0.0.1/32"); });
  EXPECT_EQ(PoolStatsFor(HttpOrigin()).idle, 0);
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 1);

  FetchResponse response;
  const grpc::Status status = Fetch(Request(nginx().HttpUrl("/cl/1k")), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("127.0.0.1 is in policy.deny_cidrs"));
  EXPECT_EQ(observer_.Denied(DenyReason::kCidrDenied), 1);
  EXPECT_EQ(observer_.requests_reused, 0);
}

TEST_F(PolicyChangeTest, AResponseUnderWayWhenItsAddressIsDeniedEndsButItsConnectionIsNotPooled) {
  StartEgress();
  transport::Response response = StartResponse(nginx().HttpUrl("/cl/100k"));
  ChangePolicy([](egress::v1::PolicyConfig& p) { p.add_deny_cidrs("127.0.0.1/32"); });
  EXPECT_EQ(PoolStatsFor(HttpOrigin()).active, 1);  // the policy left it to finish
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 0);

  EXPECT_EQ(ReadToEnd(*response.body), 102400u);
  response.body.reset();
  WaitForQuietPool();
  EXPECT_EQ(PoolStatsFor(HttpOrigin()).idle, 0);
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 1);
}

TEST_F(PolicyChangeTest, ABodyLeftToDrainAfterItsHostIsDeniedDoesNotPoolItsConnection) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_drain()->mutable_max_duration()->set_seconds(5);  // the drain must complete
  });
  transport::Response response = StartResponse(nginx().HttpsUrl("/cl/100k"));
  ChangePolicy([](egress::v1::PolicyConfig& p) { p.add_deny_hosts("localhost"); });
  response.body.reset();  // unread: drained in the background
  WaitForQuietPool();
  EXPECT_EQ(observer_.drains_completed, 1);
  EXPECT_EQ(PoolStatsFor(HttpsOrigin()).idle, 0);
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 1);
}

// Through the transport: 3,000 gRPC calls take minutes under TSan.
TEST_F(PolicyChangeTest, ThousandsOfFetchesToDistinctDeniedDestinationsLeaveNoPoolEntries) {
  StartEgress([](egress::v1::Config& c) { c.mutable_policy()->add_deny_cidrs("127.0.0.1/32"); });
  constexpr int kDestinations = 3000;
  int denied = 0;
  for (int i = 0; i < kDestinations; ++i) {
    auto request =
        transport::MakeRequest("GET", absl::StrCat("http://127.0.0.1:", 20000 + i, "/"), {}, "");
    ASSERT_TRUE(request.ok()) << request.status();
    std::promise<absl::Status> promise;
    server_->transport().Fetch(*std::move(request), absl::Now() + absl::Seconds(20),
                               [&](absl::StatusOr<transport::Response> response) {
                                 promise.set_value(response.status());
                               });
    if (absl::IsPermissionDenied(promise.get_future().get())) ++denied;
  }
  EXPECT_EQ(denied, kDestinations);
  EXPECT_EQ(observer_.Denied(DenyReason::kCidrDenied), kDestinations);
  EXPECT_TRUE(server_->transport().PoolStats().empty());
}

}  // namespace
}  // namespace egress::testing

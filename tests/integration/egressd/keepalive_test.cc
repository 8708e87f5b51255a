// Connection lifetime: the server's Keep-Alive hints (timeout, max) are honoured so that
// no request crosses a server's close, and egressd's own max age and max requests per
// connection retire connections at the end of an exchange or while idle, never in the
// middle of one.
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/config/config_store.h"
#include "tests/support/admin_fixture.h"
#include "tests/support/keep_alive_server.h"

namespace egress::testing {
namespace {

using egress::v1::FetchResponse;
using std::chrono::milliseconds;
using transport::CloseReason;

class KeepAliveTest : public EgressAdminTest {
 protected:
  // A POST (not idempotent: never retried on another connection) of `url`.
  grpc::Status Post(const std::string& url, FetchResponse* response = nullptr) {
    egress::v1::FetchRequest request = Request(url);
    request.set_method("POST");
    request.set_body("payload");
    FetchResponse ignored;
    return Fetch(request, response ? response : &ignored);
  }

  static void SetDuration(google::protobuf::Duration* d, milliseconds ms) {
    d->set_seconds(ms.count() / 1000);
    d->set_nanos(static_cast<int32_t>(ms.count() % 1000) * 1'000'000);
  }

  static std::string Origin(const std::string& url) { return url.substr(0, url.find('/', 8)); }

  // Waits (up to 5 s) until `origin` has `idle` idle connections; returns how many it has.
  int WaitForIdle(const std::string& origin, int idle) {
    WaitFor([&] { return PoolStatsFor(origin).idle == idle; });
    return PoolStatsFor(origin).idle;
  }

};

// The server closes a connection idle for exactly 1 s; its FIN takes 50 ms to arrive (a
// request sent in that window crosses it). POSTs after idle gaps around the edge reach a
// new connection instead: the idle one expired 300 ms (the margin) before the server's
// timeout. Gaps are not scaled: the server's timeout is real time.
TEST_F(KeepAliveTest, PostsSentAcrossTheAnnouncedTimeoutAllSucceed) {
  auto server = std::make_unique<KeepAliveServer>(1, 0, milliseconds(50));
  StartEgress([](egress::v1::Config& c) {
    SetDuration(c.mutable_transport()->mutable_keepalive_hint_margin(), milliseconds(300));
  });
  const std::string url = server->Url("/post");
  ASSERT_TRUE(Post(url).ok());
  int sent = 0;
  for (int gap = 940; gap <= 1040; gap += 10, ++sent) {
    std::this_thread::sleep_for(milliseconds(gap));
    const grpc::Status status = Post(url);
    EXPECT_TRUE(status.ok()) << "after " << gap << " ms idle: " << status.error_message();
  }
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(CloseReason::kServerHint), sent);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 0);
  EXPECT_EQ(server->accepted(), sent + 1);
  server->Stop();  // its connections' threads end: their counts are final
  EXPECT_EQ(server->requests_on_closing_connections(), 0);
}

// The server closes right after the 3rd response on a connection (announced max=3, FIN
// 50 ms later): POSTs back to back never land on a connection it is closing.
TEST_F(KeepAliveTest, PostsRightAfterTheAnnouncedMaxAllSucceed) {
  auto server = std::make_unique<KeepAliveServer>(30, 3, milliseconds(50));
  StartEgress();
  const std::string url = server->Url("/post");
  for (int i = 0; i < 12; ++i) {
    const grpc::Status status = Post(url);
    EXPECT_TRUE(status.ok()) << "POST " << i << ": " << status.error_message();
  }
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(CloseReason::kServerHint), 4);
  EXPECT_EQ(server->accepted(), 4);
  server->Stop();
  EXPECT_EQ(server->responses(), 12);
  EXPECT_EQ(server->requests_on_closing_connections(), 0);
}

// The same server with transport.honor_keepalive_hints false: egressd reuses the
// connection past the announced max, and the 4th POST lands on the connection the
// server is closing (what honouring the hint prevents, above).
TEST_F(KeepAliveTest, HintsIgnoredByConfigLetAPostReachAConnectionTheServerIsClosing) {
  auto server = std::make_unique<KeepAliveServer>(30, 3, milliseconds(50));
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->mutable_honor_keepalive_hints()->set_value(false);
  });
  const std::string url = server->Url("/post");
  for (int i = 0; i < 4; ++i) Post(url);  // the 4th may fail: that is the point
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(CloseReason::kServerHint), 0);
  server->Stop();
  EXPECT_EQ(server->requests_on_closing_connections(), 1);
}

TEST_F(KeepAliveTest, GetPoolStatsShowsTheLastHintRequestsServedAndTheOldestIdleAge) {
  auto server = std::make_unique<KeepAliveServer>(30, 100, milliseconds(0));
  StartEgress();
  StartAdmin();
  const std::string url = server->Url("/stats");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Post(url).ok());
  WaitForQuietPool();
  std::this_thread::sleep_for(milliseconds(50));
  egress::v1::PoolStats stats;
  grpc::ClientContext context;
  ASSERT_TRUE(admin_stub_->GetPoolStats(&context, egress::v1::GetPoolStatsRequest(), &stats).ok());
  ASSERT_EQ(stats.origins_size(), 1);
  const egress::v1::OriginPoolStats& origin = stats.origins(0);
  EXPECT_EQ(origin.origin(), Origin(url));
  EXPECT_EQ(origin.server_keepalive_timeout().seconds(), 30);
  ASSERT_TRUE(origin.has_server_keepalive_max());
  EXPECT_EQ(origin.server_keepalive_max(), 100u);
  EXPECT_EQ(origin.requests_served(), 3u);
  EXPECT_GE(origin.oldest_idle_age().nanos() + origin.oldest_idle_age().seconds() * 1'000'000'000,
            50'000'000);
}

TEST_F(KeepAliveTest, UpdateConfigAppliesANewMaxRequestsToPooledConnections) {
  StartEgress();
  StartAdmin();
  ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok());
  ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok());
  egress::v1::Config config = server_->config().Get()->proto;
  config.mutable_transport()->set_max_requests_per_connection(3);
  egress::v1::UpdateConfigRequest request;
  *request.mutable_config() = config;
  egress::v1::Config in_force;
  grpc::ClientContext context;
  ASSERT_TRUE(admin_stub_->UpdateConfig(&context, request, &in_force).ok());
  EXPECT_EQ(in_force.transport().max_requests_per_connection(), 3u);
  ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok());  // the connection's 3rd
  ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok());
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(CloseReason::kMaxRequests), 1);
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/echo"), 4), 2);
}

// An override asks for 3 idle connections to 127.0.0.1; localhost (the same nginx, no
// override) gets none beyond the one its request left.
TEST_F(KeepAliveTest, MinIdlePerOriginKeepsConnectionsReadyForTheOriginsAnOverrideNames) {
  StartEgress([](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("127.0.0.1");
    o->set_min_idle_per_origin(3);
  });
  const std::string warmed = nginx().HttpUrl("/echo");
  const std::string cold = nginx().HttpsUrl("/echo");
  ASSERT_TRUE(Post(warmed).ok());
  ASSERT_TRUE(Post(cold).ok());
  EXPECT_EQ(WaitForIdle(Origin(warmed), 3), 3);
  EXPECT_EQ(PoolStatsFor(Origin(warmed)).opened, 3u);
  EXPECT_EQ(WaitForIdle(Origin(cold), 1), 1);
  EXPECT_EQ(PoolStatsFor(Origin(cold)).opened, 1u);
  // A request takes a ready connection, and another is dialed in its place.
  egress::v1::FetchResponse response;
  ASSERT_TRUE(Post(warmed, &response).ok());
  EXPECT_TRUE(response.connection().was_idle());
  EXPECT_EQ(WaitForIdle(Origin(warmed), 4), 4);
  EXPECT_EQ(PoolStatsFor(Origin(warmed)).opened, 4u);
}

// Pre-warming dials as any dial does: once the policy denies the origin's address, what
// was ready is closed and the dials that would replace it are denied. A 3 s response
// keeps the origin in use meanwhile (pre-warming follows origins that have connections).
TEST_F(KeepAliveTest, PreWarmingDialsOnlyWhereThePolicyAllows) {
  StartEgress([](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("127.0.0.1");
    o->set_min_idle_per_origin(2);
  });
  const std::string url = nginx().HttpUrl("/echo");
  ASSERT_TRUE(Post(url).ok());
  ASSERT_EQ(WaitForIdle(Origin(url), 2), 2);
  grpc::Status slow;
  std::thread in_use([&] {
    FetchResponse response;
    slow = Fetch(Request(nginx().HttpUrl("/slow-head")), &response);
  });
  WaitFor([&] { return PoolStatsFor(Origin(url)).active != 0; });
  ASSERT_EQ(WaitForIdle(Origin(url), 2), 2);  // the one taken was replaced
  egress::v1::Config config = server_->config().Get()->proto;
  config.mutable_policy()->add_deny_cidrs("127.0.0.1/32");
  ASSERT_TRUE(server_->ApplyConfig(config).ok());
  std::this_thread::sleep_for(milliseconds(1500));  // a sweep or more
  EXPECT_EQ(PoolStatsFor(Origin(url)).idle, 0);
  EXPECT_GE(observer_.Denied(transport::DenyReason::kCidrDenied), 1);
  EXPECT_EQ(observer_.opened, 3);
  in_use.join();
  EXPECT_TRUE(slow.ok()) << slow.error_message();
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 3);
}

// nginx with `keepalive_timeout 2s 2s` announces timeout=2 and closes connections idle
// for 2 s; with the default margin (1 s) a connection idle longer than 1 s is not reused.
TEST_F(KeepAliveTest, PostsToNginxAcrossItsAnnouncedTimeoutAllSucceed) {
  StartEgress();
  const std::string url =
      absl::StrCat("http://127.0.0.1:", nginx().keepalive_hint_port(), "/echo");
  int sent = 0;
  for (int gap : {0, 1100, 1900, 1980, 2000, 2020, 2100}) {
    std::this_thread::sleep_for(milliseconds(gap));
    const grpc::Status status = Post(url);
    EXPECT_TRUE(status.ok()) << "after " << gap << " ms idle: " << status.error_message();
    ++sent;
  }
  WaitForQuietPool();
  // Every gap but the first ran past the margin: each POST found its connection retired.
  EXPECT_EQ(observer_.Closed(CloseReason::kServerHint), sent - 1);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 0);
  EXPECT_EQ(nginx().WaitForRequests(LoggedUri("/echo"), sent).size(), static_cast<size_t>(sent));
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/echo"), sent), sent);
}

// nginx with `keepalive_requests 3` says "Connection: close" on the 3rd response.
TEST_F(KeepAliveTest, PostsToNginxAcrossItsRequestLimitAllSucceed) {
  StartEgress();
  const std::string url =
      absl::StrCat("http://127.0.0.1:", nginx().keepalive_hint_port(), "/echo");
  for (int i = 0; i < 9; ++i) {
    const grpc::Status status = Post(url);
    EXPECT_TRUE(status.ok()) << "POST " << i << ": " << status.error_message();
  }
  WaitForQuietPool();
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/echo"), 9), 3);
  EXPECT_EQ(observer_.Closed(CloseReason::kConnectionClose), 3);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 0);
}

TEST_F(KeepAliveTest, MaxRequestsPerConnectionRetiresAConnectionAfterItsLastRequest) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->set_max_requests_per_connection(3);
  });
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok()) << i;
  WaitForQuietPool();
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/echo"), 9), 3);
  EXPECT_EQ(observer_.Closed(CloseReason::kMaxRequests), 3);
  EXPECT_EQ(IdleConnections(), 0);
}

TEST_F(KeepAliveTest, AnOriginOverrideGivesItsOriginsItsOwnMaxRequests) {
  StartEgress([](egress::v1::Config& c) {
    auto* o = c.mutable_transport()->add_origins();
    o->set_host("127.0.0.1");
    o->set_max_requests_per_connection(2);
  });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok()) << i;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Post(nginx().HttpsUrl("/echo")).ok()) << i;
  WaitForQuietPool();
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/echo"), 8), 3);  // 2 to 127.0.0.1, 1 to localhost
  EXPECT_EQ(observer_.Closed(CloseReason::kMaxRequests), 2);
}

TEST_F(KeepAliveTest, MaxConnectionAgeRetiresAnIdleConnection) {
  StartEgress([](egress::v1::Config& c) {
    SetDuration(c.mutable_transport()->mutable_max_connection_age(), milliseconds(500));
    c.mutable_transport()->set_max_connection_age_jitter_percent(0);
  });
  ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok());
  std::this_thread::sleep_for(milliseconds(800));
  ASSERT_TRUE(Post(nginx().HttpUrl("/echo")).ok());
  WaitForQuietPool();
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/echo"), 2), 2);
  EXPECT_EQ(observer_.Closed(CloseReason::kMaxAge), 1);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale) + observer_.Closed(CloseReason::kIdleTimeout),
            0);
}

// /slow-head answers after 3 s, ten times the connection's max age: the exchange ends
// normally, and the connection is retired only then.
TEST_F(KeepAliveTest, MaxConnectionAgeNeverCutsAnExchangeShort) {
  StartEgress([](egress::v1::Config& c) {
    SetDuration(c.mutable_transport()->mutable_max_connection_age(), milliseconds(300));
    c.mutable_transport()->set_max_connection_age_jitter_percent(0);
  });
  FetchResponse response;
  const grpc::Status status = Fetch(Request(nginx().HttpUrl("/slow-head")), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status_code(), 200);
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(CloseReason::kMaxAge), 1);
  EXPECT_EQ(observer_.AllClosed(), 1);
  EXPECT_EQ(IdleConnections(), 0);
}

}  // namespace
}  // namespace egress::testing

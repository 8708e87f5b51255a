// The lifecycle of a caller's connection to egressd's own gRPC server on the loops
// (--data_plane=loops): the graceful GOAWAY at the connection's max age and at shutdown,
// as gRPC's library server (C-core 1.51) sends it, and what a caller sees around it.
// grpc_connection_age_test runs the age and grace cases against both data planes.

#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "service/config/config.h"
#include "service/dataplane/grpc_framing.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/h2_frame_connection.h"
#include "tests/support/raw_grpc_call.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

// Opens stream 3 for `path` on `connection` (past its server's final GOAWAY): whether the
// server answers RST_STREAM(3, REFUSED_STREAM).
::testing::AssertionResult OpensARefusedStream(H2FrameConnection& connection,
                                               const std::string& path) {
  connection.OpenStream(3, path);
  const auto reset = connection.Next(NGHTTP2_RST_STREAM, Scaled(absl::Seconds(5)));
  if (!reset) return ::testing::AssertionFailure() << "no RST_STREAM";
  if (reset->stream_id != 3 || reset->ErrorCode() != NGHTTP2_REFUSED_STREAM) {
    return ::testing::AssertionFailure()
           << "RST_STREAM(" << reset->stream_id << ", " << reset->ErrorCode() << ")";
  }
  return ::testing::AssertionSuccess();
}

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kFetchStream[] = "/egress.v1.Egress/FetchStream";
// grpc.health.v1.HealthCheckResponse{status: SERVING} and {status: NOT_SERVING}, framed.
const std::string kServing("\0\0\0\0\2\x08\x01", 7);
const std::string kNotServing("\0\0\0\0\2\x08\x02", 7);

class LoopLifecycleTest : public EgressFaultsTest {
 protected:
  // The loops with a connection age (EgressTest::StartEgress's config otherwise).
  void StartLoops(const ConnectionAge& age = {}) {
    egress::v1::Config proto;
    proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
    auto config = BuildConfig(proto);
    ASSERT_TRUE(config.ok()) << config.status();
    auto server = EgressServer::Start(*config, "127.0.0.1:0", observer_, observer_,
                                      ListenerCredentials(), nullptr, age,
                                      DataPlane::kLoops);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = egress::v1::Egress::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->grpc_port()), grpc::InsecureChannelCredentials()));
  }

  // The framed HealthCheckResponse of a health Check on a connection of its own.
  std::string HealthCheck() {
    auto answer = RawGrpcCall(server_->grpc_port(), kHealthCheck, dataplane::FrameMessage(""),
                              {}, absl::Seconds(10));
    return answer.ok() ? answer->data : std::string(answer.status().message());
  }

  // Shutdown(grace) on a thread of its own, as SIGTERM starts it; joined by the test.
  void ShutdownInBackground(absl::Duration grace) {
    shutdown_ = std::thread([this, grace] { server_->Shutdown(grace); });
  }
  void TearDown() override {
    if (shutdown_.joinable()) shutdown_.join();
    EgressFaultsTest::TearDown();
  }

  // A FetchStream of nginx's 300 KiB on a raw connection whose window stays shut: its
  // head comes, its body waits, and the call is in flight until the test opens it.
  int32_t HeldFetchStream(RawGrpcConnection& connection) {
    std::string message;
    Request(nginx().HttpUrl("/chunked/300k")).SerializeToString(&message);
    const int32_t stream = connection.Start(kFetchStream, dataplane::FrameMessage(message), {});
    EXPECT_TRUE(connection.Pump([&] { return connection.head_seen(stream); }, absl::Seconds(10)));
    return stream;
  }

  std::unique_ptr<grpc::health::v1::Health::Stub> HealthStub() {
    return grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                            grpc::InsecureChannelCredentials()));
  }

  std::thread shutdown_;
};

// A caller that opens a stream after the final GOAWAY (its GOAWAY crossed on the wire)
// learns it was not processed: REFUSED_STREAM, which gRPC clients retry, counted.
TEST_F(LoopLifecycleTest, AStreamOpenedAfterTheMaxAgeGoAwayIsRefusedAndCounted) {
  StartLoops({Scaled(absl::Milliseconds(300)), Scaled(absl::Seconds(30))});
  H2FrameConnection connection(server_->grpc_port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Greet());
  connection.OpenStream(1, kHealthCheck);  // left open: the connection has a call under way
  const auto announced = connection.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5)));
  ASSERT_TRUE(announced.has_value()) << "no GOAWAY at the max age";
  ASSERT_GE(announced->payload.size(), 8u);
  EXPECT_EQ(announced->LastStreamId(), 0x7fffffffu) << "the first names 2^31-1";
  EXPECT_EQ(announced->ErrorCode(), 0u) << "NO_ERROR";
  const auto final_goaway = connection.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5)));
  ASSERT_TRUE(final_goaway.has_value()) << "no final GOAWAY after the PING's ACK";
  EXPECT_EQ(final_goaway->LastStreamId(), 1u) << "the last stream taken";
  EXPECT_EQ(final_goaway->DebugData(), "max_age");
  EXPECT_TRUE(OpensARefusedStream(connection, kHealthCheck));
  EXPECT_EQ(observer_.Refused(CallRefusal::kAfterGoAway), 1);
}

// gRPC clients answer the first GOAWAY's PING and may send a request they had started in
// the same write (grpc-java does): it is served, and the final GOAWAY, a second after the
// ACK, names it. One sent after the final GOAWAY is refused, and nothing of it runs (no
// fetch started, then cancelled, for a call the caller retries).
TEST_F(LoopLifecycleTest, ARequestSentWithThePingAckIsServedAndOneAfterTheFinalGoAwayRefused) {
  StartLoops({Scaled(absl::Milliseconds(300)), Scaled(absl::Seconds(30))});
  H2FrameConnection connection(server_->grpc_port());
  ASSERT_TRUE(connection.connected());
  ASSERT_TRUE(connection.Greet());
  connection.OpenStream(1, kHealthCheck);  // left open: the connection has a call under way
  connection.set_ack_pings(false);
  const auto ping = connection.Next(NGHTTP2_PING, Scaled(absl::Seconds(5)));
  ASSERT_TRUE(ping.has_value()) << "no PING with the first GOAWAY";
  std::string message;
  Request(nginx().HttpUrl("/cl/1k")).SerializeToString(&message);
  const auto request = [&](int32_t stream_id) {
    return H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, stream_id,
                   connection.RequestBlock()) +
           H2Frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, stream_id,
                   dataplane::FrameMessage(message));
  };
  connection.Send(H2Frame(NGHTTP2_PING, NGHTTP2_FLAG_ACK, 0, ping->payload) + request(3));
  auto final_goaway = connection.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5)));
  if (final_goaway && final_goaway->LastStreamId() == 0x7fffffffu) {
    final_goaway = connection.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5)));  // that was the first
  }
  ASSERT_TRUE(final_goaway.has_value()) << "no final GOAWAY";
  EXPECT_EQ(final_goaway->LastStreamId(), 3u) << "the final GOAWAY leaves stream 3 out";
  EXPECT_TRUE(WaitFor([&] { return observer_.Fetches(grpc::StatusCode::OK) == 1; }))
      << "the stream sent with the ACK was not served";
  connection.Send(request(5));
  const auto reset = connection.Next(NGHTTP2_RST_STREAM, Scaled(absl::Seconds(5)));
  ASSERT_TRUE(reset.has_value()) << "no RST_STREAM";
  EXPECT_EQ(reset->stream_id, 5);
  EXPECT_EQ(reset->ErrorCode(), uint32_t{NGHTTP2_REFUSED_STREAM});
  EXPECT_EQ(observer_.Refused(CallRefusal::kAfterGoAway), 1);
  EXPECT_EQ(server_->fetches_in_flight(), 0u);
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::CANCELLED), 0) << "the refused call was started";
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::OK), 1) << "the refused call was served";
}

// At shutdown: health NOT_SERVING, every connection a GOAWAY, the calls under way finished
// within the grace, then the connections closed.
TEST_F(LoopLifecycleTest, AFetchStreamUnderWayAtShutdownCompletesAfterItsConnectionsGoAway) {
  StartLoops();
  ASSERT_EQ(HealthCheck(), kServing);
  auto connection = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(connection.ok()) << connection.status();
  const int32_t stream = HeldFetchStream(**connection);
  ASSERT_EQ(server_->fetches_in_flight(), 1u);
  ShutdownInBackground(Scaled(absl::Seconds(30)));
  // A connection opened during the grace is answered NOT_SERVING (a new connection is
  // what a kubelet's gRPC probe opens), and gets its GOAWAY too.
  const absl::Time give_up = absl::Now() + Scaled(absl::Seconds(10));
  std::string health = HealthCheck();
  while (health == kServing && absl::Now() < give_up) health = HealthCheck();
  EXPECT_EQ(health, kNotServing);
  (*connection)->OpenWindow();
  auto answer = (*connection)->Wait(stream, Scaled(absl::Seconds(20)));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->Field("grpc-status"), "0") << answer->Field("grpc-message");
  EXPECT_GT(answer->data.size(), 307200u);
  EXPECT_GE((*connection)->goaways(), 1) << "the connection got no GOAWAY at shutdown";
  EXPECT_EQ((*connection)->goaway_last_stream_id(), stream);  // at shutdown, at the ACK
  shutdown_.join();
  EXPECT_FALSE((*connection)->Pump([] { return false; }, Scaled(absl::Seconds(5))));
  EXPECT_TRUE((*connection)->ended()) << "the connection outlived the shutdown";
}

TEST_F(LoopLifecycleTest, AStreamOpenedAfterTheShutdownGoAwayIsRefused) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  ASSERT_TRUE(caller.Greet());
  caller.OpenStream(1, kHealthCheck);  // left open
  ASSERT_TRUE(caller.Next(NGHTTP2_SETTINGS, Scaled(absl::Seconds(5))).has_value());
  // A fetch in flight holds the shutdown in its grace.
  auto held = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(held.ok()) << held.status();
  const int32_t stream = HeldFetchStream(**held);
  ShutdownInBackground(Scaled(absl::Seconds(30)));
  ASSERT_TRUE(caller.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5))).has_value());
  const auto final_goaway = caller.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5)));
  ASSERT_TRUE(final_goaway.has_value());
  EXPECT_EQ(final_goaway->LastStreamId(), 1u);
  EXPECT_TRUE(OpensARefusedStream(caller, kFetchStream));
  EXPECT_EQ(observer_.Refused(CallRefusal::kAfterGoAway), 1);
  (*held)->OpenWindow();
  ASSERT_TRUE((*held)->Wait(stream, Scaled(absl::Seconds(20))).ok());
  shutdown_.join();
  EXPECT_TRUE(caller.Closes(Scaled(absl::Seconds(5)))) << "the connection outlived the shutdown";
}

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

TEST_F(LoopLifecycleTest, AHealthWatchIsToldServingAndThenNotServingAtShutdown) {
  StartLoops();
  auto health = HealthStub();
  grpc::ClientContext context;
  auto watch = health->Watch(&context, HealthCheckRequest());
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response)) << watch->Finish().error_message();
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  // A fetch in flight holds the shutdown in its grace.
  auto held = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(held.ok()) << held.status();
  const int32_t stream = HeldFetchStream(**held);
  ShutdownInBackground(Scaled(absl::Seconds(30)));
  ASSERT_TRUE(watch->Read(&response)) << watch->Finish().error_message();
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  context.TryCancel();
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
  (*held)->OpenWindow();
  ASSERT_TRUE((*held)->Wait(stream, Scaled(absl::Seconds(20))).ok());
}

// A Watch of `service` that its caller cancels after the first status: that status, and
// how the call ended (CANCELLED: it was still open).
std::pair<HealthCheckResponse::ServingStatus, grpc::StatusCode> WatchOnce(
    grpc::health::v1::Health::Stub& health, const std::string& service) {
  HealthCheckRequest request;
  request.set_service(service);
  grpc::ClientContext context;
  auto watch = health.Watch(&context, request);
  HealthCheckResponse response;
  if (!watch->Read(&response)) return {HealthCheckResponse::UNKNOWN, watch->Finish().error_code()};
  context.TryCancel();
  return {response.status(), watch->Finish().error_code()};
}

// As gRPC's default health service: SERVICE_UNKNOWN, and the call stays open until the
// caller cancels it (a Check of the same service is NOT_FOUND).
TEST_F(LoopLifecycleTest, AHealthWatchOfAnUnknownServiceIsToldServiceUnknownAndStaysOpen) {
  StartLoops();
  auto health = HealthStub();
  EXPECT_EQ(WatchOnce(*health, "no.such.Service"),
            std::make_pair(HealthCheckResponse::SERVICE_UNKNOWN, grpc::StatusCode::CANCELLED));
  HealthCheckRequest request;
  request.set_service("no.such.Service");
  grpc::ClientContext check;
  HealthCheckResponse response;
  EXPECT_EQ(health->Check(&check, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(LoopLifecycleTest, AHealthWatchOfEgressIsToldServing) {
  StartLoops();
  EXPECT_EQ(WatchOnce(*HealthStub(), "egress.v1.Egress"),
            std::make_pair(HealthCheckResponse::SERVING, grpc::StatusCode::CANCELLED));
}

// gRPC's keepalive enforcement with the library server's defaults: with no call open a
// caller may PING once in 2 hours; the first PING and 2 strikes pass, the third strike
// ends the connection.
TEST_F(LoopLifecycleTest, ACallerThatPingsTooOftenIsToldTooManyPingsAndItsConnectionEnds) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  ASSERT_TRUE(caller.Greet());
  for (int i = 0; i < 4; ++i) caller.Send(PingFrame());
  const auto goaway = caller.Next(NGHTTP2_GOAWAY, Scaled(absl::Seconds(5)));
  ASSERT_TRUE(goaway.has_value()) << "no GOAWAY for the fourth PING";
  EXPECT_EQ(goaway->ErrorCode(), uint32_t{NGHTTP2_ENHANCE_YOUR_CALM});
  EXPECT_EQ(goaway->DebugData(), "too_many_pings");
  EXPECT_TRUE(caller.Closes(Scaled(absl::Seconds(5))));
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyPings), 1);
}

// Every answer the server sends clears the strikes, as gRPC's library server does.
TEST_F(LoopLifecycleTest, APingBeforeEachCallIsNoStrike) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  ASSERT_TRUE(caller.Greet());
  for (int32_t stream = 1; stream <= 9; stream += 2) {
    caller.Send(PingFrame());
    caller.OpenStream(stream, kHealthCheck);
    caller.Send(
        H2Frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, stream, dataplane::FrameMessage("")));
    const auto answer = caller.Next(NGHTTP2_HEADERS, Scaled(absl::Seconds(5)));
    ASSERT_TRUE(answer.has_value()) << "no answer on stream " << stream;
    ASSERT_EQ(answer->stream_id, stream);
    caller.Next(NGHTTP2_HEADERS, Scaled(absl::Seconds(5)));  // the trailers
  }
  EXPECT_EQ(caller.goaways(), 0);
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyPings), 0);
}

}  // namespace
}  // namespace egress::testing

// egressd bounds the age of its callers' gRPC connections (--grpc_max_connection_age,
// --grpc_max_connection_age_grace): at the age it sends GOAWAY, so that clients
// reconnect and spread over replicas that joined since; a call under way gets the grace
// to finish. And their idle time (--grpc_max_connection_idle): a connection with no call
// open for that long gets GOAWAY too. Each case runs against both data planes: gRPC's library server and
// egressd's own on the transport's loops (--data_plane=loops).
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/config/config.h"
#include "service/server/server.h"
#include "tests/support/counting_observer.h"
#include "tests/support/fault_server.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

class GrpcConnectionAgeTest : public ::testing::TestWithParam<DataPlane> {
 protected:
  void Start(const ConnectionAge& age) {
    egress::v1::Config proto;
    proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");  // the test upstream
    auto config = BuildConfig(proto);
    ASSERT_TRUE(config.ok()) << config.status();
    auto server = EgressServer::Start(*config, "127.0.0.1:0", observer_, observer_,
                                      ListenerCredentials(), nullptr, age,
                                      GetParam());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = egress::v1::Egress::NewStub(channel_);
  }

  // A stream the test cancelled is over before the server goes: on the loops a call still
  // finishing when they stop is never freed (gRPC's library server waits for it).
  void TearDown() override {
    if (server_) {
      EXPECT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 0; },
                          Scaled(absl::Seconds(10))));
    }
  }

  // A call that needs no upstream: egressd answers INVALID_ARGUMENT over the channel.
  grpc::StatusCode BadUrlFetch() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    egress::v1::FetchRequest request;
    request.set_url("not a url");
    egress::v1::FetchResponse response;
    return stub_->Fetch(&context, request, &response).error_code();
  }

  // Starts a FetchStream of the upstream's slow body (the head and a body byte, then a
  // byte a second) and reads its first two bytes, about a second: "bb", unless cut.
  std::string StartSlowBody(grpc::ClientContext& context,
                            std::unique_ptr<grpc::ClientReader<egress::v1::FetchChunk>>& reader) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    egress::v1::FetchRequest request;
    request.set_url(upstream_.Url("/slow-body"));
    reader = stub_->FetchStream(&context, request);
    egress::v1::FetchChunk chunk;
    if (!reader->Read(&chunk) || !chunk.has_head()) return "(no head)";
    std::string body;
    while (body.size() < 2 && reader->Read(&chunk)) body += chunk.body();
    return body;
  }

  // Waits up to `limit` for the channel to leave READY (GOAWAY); false if it stayed.
  bool LeavesReady(absl::Duration limit) {
    return channel_->WaitForStateChange(GRPC_CHANNEL_READY, absl::ToChronoTime(absl::Now() + limit));
  }

  CountingObserver observer_;
  FaultServer upstream_;
  std::unique_ptr<EgressServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<egress::v1::Egress::Stub> stub_;
};

TEST_P(GrpcConnectionAgeTest, AnIdleConnectionGetsGoawayAtItsMaxAgeAndTheNextCallReconnects) {
  Start({Scaled(absl::Milliseconds(500)), Scaled(absl::Milliseconds(500))});
  const absl::Time start = absl::Now();
  ASSERT_EQ(BadUrlFetch(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(channel_->GetState(false), GRPC_CHANNEL_READY);
  ASSERT_TRUE(LeavesReady(Scaled(absl::Seconds(5))));
  const absl::Duration lived = absl::Now() - start;
  EXPECT_GE(lived, Scaled(absl::Milliseconds(450))) << "500 ms less gRPC's 10 % jitter";
  EXPECT_EQ(BadUrlFetch(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(channel_->GetState(false), GRPC_CHANNEL_READY);
}

TEST_P(GrpcConnectionAgeTest, AMaxAgeOfZeroKeepsTheConnection) {
  Start({absl::ZeroDuration(), absl::ZeroDuration()});
  ASSERT_EQ(BadUrlFetch(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(LeavesReady(Scaled(absl::Milliseconds(1500))));
}

TEST_P(GrpcConnectionAgeTest, AStreamUnderWayAtTheMaxAgeKeepsGoingThroughTheGrace) {
  Start({Scaled(absl::Milliseconds(300)), Scaled(absl::Seconds(30))});
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<egress::v1::FetchChunk>> reader;
  // Two seconds in, well past the max age: GOAWAY has come, and the stream goes on.
  EXPECT_EQ(StartSlowBody(context, reader), "bb")
      << "the stream was cut: " << reader->Finish().error_message();
  context.TryCancel();
  reader->Finish();
}

TEST_P(GrpcConnectionAgeTest, AStreamStillUnderWayAtTheEndOfTheGraceIsCut) {
  Start({Scaled(absl::Milliseconds(300)), Scaled(absl::Milliseconds(700))});
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  egress::v1::FetchRequest request;
  request.set_url(upstream_.Url("/slow-body"));  // 100 bytes over 100 s
  const absl::Time start = absl::Now();
  auto reader = stub_->FetchStream(&context, request);
  egress::v1::FetchChunk chunk;
  while (reader->Read(&chunk)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5))) << status.error_message();
}

TEST_P(GrpcConnectionAgeTest, AConnectionWithNoCallForItsMaxIdleGetsGoawayAndTheNextCallReconnects) {
  Start({absl::ZeroDuration(), Scaled(absl::Seconds(30)), Scaled(absl::Milliseconds(500))});
  ASSERT_EQ(BadUrlFetch(), grpc::StatusCode::INVALID_ARGUMENT);
  const absl::Time idle_from = absl::Now();  // the server's idle time began before
  ASSERT_EQ(channel_->GetState(false), GRPC_CHANNEL_READY);
  ASSERT_TRUE(LeavesReady(Scaled(absl::Seconds(5))));
  // Not at once: half the max idle, as the server's idle time began a busy machine's
  // moment before idle_from.
  EXPECT_GE(absl::Now() - idle_from, Scaled(absl::Milliseconds(250)));
  EXPECT_EQ(BadUrlFetch(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(channel_->GetState(false), GRPC_CHANNEL_READY);
}

TEST_P(GrpcConnectionAgeTest, AStreamUnderWayKeepsItsConnectionPastTheMaxIdleUntilItEnds) {
  // A max idle well within the second the stream is read for, even at 4x.
  Start({absl::ZeroDuration(), Scaled(absl::Seconds(30)), Scaled(absl::Milliseconds(200))});
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<egress::v1::FetchChunk>> reader;
  // Past the max idle with the stream open: no GOAWAY (which takes the channel off READY).
  EXPECT_EQ(StartSlowBody(context, reader), "bb") << reader->Finish().error_message();
  EXPECT_EQ(channel_->GetState(false), GRPC_CHANNEL_READY);
  context.TryCancel();
  reader->Finish();
  // Its idle time starts when the stream ends (the server learns of it after this).
  const absl::Time ended = absl::Now();
  EXPECT_TRUE(LeavesReady(Scaled(absl::Seconds(5))));
  EXPECT_GE(absl::Now() - ended, Scaled(absl::Milliseconds(100)));  // half, as above
}

TEST_P(GrpcConnectionAgeTest, ANegativeAgeOrMaxIdleIsRefused) {
  auto config = BuildConfig(egress::v1::Config());
  ASSERT_TRUE(config.ok());
  for (const ConnectionAge& age : {ConnectionAge{absl::Seconds(-1), absl::Seconds(30)},
                                   ConnectionAge{absl::Seconds(1), absl::Seconds(30),
                                                 absl::Seconds(-1)}}) {
    auto server = EgressServer::Start(*config, "127.0.0.1:0", observer_, observer_,
                                      ListenerCredentials(), nullptr, age, GetParam());
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
  }
}

INSTANTIATE_TEST_SUITE_P(BothDataPlanes, GrpcConnectionAgeTest,
                         ::testing::Values(DataPlane::kGrpcLibrary, DataPlane::kLoops),
                         [](const ::testing::TestParamInfo<DataPlane>& info) {
                           return info.param == DataPlane::kLoops ? "Loops" : "GrpcLibrary";
                         });

// The grace is the longest a fetch may take by default (limits.max_timeout): a fetch
// under way when its connection reaches the age is not cut short.
TEST(ConnectionAgeDefaults, AreFiveMinutesWithTheDefaultMaxTimeoutOfGraceAndNoMaxIdle) {
  EXPECT_EQ(ConnectionAge().max_age, absl::Minutes(5));
  EXPECT_EQ(ConnectionAge().max_idle, absl::ZeroDuration());  // gRPC's default
  auto config = BuildConfig(egress::v1::Config());
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(ConnectionAge().grace, config->limits.max_timeout);
}

}  // namespace
}  // namespace egress::testing

// Fetch and FetchStream over HTTP/2 upstreams (issue 19), through egress's gRPC API: what
// a caller sees (ConnectionInfo.protocol, exact bodies), and that a body it does not read
// (PREFIX, NONE, a cancelled stream) is reset rather than drained while the connection
// carries on.
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/admin_fixture.h"
#include "tests/support/scripted_h2_server.h"

namespace egress::testing {
namespace {

using egress::v1::FetchChunk;
using egress::v1::FetchRequest;
using egress::v1::FetchResponse;

class Http2FetchTest : public EgressAdminTest {
 protected:
  void SetUp() override { StartEgress(); }

  std::string Origin() const { return absl::StrCat("https://localhost:", nginx().http2_port()); }
};

// Callers that open FetchStreams over HTTP/2 and never read (issue 38): a stream's
// flow-control window is reserved from limits.buffered_body_budget_bytes before the
// server may fill it, so every body byte egress buffers for them is charged to the
// budget (egress_buffered_body_bytes) and stays within it; the fetches past it fail at
// once with RESOURCE_EXHAUSTED, reason BODY_BUDGET_EXHAUSTED, instead of each growing
// egress by a window; cancelled, the callers give it all back.
TEST_F(Http2FetchTest, StalledFetchStreamsBufferOnlyWhatTheBodyBudgetHasCharged) {
  constexpr uint64_t kBudget = 4 << 20;
  constexpr int kStreams = 150;  // on two connections (100 streams each at most)
  StartEgress([](egress::v1::Config& c) {
    c.mutable_limits()->set_default_max_body_bytes(1 << 20);
    c.mutable_limits()->set_max_body_bytes_ceiling(1 << 20);
    c.mutable_limits()->set_buffered_body_budget_bytes(kBudget);
  });
  // A caller whose gRPC takes little ahead of its reads (gRPC's own window tuning would
  // take each body whole into the caller's memory): egress's writes wait for it.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  auto caller = egress::v1::Egress::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", server_->grpc_port()), grpc::InsecureChannelCredentials(), args));
  struct Stalled {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<FetchChunk>> reader;
  };
  std::vector<std::unique_ptr<Stalled>> streams;
  for (int i = 0; i < kStreams; ++i) {
    auto stalled = std::make_unique<Stalled>();
    stalled->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stalled->reader = caller->FetchStream(&stalled->context, Request(nginx().Http2Url("/cl/6m")));
    streams.push_back(std::move(stalled));
  }
  // Settled: every fetch holds its stream or was refused, and nginx has filled the
  // windows it was given (the bytes buffered stay the same a while).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  uint64_t buffered = 0;
  for (int same = 0; same < 3 && std::chrono::steady_clock::now() < give_up;) {
    std::this_thread::sleep_for(Gap(100));
    const transport::OriginStats stats = PoolStatsFor(Origin());
    const bool all_placed =
        stats.streams + observer_.Fetches(grpc::StatusCode::RESOURCE_EXHAUSTED) == kStreams;
    same = all_placed && stats.http2_buffered_body_bytes == buffered ? same + 1 : 0;
    buffered = stats.http2_buffered_body_bytes;
  }
  const uint64_t charged = observer_.buffered_body_bytes;
  EXPECT_GT(buffered, 0u);
  EXPECT_LE(buffered, charged) << "HTTP/2 streams buffer " << buffered
                               << " body bytes; the body budget has charged " << charged;
  EXPECT_LE(observer_.buffered_body_peak, kBudget);

  // Refused fetches end (at once, or after their head); those that hold a stream have a
  // body chunk to give.
  int held = 0, refused = 0;
  for (auto& stalled : streams) {
    FetchChunk chunk;
    bool has_body = false;
    while (!has_body && stalled->reader->Read(&chunk)) has_body = chunk.has_body();
    if (has_body) {
      ++held;
      stalled->context.TryCancel();
      EXPECT_EQ(stalled->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
      continue;
    }
    ++refused;
    const grpc::Status status = stalled->reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    const auto info = ErrorInfoOf(status);
    ASSERT_TRUE(info.has_value()) << status.error_message();
    EXPECT_EQ(info->reason(), "BODY_BUDGET_EXHAUSTED");
  }
  std::cout << kStreams << " stalled FetchStreams over HTTP/2 with a budget of " << kBudget
            << " bytes: " << held << " held a stream, " << refused << " refused; "
            << buffered << " bytes buffered by streams, " << charged << " charged\n";
  EXPECT_GT(held, 0);
  EXPECT_GT(refused, 0);
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
  EXPECT_TRUE(WaitFor([&] {
    const transport::OriginStats stats = PoolStatsFor(Origin());
    return stats.streams == 0 && stats.http2_buffered_body_bytes == 0;
  }));
}

// HTTP/2 fetches in flight at once, each with a small answer (issue 38): a stream
// reserves only its first window from limits.buffered_body_budget_bytes before its
// request goes out, small enough that max_concurrent_fetches streams fit the default
// budget, so the budget does not refuse fetches that buffer almost nothing. 40 fetches
// held open by the server against a 1 MiB budget: more than 1 MiB / 64 KiB (the first
// window was 64 KiB: 24 of them were refused BODY_BUDGET_EXHAUSTED), fewer than 1 MiB /
// 16 KiB.
TEST_F(Http2FetchTest, ConcurrentFetchesWithSmallAnswersAreNotRefusedByTheBodyBudget) {
  constexpr uint64_t kBudget = 1 << 20;
  constexpr size_t kFetches = 40;
  // The server answers nothing until it has every fetch's request (or a read times out):
  // until then each fetch holds its stream and its first window.
  std::atomic<size_t> held_at_once{0};
  ScriptedH2Server server([&](H2Peer& peer) {
    if (!peer.Handshake()) return;
    std::optional<H2Request> warm = peer.ReadRequest();
    if (!warm || !peer.Respond(warm->stream_id, 200, "warm")) return;
    std::vector<int32_t> held;
    while (held.size() < kFetches) {
      std::optional<H2Request> request = peer.ReadRequest();
      if (!request) break;
      held.push_back(request->stream_id);
    }
    held_at_once = held.size();
    for (int32_t id : held) {
      if (!peer.Respond(id, 200, "ok")) return;
    }
    peer.ReadUntilClosed();
  });
  StartEgress([](egress::v1::Config& c) {
    c.mutable_limits()->set_default_max_body_bytes(64 << 10);
    c.mutable_limits()->set_max_body_bytes_ceiling(64 << 10);
    c.mutable_limits()->set_buffered_body_budget_bytes(kBudget);
    c.mutable_transport()->mutable_http2()->set_mode(egress::v1::HTTP2_MODE_PRIOR_KNOWLEDGE);
  });
  const std::string url = absl::StrCat("http://127.0.0.1:", server.port(), "/small");
  FetchResponse warm;  // the connection the others share
  ASSERT_TRUE(Fetch(Request(url), &warm).ok());
  ASSERT_EQ(warm.body(), "warm");

  std::vector<std::unique_ptr<BackgroundFetch>> fetches;
  for (size_t i = 0; i < kFetches; ++i) {
    fetches.push_back(std::make_unique<BackgroundFetch>(*stub_, Request(url)));
  }
  int ok = 0, refused = 0;
  for (auto& fetch : fetches) {
    const grpc::Status& status = fetch->Wait();
    if (status.ok()) {
      ++ok;
      continue;
    }
    const auto info = ErrorInfoOf(status);
    if (info && info->reason() == "BODY_BUDGET_EXHAUSTED") ++refused;
    ADD_FAILURE() << status.error_message();
  }
  EXPECT_EQ(refused, 0) << ok << " of " << kFetches << " HTTP/2 fetches with a 2-byte answer "
                        << "succeeded against a body budget of " << kBudget << " bytes";
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::RESOURCE_EXHAUSTED), 0);
  EXPECT_EQ(held_at_once, kFetches);
  EXPECT_EQ(server.accepted(), 1);
  EXPECT_LE(observer_.buffered_body_peak, kBudget);
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
  const std::string origin = absl::StrCat("http://127.0.0.1:", server.port());
  EXPECT_TRUE(WaitFor([&] { return PoolStatsFor(origin).streams == 0; }));
}

TEST_F(Http2FetchTest, AFullFetchSaysH2AndReturnsTheBodyExactly) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx().Http2Url("/cl/100k")), &response).ok());
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(response.connection().protocol(), "h2");
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("100k"));
  bool content_length = false;
  for (const auto& header : response.headers()) {
    content_length = content_length || header.name() == "content-length";
  }
  EXPECT_TRUE(content_length) << "HTTP/2 header names arrive in lower case";
}

TEST_F(Http2FetchTest, PrefixAndNoneResetTheRestAndTheConnectionIsReused) {
  FetchResponse prefix;
  ASSERT_TRUE(Fetch(Request(nginx().Http2Url("/cl/6m"), egress::v1::BODY_MODE_PREFIX),
                    &prefix)
                  .ok());
  FetchResponse none;
  ASSERT_TRUE(
      Fetch(Request(nginx().Http2Url("/cl/6m"), egress::v1::BODY_MODE_NONE), &none).ok());
  EXPECT_TRUE(none.connection().reused());
  EXPECT_EQ(none.connection().connection_id(), prefix.connection().connection_id());
  EXPECT_TRUE(WaitFor([&] { return observer_.streams_reset == 2; }));
  EXPECT_EQ(observer_.drains_started, 0);
  EXPECT_EQ(observer_.opened, 1);
}

TEST_F(Http2FetchTest, ACancelledFetchStreamResetsItsStreamOnly) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = stub_->FetchStream(&context, Request(nginx().Http2Url("/stall")));
  FetchChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  ASSERT_TRUE(chunk.has_head());
  EXPECT_EQ(chunk.head().connection().protocol(), "h2");
  context.TryCancel();  // during the 80 ms stall
  reader->Finish();
  EXPECT_TRUE(WaitFor([&] { return observer_.streams_reset == 1; }));
  FetchResponse next;
  ASSERT_TRUE(Fetch(Request(nginx().Http2Url("/cl/1k")), &next).ok());
  EXPECT_TRUE(next.connection().reused());
  EXPECT_EQ(observer_.opened, 1);
}

TEST_F(Http2FetchTest, PoolStatsCountOpenStreamsOnOneConnection) {
  StartAdmin();
  std::vector<std::unique_ptr<BackgroundFetch>> slow;
  FetchResponse warm;  // the origin speaks h2: the others share its connection
  ASSERT_TRUE(Fetch(Request(nginx().Http2Url("/cl/1k")), &warm).ok());
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<BackgroundFetch>(*stub_, Request(nginx().Http2Url("/slow-300ms"))));
  }
  egress::v1::OriginPoolStats stats;
  EXPECT_TRUE(WaitFor([&] {
    grpc::ClientContext context;
    egress::v1::PoolStats pools;
    if (!admin_stub_->GetPoolStats(&context, {}, &pools).ok()) return false;
    for (const auto& origin : pools.origins()) {
      if (origin.origin() == Origin()) stats = origin;
    }
    return stats.streams() == 4;
  })) << stats.DebugString();
  EXPECT_EQ(stats.active(), 1u);
  EXPECT_EQ(stats.opened(), 1u);
  for (auto& fetch : slow) EXPECT_TRUE(fetch->Wait().ok());
}

}  // namespace
}  // namespace egress::testing

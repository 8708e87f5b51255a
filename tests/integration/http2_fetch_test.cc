// Fetch and FetchStream over HTTP/2 upstreams (issue 19), through egress's gRPC API: what
// a caller sees (ConnectionInfo.protocol, exact bodies), and that a body it does not read
// (PREFIX, NONE, a cancelled stream) is reset rather than drained while the connection
// carries on.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/admin_fixture.h"

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

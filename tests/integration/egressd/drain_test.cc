// Auto-drain through Fetch with BODY_MODE_NONE, counted at the upstream (nginx's access
// log) and at the transport's decision points.
#include <chrono>

#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using transport::CloseReason;
using transport::DrainAbandonReason;
using transport::DrainSkipReason;

class DrainTest : public EgressTest {
 protected:
  // Ten head-only fetches 20 ms apart (see Gap) over HTTPS; returns the new connections nginx saw.
  int TenSpacedHeadOnlyFetches(const std::string& path) {
    for (int i = 0; i < 10; ++i) {
      egress::v1::FetchResponse response;
      const grpc::Status status =
          Fetch(Request(nginx().HttpsUrl(path), egress::v1::BODY_MODE_NONE), &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.status_code(), 200);
      EXPECT_TRUE(response.body().empty());
      WaitForQuietPool();  // the drain is over, however long a busy machine made it
    }
    return nginx().NewConnections(LoggedUri(path), 10);
  }
};

TEST_F(DrainTest, SmallContentLengthBodyIsDrainedAndOneConnectionServesAll) {
  StartEgress();
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/cl/1k"), 1);
  EXPECT_EQ(observer_.drains_started, 10);
  EXPECT_EQ(observer_.drains_completed, 10);
  EXPECT_EQ(observer_.requests_reused, 9);
}

TEST_F(DrainTest, ContentLengthExactlyAtTheByteCapIsDrained) {
  // 256 KiB over TLS can take longer than the 50 ms time cap on a busy machine; this test
  // is about the byte cap alone.
  StartEgress([](egress::v1::Config& c) {
    c.mutable_drain()->mutable_max_duration()->set_seconds(5);
  });
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/cl/262144"), 1);
  EXPECT_EQ(observer_.drains_completed, 10);
}

TEST_F(DrainTest, ContentLengthOneByteOverTheCapSkipsTheDrain) {
  StartEgress();
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/cl/262145"), 10);
  EXPECT_EQ(observer_.drains_started, 0);
  EXPECT_EQ(observer_.Skipped(DrainSkipReason::kOverByteCap), 10);
}

TEST_F(DrainTest, SmallChunkedBodyIsDrained) {
  StartEgress();
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/chunked/1k"), 1);
  EXPECT_EQ(observer_.drains_completed, 10);
}

TEST_F(DrainTest, ChunkedBodyOverTheCapIsAbandonedAtCapPlusOneByte) {
  // As above: the byte cap alone (under TSan one drain of ten hit the 50 ms time cap).
  StartEgress([](egress::v1::Config& c) {
    c.mutable_drain()->mutable_max_duration()->set_seconds(5);
  });
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/chunked/300k"), 10);
  EXPECT_EQ(observer_.drains_started, 10);
  EXPECT_EQ(observer_.Abandoned(DrainAbandonReason::kByteCap), 10);
  EXPECT_EQ(observer_.drain_bytes, 10u * (256 * 1024 + 1));
}

TEST_F(DrainTest, BodyThatStallsPastTheTimeCapIsAbandoned) {
  StartEgress();
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/stall"), 10);
  EXPECT_EQ(observer_.Abandoned(DrainAbandonReason::kTimeCap), 10);
}

TEST_F(DrainTest, ConnectionCloseResponseStartsNoDrain) {
  StartEgress();
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/close/1k"), 10);
  EXPECT_EQ(observer_.drains_started, 0);
  EXPECT_EQ(observer_.Skipped(DrainSkipReason::kConnectionClose), 10);
}

TEST_F(DrainTest, ModeOffClosesEveryConnectionWithUnreadBytes) {
  StartEgress([](egress::v1::Config& c) { c.mutable_drain()->set_mode(egress::v1::DRAIN_MODE_OFF); });
  EXPECT_EQ(TenSpacedHeadOnlyFetches("/cl/1k"), 10);
  EXPECT_EQ(observer_.drains_started, 0);
  EXPECT_EQ(observer_.Skipped(DrainSkipReason::kDisabled), 10);
}

TEST_F(DrainTest, CallerSayingConnectionCloseRetiresTheConnection) {
  StartEgress();
  for (int i = 0; i < 3; ++i) {
    egress::v1::FetchRequest request = Request(nginx().HttpsUrl("/cl/1k"));
    auto* header = request.add_headers();
    header->set_name("Connection");
    header->set_value("close");
    egress::v1::FetchResponse response;
    ASSERT_TRUE(Fetch(request, &response).ok());
    EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
  }
  WaitForQuietPool();
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/cl/1k"), 3), 3);
  EXPECT_EQ(observer_.Closed(CloseReason::kConnectionClose), 3);
  EXPECT_EQ(IdleConnections(), 0);
}

TEST_F(DrainTest, BackToBackFetchesOfSmallBodiesNeedAtMostThreeConnections) {
  StartEgress();
  int new_connections_seen_by_callers = 0;
  for (int i = 0; i < 200; ++i) {
    egress::v1::FetchResponse response;
    ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/4k"), egress::v1::BODY_MODE_NONE), &response).ok());
    if (!response.connection().reused()) ++new_connections_seen_by_callers;
  }
  WaitForQuietPool();
  const int at_upstream = nginx().NewConnections(LoggedUri("/cl/4k"), 200);
  EXPECT_LE(at_upstream, 3);
  EXPECT_GE(at_upstream, 1);
  EXPECT_EQ(new_connections_seen_by_callers, at_upstream);
}

}  // namespace
}  // namespace egress::testing

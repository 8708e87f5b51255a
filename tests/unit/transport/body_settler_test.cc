// BodySettler's decisions, without a socket: the close a skipped drain leaves, and what an
// HTTP/2 stream let go of comes to.
#include "service/transport/body_settler.h"

#include "gtest/gtest.h"

namespace egress::transport {
namespace {

TEST(BodySettlerTest, ADrainSkippedForTheServersConnectionCloseClosesForThatReason) {
  EXPECT_EQ(CloseReasonOfSkip(DrainSkipReason::kConnectionClose), CloseReason::kConnectionClose);
}

TEST(BodySettlerTest, EveryOtherSkippedDrainClosesForTheUnreadBody) {
  for (const DrainSkipReason skip :
       {DrainSkipReason::kOverByteCap, DrainSkipReason::kDisabled, DrainSkipReason::kOverBudget,
        DrainSkipReason::kSlowerThanDial}) {
    EXPECT_EQ(CloseReasonOfSkip(skip), CloseReason::kUnreadBody) << ToString(skip);
  }
}

TEST(BodySettlerTest, AFailedStreamIsStreamFailedWhateverItsBody) {
  EXPECT_EQ(StreamOutcome(/*failed=*/true, /*reset=*/false, /*body_received=*/false),
            "stream_failed");
  EXPECT_EQ(StreamOutcome(/*failed=*/true, /*reset=*/false, /*body_received=*/true),
            "stream_failed");
}

TEST(BodySettlerTest, AStreamResetBeforeTheServerSentItsWholeBodyIsReset) {
  EXPECT_EQ(StreamOutcome(/*failed=*/false, /*reset=*/true, /*body_received=*/false), "reset");
}

TEST(BodySettlerTest, AStreamReadToItsEndOrAllHereButUnreadIsPooled) {
  EXPECT_EQ(StreamOutcome(/*failed=*/false, /*reset=*/false, /*body_received=*/true), "pooled");
  EXPECT_EQ(StreamOutcome(/*failed=*/false, /*reset=*/true, /*body_received=*/true), "pooled");
}

}  // namespace
}  // namespace egress::transport

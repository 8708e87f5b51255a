#include "service/transport/drain_decision.h"

#include "gtest/gtest.h"

namespace egress::transport {
namespace {

struct Case {
  const char* name;
  DrainMode mode;
  bool keep_alive;
  std::optional<uint64_t> remaining;
  DrainDecision expected;
};

class DrainDecisionTest : public ::testing::TestWithParam<Case> {};

TEST_P(DrainDecisionTest, FollowsGo127Rules) {
  const Case& c = GetParam();
  DrainSettings settings;
  settings.mode = c.mode;
  EXPECT_EQ(DecideDrain(settings, UnreadBody{c.keep_alive, c.remaining}), c.expected);
}

const Drain kDefaultCaps{256 * 1024, absl::Milliseconds(50)};

INSTANTIATE_TEST_SUITE_P(
    Table, DrainDecisionTest,
    ::testing::Values(
        Case{"small_content_length", DrainMode::kFixed, true, 1024, kDefaultCaps},
        Case{"content_length_at_cap", DrainMode::kFixed, true, 262144, kDefaultCaps},
        Case{"content_length_over_cap", DrainMode::kFixed, true, 262145,
             DrainSkipReason::kOverByteCap},
        Case{"chunked_is_tried", DrainMode::kFixed, true, std::nullopt, kDefaultCaps},
        Case{"connection_close", DrainMode::kFixed, false, 10, DrainSkipReason::kConnectionClose},
        Case{"connection_close_beats_over_cap", DrainMode::kFixed, false, 1 << 30,
             DrainSkipReason::kConnectionClose},
        Case{"off", DrainMode::kOff, true, 10, DrainSkipReason::kDisabled},
        Case{"off_chunked", DrainMode::kOff, true, std::nullopt, DrainSkipReason::kDisabled}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(DrainDecision, CapsComeFromTheSettings) {
  DrainSettings settings;
  settings.max_bytes = 10;
  settings.max_duration = absl::Seconds(2);
  EXPECT_EQ(DecideDrain(settings, UnreadBody{true, 10}),
            DrainDecision(Drain{10, absl::Seconds(2)}));
  EXPECT_EQ(DecideDrain(settings, UnreadBody{true, 11}),
            DrainDecision(DrainSkipReason::kOverByteCap));
}

}  // namespace
}  // namespace egress::transport

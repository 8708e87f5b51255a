#include "service/transport/drain/drain_decision.h"

#include "service/transport/drain/cost_model.h"

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

// ADAPTIVE: the same inputs, plus what was learned of the origin.
namespace egress::transport {
namespace {
namespace adaptive {

constexpr uint64_t kCeiling = 4 * 1024 * 1024;

struct Case {
  const char* name;
  bool keep_alive;
  std::optional<uint64_t> remaining;
  OriginCost cost;
  double factor;
  absl::Duration min_dial_cost;
  DrainDecision expected;
};

class AdaptiveDrainTest : public ::testing::TestWithParam<Case> {};

TEST_P(AdaptiveDrainTest, DrainsWhileFinishingIsCheaperThanADial) {
  const Case& c = GetParam();
  DrainSettings settings = DrainSettings::DefaultsFor(DrainMode::kAdaptive);
  settings.cost_factor = c.factor;
  settings.min_dial_cost = c.min_dial_cost;
  EXPECT_EQ(DecideDrain(settings, UnreadBody{c.keep_alive, c.remaining}, c.cost), c.expected);
}

const OriginCost kWan{absl::Milliseconds(50), 10e6, absl::Milliseconds(5)};  // 10 MB/s
Drain Budgeted(absl::Duration pause) { return Drain{kCeiling, absl::Seconds(1), pause, true}; }

INSTANTIATE_TEST_SUITE_P(
    Table, AdaptiveDrainTest,
    ::testing::Values(
        // 262,145 bytes at 10 MB/s: 26 ms, under a 50 ms dial (FIXED would skip it).
        Case{"over_fixed_cap_but_quick", true, 262145, kWan, 1, {},
             Budgeted(absl::Milliseconds(50))},
        // 1 MiB at 10 MB/s: 105 ms, over the dial...
        Case{"slower_than_a_dial", true, 1 << 20, kWan, 1, {}, DrainSkipReason::kSlowerThanDial},
        // ... but not over four dials.
        Case{"factor_makes_room", true, 1 << 20, kWan, 4, {}, Budgeted(absl::Milliseconds(200))},
        Case{"floor_over_learned_dial", true, 1 << 20, kWan, 1, absl::Milliseconds(300),
             Budgeted(absl::Milliseconds(300))},
        Case{"chunked_drains_while_bytes_come", true, std::nullopt, kWan, 1, {},
             Budgeted(absl::Milliseconds(50))},
        Case{"pause_never_past_the_time_ceiling", true, std::nullopt,
             OriginCost{absl::Seconds(3), std::nullopt, std::nullopt}, 1, {},
             Budgeted(absl::Seconds(1))},
        // No rate learned yet: the length alone does not decide.
        Case{"no_rate_yet", true, 1 << 20,
             OriginCost{absl::Milliseconds(50), std::nullopt, std::nullopt}, 1, {},
             Budgeted(absl::Milliseconds(50))},
        Case{"nothing_learned_ceilings_only", true, 1 << 20, OriginCost{}, 1, {},
             Budgeted(absl::InfiniteDuration())},
        Case{"over_the_ceiling", true, kCeiling + 1, kWan, 1000, {},
             DrainSkipReason::kOverByteCap},
        Case{"connection_close", false, 10, kWan, 1, {}, DrainSkipReason::kConnectionClose}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

struct FinishCase {
  const char* name;
  DrainProgress drain;
  OriginCost cost;
  std::optional<absl::Duration> expected;
};

class ExpectedFinishTest : public ::testing::TestWithParam<FinishCase> {};

TEST_P(ExpectedFinishTest, ComesFromTheRestAndTheRateOrTheUsualDrainTime) {
  EXPECT_EQ(ExpectedTimeToFinish(GetParam().drain, GetParam().cost), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ExpectedFinishTest,
    ::testing::Values(
        FinishCase{"rest_at_rate", {absl::Milliseconds(3), 100000}, kWan, absl::Milliseconds(10)},
        FinishCase{"chunked_usual_time_less_elapsed", {absl::Milliseconds(3), std::nullopt}, kWan,
                   absl::Milliseconds(2)},
        FinishCase{"late_past_the_usual_time", {absl::Milliseconds(9), std::nullopt}, kWan,
                   absl::ZeroDuration()},
        FinishCase{"known_rest_without_rate", {absl::Milliseconds(1), 100000},
                   OriginCost{absl::Milliseconds(50), std::nullopt, absl::Milliseconds(4)},
                   absl::Milliseconds(3)},
        FinishCase{"nothing_learned", {absl::Milliseconds(1), 100000},
                   OriginCost{absl::Milliseconds(50), std::nullopt, std::nullopt}, std::nullopt}),
    [](const ::testing::TestParamInfo<FinishCase>& info) { return info.param.name; });

struct AcquireCase {
  const char* name;
  std::optional<absl::Duration> dial;
  std::vector<std::optional<absl::Duration>> finishes;
  AcquireDecision expected;
};

class AcquireTest : public ::testing::TestWithParam<AcquireCase> {};

TEST_P(AcquireTest, WaitsOnlyForADrainExpectedBeforeADial) {
  EXPECT_EQ(DecideAcquire(GetParam().dial, GetParam().finishes), GetParam().expected);
}

const absl::Duration ms = absl::Milliseconds(1);
INSTANTIATE_TEST_SUITE_P(
    Table, AcquireTest,
    ::testing::Values(
        // Waits for the estimate and half again, at most a dial.
        AcquireCase{"drain_sooner_than_dial", 50 * ms, {10 * ms}, {DrainAwareChoice::kWait, 15 * ms}},
        AcquireCase{"slack_never_past_the_dial", 50 * ms, {40 * ms}, {DrainAwareChoice::kWait, 50 * ms}},
        AcquireCase{"at_least_a_millisecond_of_slack", 50 * ms, {absl::ZeroDuration()},
                    {DrainAwareChoice::kWait, 1 * ms}},
        AcquireCase{"soonest_of_several", 50 * ms, {std::nullopt, 80 * ms, 4 * ms},
                    {DrainAwareChoice::kWait, 6 * ms}},
        AcquireCase{"drain_slower_than_dial", 50 * ms, {60 * ms}, {DrainAwareChoice::kDial, {}}},
        AcquireCase{"equal_dials", 50 * ms, {50 * ms}, {DrainAwareChoice::kDial, {}}},
        AcquireCase{"unknown_drains_dial", 50 * ms, {std::nullopt}, {DrainAwareChoice::kDial, {}}},
        AcquireCase{"unknown_dial_dials", std::nullopt, {1 * ms}, {DrainAwareChoice::kDial, {}}}),
    [](const ::testing::TestParamInfo<AcquireCase>& info) { return info.param.name; });

TEST(DialCost, IsTheLearnedCostRaisedToTheFloor) {
  const OriginCost learned{absl::Milliseconds(50), std::nullopt, std::nullopt};
  EXPECT_EQ(DialCost(absl::ZeroDuration(), learned), absl::Milliseconds(50));
  EXPECT_EQ(DialCost(absl::Milliseconds(80), learned), absl::Milliseconds(80));
  EXPECT_EQ(DialCost(absl::Milliseconds(20), learned), absl::Milliseconds(50));
  EXPECT_EQ(DialCost(absl::Milliseconds(20), OriginCost{}), absl::Milliseconds(20));
  EXPECT_EQ(DialCost(absl::ZeroDuration(), OriginCost{}), std::nullopt);
}

TEST(CostModel, LearnsMovingAveragesAndForgetsDrainTimeOnAnAbandon) {
  CostModel model;
  model.RecordDial(absl::Milliseconds(100));
  EXPECT_EQ(model.estimate().dial, absl::Milliseconds(100));
  model.RecordDial(absl::Milliseconds(50));  // recent samples weigh 0.3
  EXPECT_EQ(model.estimate().dial, absl::Milliseconds(85));

  model.RecordDrain(1000000, absl::Milliseconds(100), /*completed=*/true, /*warm=*/true);
  EXPECT_EQ(model.estimate().body_bytes_per_second, 1e7);
  EXPECT_EQ(model.estimate().drain_time, absl::Milliseconds(100));
  // A cold connection's body (slow start) and a small one say nothing about the rate.
  model.RecordDrain(1000000, absl::Seconds(1), true, /*warm=*/false);
  model.RecordDrain(1000, absl::Seconds(1), true, true);
  EXPECT_EQ(model.estimate().body_bytes_per_second, 1e7);

  model.RecordDrain(5000, absl::Milliseconds(50), /*completed=*/false, true);
  EXPECT_EQ(model.estimate().drain_time, std::nullopt);
  EXPECT_EQ(model.estimate().dial, absl::Milliseconds(85));
}

}  // namespace adaptive
}  // namespace
}  // namespace egress::transport

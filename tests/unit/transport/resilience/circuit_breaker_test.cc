// The circuit breaker's states, driven with a clock of our own: what opens it, what it
// refuses, what a probe decides, and what says nothing of an origin's health.
#include "service/transport/resilience/circuit_breaker.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "tests/support/counting_observer.h"

namespace egress::transport {
namespace {

const Origin kOrigin{false, "api.test", 80};
const Origin kOther{false, "other.test", 80};
const absl::Time kStart = absl::FromUnixSeconds(1000000);

CircuitBreakerSettings Settings(uint32_t failures) {
  CircuitBreakerSettings settings;
  settings.consecutive_failures = failures;
  settings.open_for = absl::Seconds(10);
  return settings;
}

class CircuitBreakerTest : public ::testing::Test {
 protected:
  // One admitted fetch to `origin` ending with `health` at `now`.
  void Fetch(const Origin& origin, FetchHealth health, absl::Time now) {
    const CircuitBreakers::Admission admission = breakers_.Admit(origin, settings_, now);
    ASSERT_TRUE(admission.status.ok()) << admission.status;
    breakers_.Record(origin, settings_, admission, health, "connect failed", now);
  }
  bool Admitted(const Origin& origin, absl::Time now) {
    return breakers_.Admit(origin, settings_, now).status.ok();
  }

  testing::CountingObserver observer_;
  CircuitBreakerSettings settings_ = Settings(3);
  CircuitBreakers breakers_{observer_};
};

TEST_F(CircuitBreakerTest, OpensAfterTheConfiguredFailuresInARowAndRefusesWithARetryDelay) {
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  EXPECT_TRUE(Admitted(kOrigin, kStart));  // two of three: still closed
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const CircuitBreakers::Admission refused =
      breakers_.Admit(kOrigin, settings_, kStart + absl::Seconds(4));
  ASSERT_TRUE(absl::IsUnavailable(refused.status)) << refused.status;
  EXPECT_NE(refused.status.message().find("circuit breaker open for http://api.test:80"),
            absl::string_view::npos)
      << refused.status;
  EXPECT_NE(refused.status.message().find("connect failed"), absl::string_view::npos);
  const std::optional<ErrorReason> reason = ReasonOf(refused.status);
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason->reason, "CIRCUIT_OPEN");
  EXPECT_EQ(reason->retry_delay, absl::Seconds(6));
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kOpen), 1);
  EXPECT_EQ(observer_.breaker_rejected, 1);
  EXPECT_TRUE(Admitted(kOther, kStart));  // other origins are not affected
}

TEST_F(CircuitBreakerTest, ASuccessResetsTheCount) {
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  Fetch(kOrigin, FetchHealth::kSuccess, kStart);
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  EXPECT_TRUE(Admitted(kOrigin, kStart));
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kOpen), 0);
}

TEST_F(CircuitBreakerTest, NeutralEndsNeitherCountNorReset) {
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  for (int i = 0; i < 10; ++i) Fetch(kOrigin, FetchHealth::kNeutral, kStart);
  EXPECT_TRUE(Admitted(kOrigin, kStart));
  Fetch(kOrigin, FetchHealth::kFailure, kStart);
  EXPECT_FALSE(Admitted(kOrigin, kStart));
}

TEST_F(CircuitBreakerTest, AfterOpenForOneProbeAtATimeGoesAndItsSuccessCloses) {
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const absl::Time later = kStart + absl::Seconds(10);
  const CircuitBreakers::Admission probe = breakers_.Admit(kOrigin, settings_, later);
  ASSERT_TRUE(probe.status.ok());
  EXPECT_NE(probe.probe, 0u);
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kHalfOpen), 1);
  // While it is under way the others are refused.
  const CircuitBreakers::Admission second = breakers_.Admit(kOrigin, settings_, later);
  ASSERT_FALSE(second.status.ok());
  const auto metadata = ReasonOf(second.status)->metadata;
  EXPECT_THAT(metadata, ::testing::Contains(std::make_pair(std::string("state"),
                                                           std::string("half_open"))));
  // A fetch admitted before the breaker opened says nothing now.
  const CircuitBreakers::Admission before_it_opened{absl::OkStatus(), probe.generation, 0};
  breakers_.Record(kOrigin, settings_, before_it_opened, FetchHealth::kSuccess, "", later);
  EXPECT_FALSE(Admitted(kOrigin, later));
  breakers_.Record(kOrigin, settings_, probe, FetchHealth::kSuccess, "", later);
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kClosed), 1);
  EXPECT_TRUE(Admitted(kOrigin, later));
  EXPECT_TRUE(breakers_.Stats(later).empty());
}

TEST_F(CircuitBreakerTest, AFailedProbeOpensAgainForOpenFor) {
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const absl::Time later = kStart + absl::Seconds(11);
  Fetch(kOrigin, FetchHealth::kFailure, later);  // the probe
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kOpen), 2);
  EXPECT_FALSE(Admitted(kOrigin, later + absl::Seconds(9)));
  EXPECT_TRUE(Admitted(kOrigin, later + absl::Seconds(10)));
}

TEST_F(CircuitBreakerTest, ANeutralProbeLetsTheNextFetchProbe) {
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const absl::Time later = kStart + absl::Seconds(10);
  Fetch(kOrigin, FetchHealth::kNeutral, later);  // e.g. its caller cancelled
  const CircuitBreakers::Admission next = breakers_.Admit(kOrigin, settings_, later);
  ASSERT_TRUE(next.status.ok());
  EXPECT_NE(next.probe, 0u);
}

TEST_F(CircuitBreakerTest, AProbeWhoseEndIsNeverRecordedExpiresAfterTheRetryDelayTheOthersAreTold) {
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const absl::Time later = kStart + absl::Seconds(10);
  ASSERT_TRUE(Admitted(kOrigin, later));  // lost
  const CircuitBreakers::Admission refused =
      breakers_.Admit(kOrigin, settings_, later + absl::Milliseconds(400));
  ASSERT_FALSE(refused.status.ok());
  const absl::Duration told = ReasonOf(refused.status)->retry_delay.value_or(absl::ZeroDuration());
  EXPECT_GT(told, absl::ZeroDuration());
  EXPECT_FALSE(Admitted(kOrigin, later + absl::Milliseconds(400) + told - absl::Milliseconds(1)));
  EXPECT_TRUE(Admitted(kOrigin, later + absl::Milliseconds(400) + told));
}

// A probe to an upstream that answers slowly (or never: its own timeouts may be long)
// holds the half-open slot only as long as the others are told to wait, not open_for:
// a caller that comes back after the retry delay it was given probes itself.
TEST_F(CircuitBreakerTest, ASlowProbeHoldsTheHalfOpenSlotNoLongerThanTheRetryDelayItsRefusalsGive) {
  settings_.open_for = absl::Hours(1);
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const absl::Time half_open = kStart + settings_.open_for;
  const CircuitBreakers::Admission slow = breakers_.Admit(kOrigin, settings_, half_open);
  ASSERT_TRUE(slow.status.ok());
  ASSERT_NE(slow.probe, 0u);
  const CircuitBreakers::Admission refused = breakers_.Admit(kOrigin, settings_, half_open);
  ASSERT_FALSE(refused.status.ok());
  const absl::Duration told = ReasonOf(refused.status)->retry_delay.value_or(absl::ZeroDuration());
  EXPECT_GT(told, absl::ZeroDuration());
  EXPECT_LE(told, absl::Seconds(5));
  const CircuitBreakers::Admission back = breakers_.Admit(kOrigin, settings_, half_open + told);
  ASSERT_TRUE(back.status.ok()) << "told to come back after " << told << ": " << back.status;
  EXPECT_NE(back.probe, 0u);
  EXPECT_NE(back.probe, slow.probe);
}

TEST_F(CircuitBreakerTest, AProbeReplacedAfterOpenForNoLongerDecides) {
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  const absl::Time later = kStart + absl::Seconds(10);
  const CircuitBreakers::Admission slow = breakers_.Admit(kOrigin, settings_, later);
  const CircuitBreakers::Admission next =
      breakers_.Admit(kOrigin, settings_, later + absl::Seconds(10));
  ASSERT_TRUE(slow.status.ok() && next.status.ok());
  ASSERT_NE(slow.probe, next.probe);
  // The slow probe's success comes last but one: the breaker waits for the new probe.
  const absl::Time soon = later + absl::Seconds(10) + absl::Milliseconds(500);
  breakers_.Record(kOrigin, settings_, slow, FetchHealth::kSuccess, "", soon);
  EXPECT_FALSE(Admitted(kOrigin, soon));
  breakers_.Record(kOrigin, settings_, next, FetchHealth::kFailure, "reset",
                   later + absl::Seconds(12));
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kOpen), 2);
  EXPECT_FALSE(Admitted(kOrigin, later + absl::Seconds(21)));
}

TEST_F(CircuitBreakerTest, FetchesAdmittedBeforeAResetAreNotCounted) {
  // Admitted under the old thresholds; they end after the new config's Reset.
  const CircuitBreakers::Admission old = breakers_.Admit(kOrigin, settings_, kStart);
  breakers_.Reset();
  for (int i = 0; i < 5; ++i) {
    breakers_.Record(kOrigin, settings_, old, FetchHealth::kFailure, "reset", kStart);
  }
  EXPECT_TRUE(Admitted(kOrigin, kStart));
  EXPECT_TRUE(breakers_.Stats(kStart).empty());
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);  // admitted after
  EXPECT_FALSE(Admitted(kOrigin, kStart));
}

TEST_F(CircuitBreakerTest, OffWhenConsecutiveFailuresIsZero) {
  settings_ = Settings(0);
  for (int i = 0; i < 100; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  EXPECT_TRUE(Admitted(kOrigin, kStart));
  EXPECT_TRUE(breakers_.Stats(kStart).empty());
}

TEST_F(CircuitBreakerTest, ResetClosesEveryBreakerAndReportsIt) {
  for (int i = 0; i < 3; ++i) Fetch(kOrigin, FetchHealth::kFailure, kStart);
  breakers_.Reset();
  EXPECT_EQ(observer_.BreakerTransitionsTo(BreakerState::kClosed), 1);
  EXPECT_TRUE(Admitted(kOrigin, kStart));
}

TEST(CircuitBreakerBoundTest, PastTheBoundOpenOnesAreKeptUntilTheirTimeIsUp) {
  testing::CountingObserver observer;
  CircuitBreakers breakers(observer, /*max_tracked=*/2);
  const CircuitBreakerSettings settings = Settings(1);
  const Origin a{false, "a.test", 80}, b{false, "b.test", 80}, c{false, "c.test", 80};
  for (const Origin& origin : {a, b, c}) {
    breakers.Record(origin, settings, {}, FetchHealth::kFailure, "x", kStart);
  }
  EXPECT_EQ(breakers.Stats(kStart).size(), 2u);
  EXPECT_FALSE(breakers.Admit(a, settings, kStart).status.ok());
  EXPECT_FALSE(breakers.Admit(b, settings, kStart).status.ok());
  EXPECT_TRUE(breakers.Admit(c, settings, kStart).status.ok());  // no room: not tracked
  // Once a's and b's time is up (nobody fetched them since), one makes room for c.
  const absl::Time later = kStart + settings.open_for;
  breakers.Record(c, settings, {}, FetchHealth::kFailure, "x", later);
  EXPECT_EQ(breakers.Stats(later).size(), 2u);
  EXPECT_FALSE(breakers.Admit(c, settings, later).status.ok());
  EXPECT_EQ(observer.BreakerTransitionsTo(BreakerState::kClosed), 1);  // the one evicted
}

TEST(CircuitBreakerBoundTest, AFullTableMakesRoomFromAClosedBreaker) {
  testing::CountingObserver observer;
  CircuitBreakers breakers(observer, /*max_tracked=*/2);
  const CircuitBreakerSettings settings = Settings(2);
  const Origin a{false, "a.test", 80}, b{false, "b.test", 80}, c{false, "c.test", 80};
  for (const Origin& origin : {a, b, c}) {  // one failure each: closed, counted
    breakers.Record(origin, settings, {}, FetchHealth::kFailure, "x", kStart);
  }
  breakers.Record(c, settings, {}, FetchHealth::kFailure, "x", kStart);
  EXPECT_FALSE(breakers.Admit(c, settings, kStart).status.ok());
  EXPECT_EQ(breakers.Stats(kStart).size(), 2u);
}

// A full table of open breakers with one closed one among them makes room from that one,
// wherever it sits in the table (not only when it happens to be among the first few).
TEST(CircuitBreakerBoundTest, AFullTableFindsItsOneClosedBreakerWhereverItIs) {
  constexpr size_t kTracked = 500;
  const CircuitBreakerSettings open_at_once = Settings(1);
  const CircuitBreakerSettings open_at_three = Settings(3);
  for (int round = 0; round < 20; ++round) {
    testing::CountingObserver observer;
    CircuitBreakers breakers(observer, kTracked);
    const auto name = [round](absl::string_view what, size_t i) {
      return Origin{false, absl::StrCat(what, "-", round, "-", i, ".test"), 80};
    };
    for (size_t i = 0; i + 1 < kTracked; ++i) {
      breakers.Record(name("open", i), open_at_once, {}, FetchHealth::kFailure, "x", kStart);
    }
    breakers.Record(name("closed", 0), open_at_three, {}, FetchHealth::kFailure, "x", kStart);
    ASSERT_EQ(breakers.Stats(kStart).size(), kTracked);
    const Origin failing = name("failing", 0);
    breakers.Record(failing, open_at_once, {}, FetchHealth::kFailure, "x", kStart);
    EXPECT_FALSE(breakers.Admit(failing, open_at_once, kStart).status.ok())
        << "round " << round << ": the failing origin was not tracked";
    EXPECT_EQ(breakers.Stats(kStart).size(), kTracked);
  }
}

TEST(FetchHealthTest, OnlyTheOriginsOwnFailuresCount) {
  const auto failed = [](absl::string_view reason) {
    return HealthOf(WithReason(absl::UnavailableError("x"), reason), 0, true);
  };
  EXPECT_EQ(failed("CONNECT_FAILED"), FetchHealth::kFailure);
  EXPECT_EQ(failed("UPSTREAM_CONNECTION_FAILED"), FetchHealth::kFailure);
  EXPECT_EQ(failed("UPSTREAM_CLOSED"), FetchHealth::kFailure);
  EXPECT_EQ(failed("UPSTREAM_TIMEOUT"), FetchHealth::kFailure);
  EXPECT_EQ(failed("TLS_FAILED"), FetchHealth::kFailure);
  // The caller's own deadline or cancellation, the policy, DNS and our limits do not.
  EXPECT_EQ(failed("DEADLINE_EXCEEDED"), FetchHealth::kNeutral);
  EXPECT_EQ(failed("CANCELLED"), FetchHealth::kNeutral);
  EXPECT_EQ(failed("POLICY_DENIED"), FetchHealth::kNeutral);
  EXPECT_EQ(failed("DNS_FAILED"), FetchHealth::kNeutral);
  EXPECT_EQ(failed("ORIGIN_BUSY"), FetchHealth::kNeutral);
  EXPECT_EQ(HealthOf(absl::CancelledError("no reason"), 0, true), FetchHealth::kNeutral);
  EXPECT_EQ(HealthOf(absl::OkStatus(), 503, true), FetchHealth::kFailure);
  EXPECT_EQ(HealthOf(absl::OkStatus(), 503, false), FetchHealth::kSuccess);
  EXPECT_EQ(HealthOf(absl::OkStatus(), 404, true), FetchHealth::kSuccess);
}

}  // namespace
}  // namespace egress::transport

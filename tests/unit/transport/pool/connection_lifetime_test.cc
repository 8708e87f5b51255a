#include "service/transport/pool/connection_lifetime.h"

#include "gtest/gtest.h"

namespace egress::transport {
namespace {

const absl::Time kCreated = absl::FromUnixSeconds(1000);

ConnectionFacts Facts(int requests, std::optional<KeepAliveHint> hint = std::nullopt,
                      double age_draw = 0) {
  return ConnectionFacts{kCreated, requests, hint, age_draw};
}

TEST(ConnectionLifetime, UnlimitedByDefault) {
  EXPECT_EQ(RetireAfterExchange(Facts(1000000), LifetimeLimits{}, kCreated + absl::Hours(1000)),
            std::nullopt);
}

TEST(ConnectionLifetime, AgeIsShortenedByAtMostTheJitter) {
  LifetimeLimits limits;
  limits.max_age = absl::Seconds(100);
  limits.max_age_jitter_percent = 10;
  EXPECT_EQ(AgeLimit(limits, 0), absl::Seconds(100));
  EXPECT_EQ(AgeLimit(limits, 0.5), absl::Seconds(95));
  EXPECT_GT(AgeLimit(limits, 0.9999999), absl::Seconds(90));
  limits.max_age_jitter_percent = 0;
  EXPECT_EQ(AgeLimit(limits, 0.9999999), absl::Seconds(100));
}

TEST(ConnectionLifetime, AnExchangeEndingPastTheAgeRetiresForMaxAge) {
  LifetimeLimits limits;
  limits.max_age = absl::Seconds(10);
  limits.max_age_jitter_percent = 50;
  EXPECT_EQ(RetireAfterExchange(Facts(1, std::nullopt, 0.5), limits, kCreated + absl::Seconds(7)),
            std::nullopt);
  EXPECT_EQ(RetireAfterExchange(Facts(1, std::nullopt, 0.5), limits, kCreated + absl::Seconds(8)),
            CloseReason::kMaxAge);
}

TEST(ConnectionLifetime, TheLastOfMaxRequestsRetiresForMaxRequests) {
  LifetimeLimits limits;
  limits.max_requests = 3;
  EXPECT_EQ(RetireAfterExchange(Facts(2), limits, kCreated), std::nullopt);
  EXPECT_EQ(RetireAfterExchange(Facts(3), limits, kCreated), CloseReason::kMaxRequests);
}

TEST(ConnectionLifetime, TheServersMaxRetiresForServerHint) {
  const KeepAliveHint max3{std::nullopt, 3u};
  EXPECT_EQ(RetireAfterExchange(Facts(2, max3), LifetimeLimits{}, kCreated), std::nullopt);
  EXPECT_EQ(RetireAfterExchange(Facts(3, max3), LifetimeLimits{}, kCreated),
            CloseReason::kServerHint);
  EXPECT_EQ(RetireAfterExchange(Facts(1, KeepAliveHint{std::nullopt, 0u}), LifetimeLimits{},
                                kCreated),
            CloseReason::kServerHint);
}

TEST(ConnectionLifetime, AServerTimeoutWithinTheMarginLeavesNothingToReuse) {
  LifetimeLimits limits;  // margin 1 s
  EXPECT_EQ(RetireAfterExchange(Facts(1, KeepAliveHint{absl::Seconds(1), std::nullopt}), limits,
                                kCreated),
            CloseReason::kServerHint);
  EXPECT_EQ(RetireAfterExchange(Facts(1, KeepAliveHint{absl::Seconds(2), std::nullopt}), limits,
                                kCreated),
            std::nullopt);
}

TEST(ConnectionLifetime, AnIdleConnectionExpiresTheMarginBeforeTheServersTimeout) {
  LifetimeLimits limits;
  limits.hint_margin = absl::Milliseconds(300);
  const absl::Time since = kCreated + absl::Seconds(1);
  const IdleDeadline deadline = IdleDeadlineOf(
      Facts(1, KeepAliveHint{absl::Seconds(2), std::nullopt}), since, absl::Seconds(90), limits);
  EXPECT_EQ(deadline.at, since + absl::Milliseconds(1700));
  EXPECT_EQ(deadline.reason, CloseReason::kServerHint);
}

TEST(ConnectionLifetime, TheServersTimeoutNeverLengthensTheIdleTimeout) {
  const absl::Time since = kCreated;
  const IdleDeadline deadline =
      IdleDeadlineOf(Facts(1, KeepAliveHint{absl::Seconds(300), std::nullopt}), since,
                     absl::Seconds(5), LifetimeLimits{});
  EXPECT_EQ(deadline.at, since + absl::Seconds(5));
  EXPECT_EQ(deadline.reason, CloseReason::kIdleTimeout);
}

TEST(ConnectionLifetime, HintsNotHonouredBoundNeitherReuseNorIdleTime) {
  LifetimeLimits limits;
  limits.honor_hints = false;
  const KeepAliveHint hint{absl::Seconds(2), 3u};
  EXPECT_EQ(RetireAfterExchange(Facts(3, hint), limits, kCreated), std::nullopt);
  const IdleDeadline deadline = IdleDeadlineOf(Facts(1, hint), kCreated, absl::Seconds(90), limits);
  EXPECT_EQ(deadline.at, kCreated + absl::Seconds(90));
  EXPECT_EQ(deadline.reason, CloseReason::kIdleTimeout);
}

TEST(ConnectionLifetime, AnIdleConnectionExpiresAtItsAge) {
  LifetimeLimits limits;
  limits.max_age = absl::Seconds(30);
  const IdleDeadline deadline =
      IdleDeadlineOf(Facts(1), kCreated + absl::Seconds(29), absl::Seconds(90), limits);
  EXPECT_EQ(deadline.at, kCreated + absl::Seconds(30));
  EXPECT_EQ(deadline.reason, CloseReason::kMaxAge);
}

}  // namespace
}  // namespace egress::transport

// RetryBudgets on a clock of the test's own, and what is retryable, Retry-After and the
// backoff's bounds.
#include "service/transport/resilience/retry_budget.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"

namespace egress::transport {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

Origin TestOrigin(const std::string& host = "api.test") { return Origin{false, host, 80}; }

RetrySettings Budget(uint32_t percent, uint32_t per_second) {
  RetrySettings settings;
  settings.max_attempts = 3;
  settings.budget_percent = percent;
  settings.min_retries_per_second = per_second;
  return settings;
}

TEST(RetryBudgetsTest, EveryFetchEarnsItsShareOfARetry) {
  RetryBudgets budgets;
  const RetrySettings settings = Budget(20, 0);
  int retries = 0;
  for (int i = 0; i < 100; ++i) {
    budgets.OnFetch(TestOrigin(), settings, kStart);
    while (budgets.TryRetry(TestOrigin(), settings, kStart)) ++retries;
  }
  EXPECT_GE(retries, 19);
  EXPECT_LE(retries, 20);
  // Another origin's budget is its own.
  EXPECT_FALSE(budgets.TryRetry(TestOrigin("other.test"), settings, kStart));
}

TEST(RetryBudgetsTest, AQuietOriginMayRetryMinRetriesPerSecond) {
  RetryBudgets budgets;
  const RetrySettings settings = Budget(0, 2);
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, kStart));
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, kStart));
  EXPECT_FALSE(budgets.TryRetry(TestOrigin(), settings, kStart));
  EXPECT_FALSE(budgets.TryRetry(TestOrigin(), settings, kStart + absl::Milliseconds(400)));
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, kStart + absl::Milliseconds(500)));
  // The bucket holds a second's worth, however long the pause.
  const absl::Time later = kStart + absl::Hours(1);
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, later));
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, later));
  EXPECT_FALSE(budgets.TryRetry(TestOrigin(), settings, later));
}

// A long healthy spell saves up at most kMaxSaved retries for the outage after it.
TEST(RetryBudgetsTest, WhatIsSavedUpIsCapped) {
  RetryBudgets budgets;
  const RetrySettings settings = Budget(100, 0);
  for (int i = 0; i < 1000; ++i) budgets.OnFetch(TestOrigin(), settings, kStart);
  int retries = 0;
  while (budgets.TryRetry(TestOrigin(), settings, kStart)) ++retries;
  EXPECT_EQ(retries, RetryBudgets::kMaxSaved);
}

Origin Numbered(absl::string_view what, size_t i) {
  return TestOrigin(absl::StrCat(what, "-", i, ".test"));
}

// A caller that fetches from ever new origins does not give a failing origin back the
// retries it has spent: only budgets that hold nothing back make room in a full table.
TEST(RetryBudgetsBoundTest, CyclingOriginsDoesNotRefreshAFailingOriginsSpentBudget) {
  constexpr size_t kTracked = 200;
  RetryBudgets budgets(kTracked);
  const RetrySettings settings = Budget(0, 1);
  for (size_t i = 0; i < kTracked / 2; ++i) {  // failing origins that spent their retries
    ASSERT_TRUE(budgets.TryRetry(Numbered("failing", i), settings, kStart));
  }
  for (size_t i = 0; i < 100 * kTracked; ++i) {
    budgets.OnFetch(Numbered("cycled", i), settings, kStart);
  }
  size_t refreshed = 0;
  for (size_t i = 0; i < kTracked / 2; ++i) {
    refreshed += budgets.TryRetry(Numbered("failing", i), settings, kStart);
  }
  EXPECT_EQ(refreshed, 0u);
}

// A full table of budgets in their fresh state (a full bucket) makes room for a new
// origin, which may then retry.
TEST(RetryBudgetsBoundTest, AFullTableMakesRoomFromABudgetThatHoldsNothingBack) {
  RetryBudgets budgets(/*max_origins=*/100);
  const RetrySettings settings = Budget(0, 1);
  for (size_t i = 0; i < 100; ++i) budgets.OnFetch(Numbered("fresh", i), settings, kStart);
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, kStart));
  EXPECT_FALSE(budgets.TryRetry(TestOrigin(), settings, kStart));  // tracked: spent
}

// When every tracked origin has spent its bucket, a new origin is not tracked, and an
// untracked origin has no room to retry (the safe direction); once a bucket is full
// again, it makes room.
TEST(RetryBudgetsBoundTest, WithNoRoomANewOriginDoesNotRetryUntilABucketRefills) {
  RetryBudgets budgets(/*max_origins=*/100);
  const RetrySettings settings = Budget(0, 1);
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(budgets.TryRetry(Numbered("spent", i), settings, kStart));
  }
  EXPECT_FALSE(budgets.TryRetry(TestOrigin(), settings, kStart));
  for (size_t i = 0; i < 100; ++i) {
    EXPECT_FALSE(budgets.TryRetry(Numbered("spent", i), settings, kStart)) << i;
  }
  const absl::Time refilled = kStart + absl::Seconds(1);
  EXPECT_TRUE(budgets.TryRetry(TestOrigin(), settings, refilled));
}

TEST(RetryableOutcomeTest, WhatMayGoAgain) {
  const auto reason = [](absl::string_view r) {
    return WithReason(absl::UnavailableError("x"), r);
  };
  // Nothing written: any method.
  EXPECT_EQ(RetryableOutcome(reason("CONNECT_FAILED"), 0, false, false), RetryReason::kConnectFailed);
  EXPECT_EQ(RetryableOutcome(reason("TLS_FAILED"), 0, false, false), RetryReason::kConnectFailed);
  // Written: idempotent methods only.
  EXPECT_EQ(RetryableOutcome(reason("UPSTREAM_CLOSED"), 0, false, true), RetryReason::kReset);
  EXPECT_EQ(RetryableOutcome(reason("UPSTREAM_CONNECTION_FAILED"), 0, false, true),
            RetryReason::kReset);
  EXPECT_EQ(RetryableOutcome(reason("UPSTREAM_CLOSED"), 0, false, false), std::nullopt);
  for (int code : {502, 503, 504}) {
    EXPECT_EQ(RetryableOutcome(absl::OkStatus(), code, false, true), RetryReason::kStatus);
    EXPECT_EQ(RetryableOutcome(absl::OkStatus(), code, false, false), std::nullopt);
  }
  EXPECT_EQ(RetryableOutcome(absl::OkStatus(), 429, true, true), RetryReason::kStatus);
  EXPECT_EQ(RetryableOutcome(absl::OkStatus(), 429, false, true), std::nullopt);
  for (int code : {200, 404, 500, 501}) {
    EXPECT_EQ(RetryableOutcome(absl::OkStatus(), code, true, true), std::nullopt) << code;
  }
  // Never: a certificate that is wrong, a policy denial, an open breaker, a timeout.
  for (absl::string_view r : {"TLS_CERTIFICATE_INVALID", "CIRCUIT_OPEN", "UPSTREAM_TIMEOUT",
                              "UPSTREAM_INVALID_RESPONSE", "DNS_FAILED"}) {
    EXPECT_EQ(RetryableOutcome(reason(r), 0, false, true), std::nullopt) << r;
  }
  EXPECT_EQ(RetryableOutcome(absl::PermissionDeniedError("denied"), 0, false, true), std::nullopt);
}

TEST(RetryAfterTest, DeltaSecondsOnly) {
  EXPECT_EQ(RetryAfter({{"Retry-After", "3"}}), absl::Seconds(3));
  EXPECT_EQ(RetryAfter({{"retry-after", " 0 "}}), absl::ZeroDuration());
  EXPECT_EQ(RetryAfter({{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}}), std::nullopt);
  EXPECT_EQ(RetryAfter({{"Retry-After", "-1"}}), std::nullopt);
  EXPECT_EQ(RetryAfter({{"Content-Length", "0"}}), std::nullopt);
}

TEST(BackoffTest, FullJitterUnderAnExponentialCeiling) {
  RetrySettings settings;
  settings.base_backoff = absl::Milliseconds(25);
  settings.max_backoff = absl::Milliseconds(250);
  EXPECT_EQ(Backoff(settings, 1, 0.0), absl::ZeroDuration());
  EXPECT_EQ(Backoff(settings, 1, 0.5), absl::Microseconds(12500));
  EXPECT_EQ(Backoff(settings, 2, 1.0), absl::Milliseconds(50));
  EXPECT_EQ(Backoff(settings, 3, 1.0), absl::Milliseconds(100));
  EXPECT_EQ(Backoff(settings, 5, 1.0), absl::Milliseconds(250));
  EXPECT_EQ(Backoff(settings, 1000, 1.0), absl::Milliseconds(250));
}

}  // namespace
}  // namespace egress::transport

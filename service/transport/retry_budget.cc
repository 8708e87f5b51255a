#include "service/transport/retry_budget.h"

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "service/transport/error_reason.h"

namespace egress::transport {

RetryBudgets::Budget& RetryBudgets::For(const Origin& origin, const RetrySettings& settings,
                                        absl::Time now) {
  std::string key = origin.Key();
  auto it = budgets_.find(key);
  if (it == budgets_.end()) {
    // One other origin's budget makes room: it starts afresh if it comes back (nothing
    // saved, a full bucket), whereas forgetting them all would refill a failing origin's.
    if (budgets_.size() >= kMaxOrigins) budgets_.erase(budgets_.begin());
    it = budgets_.emplace(std::move(key), Budget()).first;
  }
  Budget& budget = it->second;
  const double rate = settings.min_retries_per_second;
  budget.bucket.Refill(now, rate, rate);
  return budget;
}

void RetryBudgets::OnFetch(const Origin& origin, const RetrySettings& settings, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  Budget& budget = For(origin, settings, now);
  budget.saved = std::min(kMaxSaved, budget.saved + settings.budget_percent / 100.0);
}

bool RetryBudgets::TryRetry(const Origin& origin, const RetrySettings& settings,
                            absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  Budget& budget = For(origin, settings, now);
  if (budget.saved >= 1) {
    budget.saved -= 1;
    return true;
  }
  return budget.bucket.TryTake();
}

std::optional<RetryReason> RetryableOutcome(const absl::Status& status, int status_code,
                                            bool has_retry_after, bool idempotent) {
  if (status.ok()) {
    const bool retryable = status_code == 502 || status_code == 503 || status_code == 504 ||
                           (status_code == 429 && has_retry_after);
    if (retryable && idempotent) return RetryReason::kStatus;
    return std::nullopt;
  }
  const std::optional<ErrorReason> reason = ReasonOf(status);
  if (!reason) return std::nullopt;
  // Nothing of the request was written before these.
  if (reason->reason == "CONNECT_FAILED" || reason->reason == "TLS_FAILED") {
    return RetryReason::kConnectFailed;
  }
  if (idempotent &&
      (reason->reason == "UPSTREAM_CLOSED" || reason->reason == "UPSTREAM_CONNECTION_FAILED")) {
    return RetryReason::kReset;
  }
  return std::nullopt;
}

std::optional<absl::Duration> RetryAfter(const HeaderList& headers) {
  for (const auto& [name, value] : headers) {
    if (!absl::EqualsIgnoreCase(name, "retry-after")) continue;
    uint32_t seconds = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &seconds)) return std::nullopt;
    return absl::Seconds(seconds);
  }
  return std::nullopt;
}

absl::Duration Backoff(const RetrySettings& settings, uint32_t retry, double unit_random) {
  absl::Duration ceiling = settings.base_backoff;
  for (uint32_t i = 1; i < retry && ceiling < settings.max_backoff; ++i) ceiling *= 2;
  return std::min(ceiling, settings.max_backoff) * unit_random;
}

absl::Duration RandomBackoff(const RetrySettings& settings, uint32_t retry) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return Backoff(settings, retry, std::uniform_real_distribution<double>(0, 1)(generator));
}

}  // namespace egress::transport

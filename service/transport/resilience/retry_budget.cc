#include "service/transport/resilience/retry_budget.h"

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "service/base/error_reason.h"

namespace egress::transport {

namespace {

// When a bucket of `tokens` out of `rate` is full again, refilled at `rate` a second.
absl::Time FullAt(double tokens, double rate, absl::Time now) {
  if (tokens >= rate) return now;
  return now + absl::Ceil(absl::Seconds((rate - tokens) / rate), absl::Microseconds(1));
}

}  // namespace

RetryBudgets::Budget* RetryBudgets::For(const Origin& origin, const RetrySettings& settings,
                                        absl::Time now) {
  const double rate = settings.min_retries_per_second;
  std::string key = origin.Key();
  auto it = budgets_.find(key);
  if (it == budgets_.end()) {
    if (budgets_.size() >= max_origins_ && !MakeRoom(rate, now)) return nullptr;
    it = budgets_.emplace(key, Budget{0, TokenBucket(), now}).first;
    by_full_at_.emplace(now, std::move(key));
  }
  Budget& budget = it->second;
  budget.bucket.Refill(now, rate, rate);
  return &budget;
}

bool RetryBudgets::MakeRoom(double rate, absl::Time now) {
  while (!by_full_at_.empty() && by_full_at_.begin()->first <= now) {
    auto node = by_full_at_.extract(by_full_at_.begin());
    const auto it = budgets_.find(node.value().second);
    const double tokens = it->second.bucket.TokensAt(now, rate, rate);
    if (tokens >= rate) {
      budgets_.erase(it);
      return true;
    }
    // Not full after all (its rate has changed since): its new place is after `now`.
    it->second.full_at = std::max(FullAt(tokens, rate, now), now + absl::Microseconds(1));
    node.value().first = it->second.full_at;
    by_full_at_.insert(std::move(node));
  }
  return false;
}

void RetryBudgets::Reindex(const std::string& key, Budget& budget, double rate, absl::Time now) {
  const absl::Time full_at = FullAt(budget.bucket.tokens(), rate, now);
  if (full_at == budget.full_at) return;
  auto node = by_full_at_.extract({budget.full_at, key});
  budget.full_at = full_at;
  node.value().first = full_at;
  by_full_at_.insert(std::move(node));
}

void RetryBudgets::OnFetch(const Origin& origin, const RetrySettings& settings, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  Budget* budget = For(origin, settings, now);
  if (!budget) return;  // not tracked: nothing is saved for it
  budget->saved = std::min(kMaxSaved, budget->saved + settings.budget_percent / 100.0);
}

bool RetryBudgets::TryRetry(const Origin& origin, const RetrySettings& settings,
                            absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  Budget* budget = For(origin, settings, now);
  if (!budget) return false;  // not tracked: no room, no retry
  if (budget->saved >= 1) {
    budget->saved -= 1;
    return true;
  }
  if (!budget->bucket.TryTake()) return false;
  Reindex(origin.Key(), *budget, settings.min_retries_per_second, now);
  return true;
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

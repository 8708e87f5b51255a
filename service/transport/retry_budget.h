#ifndef EGRESS_SERVICE_TRANSPORT_RETRY_BUDGET_H_
#define EGRESS_SERVICE_TRANSPORT_RETRY_BUDGET_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/transport/observer.h"
#include "service/transport/origin.h"
#include "service/transport/request.h"
#include "service/transport/settings.h"
#include "service/transport/token_bucket.h"

namespace egress::transport {

// Each origin's retry budget (RetrySettings): every fetch earns budget_percent / 100 of
// a retry (at most kMaxSaved saved up, so that a long healthy spell cannot pay for a
// storm), and a bucket of min_retries_per_second (as many at once) lets origins too
// quiet to earn one still retry. At most kMaxOrigins origins are tracked; a new one past
// that takes the place of another, whose budget starts afresh if it comes back (nothing
// saved, a full bucket: at most min_retries_per_second more). Thread-safe.
class RetryBudgets {
 public:
  static constexpr double kMaxSaved = 100;
  static constexpr size_t kMaxOrigins = 10000;

  // A fetch with retries on started (its first attempt).
  void OnFetch(const Origin& origin, const RetrySettings& settings, absl::Time now);
  // Whether one retry may go now; if so, it is taken from the budget.
  bool TryRetry(const Origin& origin, const RetrySettings& settings, absl::Time now);

 private:
  struct Budget {
    double saved = 0;
    TokenBucket bucket;  // of min_retries_per_second
  };
  Budget& For(const Origin& origin, const RetrySettings& settings, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::mutex mu_;
  absl::flat_hash_map<std::string, Budget> budgets_ ABSL_GUARDED_BY(mu_);  // by origin key
};

// Why a finished attempt may be tried again (see RetrySettings), or nullopt: `status`
// and, for a response, its status code and whether it had a Retry-After.
std::optional<RetryReason> RetryableOutcome(const absl::Status& status, int status_code,
                                            bool has_retry_after, bool idempotent);

// A Retry-After of delta-seconds; nullopt when absent or not a number (an HTTP-date is
// not followed: the backoff applies).
std::optional<absl::Duration> RetryAfter(const HeaderList& headers);

// The wait before retry number `retry` (1 for the first): full jitter, `unit_random`
// (in [0, 1)) of base_backoff x 2^(retry-1), at most max_backoff.
absl::Duration Backoff(const RetrySettings& settings, uint32_t retry, double unit_random);
// Backoff with a random draw of unit_random.
absl::Duration RandomBackoff(const RetrySettings& settings, uint32_t retry);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_RETRY_BUDGET_H_

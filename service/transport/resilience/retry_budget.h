#ifndef EGRESS_SERVICE_TRANSPORT_RESILIENCE_RETRY_BUDGET_H_
#define EGRESS_SERVICE_TRANSPORT_RESILIENCE_RETRY_BUDGET_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/transport/observer.h"
#include "service/transport/http/origin.h"
#include "service/transport/http/request.h"
#include "service/transport/settings.h"
#include "service/base/token_bucket.h"

namespace egress::transport {

// Each origin's retry budget (RetrySettings): every fetch earns budget_percent / 100 of
// a retry (at most kMaxSaved saved up, so that a long healthy spell cannot pay for a
// storm), and a bucket of min_retries_per_second (as many at once) lets origins too
// quiet to earn one still retry. At most max_origins origins are tracked. A new one past
// that takes the place of one whose bucket is full (it holds no retry back: if it comes
// back it starts afresh, with nothing saved, which allows no more retries than it had),
// the one full the longest, found in O(log n). When every bucket has retries taken from
// it, the new origin is not tracked and may not retry until one is full again: a caller
// that cycles through origins cannot give a failing origin back the retries it spent.
// Thread-safe.
class RetryBudgets {
 public:
  static constexpr double kMaxSaved = 100;
  static constexpr size_t kMaxOrigins = 10000;

  explicit RetryBudgets(size_t max_origins = kMaxOrigins) : max_origins_(max_origins) {}

  // A fetch with retries on started (its first attempt).
  void OnFetch(const Origin& origin, const RetrySettings& settings, absl::Time now);
  // Whether one retry may go now; if so, it is taken from the budget.
  bool TryRetry(const Origin& origin, const RetrySettings& settings, absl::Time now);

 private:
  struct Budget {
    double saved = 0;
    TokenBucket bucket;  // of min_retries_per_second
    absl::Time full_at;  // when the bucket is full again: its place in by_full_at_
  };
  // The budget of `origin`, refilled to `now`, made if there is room; null if not.
  Budget* For(const Origin& origin, const RetrySettings& settings, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the budget whose bucket has been full the longest, if one is full at `now`.
  bool MakeRoom(double rate, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the budget of `key` to its place in by_full_at_ after its bucket changed.
  void Reindex(const std::string& key, Budget& budget, double rate, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_origins_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, Budget> budgets_ ABSL_GUARDED_BY(mu_);  // by origin key
  std::set<std::pair<absl::Time, std::string>> by_full_at_ ABSL_GUARDED_BY(mu_);
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

#endif  // EGRESS_SERVICE_TRANSPORT_RESILIENCE_RETRY_BUDGET_H_

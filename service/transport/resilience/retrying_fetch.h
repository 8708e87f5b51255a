#ifndef EGRESS_SERVICE_TRANSPORT_RESILIENCE_RETRYING_FETCH_H_
#define EGRESS_SERVICE_TRANSPORT_RESILIENCE_RETRYING_FETCH_H_

#include <functional>
#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "service/transport/http/request.h"
#include "service/transport/observer.h"
#include "service/transport/resilience/retry_budget.h"
#include "service/transport/response.h"

namespace egress::transport {

// A fetch with retries on (RetrySettings): each attempt is a fetch of its own (so the
// policy, the circuit breaker and the pool judge each one), started by `start_attempt`;
// an attempt whose outcome is retryable (RetryableOutcome) is followed by another after
// its backoff, while attempts, the deadline and the origin's budget allow. Cancel
// aborts the attempt under way or the wait. `done` runs once, with the last attempt's
// outcome (a response's `retried` set when it was not the first).
class RetryingFetch : public PendingFetch, public std::enable_shared_from_this<RetryingFetch> {
 public:
  using StartAttempt = std::function<std::shared_ptr<PendingFetch>(
      HttpRequest request, ResponseCallback done)>;

  RetryingFetch(boost::asio::io_context& timers, TransportObserver& observer,
                RetryBudgets& budgets, const RetrySettings& settings, HttpRequest request,
                absl::Time deadline, StartAttempt start_attempt, ResponseCallback done);

  void Start();
  void Cancel() override;

 private:
  void Attempt();
  void OnAttempt(absl::StatusOr<Response> result);
  // The next attempt after `wait`, on the timers' thread (where timer_ is used).
  void Wait(absl::Duration wait);
  void Finish(absl::StatusOr<Response> result);
  bool Cancelled();

  TransportObserver& observer_;
  RetryBudgets& budgets_;
  const RetrySettings settings_;
  const uint32_t max_attempts_;
  const HttpRequest request_;
  const absl::Time deadline_;
  const StartAttempt start_attempt_;
  ResponseCallback done_;
  boost::asio::io_context& timers_;
  boost::asio::steady_timer timer_;
  std::mutex mu_;
  uint32_t attempts_ ABSL_GUARDED_BY(mu_) = 0;  // started; each after the last one ended
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<PendingFetch> attempt_ ABSL_GUARDED_BY(mu_);  // the latest one
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_RESILIENCE_RETRYING_FETCH_H_

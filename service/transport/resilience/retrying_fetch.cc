#include "service/transport/resilience/retrying_fetch.h"

#include <algorithm>
#include <utility>

#include "boost/asio/post.hpp"

namespace egress::transport {

RetryingFetch::RetryingFetch(boost::asio::io_context& timers, TransportObserver& observer,
                             RetryBudgets& budgets, const RetrySettings& settings,
                             HttpRequest request, absl::Time deadline,
                             StartAttempt start_attempt, ResponseCallback done)
    : observer_(observer),
      budgets_(budgets),
      settings_(settings),
      max_attempts_(request.max_attempts.value_or(settings.max_attempts)),
      request_(std::move(request)),
      deadline_(deadline),
      start_attempt_(std::move(start_attempt)),
      done_(std::move(done)),
      timers_(timers),
      timer_(timers) {}

void RetryingFetch::Start() {
  budgets_.OnFetch(request_.origin, settings_, absl::Now());
  Attempt();
}

void RetryingFetch::Attempt() {
  uint32_t attempt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    attempt = ++attempts_;
  }
  auto pending = start_attempt_(request_, [self = shared_from_this()](
                                              absl::StatusOr<Response> result) {
    self->OnAttempt(std::move(result));
  });
  bool cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // An attempt answered at once may already have been followed by the next one.
    if (attempts_ == attempt) attempt_ = pending;
    cancelled = cancelled_;
  }
  if (cancelled) pending->Cancel();
}

void RetryingFetch::Cancel() {
  std::shared_ptr<PendingFetch> attempt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_) return;
    cancelled_ = true;
    attempt = attempt_;
  }
  if (attempt) attempt->Cancel();  // an attempt under way ends CANCELLED
  // A wait under way ends now; one about to start sees cancelled_ (the same thread).
  boost::asio::post(timers_, [self = shared_from_this()] { self->timer_.cancel(); });
}

void RetryingFetch::OnAttempt(absl::StatusOr<Response> result) {
  const bool response = result.ok();
  const std::optional<absl::Duration> retry_after =
      response ? RetryAfter(result->head.headers) : std::nullopt;
  bool cancelled;
  uint32_t attempts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_;
    attempts = attempts_;
  }
  const std::optional<RetryReason> reason =
      attempts < max_attempts_
          ? RetryableOutcome(result.status(), response ? result->head.status_code : 0,
                             retry_after.has_value(), request_.IsIdempotent())
          : std::nullopt;
  if (!reason || cancelled) return Finish(std::move(result));
  const absl::Duration wait = retry_after.value_or(RandomBackoff(settings_, attempts));
  // No time left for another attempt: the caller gets this one's outcome.
  if (absl::Now() + wait >= deadline_) return Finish(std::move(result));
  if (!budgets_.TryRetry(request_.origin, settings_, absl::Now())) {
    observer_.OnRetryBudgetExhausted(request_.origin);
    return Finish(std::move(result));
  }
  observer_.OnRetry(request_.origin, *reason);
  if (response) result->body->Close();  // its body drains as any unread one
  Wait(wait);
}

void RetryingFetch::Wait(absl::Duration wait) {
  boost::asio::post(timers_, [self = shared_from_this(), wait] {
    if (self->Cancelled()) {
      return self->Finish(absl::CancelledError("the caller cancelled the request"));
    }
    self->timer_.expires_after(absl::ToChronoNanoseconds(wait));
    self->timer_.async_wait([self](boost::system::error_code) {
      if (self->Cancelled()) {
        return self->Finish(absl::CancelledError("the caller cancelled the request"));
      }
      self->Attempt();
    });
  });
}

bool RetryingFetch::Cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void RetryingFetch::Finish(absl::StatusOr<Response> result) {
  bool retried;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retried = attempts_ > 1;
  }
  if (result.ok()) result->connection.retried = result->connection.retried || retried;
  std::exchange(done_, nullptr)(std::move(result));
}

}  // namespace egress::transport

#include "service/transport/drain/drain_budget.h"

namespace egress::transport {

// The observer hears of every change under the lock, so that it sees them in order.

void DrainBudget::SetLimit(uint64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = limit;
  observer_.OnDrainBudget(in_use_, limit_);
}

bool DrainBudget::TryReserve(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > limit_ || in_use_ > limit_ - bytes) return false;
  in_use_ += bytes;
  observer_.OnDrainBudget(in_use_, limit_);
  return true;
}

void DrainBudget::Release(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= bytes;
  observer_.OnDrainBudget(in_use_, limit_);
}

}  // namespace egress::transport

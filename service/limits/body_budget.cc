#include "service/limits/body_budget.h"

namespace egress {

// The observer hears of every change under the lock, so that it sees them in order.

bool BodyBudget::TryReserve(uint64_t bytes, uint64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > limit || in_use_ > limit - bytes) return false;
  in_use_ += bytes;
  observer_.OnBufferedBodyBytes(in_use_);
  return true;
}

void BodyBudget::Release(uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= bytes;
  observer_.OnBufferedBodyBytes(in_use_);
}

}  // namespace egress

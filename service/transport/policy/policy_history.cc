#include "service/transport/policy/policy_history.h"

#include <utility>

namespace egress::transport {

void PolicyHistory::Add(PolicyDecision decision) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return;
  if (decisions_.size() == capacity_) decisions_.pop_front();
  decisions_.push_back(std::move(decision));
}

void PolicyHistory::SetCapacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = capacity;
  while (decisions_.size() > capacity_) decisions_.pop_front();
}

std::vector<PolicyDecision> PolicyHistory::Recent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {decisions_.begin(), decisions_.end()};
}

}  // namespace egress::transport

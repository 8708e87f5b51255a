#include "service/limits/caller_counts.h"

namespace egress {

bool CallerCounts::TryAcquire(absl::string_view caller, uint32_t limit) {
  if (limit == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t& count = counts_[caller];
  if (count >= limit) return false;
  ++count;
  return true;
}

void CallerCounts::Release(absl::string_view caller) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = counts_.find(caller);
  if (it == counts_.end()) return;
  if (--it->second == 0) counts_.erase(it);
}

}  // namespace egress

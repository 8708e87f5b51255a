#ifndef EGRESS_SERVICE_LIMITS_BODY_BUDGET_H_
#define EGRESS_SERVICE_LIMITS_BODY_BUDGET_H_

#include <cstdint>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "service/fetch/fetch_observer.h"

namespace egress {

// The response body bytes all fetches together hold in egressd's memory
// (limits.buffered_body_budget_bytes), so that callers asking for large bodies get
// RESOURCE_EXHAUSTED instead of growing the process until it is killed. A fetch reserves
// bytes before it keeps them and gives them back when it is done. Thread-safe.
class BodyBudget {
 public:
  explicit BodyBudget(FetchObserver& observer) : observer_(observer) {}

  // False, reserving nothing, when `bytes` more would go over `limit` (the limit of the
  // config the fetch runs under: a lowered limit refuses until enough are released).
  bool TryReserve(uint64_t bytes, uint64_t limit);
  void Release(uint64_t bytes);

 private:
  FetchObserver& observer_;
  std::mutex mu_;
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_LIMITS_BODY_BUDGET_H_

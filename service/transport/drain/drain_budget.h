#ifndef EGRESS_SERVICE_TRANSPORT_DRAIN_DRAIN_BUDGET_H_
#define EGRESS_SERVICE_TRANSPORT_DRAIN_DRAIN_BUDGET_H_

#include <cstdint>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "service/transport/observer.h"

namespace egress::transport {

// The bytes ADAPTIVE drains may be reading at once, across all origins, so that drains
// cannot crowd out real traffic. A drain reserves what it is about to read before it
// reads it and gives it all back when it ends. Thread-safe.
class DrainBudget {
 public:
  DrainBudget(uint64_t limit, TransportObserver& observer) : observer_(observer), limit_(limit) {}

  // A lower limit refuses new reservations until enough are released.
  void SetLimit(uint64_t limit);
  // False, reserving nothing, when `bytes` more would go over the limit.
  bool TryReserve(uint64_t bytes);
  void Release(uint64_t bytes);

 private:
  TransportObserver& observer_;
  std::mutex mu_;
  uint64_t limit_ ABSL_GUARDED_BY(mu_);
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DRAIN_DRAIN_BUDGET_H_

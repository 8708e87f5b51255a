#ifndef EGRESS_SERVICE_LIMITS_CALLER_COUNTS_H_
#define EGRESS_SERVICE_LIMITS_CALLER_COUNTS_H_

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace egress {

// Fetches under way per caller identity (limits.max_concurrent_fetches_per_caller), so
// that one caller cannot take every slot of max_concurrent_fetches. Callers without an
// identity share the count of "". Only callers with fetches under way have an entry.
// Thread-safe.
class CallerCounts {
 public:
  // Counts one more fetch for `caller` unless it already has `limit` under way; 0 means
  // no limit (and nothing is counted).
  bool TryAcquire(absl::string_view caller, uint32_t limit);
  // Ends a fetch counted by TryAcquire.
  void Release(absl::string_view caller);

 private:
  std::mutex mu_;
  absl::flat_hash_map<std::string, uint32_t> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace egress

#endif  // EGRESS_SERVICE_LIMITS_CALLER_COUNTS_H_

#ifndef EGRESS_SERVICE_SERVER_MEMORY_RELEASER_H_
#define EGRESS_SERVICE_SERVER_MEMORY_RELEASER_H_

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace egress {

// Gives the heap's free pages back to the system now and then, as Go's scavenger does.
// After a burst (1,000 concurrent fetches) glibc keeps what the fetches freed, some
// 57 MiB, in its arenas between blocks that live on (the pooled connections), where no
// free() returns it and only malloc_trim does. A thread of its own looks every
// `interval`; when more than kMinFreeBytes of the arenas have become unused since its
// last trim, it trims them.
// Exports egress_memory_releases_total and egress_memory_release_seconds_total (what
// the trims cost) and egress_heap_free_bytes (unused heap at the last look).
class MemoryReleaser final : public prometheus::Collectable {
 public:
  static constexpr size_t kMinFreeBytes = 8 << 20;

  explicit MemoryReleaser(absl::Duration interval);
  ~MemoryReleaser() override;
  MemoryReleaser(const MemoryReleaser&) = delete;
  MemoryReleaser& operator=(const MemoryReleaser&) = delete;

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void Run(absl::Duration interval);

  std::atomic<uint64_t> releases_{0};
  std::atomic<int64_t> release_nanoseconds_{0};
  std::atomic<uint64_t> free_bytes_{0};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_SERVER_MEMORY_RELEASER_H_

#include "service/server/memory_releaser.h"

#include <malloc.h>

#include <algorithm>

#include "prometheus/client_metric.h"

namespace egress {
namespace {

prometheus::MetricFamily OneSample(const char* name, const char* help,
                                   prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {name, help, type, {metric}};
}

}  // namespace

MemoryReleaser::MemoryReleaser(absl::Duration interval)
    : thread_([this, interval] { Run(interval); }) {}

MemoryReleaser::~MemoryReleaser() {
  stop_.Notify();
  thread_.join();
}

void MemoryReleaser::Run(absl::Duration interval) {
  // Free chunks in every arena (fordblks), trimmed or not: a trim leaves them free but
  // gives their pages back. The least seen since the last trim tells what became free
  // after it (a burst's memory, pooled connections closed since), which is worth a trim;
  // what was already trimmed is not worth walking again (some 8 ms with 1,000 pooled TLS
  // connections).
  size_t least_free_since_trim = 0;
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    const size_t free_bytes = mallinfo2().fordblks;
    free_bytes_ = free_bytes;
    least_free_since_trim = std::min(least_free_since_trim, free_bytes);
    if (free_bytes - least_free_since_trim <= kMinFreeBytes) continue;
    const absl::Time start = absl::Now();
    malloc_trim(0);
    release_nanoseconds_ += absl::ToInt64Nanoseconds(absl::Now() - start);
    ++releases_;
    least_free_since_trim = free_bytes;
  }
}

std::vector<prometheus::MetricFamily> MemoryReleaser::Collect() const {
  using prometheus::MetricType;
  return {
      OneSample("egress_memory_releases_total",
                "Times the heap's unused pages were given back to the system (malloc_trim: when "
                "more than 8 MiB had become unused since the last time).",
                MetricType::Counter, static_cast<double>(releases_)),
      OneSample("egress_memory_release_seconds_total",
                "Time spent giving the heap's unused pages back to the system.",
                MetricType::Counter, release_nanoseconds_ * 1e-9),
      OneSample("egress_heap_free_bytes",
                "Heap memory malloc held unused at the last look (before any release).",
                MetricType::Gauge, static_cast<double>(free_bytes_)),
  };
}

}  // namespace egress

#include "service/memory_releaser.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>

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

// The process's resident set, 0 when /proc cannot say.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

MemoryReleaser::MemoryReleaser(absl::Duration interval)
    : thread_([this, interval] { Run(interval); }) {}

MemoryReleaser::~MemoryReleaser() {
  stop_.Notify();
  thread_.join();
}

void MemoryReleaser::Run(absl::Duration interval) {
  // What a trim left resident: trimming again before the process grew past it would walk
  // the same free chunks (some 8 ms with 1,000 pooled TLS connections) for nothing.
  size_t resident_after_trim = 0;
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    // Free chunks in every arena (fordblks), trimmed or not; mmapped blocks went back
    // when they were freed.
    const size_t free_bytes = mallinfo2().fordblks;
    free_bytes_ = free_bytes;
    if (free_bytes <= kMinFreeBytes || ResidentBytes() <= resident_after_trim + kMinFreeBytes) {
      continue;
    }
    const absl::Time start = absl::Now();
    malloc_trim(0);
    release_nanoseconds_ += absl::ToInt64Nanoseconds(absl::Now() - start);
    ++releases_;
    resident_after_trim = ResidentBytes();
  }
}

std::vector<prometheus::MetricFamily> MemoryReleaser::Collect() const {
  using prometheus::MetricType;
  return {
      OneSample("egress_memory_releases_total",
                "Times the heap's unused pages were given back to the system (malloc_trim: when "
                "more than 8 MiB was unused and the process had grown as much since the last).",
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

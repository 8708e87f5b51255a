#ifndef EGRESS_TESTS_SUPPORT_RESIDENT_MEMORY_H_
#define EGRESS_TESTS_SUPPORT_RESIDENT_MEMORY_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <thread>

#include "tests/support/wait_for.h"

namespace egress::testing {

// This process's resident memory (egress runs in it), in bytes.
inline int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// True in the sanitizer builds (they set EGRESS_TEST_TIME_SCALE): their allocators keep
// freed memory (ASan's quarantine) and add shadow memory, so resident memory there says
// little about what egress holds.
inline bool SanitizerBuild() { return TestTimeScale() > 1; }

// The most this process's resident memory grew, sampled every few milliseconds while
// the sampler lives.
class RssGrowth {
 public:
  RssGrowth() : start_(ResidentBytes()), peak_(start_), thread_([this] { Sample(); }) {}
  ~RssGrowth() { Stop(); }
  int64_t Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return peak_ - start_;
  }

 private:
  void Sample() {
    while (!stop_) {
      peak_ = std::max<int64_t>(peak_, ResidentBytes());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  const int64_t start_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_;
  std::thread thread_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_RESIDENT_MEMORY_H_

#include "service/memory_releaser.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace egress {
namespace {

double ResidentMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

std::map<std::string, double> Samples(const MemoryReleaser& releaser) {
  std::map<std::string, double> samples;
  for (const auto& family : releaser.Collect()) {
    const auto& metric = family.metric.at(0);
    samples[family.name] = family.type == prometheus::MetricType::Counter
                               ? metric.counter.value
                               : metric.gauge.value;
  }
  return samples;
}

// What a burst of fetches leaves: 64 MiB freed between blocks that stay (the pooled
// connections). glibc keeps it resident until the releaser trims the heap.
TEST(MemoryReleaserTest, GivesBackWhatABurstFreedBetweenBlocksThatStay) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators are not glibc's";
#endif
  const double before = ResidentMiB();
  constexpr int kBlocks = 1024;
  constexpr size_t kBlockBytes = 64 << 10;  // under glibc's mmap threshold: on the heap
  std::vector<void*> burst, staying;
  for (int i = 0; i < kBlocks; ++i) {
    burst.push_back(std::malloc(kBlockBytes));
    std::memset(burst.back(), 1, kBlockBytes);
    staying.push_back(std::malloc(64));
  }
  for (void* block : burst) std::free(block);
  const double after_burst = ResidentMiB();
  // Otherwise there is nothing for the releaser to do, and the test would prove nothing.
  ASSERT_GT(after_burst - before, 48) << "glibc returned the burst's memory by itself";

  MemoryReleaser releaser(absl::Milliseconds(20));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // The pages go while malloc_trim runs; it is counted when it returns.
  while ((ResidentMiB() - before > 16 || Samples(releaser)["egress_memory_releases_total"] < 1) &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(ResidentMiB() - before, 16) << "after the burst: " << after_burst - before;
  const auto samples = Samples(releaser);
  EXPECT_GE(samples.at("egress_memory_releases_total"), 1);
  EXPECT_GT(samples.at("egress_memory_release_seconds_total"), 0);
  // The free chunks are still free, but already trimmed: looking again finds the
  // process no larger than after the trim, and leaves them.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Samples(releaser).at("egress_memory_releases_total"),
            samples.at("egress_memory_releases_total"));
  for (void* block : staying) std::free(block);
}

// With little unused heap there is nothing worth a trim: the releaser looks and leaves it.
TEST(MemoryReleaserTest, LeavesASmallHeapAlone) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators are not glibc's";
#endif
  MemoryReleaser releaser(absl::Milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto samples = Samples(releaser);
  EXPECT_EQ(samples.at("egress_memory_releases_total"), 0);
  EXPECT_LT(samples.at("egress_heap_free_bytes"), MemoryReleaser::kMinFreeBytes);
  EXPECT_GT(samples.at("egress_heap_free_bytes"), 0);
}

}  // namespace
}  // namespace egress

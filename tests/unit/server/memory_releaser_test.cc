#include "service/server/memory_releaser.h"

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
#include "tests/support/wait_for.h"

namespace egress {
namespace {

double ResidentMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// The sanitizers bring allocators of their own, which malloc_trim does not reach. Their
// configs say so in the environment (.bazelrc): the TSan config undefines
// __SANITIZE_THREAD__, and clang, which compiles the ASan config, does not define
// __SANITIZE_ADDRESS__.
bool UnderASanitizer() {
  const char* sanitizer = std::getenv("EGRESS_TEST_SANITIZER");
  return sanitizer != nullptr && *sanitizer != '\0';
}

// Allocates `blocks` blocks of 64 KiB, under glibc's mmap threshold (on the heap), each
// followed by a small one that stays: what pooled connections do between a burst's.
struct Burst {
  explicit Burst(int blocks) {
    for (int i = 0; i < blocks; ++i) {
      big.push_back(std::malloc(kBlockBytes));
      std::memset(big.back(), 1, kBlockBytes);
      staying.push_back(std::malloc(64));
    }
  }
  void FreeBig() {
    for (void* block : big) std::free(block);
    big.clear();
  }
  ~Burst() {
    FreeBig();
    for (void* block : staying) std::free(block);
  }
  static constexpr size_t kBlockBytes = 64 << 10;
  std::vector<void*> big, staying;
};

// Waits up to 10 s for RSS to come within `within_mib` of `baseline` and for `releases`
// trims to have been counted (the pages go while malloc_trim runs; it counts on return).
void WaitForRelease(const MemoryReleaser& releaser, double baseline, double within_mib,
                    double releases);

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

void WaitForRelease(const MemoryReleaser& releaser, double baseline, double within_mib,
                    double releases) {
  testing::WaitFor(
      [&] {
        return ResidentMiB() - baseline <= within_mib &&
               Samples(releaser)["egress_memory_releases_total"] >= releases;
      },
      absl::Seconds(10));
}

// With little unused heap there is nothing worth a trim: the releaser looks and leaves it.
// First in the file: the tests below leave the heap with much unused.
TEST(MemoryReleaserTest, LeavesASmallHeapAlone) {
  if (UnderASanitizer()) GTEST_SKIP() << "the sanitizers' allocators are not glibc's";
  MemoryReleaser releaser(absl::Milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto samples = Samples(releaser);
  EXPECT_EQ(samples.at("egress_memory_releases_total"), 0);
  EXPECT_LT(samples.at("egress_heap_free_bytes"), MemoryReleaser::kMinFreeBytes);
  EXPECT_GT(samples.at("egress_heap_free_bytes"), 0);
}

// What a burst of fetches leaves: 64 MiB freed between blocks that stay (the pooled
// connections). glibc keeps it resident until the releaser trims the heap.
TEST(MemoryReleaserTest, GivesBackWhatABurstFreedBetweenBlocksThatStay) {
  if (UnderASanitizer()) GTEST_SKIP() << "the sanitizers' allocators are not glibc's";
  const double before = ResidentMiB();
  Burst burst(1024);
  burst.FreeBig();
  const double after_burst = ResidentMiB();
  // Otherwise there is nothing for the releaser to do, and the test would prove nothing.
  ASSERT_GT(after_burst - before, 48) << "glibc returned the burst's memory by itself";

  MemoryReleaser releaser(absl::Milliseconds(20));
  WaitForRelease(releaser, before, 16, 1);
  EXPECT_LT(ResidentMiB() - before, 16) << "after the burst: " << after_burst - before;
  const auto samples = Samples(releaser);
  EXPECT_GE(samples.at("egress_memory_releases_total"), 1);
  EXPECT_GT(samples.at("egress_memory_release_seconds_total"), 0);
  // The free chunks are still free, but already trimmed: looking again leaves them.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Samples(releaser).at("egress_memory_releases_total"),
            samples.at("egress_memory_releases_total"));
}

// Memory that becomes free after a trim (pooled connections closed at their idle
// timeout, long after the burst) is given back at a later look.
TEST(MemoryReleaserTest, GivesBackWhatBecameFreeAfterItsLastTrim) {
  if (UnderASanitizer()) GTEST_SKIP() << "the sanitizers' allocators are not glibc's";
  const double before = ResidentMiB();
  Burst living(1024);  // 64 MiB in use through the first trim
  Burst first(256);    // 16 MiB freed: the first trim
  first.FreeBig();
  MemoryReleaser releaser(absl::Milliseconds(20));
  WaitForRelease(releaser, before, 72, 1);
  ASSERT_GE(Samples(releaser)["egress_memory_releases_total"], 1);
  const double releases = Samples(releaser)["egress_memory_releases_total"];
  const double with_living = ResidentMiB();
  ASSERT_GT(with_living - before, 48);

  living.FreeBig();
  WaitForRelease(releaser, before, 16, releases + 1);
  EXPECT_LT(ResidentMiB() - before, 16) << "while the 64 MiB lived: " << with_living - before;
  EXPECT_GE(Samples(releaser)["egress_memory_releases_total"], releases + 1);
}

}  // namespace
}  // namespace egress

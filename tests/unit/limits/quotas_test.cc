// QuotaTable and FindQuota on a clock of the test's own: token buckets, concurrency,
// the precedence of rules, config changes and the bound on tracked callers.
#include "service/limits/quotas.h"

#include <dirent.h>

#include <future>
#include <vector>

#include "service/limits/quota_store.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "tests/support/counting_observer.h"
#include "tests/support/wait_for.h"

namespace egress {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

QuotaRule Rule(std::string name, std::string caller, std::vector<std::string> hosts = {},
               uint32_t max_concurrent = 0, double rate = 0, double burst = 0) {
  QuotaRule rule;
  rule.name = std::move(name);
  rule.caller = std::move(caller);
  for (const auto& host : hosts) rule.hosts.push_back(*transport::HostPattern::Parse(host));
  rule.max_concurrent = max_concurrent;
  rule.requests_per_second = rate;
  rule.burst = burst;
  return rule;
}

class QuotaTableTest : public ::testing::Test {
 protected:
  testing::CountingObserver observer_;
  QuotaTable table_{observer_};
};

TEST(FindQuotaTest, ARuleNamingTheCallerComesBeforeAnyCallerRules) {
  const std::vector<QuotaRule> rules = {
      Rule("everyone", "*", {"*.example.com"}, 1),
      Rule("billing-api", "billing", {"api.example.com"}, 1),
      Rule("billing-other", "billing", {"other.test"}, 1),
  };
  EXPECT_EQ(FindQuota(rules, "billing", "api.example.com")->name, "billing-api");
  EXPECT_EQ(FindQuota(rules, "billing", "API.example.com")->name, "billing-api");
  EXPECT_EQ(FindQuota(rules, "billing", "www.example.com")->name, "everyone");
  EXPECT_EQ(FindQuota(rules, "search", "api.example.com")->name, "everyone");
  EXPECT_EQ(FindQuota(rules, "", "api.example.com")->name, "everyone");
  EXPECT_EQ(FindQuota(rules, "billing", "other.test")->name, "billing-other");
  EXPECT_EQ(FindQuota(rules, "search", "other.test"), nullptr);
  // A rule with no host patterns ("*") covers every host.
  EXPECT_EQ(FindQuota({Rule("all", "*")}, "x", "anything.test")->name, "all");
}

TEST_F(QuotaTableTest, ABucketLetsItsBurstThroughThenOneRequestPerTokenWithTheWaitInRetryInfo) {
  const QuotaRule rule = Rule("r", "*", {}, 0, /*rate=*/10, /*burst=*/3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(table_.Acquire(rule, "a", kStart).ok()) << i;
  auto refused = table_.Acquire(rule, "a", kStart);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("caller \"a\" is over quota \"r\": at most 10 requests per second "
                        "(burst 3)"));
  auto reason = transport::ReasonOf(refused.status());
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason->reason, "QUOTA_EXCEEDED");
  EXPECT_EQ(reason->retry_delay, absl::Milliseconds(100));  // one token at 10 per second
  EXPECT_EQ(observer_.quota_rejected[static_cast<size_t>(QuotaLimit::kRequestsPerSecond)], 1);

  // 60 ms later 0.6 of a token: 40 ms more to wait.
  refused = table_.Acquire(rule, "a", kStart + absl::Milliseconds(60));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(transport::ReasonOf(refused.status())->retry_delay, absl::Milliseconds(40));
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart + absl::Milliseconds(100)).ok());
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart + absl::Milliseconds(100)).ok());
  // A long pause refills up to the burst, not beyond.
  const absl::Time later = kStart + absl::Hours(1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(table_.Acquire(rule, "a", later).ok()) << i;
  EXPECT_FALSE(table_.Acquire(rule, "a", later).ok());
}

TEST_F(QuotaTableTest, EachCallerHasItsOwnBucket) {
  const QuotaRule rule = Rule("r", "*", {}, 0, 1, 1);
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart).ok());
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());
  EXPECT_TRUE(table_.Acquire(rule, "b", kStart).ok());
  EXPECT_TRUE(table_.Acquire(rule, "", kStart).ok());
  auto refused = table_.Acquire(rule, "", kStart);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("callers without an identity are over"));
}

TEST_F(QuotaTableTest, APlaceUnderMaxConcurrentIsHeldUntilTheLeaseEnds) {
  const QuotaRule rule = Rule("r", "*", {}, /*max_concurrent=*/2);
  auto first = table_.Acquire(rule, "a", kStart);
  auto second = table_.Acquire(rule, "a", kStart);
  ASSERT_TRUE(first.ok() && second.ok());
  auto refused = table_.Acquire(rule, "a", kStart);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("at most 2 requests under way at once"));
  EXPECT_EQ(transport::ReasonOf(refused.status())->retry_delay, transport::kRetryAfterLoad);
  EXPECT_EQ(observer_.quota_rejected[static_cast<size_t>(QuotaLimit::kMaxConcurrent)], 1);
  EXPECT_TRUE(table_.Acquire(rule, "b", kStart).ok());  // another caller's count

  first->Reset();
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart).ok());  // destroyed at once: gives it back
  QuotaTable::Lease moved = *std::move(second);
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart).ok());
  auto third = table_.Acquire(rule, "a", kStart);
  EXPECT_TRUE(third.ok());
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());  // moved and third hold both
}

// A request refused for concurrency takes no token, and one refused for rate no place.
TEST_F(QuotaTableTest, ARefusedRequestTakesNothing) {
  const QuotaRule rule = Rule("r", "*", {}, 1, 1, 2);
  auto held = table_.Acquire(rule, "a", kStart);
  ASSERT_TRUE(held.ok());
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());
  held->Reset();
  auto second = table_.Acquire(rule, "a", kStart);
  EXPECT_TRUE(second.ok());  // the burst's second token is still there
  second->Reset();
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());  // no token left
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart + absl::Seconds(1)).ok());  // and no place lost
}

// A new config's numbers apply from the next request; the bucket is not refilled by it.
TEST_F(QuotaTableTest, AChangedRuleKeepsItsBucketWithinTheNewBurst) {
  QuotaRule rule = Rule("r", "*", {}, 0, 1, 10);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(table_.Acquire(rule, "a", kStart).ok());
  rule.burst = 2;  // 5 tokens left, capped to 2
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart).ok());
  EXPECT_TRUE(table_.Acquire(rule, "a", kStart).ok());
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());
  rule.burst = 10;  // a larger burst does not hand out tokens at once
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());
  rule.requests_per_second = 0;
  rule.max_concurrent = 1;  // now a concurrency rule only
  auto held = table_.Acquire(rule, "a", kStart);
  EXPECT_TRUE(held.ok());
  EXPECT_FALSE(table_.Acquire(rule, "a", kStart).ok());
}

// Callers past the bound share one entry per rule: a flood of identities stays within
// the quota, and entries that would behave as new ones are forgotten to make room.
TEST(QuotaTableBoundTest, CallersPastTheBoundShareOneEntryAndIdleOnesAreForgotten) {
  testing::CountingObserver observer;
  QuotaTable table(observer, /*max_entries=*/3);
  const QuotaRule rule = Rule("r", "*", {}, 0, 1, 1);
  for (const char* caller : {"a", "b", "c"}) EXPECT_TRUE(table.Acquire(rule, caller, kStart).ok());
  EXPECT_EQ(table.entries(), 3u);
  EXPECT_TRUE(table.Acquire(rule, "d", kStart).ok());   // the overflow entry's token
  EXPECT_FALSE(table.Acquire(rule, "e", kStart).ok());  // shared with d
  EXPECT_EQ(table.entries(), 4u);
  // A second on, every bucket is full again: the next new caller makes room.
  EXPECT_TRUE(table.Acquire(rule, "f", kStart + absl::Seconds(1)).ok());
  EXPECT_EQ(table.entries(), 1u);
  EXPECT_FALSE(table.Acquire(rule, "f", kStart + absl::Seconds(1)).ok());  // its own entry
}

TEST(QuotaTableBoundTest, AnEntryWithRequestsUnderWayIsNeverForgotten) {
  testing::CountingObserver observer;
  QuotaTable table(observer, /*max_entries=*/1);
  const QuotaRule rule = Rule("r", "*", {}, /*max_concurrent=*/1);
  auto held = table.Acquire(rule, "a", kStart);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(table.Acquire(rule, "b", kStart + absl::Seconds(5)).ok());  // overflow
  EXPECT_FALSE(table.Acquire(rule, "a", kStart + absl::Seconds(5)).ok());
}

// The threads of this process.
size_t ThreadCount() {
  size_t count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return 0;
  while (const dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

QuotaStoreSettings StoreAt(int port) {
  QuotaStoreSettings settings;
  settings.host = "127.0.0.1";
  settings.port = port;
  return settings;
}

// Config changes that move the quota store between Redis addresses keep one store's
// thread, not one per address ever configured.
TEST(QuotaStoresTest, AStoreForAnAddressNoLongerConfiguredIsStoppedAndJoined) {
  QuotaStores stores;
  ASSERT_NE(stores.For(StoreAt(1)), nullptr);
  // With one store's thread (and a sanitizer's own, which starts with the first thread).
  const size_t with_one = ThreadCount();
  ASSERT_GT(with_one, 1u);
  for (int i = 1; i < 12; ++i) {
    ASSERT_NE(stores.For(StoreAt(1 + i % 4)), nullptr);
    // The kernel lists a joined thread until it is reaped, a moment after pthread_join
    // returned; a thread never joined stays listed.
    EXPECT_TRUE(testing::WaitFor([&] { return ThreadCount() == with_one; }))
        << ThreadCount() << " threads after " << i + 1 << " stores, not " << with_one;
  }
  EXPECT_EQ(stores.For(StoreAt(4)), stores.For(StoreAt(4)));  // the one in force is kept
}

// A request that was waiting when its store was replaced is answered by that store (here:
// its Redis cannot be reached), not dropped; the replaced store takes no new ones.
TEST(QuotaStoresTest, AReplacedStoreAnswersWhatWasWaitingAndRefusesWhatComesAfter) {
  QuotaStores stores;
  const std::shared_ptr<RedisQuotaStore> old = stores.For(StoreAt(1));
  std::promise<absl::Status> waiting;
  old->Take("k", 1, 1, [&](absl::StatusOr<QuotaTake> take) { waiting.set_value(take.status()); });
  stores.For(StoreAt(2));
  const absl::Status answer = waiting.get_future().get();
  EXPECT_TRUE(absl::IsUnavailable(answer)) << answer;
  EXPECT_THAT(std::string(answer.message()), HasSubstr("127.0.0.1:1")) << answer;
  std::promise<absl::Status> late;
  old->Take("k", 1, 1, [&](absl::StatusOr<QuotaTake> take) { late.set_value(take.status()); });
  const absl::Status refused = late.get_future().get();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("replaced")) << refused;
}

}  // namespace
}  // namespace egress

// The DNS cache on its own, at times the tests choose.
#include "service/transport/dns/cache.h"

#include "gtest/gtest.h"

namespace egress::transport {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

DnsCache::Addresses Only(const char* ip) { return {boost::asio::ip::make_address(ip)}; }

TEST(DnsCache, AnswerIsFreshForItsTtlAndNoLonger) {
  DnsCache cache;
  cache.StoreAddresses("a.test", Only("10.0.0.1"), absl::Seconds(10), kStart, DnsSettings{});
  const auto before = cache.Fresh("a.test", kStart + absl::Seconds(9));
  ASSERT_TRUE(before.has_value());
  ASSERT_TRUE(before->ok());
  EXPECT_EQ(**before, Only("10.0.0.1"));
  EXPECT_FALSE(cache.Fresh("a.test", kStart + absl::Seconds(10)).has_value());
}

TEST(DnsCache, NamesAreMatchedWithoutRegardToCase) {
  DnsCache cache;
  cache.StoreAddresses("A.Test", Only("10.0.0.1"), absl::Seconds(10), kStart, DnsSettings{});
  EXPECT_TRUE(cache.Fresh("a.TEST", kStart).has_value());
}

TEST(DnsCache, TtlIsRaisedToMinTtlAndCutToMaxTtl) {
  DnsSettings settings;
  settings.min_ttl = absl::Seconds(5);
  settings.max_ttl = absl::Seconds(60);
  DnsCache cache;
  cache.StoreAddresses("short.test", Only("10.0.0.1"), absl::Seconds(1), kStart, settings);
  cache.StoreAddresses("long.test", Only("10.0.0.2"), absl::Hours(1), kStart, settings);
  EXPECT_TRUE(cache.Fresh("short.test", kStart + absl::Seconds(4)).has_value());
  EXPECT_FALSE(cache.Fresh("long.test", kStart + absl::Seconds(60)).has_value());
}

TEST(DnsCache, NegativeAnswerIsKeptForNegativeTtl) {
  DnsSettings settings;
  settings.negative_ttl = absl::Seconds(5);
  DnsCache cache;
  cache.StoreNegative("missing.test", absl::UnavailableError("the name does not exist"), kStart,
                      settings);
  const auto cached = cache.Fresh("missing.test", kStart + absl::Seconds(4));
  ASSERT_TRUE(cached.has_value());
  EXPECT_EQ(cached->status().message(), "the name does not exist");
  EXPECT_FALSE(cache.Fresh("missing.test", kStart + absl::Seconds(5)).has_value());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DnsCache, ExpiredAnswerServesStaleForStaleForAndNoLonger) {
  DnsSettings settings;
  settings.stale_for = absl::Seconds(30);
  DnsCache cache;
  cache.StoreAddresses("a.test", Only("10.0.0.1"), absl::Seconds(10), kStart, settings);
  EXPECT_EQ(cache.Stale("a.test", kStart + absl::Seconds(39), settings), Only("10.0.0.1"));
  EXPECT_FALSE(cache.Stale("a.test", kStart + absl::Seconds(40), settings).has_value());
}

TEST(DnsCache, NameThatStoppedExistingIsNotServedStale) {
  DnsSettings settings;
  DnsCache cache;
  cache.StoreAddresses("a.test", Only("10.0.0.1"), absl::Seconds(10), kStart, settings);
  cache.StoreNegative("a.test", absl::UnavailableError("gone"), kStart + absl::Seconds(11),
                      settings);
  EXPECT_FALSE(cache.Stale("a.test", kStart + absl::Seconds(12), settings).has_value());
}

TEST(DnsCache, LeastRecentlyUsedNameGoesFirstPastMaxEntries) {
  DnsSettings settings;
  settings.cache_max_entries = 2;
  DnsCache cache;
  cache.StoreAddresses("a.test", Only("10.0.0.1"), absl::Seconds(10), kStart, settings);
  cache.StoreAddresses("b.test", Only("10.0.0.2"), absl::Seconds(10), kStart, settings);
  ASSERT_TRUE(cache.Fresh("a.test", kStart).has_value());  // b is now the least recent
  cache.StoreAddresses("c.test", Only("10.0.0.3"), absl::Seconds(10), kStart, settings);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.Fresh("a.test", kStart).has_value());
  EXPECT_FALSE(cache.Fresh("b.test", kStart).has_value());
  EXPECT_TRUE(cache.Fresh("c.test", kStart).has_value());
}

TEST(DnsCache, LoweredMaxEntriesIsMetAtTheNextStore) {
  DnsSettings settings;
  DnsCache cache;
  for (const char* name : {"a.test", "b.test", "c.test"}) {
    cache.StoreAddresses(name, Only("10.0.0.1"), absl::Seconds(10), kStart, settings);
  }
  settings.cache_max_entries = 1;
  cache.StoreAddresses("d.test", Only("10.0.0.4"), absl::Seconds(10), kStart, settings);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_TRUE(cache.Fresh("d.test", kStart).has_value());
}

}  // namespace
}  // namespace egress::transport

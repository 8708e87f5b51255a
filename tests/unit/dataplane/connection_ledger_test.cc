// The caller connections open at once, in all and by source (--grpc_max_connections and
// --grpc_max_connections_per_source): what counts as one source, slots given back, and
// the connections that have not sent their preface evicted for new ones.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/asio/ip/address.hpp"
#include "gtest/gtest.h"
#include "service/dataplane/caller_limits.h"

namespace egress::dataplane {
namespace {

boost::asio::ip::address At(const char* text) { return boost::asio::ip::make_address(text); }

// Bounds of `total` and `per_source` connections, evicting without waiting.
CallerLimits Limits(uint32_t total, uint32_t per_source) {
  CallerLimits limits;
  limits.max_connections = total;
  limits.max_connections_per_source = per_source;
  limits.eviction_age = absl::ZeroDuration();
  limits.idle_eviction_age = absl::ZeroDuration();
  return limits;
}

TEST(ConnectionLedgerTest, AnIpv6SlashSixtyFourIsOneSourceAndAMappedAddressItsIpv4One) {
  auto ledger = std::make_shared<ConnectionLedger>(Limits(100, 2));
  std::vector<ConnectionSlot> held;
  held.push_back(ledger->Take(At("2001:db8:1:2::1")));
  held.push_back(ledger->Take(At("2001:db8:1:2:ffff::9")));
  EXPECT_FALSE(ledger->Take(At("2001:db8:1:2::3")).held()) << "the same /64, a third time";
  EXPECT_TRUE(ledger->Take(At("2001:db8:1:3::1")).held()) << "another /64";
  held.push_back(ledger->Take(At("192.0.2.7")));
  held.push_back(ledger->Take(At("::ffff:192.0.2.7")));
  EXPECT_FALSE(ledger->Take(At("192.0.2.7")).held()) << "an IPv4-mapped address is its IPv4 one";
  EXPECT_TRUE(ledger->Take(At("192.0.2.8")).held());
  for (const auto& slot : held) EXPECT_TRUE(slot.held());
}

TEST(ConnectionLedgerTest, ASlotGoesBackWhenItsConnectionEndsAndTheTotalBoundsAllSources) {
  auto ledger = std::make_shared<ConnectionLedger>(Limits(2, 1));
  ConnectionSlot first = ledger->Take(At("10.0.0.1"));
  ASSERT_TRUE(first.held());
  EXPECT_FALSE(ledger->Take(At("10.0.0.1")).held());
  ConnectionSlot second = ledger->Take(At("10.0.0.2"));
  ASSERT_TRUE(second.held());
  EXPECT_FALSE(ledger->Take(At("10.0.0.3")).held()) << "past the total";
  first = ConnectionSlot();  // its connection ended
  EXPECT_TRUE(ledger->Take(At("10.0.0.1")).held());
  EXPECT_TRUE(ledger->Take(At("10.0.0.3")).held());
}

// A slot whose close the ledger may call, recording into `closed` that it did.
ConnectionSlot Evictable(ConnectionLedger& ledger, const char* source,
                         std::vector<std::string>& closed) {
  ConnectionSlot slot = ledger.Take(At(source));
  EXPECT_TRUE(slot.held());
  EXPECT_TRUE(slot.EvictWith([&closed, source](CallRefusal reason) {
    closed.push_back(absl::StrCat(source, " ", ToString(reason)));
  }));
  return slot;
}

TEST(ConnectionLedgerTest, WhenAllAreTakenTheOldestConnectionWithoutItsPrefaceMakesRoom) {
  auto ledger = std::make_shared<ConnectionLedger>(Limits(3, 3));
  std::vector<std::string> closed;
  ConnectionSlot greeted = Evictable(*ledger, "10.0.0.1", closed);
  greeted.Proven();  // the oldest, but it sent its preface and has a call open
  greeted.CallsOpen(true);
  ConnectionSlot silent = Evictable(*ledger, "10.0.0.2", closed);
  ConnectionSlot later = Evictable(*ledger, "10.0.0.3", closed);
  ConnectionSlot newcomer = ledger->Take(At("10.0.0.4"));
  EXPECT_TRUE(newcomer.held());
  EXPECT_EQ(closed, std::vector<std::string>{"10.0.0.2 preface_evicted"})
      << "the oldest without its preface";
  EXPECT_FALSE(silent.EvictWith([](CallRefusal) {}))
      << "an evicted slot's connection must close at once";
  silent.Proven();  // too late: changes nothing
  silent = ConnectionSlot();  // its connection closed: gives back no slot of the others'
  ConnectionSlot next = ledger->Take(At("10.0.0.5"));
  EXPECT_TRUE(next.held());
  EXPECT_EQ(closed, (std::vector<std::string>{"10.0.0.2 preface_evicted",
                                              "10.0.0.3 preface_evicted"}));
  // Left: `greeted` (a call open) and `newcomer` and `next`, which cannot be closed (no
  // EvictWith): nobody makes room.
  EXPECT_FALSE(ledger->Take(At("10.0.0.6")).held());
  EXPECT_EQ(closed.size(), 2u);
}

TEST(ConnectionLedgerTest, ASourcePastItsOwnShareEvictsNobody) {
  auto ledger = std::make_shared<ConnectionLedger>(Limits(2, 1));
  std::vector<std::string> closed;
  ConnectionSlot first = Evictable(*ledger, "10.0.0.1", closed);
  ConnectionSlot second = Evictable(*ledger, "10.0.0.2", closed);
  EXPECT_FALSE(ledger->Take(At("10.0.0.1")).held());
  EXPECT_TRUE(closed.empty());
  ConnectionSlot third = ledger->Take(At("10.0.0.3"));
  EXPECT_TRUE(third.held());
  EXPECT_EQ(closed, std::vector<std::string>{"10.0.0.1 preface_evicted"});
  // 10.0.0.1's evicted slot no longer counts against its share.
  EXPECT_TRUE(Evictable(*ledger, "10.0.0.1", closed).held());
}

TEST(ConnectionLedgerTest, WithNoneWithoutItsPrefaceTheLongestIdleConnectionMakesRoom) {
  auto ledger = std::make_shared<ConnectionLedger>(Limits(3, 3));
  std::vector<std::string> closed;
  ConnectionSlot busy = Evictable(*ledger, "10.0.0.1", closed);  // the oldest
  busy.Proven();
  busy.CallsOpen(true);
  ConnectionSlot idle = Evictable(*ledger, "10.0.0.2", closed);
  idle.Proven();
  idle.CallsOpen(true);  // a call, over after the newest went idle
  ConnectionSlot idle_longer = Evictable(*ledger, "10.0.0.3", closed);  // the newest
  idle_longer.Proven();
  absl::SleepFor(absl::Milliseconds(2));
  idle.CallsOpen(false);
  ConnectionSlot newcomer = ledger->Take(At("10.0.0.4"));
  EXPECT_TRUE(newcomer.held());
  EXPECT_EQ(closed, std::vector<std::string>{"10.0.0.3 idle_evicted"});
  idle.CallsOpen(true);  // a call: every connection left is busy or cannot be closed
  EXPECT_FALSE(ledger->Take(At("10.0.0.5")).held());
  idle.CallsOpen(false);  // the call is over
  EXPECT_TRUE(ledger->Take(At("10.0.0.5")).held());
  EXPECT_EQ(closed, (std::vector<std::string>{"10.0.0.3 idle_evicted", "10.0.0.2 idle_evicted"}));
}

// A connection within eviction_age of its accept may be doing its handshake: in a storm
// of callers connecting near the bound, the newest evicting the oldest at once would let
// none finish. One idle for less than idle_eviction_age may be between two calls. In
// both cases the new connection is refused instead.
TEST(ConnectionLedgerTest, NoConnectionIsEvictedBeforeItsAge) {
  for (const bool greeted : {false, true}) {
    CallerLimits limits = Limits(1, 1);
    limits.eviction_age = absl::Hours(1);
    limits.idle_eviction_age = absl::Hours(1);
    auto ledger = std::make_shared<ConnectionLedger>(limits);
    std::vector<std::string> closed;
    ConnectionSlot young = Evictable(*ledger, "10.0.0.1", closed);
    if (greeted) young.Proven();  // and idle since
    EXPECT_FALSE(ledger->Take(At("10.0.0.2")).held()) << (greeted ? "greeted" : "silent");
    EXPECT_TRUE(closed.empty());
  }
}

}  // namespace
}  // namespace egress::dataplane

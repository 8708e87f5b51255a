// The caller connections open at once, in all and by source (--grpc_max_connections and
// --grpc_max_connections_per_source): what counts as one source, and slots given back.
#include <memory>
#include <vector>

#include "boost/asio/ip/address.hpp"
#include "gtest/gtest.h"
#include "service/dataplane/caller_limits.h"

namespace egress::dataplane {
namespace {

boost::asio::ip::address At(const char* text) { return boost::asio::ip::make_address(text); }

TEST(ConnectionLedgerTest, AnIpv6SlashSixtyFourIsOneSourceAndAMappedAddressItsIpv4One) {
  auto ledger = std::make_shared<ConnectionLedger>(100, 2);
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
  auto ledger = std::make_shared<ConnectionLedger>(2, 1);
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

}  // namespace
}  // namespace egress::dataplane

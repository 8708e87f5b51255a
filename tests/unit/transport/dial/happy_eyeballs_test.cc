// The order happy eyeballs tries a host's addresses in (RFC 8305 section 4).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/transport/dial/connect_race.h"

namespace egress::transport {
namespace {

using tcp = boost::asio::ip::tcp;

std::vector<tcp::endpoint> Endpoints(const std::vector<std::string>& ips) {
  std::vector<tcp::endpoint> endpoints;
  for (const auto& ip : ips) endpoints.emplace_back(boost::asio::ip::make_address(ip), 443);
  return endpoints;
}

TEST(InterleaveFamilies, FamiliesTakeTurnsStartingWithTheFamilyOfTheFirstAddress) {
  EXPECT_EQ(InterleaveFamilies(Endpoints({"2001:db8::1", "2001:db8::2", "2001:db8::3",
                                          "192.0.2.1", "192.0.2.2"})),
            Endpoints({"2001:db8::1", "192.0.2.1", "2001:db8::2", "192.0.2.2", "2001:db8::3"}));
  EXPECT_EQ(InterleaveFamilies(Endpoints({"192.0.2.1", "192.0.2.2", "2001:db8::1"})),
            Endpoints({"192.0.2.1", "2001:db8::1", "192.0.2.2"}));
}

TEST(InterleaveFamilies, OneFamilyKeepsTheResolversOrder) {
  EXPECT_EQ(InterleaveFamilies(Endpoints({"192.0.2.3", "192.0.2.1", "192.0.2.2"})),
            Endpoints({"192.0.2.3", "192.0.2.1", "192.0.2.2"}));
}

}  // namespace
}  // namespace egress::transport

// PeerAddress on the peer URIs gRPC reports: IPv4, IPv6 (percent-encoded as gRPC 1.51
// writes it, or bare as older gRPC did) and unix sockets.
#include "service/fetch/peer_address.h"

#include <optional>

#include "gtest/gtest.h"

namespace egress {
namespace {

namespace ip = boost::asio::ip;

std::optional<ip::address> Address(const char* text) { return ip::make_address(text); }

TEST(PeerAddressTest, AnIpv4PeerIsItsAddress) {
  EXPECT_EQ(PeerAddress("ipv4:127.0.0.1:39924"), Address("127.0.0.1"));
  EXPECT_EQ(PeerAddress("ipv4:10.1.2.3:5"), Address("10.1.2.3"));
}

TEST(PeerAddressTest, AnIpv6PeerIsItsAddressPercentEncodedOrNot) {
  EXPECT_EQ(PeerAddress("ipv6:%5B::1%5D:39924"), Address("::1"));
  EXPECT_EQ(PeerAddress("ipv6:%5b2001:db8::7%5d:443"), Address("2001:db8::7"));
  EXPECT_EQ(PeerAddress("ipv6:[::1]:39924"), Address("::1"));
}

// A listener on [::] sees an IPv4 caller as ::ffff:a.b.c.d: IPv4 CIDRs must match it.
TEST(PeerAddressTest, AnIpv4MappedPeerIsItsIpv4Address) {
  EXPECT_EQ(PeerAddress("ipv6:%5B::ffff:127.0.0.1%5D:39924"), Address("127.0.0.1"));
}

TEST(PeerAddressTest, UnixSocketsAndOtherPeersHaveNoAddress) {
  for (const char* peer : {"unix:/run/egress.sock", "unix:", "unix-abstract:egress",
                           "unix-abstract:%00egress", "", "ipv4:", "ipv4:127.0.0.1",
                           "ipv6:%5B::1%5D", "ipv4:localhost:80", "ipv6:%5Bnot-an-address%5D:1",
                           "vsock:2:80", "127.0.0.1:80"}) {
    EXPECT_EQ(PeerAddress(peer), std::nullopt) << peer;
  }
}

}  // namespace
}  // namespace egress

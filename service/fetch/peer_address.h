#ifndef EGRESS_SERVICE_FETCH_PEER_ADDRESS_H_
#define EGRESS_SERVICE_FETCH_PEER_ADDRESS_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "boost/asio/ip/address.hpp"

namespace egress {

// The IP address of a gRPC peer, from the URI gRPC names it by (ServerContext::peer()):
// "ipv4:10.0.0.1:5000", "ipv6:%5B::1%5D:39924" (gRPC 1.51 percent-encodes the
// brackets) or "ipv6:[::1]:39924" (older gRPC). An IPv4-mapped IPv6 address (a listener
// on [::] sees IPv4 callers so) comes back as IPv4, so that IPv4 CIDRs match it. None
// for unix:/path, unix-abstract:name and anything else.
std::optional<boost::asio::ip::address> PeerAddress(absl::string_view peer);

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_PEER_ADDRESS_H_

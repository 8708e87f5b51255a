#include "service/fetch/peer_address.h"

#include <string>

#include "boost/url/parse.hpp"

namespace egress {

std::optional<boost::asio::ip::address> PeerAddress(absl::string_view peer) {
  namespace urls = boost::urls;
  namespace ip = boost::asio::ip;
  // The scheme says the kind; the rest, percent-decoded, is host:port in URL authority
  // form. Unencoded brackets are no URI (older gRPC): the scheme is then split off here.
  std::string scheme, authority;
  if (const auto uri = urls::parse_uri(urls::string_view(peer.data(), peer.size()))) {
    scheme = std::string(uri->scheme());
    authority = uri->path();  // decoded
  } else if (const size_t colon = peer.find(':'); colon != absl::string_view::npos) {
    scheme = std::string(peer.substr(0, colon));
    authority = std::string(peer.substr(colon + 1));
  }
  if (scheme != "ipv4" && scheme != "ipv6") return std::nullopt;
  const auto parsed = urls::parse_authority(authority);
  if (!parsed || parsed->has_userinfo() || !parsed->has_port()) return std::nullopt;
  switch (parsed->host_type()) {
    case urls::host_type::ipv4:
      return ip::address(ip::address_v4(parsed->host_ipv4_address().to_uint()));
    case urls::host_type::ipv6: {
      const ip::address_v6 v6(parsed->host_ipv6_address().to_bytes());
      if (v6.is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, v6);
      return ip::address(v6);
    }
    default: return std::nullopt;
  }
}

}  // namespace egress

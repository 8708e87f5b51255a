#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_ORIGIN_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_ORIGIN_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

namespace egress::transport {

// Where a pooled connection goes: connections are shared only within one origin. Maps
// of origins key by the struct itself (ordered, or hashed with absl::Hash), not by Key():
// a lookup per event builds no string.
struct Origin {
  bool tls = false;
  std::string host;  // a name, an IPv4 literal, or an IPv6 literal without brackets
  uint16_t port = 0;

  // "https://example.com:443": the pool key and the metrics label.
  std::string Key() const;
  // The Host header value: the port is left out when it is the scheme's default.
  std::string HostHeader() const;

  friend bool operator==(const Origin& a, const Origin& b) {
    return std::tie(a.tls, a.host, a.port) == std::tie(b.tls, b.host, b.port);
  }
  // An order for ordered maps: by scheme, host, then port.
  friend bool operator<(const Origin& a, const Origin& b) {
    return std::tie(a.tls, a.host, a.port) < std::tie(b.tls, b.host, b.port);
  }
  template <typename H>
  friend H AbslHashValue(H hash, const Origin& origin) {
    return H::combine(std::move(hash), origin.tls, origin.host, origin.port);
  }
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_ORIGIN_H_

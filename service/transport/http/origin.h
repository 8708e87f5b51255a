#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_ORIGIN_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_ORIGIN_H_

#include <cstdint>
#include <string>
#include <tuple>

namespace egress::transport {

// Where a pooled connection goes: connections are shared only within one origin.
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
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_ORIGIN_H_

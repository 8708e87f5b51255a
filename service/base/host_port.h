#ifndef EGRESS_SERVICE_BASE_HOST_PORT_H_
#define EGRESS_SERVICE_BASE_HOST_PORT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace egress {

// Appends `host` to `out` as a URL's authority writes it: an IPv6 host (one that holds a
// ':') in brackets.
void AppendUrlHost(std::string* out, absl::string_view host);

// Appends "host:port" to `out`, an IPv6 host in brackets, as URLs and config fields write
// it: "10.0.0.1:7443", "[::1]:7443".
void AppendHostPort(std::string* out, absl::string_view host, int port);

std::string HostPort(absl::string_view host, int port);

}  // namespace egress

#endif  // EGRESS_SERVICE_BASE_HOST_PORT_H_

#ifndef EGRESS_SERVICE_TRANSPORT_TLS_H_
#define EGRESS_SERVICE_TRANSPORT_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/ssl/context.hpp"

namespace egress::transport {

// A client TLS context: TLS 1.2 and 1.3, peer verification on, the system trust store
// plus the PEM file extra_ca_file when it is not empty.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(
    const std::string& extra_ca_file);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_TLS_H_

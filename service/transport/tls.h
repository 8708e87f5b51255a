#ifndef EGRESS_SERVICE_TRANSPORT_TLS_H_
#define EGRESS_SERVICE_TRANSPORT_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/ssl/context.hpp"

namespace egress::transport {

struct ClientTlsFiles {
  std::string extra_ca_file;     // PEM CAs trusted besides the system store
  std::string client_cert_file;  // PEM certificate shown to servers that ask (mTLS)
  std::string client_key_file;
};

// A client TLS context: TLS 1.2 and 1.3, peer verification on, the system trust store
// plus the given files. Errors name the file and the config field.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(
    const ClientTlsFiles& files);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_TLS_H_

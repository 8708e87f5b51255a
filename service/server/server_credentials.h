#ifndef EGRESS_SERVICE_SERVER_SERVER_CREDENTIALS_H_
#define EGRESS_SERVICE_SERVER_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace egress {

// PEM files for a gRPC listener. None set: plaintext. Certificate and key: TLS. All
// three: mTLS, where clients must present a certificate that chains to client_ca_file.
struct ServerTlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool any() const { return !cert_file.empty() || !key_file.empty() || !client_ca_file.empty(); }
};

// `flag_prefix` (e.g. "--admin_tls") names the flags in error messages.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files, const std::string& flag_prefix);

}  // namespace egress

#endif  // EGRESS_SERVICE_SERVER_SERVER_CREDENTIALS_H_

#ifndef EGRESS_SERVICE_SERVER_SERVER_CREDENTIALS_H_
#define EGRESS_SERVICE_SERVER_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"
#include "service/dataplane/tls_settings.h"

namespace egress {

// PEM files for a gRPC listener. None set: plaintext. Certificate and key: TLS. All
// three: mTLS, where clients must present a certificate that chains to client_ca_file.
struct ServerTlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool any() const { return !cert_file.empty() || !key_file.empty() || !client_ca_file.empty(); }
};

// What a listener serves with, its PEM files read once (LoadServerCredentials): gRPC's
// credentials for its library server, and the same PEM for the data plane on the loops.
// Default-constructed: plaintext on either. Never made from gRPC's credentials alone: the
// loops, egressd's default, would serve cleartext where TLS was asked for.
struct ListenerCredentials {
  std::shared_ptr<grpc::ServerCredentials> library = grpc::InsecureServerCredentials();
  dataplane::TlsSettings loops;  // not enabled: cleartext
};

// Reads `files` (each bounded by transport::kMaxPemFileBytes) once. `flag_prefix` (e.g.
// "--admin_tls") names the flags in error messages.
absl::StatusOr<ListenerCredentials> LoadServerCredentials(const ServerTlsFiles& files,
                                                          const std::string& flag_prefix);
// gRPC's credentials alone (the admin listener, on gRPC's library server only).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files, const std::string& flag_prefix);

}  // namespace egress

#endif  // EGRESS_SERVICE_SERVER_SERVER_CREDENTIALS_H_

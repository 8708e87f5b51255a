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

// What a listener serves with, its PEM files read once: gRPC's credentials for its
// library server, and the same PEM for the data plane on the loops (EgressServer's
// --data_plane=loops). Made from gRPC's credentials alone (plaintext, as most tests start
// egress), the loops serve cleartext.
struct ListenerCredentials {
  ListenerCredentials(  // NOLINT(runtime/explicit): gRPC's credentials alone
      std::shared_ptr<grpc::ServerCredentials> library = grpc::InsecureServerCredentials())
      : library(std::move(library)) {}
  std::shared_ptr<grpc::ServerCredentials> library;
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

#ifndef EGRESS_SERVICE_ADMIN_ADMIN_SERVER_H_
#define EGRESS_SERVICE_ADMIN_ADMIN_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "service/admin/admin_service.h"
#include "service/server/server.h"
#include "service/server/server_credentials.h"

namespace egress {

struct AdminOptions {
  std::string listen;        // host:port
  std::string bearer_token;  // empty: no token required
  ServerTlsFiles tls;        // mTLS when all three files are set
  // Initialized here, so that {listen, bearer_token, tls} still sets every field.
  std::string bearer_token_file = {};        // a token file, read again when it changes
  std::vector<std::string> identities = {};  // mTLS identities allowed (see AdminAccess)
  bool allow_policy_off = false;             // UpdateConfig may turn the policy off
};

// The TransportAdmin listener. It refuses to start when the admin service would be
// open to more than operators: a non-loopback address with neither a bearer token nor
// mTLS, a token over plaintext off loopback, or mTLS with no --admin_identities (and no
// token). Server reflection is not served on it.
class AdminServer {
 public:
  static absl::StatusOr<std::unique_ptr<AdminServer>> Start(EgressServer& egress,
                                                            const AdminOptions& options);
  ~AdminServer();
  int port() const { return port_; }

 private:
  AdminServer() = default;

  std::unique_ptr<AdminService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Who could reach the admin service with these options: INVALID_ARGUMENT, saying which
// flags to set, when more than operators could (checked again by AdminServer::Start).
absl::Status CheckAdminAccess(const AdminOptions& options);

// CheckAdminAccess, and the TLS files read as AdminServer::Start will read them: every
// admin flag, checked before anything listens.
absl::Status CheckAdminOptions(const AdminOptions& options);

// Whether host:port names a loopback address ("127.x.y.z", "[::1]", "localhost").
bool IsLoopbackListenAddress(const std::string& listen);

}  // namespace egress

#endif  // EGRESS_SERVICE_ADMIN_ADMIN_SERVER_H_

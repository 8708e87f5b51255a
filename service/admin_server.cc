#include "service/admin_server.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/address.hpp"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace egress {
bool IsLoopbackListenAddress(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host == "localhost") return true;
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

absl::StatusOr<std::unique_ptr<AdminServer>> AdminServer::Start(EgressServer& egress,
                                                                const AdminOptions& options) {
  const bool mtls = !options.tls.client_ca_file.empty();
  if (!IsLoopbackListenAddress(options.listen) && options.bearer_token.empty() && !mtls) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_listen=", options.listen,
        " is not a loopback address: set --admin_token_file or the --admin_tls_* flags (mTLS) "
        "so that only operators can change the config"));
  }
  auto credentials = MakeServerCredentials(options.tls, "--admin_tls");
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<AdminServer> admin(new AdminServer());
  admin->service_ = std::make_unique<AdminService>(egress, options.bearer_token);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &admin->port_);
  builder.RegisterService(admin->service_.get());
  admin->server_ = builder.BuildAndStart();
  if (!admin->server_ || admin->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for admin gRPC on ", options.listen));
  }
  return admin;
}

AdminServer::~AdminServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

}  // namespace egress

#include "service/admin/admin_server.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/address.hpp"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
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

namespace {

// Keeps gRPC's server reflection off a listener: InitProtoReflectionServerBuilderPlugin
// adds it to every ServerBuilder, and on the admin listener it would answer outside
// the admin service's authorization.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

}  // namespace

absl::Status CheckAdminAccess(const AdminOptions& options) {
  const bool mtls = !options.tls.client_ca_file.empty();
  const bool token = !options.bearer_token.empty() || !options.bearer_token_file.empty();
  const bool loopback = IsLoopbackListenAddress(options.listen);
  if (!loopback && !token && !mtls) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_listen=", options.listen,
        " is not a loopback address: set --admin_token_file or the --admin_tls_* flags (mTLS) "
        "so that only operators can change the config"));
  }
  if (!loopback && token && options.tls.cert_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_listen=", options.listen,
        " is not a loopback address and the admin listener is plaintext: the bearer token "
        "would cross the network in the clear; set --admin_tls_cert and --admin_tls_key, or "
        "listen on loopback"));
  }
  if (mtls && options.identities.empty() && !token) {
    return absl::InvalidArgumentError(
        "--admin_tls_client_ca without --admin_identities lets every certificate that CA "
        "signs change the config: list the admin certificates' URI or DNS SANs in "
        "--admin_identities (or require --admin_token_file as well)");
  }
  if (!options.identities.empty() && !mtls) {
    return absl::InvalidArgumentError(
        "--admin_identities needs mTLS to check them: set --admin_tls_cert, --admin_tls_key "
        "and --admin_tls_client_ca");
  }
  return absl::OkStatus();
}

absl::Status CheckAdminOptions(const AdminOptions& options) {
  if (absl::Status access = CheckAdminAccess(options); !access.ok()) return access;
  return MakeServerCredentials(options.tls, "--admin_tls").status();
}

absl::StatusOr<std::unique_ptr<AdminServer>> AdminServer::Start(EgressServer& egress,
                                                                const AdminOptions& options) {
  if (auto status = CheckAdminAccess(options); !status.ok()) return status;
  auto credentials = MakeServerCredentials(options.tls, "--admin_tls");
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<AdminServer> admin(new AdminServer());
  admin->service_ = std::make_unique<AdminService>(
      egress, AdminAccess{options.bearer_token, options.bearer_token_file, options.identities,
                          options.allow_policy_off});
  grpc::ServerBuilder builder;
  builder.SetOption(std::make_unique<WithoutReflection>());
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

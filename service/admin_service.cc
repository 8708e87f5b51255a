#include "service/admin_service.h"

#include <openssl/crypto.h>

#include "absl/strings/str_cat.h"
#include "service/status_mapping.h"

namespace egress {
namespace {

// Every admin call is answered at once from memory: no I/O, so finishing inside the
// method is the callback API's intended use.
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

grpc::Status AdminService::Authorize(const grpc::CallbackServerContext& context) const {
  if (bearer_token_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string expected = absl::StrCat("Bearer ", bearer_token_);
  if (it == metadata.end() || it->second.size() != expected.size() ||
      CRYPTO_memcmp(it->second.data(), expected.data(), expected.size()) != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the admin service needs \"authorization: Bearer <token>\" metadata "
                        "with the token egressd was started with (--admin_token_file)");
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AdminService::GetConfig(grpc::CallbackServerContext* context,
                                                  const egress::v1::GetConfigRequest*,
                                                  egress::v1::Config* response) {
  if (auto status = Authorize(*context); !status.ok()) return Answer(context, status);
  *response = server_.config().Get()->proto;
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::UpdateConfig(
    grpc::CallbackServerContext* context, const egress::v1::UpdateConfigRequest* request,
    egress::v1::Config* response) {
  if (auto status = Authorize(*context); !status.ok()) return Answer(context, status);
  auto in_force = server_.ApplyConfig(request->config());
  if (!in_force.ok()) return Answer(context, ToGrpcStatus(in_force.status()));
  *response = *std::move(in_force);
  return Answer(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AdminService::GetPoolStats(grpc::CallbackServerContext* context,
                                                     const egress::v1::GetPoolStatsRequest*,
                                                     egress::v1::PoolStats* response) {
  if (auto status = Authorize(*context); !status.ok()) return Answer(context, status);
  for (const auto& stats : server_.transport().PoolStats()) {
    auto* origin = response->add_origins();
    origin->set_origin(stats.origin);
    origin->set_idle(stats.idle);
    origin->set_active(stats.active);
    origin->set_draining(stats.draining);
    origin->set_connecting(stats.connecting);
    origin->set_opened(stats.opened);
    origin->set_reused(stats.reused);
  }
  return Answer(context, grpc::Status::OK);
}

}  // namespace egress

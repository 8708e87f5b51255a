#ifndef EGRESS_SERVICE_ADMIN_SERVICE_H_
#define EGRESS_SERVICE_ADMIN_SERVICE_H_

#include <string>

#include "egress/v1/egress.grpc.pb.h"
#include "service/server.h"

namespace egress {

// egress.v1.TransportAdmin. With a bearer token set, every call must carry
// "authorization: Bearer <token>" (UNAUTHENTICATED otherwise); mTLS, when the admin
// listener uses it, is checked by gRPC before a call gets here.
class AdminService final : public egress::v1::TransportAdmin::CallbackService {
 public:
  AdminService(EgressServer& server, std::string bearer_token)
      : server_(server), bearer_token_(std::move(bearer_token)) {}

  grpc::ServerUnaryReactor* GetConfig(grpc::CallbackServerContext* context,
                                      const egress::v1::GetConfigRequest* request,
                                      egress::v1::Config* response) override;
  grpc::ServerUnaryReactor* UpdateConfig(grpc::CallbackServerContext* context,
                                         const egress::v1::UpdateConfigRequest* request,
                                         egress::v1::Config* response) override;
  grpc::ServerUnaryReactor* GetPoolStats(grpc::CallbackServerContext* context,
                                         const egress::v1::GetPoolStatsRequest* request,
                                         egress::v1::PoolStats* response) override;

 private:
  grpc::Status Authorize(const grpc::CallbackServerContext& context) const;

  EgressServer& server_;
  const std::string bearer_token_;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_ADMIN_SERVICE_H_

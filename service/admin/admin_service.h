#ifndef EGRESS_SERVICE_ADMIN_ADMIN_SERVICE_H_
#define EGRESS_SERVICE_ADMIN_ADMIN_SERVICE_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "egress/v1/egress.grpc.pb.h"
#include "service/server/server.h"
#include "service/admin/token_file.h"

namespace egress {

// Who may call the admin service, and what it may do.
struct AdminAccess {
  std::string bearer_token;       // a fixed token; empty: none
  std::string bearer_token_file;  // a token read from this file, again whenever it changes
  // mTLS identities allowed (a URI SAN when the entry has "://", else a DNS SAN); empty:
  // any certificate the admin CA signed.
  std::vector<std::string> identities;
  // UpdateConfig may turn the egress policy off or allow every address.
  bool allow_policy_off = false;
};

// egress.v1.TransportAdmin. Every call is authorized first: a bearer token, when one is
// set, in "authorization: Bearer <token>" (UNAUTHENTICATED otherwise); over mTLS the
// certificate (checked against the CA by gRPC) must name one of `identities` when that
// list is set (PERMISSION_DENIED otherwise). Every call is logged on stdout, one line
// with the peer, its identity, the outcome and, for UpdateConfig, the fields changed.
class AdminService final : public egress::v1::TransportAdmin::CallbackService {
 public:
  AdminService(EgressServer& server, AdminAccess access);
  ~AdminService() override;

  grpc::ServerUnaryReactor* GetConfig(grpc::CallbackServerContext* context,
                                      const egress::v1::GetConfigRequest* request,
                                      egress::v1::Config* response) override;
  grpc::ServerUnaryReactor* UpdateConfig(grpc::CallbackServerContext* context,
                                         const egress::v1::UpdateConfigRequest* request,
                                         egress::v1::Config* response) override;
  grpc::ServerUnaryReactor* GetPoolStats(grpc::CallbackServerContext* context,
                                         const egress::v1::GetPoolStatsRequest* request,
                                         egress::v1::PoolStats* response) override;
  grpc::ServerUnaryReactor* DryRunConfig(grpc::CallbackServerContext* context,
                                         const egress::v1::DryRunConfigRequest* request,
                                         egress::v1::DryRunConfigResponse* response) override;

 private:
  grpc::Status Authorize(const grpc::CallbackServerContext& context);
  // PERMISSION_DENIED when `next` opens the policy wider than the config in force and
  // egressd was not started with --admin_allow_policy_off.
  absl::Status CheckPolicyWidening(const egress::v1::Config& in_force,
                                   const egress::v1::Config& next) const;

  EgressServer& server_;
  const AdminAccess access_;
  std::unique_ptr<TokenFile> token_file_;  // when access_.bearer_token_file is set
  // Held by each call while it runs, and by the destructor: gRPC's shutdown already
  // orders a call before the service's end, but through locks ThreadSanitizer cannot
  // see (Debian's gRPC is not instrumented), and a call's stack reaches too deep for
  // TSan to restore and match the suppressions; this makes the order visible to it.
  std::mutex in_call_mu_;
};

// What differs between two configs, a line per field with the values, e.g.
// "modified: drain.max_bytes: 262144 -> 1000", "added: policy.deny_hosts[0]: \"a.test\"";
// for the admin log.
std::vector<std::string> ConfigChanges(const egress::v1::Config& before,
                                       const egress::v1::Config& after);

}  // namespace egress

#endif  // EGRESS_SERVICE_ADMIN_ADMIN_SERVICE_H_

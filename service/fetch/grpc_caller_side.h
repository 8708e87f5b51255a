#ifndef EGRESS_SERVICE_FETCH_GRPC_CALLER_SIDE_H_
#define EGRESS_SERVICE_FETCH_GRPC_CALLER_SIDE_H_

// Who is calling, as gRPC's library server tells it: the part of CallerSide that both
// gRPC reactors (Fetch and FetchStream) answer from their CallbackServerContext.

#include <string>

#include "service/fetch/caller_side.h"

namespace grpc {
class CallbackServerContext;
}  // namespace grpc

namespace egress::fetch {

class GrpcCallerSide : public CallerSide {
 public:
  explicit GrpcCallerSide(const grpc::CallbackServerContext& context) : context_(context) {}

  std::string Peer() const override;
  absl::InlinedVector<absl::string_view, 1> Metadata(absl::string_view key) const override;
  std::string CertificateName(egress::v1::IdentitySource source) const override;
  absl::Time Deadline() const override;

 protected:
  ~GrpcCallerSide() = default;

 private:
  const grpc::CallbackServerContext& context_;  // gRPC's, valid until OnDone
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_GRPC_CALLER_SIDE_H_

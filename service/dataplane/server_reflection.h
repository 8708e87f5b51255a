#ifndef EGRESS_SERVICE_DATAPLANE_SERVER_REFLECTION_H_
#define EGRESS_SERVICE_DATAPLANE_SERVER_REFLECTION_H_

// gRPC's server reflection (grpc.reflection.v1alpha.ServerReflection) on the loops: what
// grpcurl-style tools ask a server, its services and the descriptors of their .proto
// files, answered from the descriptors linked into egressd, as gRPC's library plugin
// answers on the other front end.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "egress/internal/server_reflection.pb.h"
#include "service/dataplane/server_session.h"
#include "service/fetch/fetch_observer.h"

namespace egress::dataplane {

constexpr absl::string_view kServerReflectionInfo =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

class ServerReflection {
 public:
  // Answers naming `services` (full names) when asked to list them.
  explicit ServerReflection(std::vector<std::string> services) : services_(std::move(services)) {}

  // A ServerReflectionInfo call (ServerSession::Read): each request gets its answer, in
  // order, the next read only once the caller has taken it; the call ends OK after the
  // caller's last request. A request that does not parse ends it INVALID_ARGUMENT.
  void Serve(const std::shared_ptr<ServerSession>& session, int32_t stream_id,
             FetchObserver& observer) const;

  // The answer to one request. A file's descriptor comes with those of the files it
  // imports not sent yet on this call (`sent`, the names of those it has sent).
  using Request = egress::internal::server_reflection::ServerReflectionRequest;
  using Response = egress::internal::server_reflection::ServerReflectionResponse;
  Response Answer(const Request& request, std::vector<std::string>& sent) const;

 private:
  // One ServerReflectionInfo call, held by its pending read or send.
  struct Call {
    const ServerReflection& reflection;
    std::shared_ptr<ServerSession> session;
    int32_t stream_id;
    FetchObserver& observer;
    std::vector<std::string> sent;  // see Answer
  };
  static void ReadNext(std::shared_ptr<Call> call);

  const std::vector<std::string> services_;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_SERVER_REFLECTION_H_

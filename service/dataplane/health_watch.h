#ifndef EGRESS_SERVICE_DATAPLANE_HEALTH_WATCH_H_
#define EGRESS_SERVICE_DATAPLANE_HEALTH_WATCH_H_

// grpc.health.v1.Health on the loops: the messages (Debian ships no stubs for them), and
// the Watch calls, which gRPC's default health service answers with the status when they
// start and each change after, until the caller cancels or the server stops.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "service/dataplane/server_session.h"

namespace egress::dataplane {

// HealthCheckResponse.ServingStatus.
enum class ServingStatus { kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// HealthCheckRequest.service of a request message; INVALID_ARGUMENT when unreadable.
absl::StatusOr<std::string> HealthCheckService(const std::string& message);
// A serialized HealthCheckResponse.
std::string HealthCheckResponse(ServingStatus status);
// Whether health answers for `service`: the whole server ("") and egress.v1.Egress.
bool IsHealthService(const std::string& service);

// The Watch calls open on every loop. Thread-safe.
class HealthWatchers {
 public:
  explicit HealthWatchers(ServingStatus status) : status_(status) {}
  // Starts a Watch call for `service` on its session's loop: its first message now.
  void Start(const std::shared_ptr<ServerSession>& session, int32_t stream_id,
             const std::string& service);
  // The server's status is now `status`: each watcher of a known service is told, on its
  // loop, unless it was already. Any thread.
  void Set(ServingStatus status);
  ServingStatus status() const;

 private:
  class Watcher;
  void Remove(Watcher* watcher);

  mutable std::mutex mu_;
  ServingStatus status_ ABSL_GUARDED_BY(mu_);
  std::map<Watcher*, std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_HEALTH_WATCH_H_

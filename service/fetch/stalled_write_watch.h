#ifndef EGRESS_SERVICE_FETCH_STALLED_WRITE_WATCH_H_
#define EGRESS_SERVICE_FETCH_STALLED_WRITE_WATCH_H_

// FetchStream's watch on a caller that stops taking messages: past the fetch's deadline
// and a grace, a write still waiting cancels the RPC.

#include <memory>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "grpcpp/server_context.h"
#include "service/fetch/stalled_write.h"

namespace egress::fetch {

// Watches the writes of a FetchStream on gRPC's library server for a caller that stops
// taking messages (see stalled_write.h): a write still waiting kStalledWriteGrace after
// the fetch's deadline cancels the RPC. The state is shared with the alarm, whose callback
// may run after the reactor is gone.
class StalledWriteWatch {
 public:
  explicit StalledWriteWatch(grpc::CallbackServerContext* context);

  // Once, before the first write.
  void Arm(absl::Time deadline);

  // Before each write; false once the watch's time has passed (no write may start).
  bool WriteStarting();
  // After each write; whether the watch cancelled the RPC while it waited.
  bool WriteDone();
  // In OnDone: gRPC frees the context after it.
  void Detach();

 private:
  struct State {
    std::mutex mu;
    grpc::CallbackServerContext* context ABSL_GUARDED_BY(mu) = nullptr;  // null after OnDone
    bool writing ABSL_GUARDED_BY(mu) = false;    // a message waits for the caller
    bool expired ABSL_GUARDED_BY(mu) = false;    // the alarm has fired
    bool cancelled ABSL_GUARDED_BY(mu) = false;  // ... and cancelled the RPC
  };
  std::shared_ptr<State> state_;
  std::optional<grpc::Alarm> alarm_;  // made when armed: an Alarm costs a grpc_init
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_STALLED_WRITE_WATCH_H_

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

namespace egress::fetch {

// Ends a server stream whose caller stops taking messages: a write still waiting for the
// caller kGrace after the fetch's deadline cancels the RPC, so that the caller does not
// hold the upstream connection, a chunk of the body budget and its fetch slots until gRPC
// gives up on it. A slow upstream is the transport's deadline's (DEADLINE_EXCEEDED, with
// its reason); a caller that reads, however slowly, takes each message well within the
// grace and meets that deadline too. The state is shared with the alarm, whose callback
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

  // The status egress counts and logs (the caller sees CANCELLED).
  static absl::Status Stalled();

 private:
  static constexpr absl::Duration kGrace = absl::Seconds(1);

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

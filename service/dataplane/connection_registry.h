#ifndef EGRESS_SERVICE_DATAPLANE_CONNECTION_REGISTRY_H_
#define EGRESS_SERVICE_DATAPLANE_CONNECTION_REGISTRY_H_

// The data plane's open connections, over every loop, so that shutdown can reach them
// all: a graceful GOAWAY to each (and to each accepted from then on), then, once the
// calls under way are over or the grace is, the close of those left.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "service/dataplane/server_session.h"

namespace egress::dataplane {

class ConnectionRegistry {
 public:
  // Registers a session that has started, on its loop; it leaves when it ends. After
  // GoAwayAll it gets its GOAWAY at once; after CloseAll began (a TLS handshake that
  // finished meanwhile), it is closed at once: nothing may outlive the loops.
  void Add(const std::shared_ptr<ServerSession>& session);
  // Every connection open, and every one added from now on, gets a graceful GOAWAY. Any
  // thread; returns at once.
  void GoAwayAll();
  // Closes every connection still open, each on its loop, and returns once they have
  // all ended or `wait` has passed. Any thread but a loop's; the loops must be running.
  void CloseAll(absl::Duration wait);
  size_t open() const;

 private:
  void Remove(uint64_t id);

  mutable std::mutex mu_;
  std::condition_variable ended_;  // a session left
  std::map<uint64_t, std::weak_ptr<ServerSession>> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool going_away_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_CONNECTION_REGISTRY_H_

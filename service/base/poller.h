#ifndef EGRESS_SERVICE_BASE_POLLER_H_
#define EGRESS_SERVICE_BASE_POLLER_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace egress {

// Calls `poll` on a thread of its own every `period`, and soon after Wake(), until it is
// destroyed; the destructor waits for a poll under way. What watches a file (the
// --config file, the admin token file) does it here, off the threads that serve calls.
// Declare it last among its owner's members, so that it starts once they are set and
// stops before they go.
class Poller {
 public:
  Poller(absl::Duration period, std::function<void()> poll);
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Asks for a poll now (or right after the one under way); does not wait for it.
  void Wake();

 private:
  void Run();

  const absl::Duration period_;
  const std::function<void()> poll_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it starts once the rest is set
};

}  // namespace egress

#endif  // EGRESS_SERVICE_BASE_POLLER_H_

#ifndef EGRESS_TESTS_SUPPORT_REDIS_SERVER_H_
#define EGRESS_TESTS_SUPPORT_REDIS_SERVER_H_

#include <memory>
#include <string>

#include "tests/support/child_process.h"

namespace egress::testing {

// Debian's redis-server on 127.0.0.1, without persistence, for the global quota store.
// Stop and Start again keep the port (and lose the data, as a restarted cache would).
class RedisServer {
 public:
  // Logs to dir/redis.log. Fails the test (ADD_FAILURE) if it does not come up.
  explicit RedisServer(const std::string& dir);

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Starts it unless it runs.
  void Start();
  void Stop() { process_.reset(); }

 private:
  std::string dir_;
  int port_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_REDIS_SERVER_H_

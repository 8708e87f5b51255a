#ifndef EGRESS_TESTS_SUPPORT_EGRESSD_PROCESS_H_
#define EGRESS_TESTS_SUPPORT_EGRESSD_PROCESS_H_

#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace egress::testing {

// The egressd binary in its own process, as deployed: the Egress, TransportAdmin and
// metrics listeners each on a free loopback port, the config read from a file, stdout and
// stderr appended to a log. Stopped with SIGTERM on destruction.
class EgressdProcess {
 public:
  // `extra_flags` follow the listeners and --config (e.g. "--shutdown_grace=10s").
  EgressdProcess(const std::string& binary, const std::string& config_file,
                 const std::string& log_file, const std::vector<std::string>& extra_flags = {});

  // True once all three listeners accept connections, within `seconds`.
  bool WaitUntilListening(int seconds = 30);

  std::string grpc_target() const;   // "127.0.0.1:port" of the Egress service
  std::string admin_target() const;  // "127.0.0.1:port" of TransportAdmin
  int grpc_port() const { return grpc_port_; }
  int admin_port() const { return admin_port_; }
  int metrics_port() const { return metrics_port_; }
  const std::string& log_file() const { return log_file_; }
  ChildProcess& process() { return process_; }

 private:
  const int grpc_port_;
  const int admin_port_;
  const int metrics_port_;
  const std::string log_file_;
  ChildProcess process_;  // declared last: it starts once the ports are chosen
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_EGRESSD_PROCESS_H_

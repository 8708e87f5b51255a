#include "tests/support/egressd_process.h"

#include "tests/support/data_plane_under_test.h"

namespace egress::testing {
namespace {

std::string Loopback(int port) { return "127.0.0.1:" + std::to_string(port); }

std::vector<std::string> Argv(const std::string& binary, int grpc_port, int admin_port,
                              int metrics_port, const std::string& config_file,
                              const std::vector<std::string>& extra_flags) {
  std::vector<std::string> argv = {binary, "--grpc_listen=" + Loopback(grpc_port),
                                   "--admin_listen=" + Loopback(admin_port),
                                   "--metrics_listen=" + Loopback(metrics_port),
                                   "--config=" + config_file,
                                   "--data_plane=" + DataPlaneUnderTest()};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  return argv;
}

}  // namespace

EgressdProcess::EgressdProcess(const std::string& binary, const std::string& config_file,
                               const std::string& log_file,
                               const std::vector<std::string>& extra_flags)
    : grpc_port_(FreePort()),
      admin_port_(FreePort()),
      metrics_port_(FreePort()),
      log_file_(log_file),
      process_(Argv(binary, grpc_port_, admin_port_, metrics_port_, config_file, extra_flags),
               log_file) {}

bool EgressdProcess::WaitUntilListening(int seconds) {
  // The listeners open one after another at start: once the first is up, the others
  // follow within moments.
  return WaitForPort(grpc_port_, seconds) && WaitForPort(admin_port_, 5) &&
         WaitForPort(metrics_port_, 5);
}

std::string EgressdProcess::grpc_target() const { return Loopback(grpc_port_); }
std::string EgressdProcess::admin_target() const { return Loopback(admin_port_); }

}  // namespace egress::testing

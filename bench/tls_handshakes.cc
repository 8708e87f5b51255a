// New connections to an https origin: the cost of a full TLS handshake against a
// resumed one, on the transport alone (no gRPC), to nginx on loopback. Every fetch is
// of /close/1k (Connection: close), so each one dials. Prints a Markdown table row per
// protocol and mode: wall time per new connection (dial + request + 1 KiB response),
// the TLS handshake's part of it (median), and CPU per new connection of this process
// (the transport: client side) and of nginx (server side).
//
//   bazel run -c opt //bench:tls_handshakes -- --connections=2000
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "service/transport/transport.h"
#include "tests/support/counting_observer.h"
#include "tests/support/nginx_upstream.h"

ABSL_FLAG(int, connections, 2000, "new connections measured per row");

namespace egress {
namespace {

// CPU seconds (user + system) this process has used.
double OwnCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// CPU seconds (user + system) process `pid` has used, from /proc.
double ProcessCpuSeconds(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses: utime and stime are the
  // 12th and 13th of them.
  const std::vector<std::string> fields = absl::StrSplit(text.substr(text.rfind(')') + 2), ' ');
  return (std::stod(fields[11]) + std::stod(fields[12])) / sysconf(_SC_CLK_TCK);
}

struct Row {
  double wall_ms = 0;
  double handshake_ms = 0;  // median
  double own_cpu_us = 0;
  double nginx_cpu_us = 0;
  int resumed = 0;
  int failed = 0;
};

Row Measure(const testing::NginxUpstream& nginx, int nginx_pid, int port, bool resumption,
            int connections) {
  testing::CountingObserver observer;
  transport::TransportSettings settings;
  settings.extra_ca_file = nginx.ca_file();
  settings.io_threads = 1;
  settings.tls_session_resumption = resumption;
  transport::PolicyRules open_policy;
  open_policy.enabled = false;  // the upstream is on loopback
  settings.policy = std::make_shared<transport::AddressPolicy>(open_policy);
  auto transport = transport::Transport::Create(settings, observer);
  if (!transport.ok()) {
    std::fprintf(stderr, "%s\n", transport.status().ToString().c_str());
    std::exit(1);
  }
  const std::string url = absl::StrCat("https://localhost:", port, "/close/1k");
  Row row;
  std::vector<double> handshakes;
  const auto fetch = [&]() {
    auto request = transport::MakeRequest("GET", url, {}, "");
    std::promise<absl::StatusOr<transport::Response>> promise;
    (*transport)->Fetch(*std::move(request), absl::Now() + absl::Seconds(10),
                        [&](absl::StatusOr<transport::Response> r) {
                          promise.set_value(std::move(r));
                        });
    auto response = promise.get_future().get();
    if (!response.ok()) {
      ++row.failed;
      return;
    }
    handshakes.push_back(absl::ToDoubleMilliseconds(response->connection.dial.tls_handshake));
  };
  for (int i = 0; i < 20; ++i) fetch();  // warm-up: the first session, caches
  handshakes.clear();
  const int resumed_before = observer.tls_resumed;
  const double own_before = OwnCpuSeconds(), nginx_before = ProcessCpuSeconds(nginx_pid);
  const absl::Time start = absl::Now();
  for (int i = 0; i < connections; ++i) fetch();
  const absl::Duration elapsed = absl::Now() - start;
  row.own_cpu_us = (OwnCpuSeconds() - own_before) * 1e6 / connections;
  row.nginx_cpu_us = (ProcessCpuSeconds(nginx_pid) - nginx_before) * 1e6 / connections;
  row.wall_ms = absl::ToDoubleMilliseconds(elapsed) / connections;
  std::sort(handshakes.begin(), handshakes.end());
  if (!handshakes.empty()) row.handshake_ms = handshakes[handshakes.size() / 2];
  row.resumed = observer.tls_resumed - resumed_before;
  return row;
}

}  // namespace
}  // namespace egress

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int connections = absl::GetFlag(FLAGS_connections);
  const std::string dir = absl::StrCat("/tmp/tls-handshakes-", getpid());
  auto nginx = egress::testing::NginxUpstream::Start(dir);
  std::ifstream pid_file(dir + "/nginx.pid");
  int nginx_pid = 0;
  pid_file >> nginx_pid;
  std::printf("| protocol | handshake | new connections | resumed | ms per new connection "
              "| TLS handshake ms (median) | egress CPU us per connection "
              "| nginx CPU us per connection |\n|---|---|---|---|---|---|---|---|\n");
  for (const auto& [protocol, port] :
       {std::pair<const char*, int>{"TLS 1.2", nginx->tls12_port()},
        std::pair<const char*, int>{"TLS 1.3", nginx->tls13_port()}}) {
    for (bool resumption : {false, true}) {
      const egress::Row row = egress::Measure(*nginx, nginx_pid, port, resumption, connections);
      std::printf("| %s | %s | %d | %d | %.3f | %.3f | %.0f | %.0f |\n", protocol,
                  resumption ? "resumed" : "full", connections - row.failed, row.resumed,
                  row.wall_ms, row.handshake_ms, row.own_cpu_us, row.nginx_cpu_us);
      std::fflush(stdout);
    }
  }
  nginx.reset();
  std::filesystem::remove_all(dir);
  return 0;
}

// Resident memory per idle pooled connection, plain HTTP and TLS: opens N connections
// at once (N concurrent fetches of a response nginx delays 300 ms), lets them go idle
// in the pool, and divides the growth of this process's RSS (the transport runs in it,
// as in egressd) by the idle connections. IP literals: no name lookups. Each kind runs in a fresh transport, after a
// warm-up that sizes the allocator's arenas for it. The last column is measured again
// after malloc_trim(0) has returned the allocator's free pages to the system: what the
// idle connections hold themselves, without what their busy phase left in the free
// lists (egressd does not trim).
//
//   bazel run -c opt //bench:idle_memory -- --connections=1000
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "service/transport/transport.h"
#include "tests/support/counting_observer.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/resident_memory.h"

ABSL_FLAG(int, connections, 1000, "idle connections measured per kind");

namespace egress {
namespace {

// Opens `connections` connections to `url`'s origin at once; returns how many are idle.
int OpenIdle(transport::Transport& transport, const std::string& url, int connections) {
  absl::BlockingCounter done(connections);
  std::atomic<int> failed{0};
  for (int i = 0; i < connections; ++i) {
    auto request = transport::MakeRequest("GET", url, {}, "");
    transport.Fetch(*std::move(request), absl::Now() + absl::Seconds(60),
                    [&](absl::StatusOr<transport::Response> response) {
                      if (!response.ok()) {
                        ++failed;
                        std::fprintf(stderr, "%s\n", response.status().ToString().c_str());
                      }
                      // The 1-line body is buffered with the head: it ends here and the
                      // connection goes back to the pool.
                      done.DecrementCount();
                    });
  }
  done.Wait();
  int idle = 0;
  for (int tries = 0; tries < 500; ++tries) {
    idle = 0;
    for (const auto& origin : transport.PoolStats()) idle += origin.idle;
    if (idle + failed >= connections) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return idle;
}

std::unique_ptr<transport::Transport> MakeTransport(const testing::NginxUpstream& nginx,
                                                    testing::CountingObserver& observer,
                                                    int connections) {
  transport::TransportSettings settings;
  settings.extra_ca_file = nginx.ca_file();
  settings.io_threads = 2;
  settings.max_idle_per_origin = connections;
  settings.max_waiting_per_origin = connections;
  transport::PolicyRules open_policy;
  open_policy.enabled = false;  // the upstream is on loopback
  settings.policy = std::make_shared<transport::AddressPolicy>(open_policy);
  return *transport::Transport::Create(settings, observer);
}

}  // namespace
}  // namespace egress

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int connections = absl::GetFlag(FLAGS_connections);
  const std::string dir = absl::StrCat("/tmp/idle-memory-", getpid());
  auto nginx = egress::testing::NginxUpstream::Start(dir);
  std::printf("| connections | kind | idle | RSS growth MiB | KiB per idle connection "
              "| KiB per idle connection after malloc_trim |\n|---|---|---|---|---|---|\n");
  for (const auto& [kind, url] :
       {std::pair<const char*, std::string>{"plain HTTP", nginx->HttpUrl("/slow-300ms")},
        std::pair<const char*, std::string>{
            "TLS", absl::StrCat("https://127.0.0.1:", nginx->https_port(), "/slow-300ms")}}) {
    egress::testing::CountingObserver observer;
    {  // warm-up: threads, allocator arenas, TLS contexts, the first session
      auto transport = egress::MakeTransport(*nginx, observer, connections);
      egress::OpenIdle(*transport, url, connections);
    }
    auto transport = egress::MakeTransport(*nginx, observer, connections);
    egress::OpenIdle(*transport, url, 8);
    malloc_trim(0);  // both columns start from the same baseline
    const int64_t before = egress::testing::ResidentBytes();
    const int idle = egress::OpenIdle(*transport, url, connections);
    absl::SleepFor(absl::Milliseconds(200));
    const int64_t grown = egress::testing::ResidentBytes() - before;
    malloc_trim(0);
    const int64_t trimmed = egress::testing::ResidentBytes() - before;
    std::printf("| %d | %s | %d | %.1f | %.1f | %.1f |\n", connections, kind, idle,
                grown / 1048576.0, idle > 0 ? grown / 1024.0 / idle : 0.0,
                idle > 0 ? trimmed / 1024.0 / idle : 0.0);
    std::fflush(stdout);
  }
  nginx.reset();
  std::filesystem::remove_all(dir);
  return 0;
}

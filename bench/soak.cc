// The soak: a million fetches of mixed scenarios through the egressd binary, injected
// upstream faults among them, by 64 concurrent callers. Reports the fetches whose outcome
// was not the one its scenario expects (must be 0), egressd's open file descriptors and
// RSS at the start and the end, and the connections it opened.
//
//   tools/soak.sh                    # 1,000,000 fetches; figures in bench/RESULTS.md
//   tools/soak.sh --fetches=20000    # a quick one
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/egressd_process.h"
#include "tests/support/fault_server.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"

ABSL_FLAG(int, fetches, 1000000, "fetches in all");
ABSL_FLAG(int, callers, 64, "concurrent callers");
ABSL_FLAG(std::string, egressd, "bazel-bin/service/egressd", "the egressd binary");

namespace {

using egress::testing::FaultServer;
using egress::testing::NginxUpstream;
using egress::v1::FetchRequest;

struct Scenario {
  std::string name;
  std::string url;
  egress::v1::BodyMode mode;
  grpc::StatusCode expected;
  int weight;  // in every 1000 fetches
  bool injected_fault;
};

int CountFds(pid_t pid) {
  int count = 0;
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (!dir) return -1;
  while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

long RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      long kib = 0;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib;
    }
  }
  return -1;
}

// The sum of every series of `metric` on egressd's /metrics.
double MetricSum(int port, const std::string& metric) {
  auto reply = egress::testing::HttpGet(port, "/metrics");
  if (!reply.ok()) return -1;
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(reply->body, '\n')) {
    if (!absl::StartsWith(line, metric) || line.size() <= metric.size() ||
        (line[metric.size()] != '{' && line[metric.size()] != ' ')) {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) sum += value;
  }
  return sum;
}

struct Snapshot {
  int fds;
  long rss_kib;
  double opened, pooled;
};

Snapshot Take(pid_t pid, int metrics_port) {
  return {CountFds(pid), RssKib(pid),
          MetricSum(metrics_port, "egress_upstream_connections_opened_total"),
          MetricSum(metrics_port, "egress_pool_connections")};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::StrCat("/tmp/egress-soak-", getpid());
  if (std::system(("mkdir -p " + dir).c_str()) != 0) return 1;
  auto nginx = NginxUpstream::Start(dir + "/nginx");
  FaultServer faults;

  std::ofstream(dir + "/egress.textproto")
      << "transport { extra_ca_file: \"" << nginx->ca_file() << "\"\n"
      // The fault server, named loop.test (run_in_netns.sh's hosts file), answers late
      // or never on purpose; nginx keeps the default header timeout.
      << "  origins { host: \"loop.test\" response_header_timeout { nanos: 200000000 } } }\n"
      << "policy { allow_cidrs: \"127.0.0.0/8\" }\n";
  egress::testing::EgressdProcess egressd(absl::GetFlag(FLAGS_egressd),
                                         dir + "/egress.textproto", dir + "/egressd.log");
  if (!egressd.WaitUntilListening()) {
    std::fprintf(stderr, "egressd did not start; see %s/egressd.log\n", dir.c_str());
    return 1;
  }
  const pid_t pid = egressd.process().pid();
  const int metrics_port = egressd.metrics_port();

  using grpc::StatusCode;
  const auto fault = [&](const std::string& path) {
    return absl::StrCat("http://loop.test:", faults.port(), path);
  };
  const std::vector<Scenario> scenarios = {
      {"https 1 KiB, read", nginx->HttpsUrl("/cl/1k"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 400, false},
      {"http 4 KiB, unread (drained)", nginx->HttpUrl("/cl/4k"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 250, false},
      {"https chunked 1 KiB, read", nginx->HttpsUrl("/chunked/1k"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 100, false},
      {"https chunked 300 KiB, unread (abandoned)", nginx->HttpsUrl("/chunked/300k"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 30, false},
      {"https 262145 B, unread (skipped)", nginx->HttpsUrl("/cl/262145"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 30, false},
      {"http Connection: close", nginx->HttpUrl("/close/1k"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 50, false},
      {"fault: reset in body", fault("/reset-body"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: malformed status", fault("/bad-status"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: headers over limit", fault("/huge-headers"), egress::v1::BODY_MODE_FULL, StatusCode::RESOURCE_EXHAUSTED, 20, true},
      {"fault: bad chunk", fault("/bad-chunk"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: Content-Length short", fault("/short-body"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: bytes past the body", fault("/long-body"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 20, true},
      {"fault: closed as reused (retried)", fault("/close-on-reuse"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 10, true},
      {"fault: never answers", fault("/never"), egress::v1::BODY_MODE_FULL, StatusCode::DEADLINE_EXCEEDED, 2, true},
      {"policy: metadata address", "http://169.254.169.254/latest", egress::v1::BODY_MODE_FULL, StatusCode::PERMISSION_DENIED, 8, true},
  };
  std::vector<const Scenario*> wheel;  // 1000 slots, each scenario by its weight
  for (const auto& s : scenarios) wheel.insert(wheel.end(), s.weight, &s);

  auto channel = grpc::CreateChannel(egressd.grpc_target(),
                                     grpc::InsecureChannelCredentials());
  const int total = absl::GetFlag(FLAGS_fetches);
  std::atomic<int> next{0};
  std::mutex mu;
  std::map<std::string, std::map<StatusCode, long>> outcomes;
  std::atomic<long> unexpected{0}, unexpected_not_injected{0};
  Snapshot start{};
  std::atomic<bool> warm{false};
  const int warm_up = std::min(total / 100, 5000);

  auto run = [&] {
    auto stub = egress::v1::Egress::NewStub(channel);
    std::map<std::string, std::map<StatusCode, long>> mine;
    for (int i; (i = next++) < total;) {
      const Scenario& s = *wheel[(static_cast<size_t>(i) * 7919) % wheel.size()];
      FetchRequest request;
      request.set_url(s.url);
      request.set_body_mode(s.mode);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      egress::v1::FetchResponse response;
      const grpc::Status status = stub->Fetch(&context, request, &response);
      ++mine[s.name][status.error_code()];
      if (status.error_code() != s.expected) {
        ++unexpected;
        if (!s.injected_fault) ++unexpected_not_injected;
        if (unexpected < 10) {
          std::fprintf(stderr, "unexpected: %s -> %d %s\n", s.name.c_str(),
                       status.error_code(), status.error_message().c_str());
        }
      }
      if (i == warm_up && !warm.exchange(true)) {
        std::lock_guard<std::mutex> lock(mu);
        start = Take(pid, metrics_port);
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [name, codes] : mine) {
      for (const auto& [code, n] : codes) outcomes[name][code] += n;
    }
  };
  const Snapshot before = Take(pid, metrics_port);
  const auto began = std::chrono::steady_clock::now();
  std::vector<std::thread> callers;
  for (int c = 0; c < absl::GetFlag(FLAGS_callers); ++c) callers.emplace_back(run);
  for (auto& t : callers) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // drains under way finish
  const Snapshot end = Take(pid, metrics_port);

  std::printf("soak: %d fetches by %d callers in %.0f s (%.0f/s)\n", total,
              absl::GetFlag(FLAGS_callers), seconds, total / seconds);
  std::printf("| scenario | expected | outcomes |\n|---|---|---|\n");
  for (const auto& s : scenarios) {
    std::string line;
    for (const auto& [code, n] : outcomes[s.name]) absl::StrAppend(&line, "code ", code, ": ", n, "; ");
    std::printf("| %s | %d | %s |\n", s.name.c_str(), s.expected, line.c_str());
  }
  std::printf("unexpected outcomes: %ld (%ld outside the injected faults)\n", unexpected.load(),
              unexpected_not_injected.load());
  std::printf("egressd before any fetch: %d fds, RSS %ld KiB\n", before.fds, before.rss_kib);
  // Each pooled connection holds one descriptor; the rest must not grow.
  std::printf("egressd after %d fetches (warm): %d fds, RSS %ld KiB, %.0f pooled connections "
              "(%.0f fds besides them)\n",
              warm_up, start.fds, start.rss_kib, start.pooled, start.fds - start.pooled);
  std::printf("egressd at the end: %d fds, RSS %ld KiB, %.0f pooled connections (%.0f fds "
              "besides them)\n",
              end.fds, end.rss_kib, end.pooled, end.fds - end.pooled);
  std::printf("upstream connections opened: %.0f (%.2f per 1000 fetches)\n", end.opened,
              1000.0 * end.opened / total);
  return unexpected_not_injected == 0 ? 0 : 1;
}

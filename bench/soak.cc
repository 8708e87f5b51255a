// The soak: a million fetches of mixed scenarios through the egressd binary, injected
// upstream faults, hostile upstreams (responses that never end) and hostile callers
// among them, by 64 concurrent callers. Reports the fetches whose outcome was not the
// one its scenario expects (must be 0 outside the injected ones), egressd's open file
// descriptors and RSS at the start and the end, its RSS sampled through the run (first,
// last, highest), and the connections it opened.
//
//   tools/soak.sh                    # 1,000,000 fetches; figures in bench/RESULTS.md
//   tools/soak.sh --fetches=20000    # a quick one
//   tools/soak.sh --only=endless --seconds=60 --callers=8   # upstreams that stream forever
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <functional>
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
#include "bench/endless_upstream.h"
#include "tests/support/egressd_process.h"
#include "tests/support/fault_server.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"

ABSL_FLAG(int, fetches, 1000000, "fetches in all");
ABSL_FLAG(int, callers, 64, "concurrent callers");
ABSL_FLAG(std::string, egressd, "bazel-bin/service/egressd", "the egressd binary");
ABSL_FLAG(int, seconds, 0, "stop starting fetches after this long (0: no time limit)");
ABSL_FLAG(std::vector<std::string>, only, {},
          "run only the scenarios whose name contains one of these (comma-separated)");
ABSL_FLAG(std::vector<std::string>, skip, {},
          "leave out the scenarios whose name contains one of these (comma-separated)");

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
  // What else the caller sets (method, headers, max_body_bytes, timeout).
  std::function<void(FetchRequest&)> shape = nullptr;
};

bool NameHasAny(const std::string& name, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    if (absl::StrContains(name, part)) return true;
  }
  return false;
}

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
  egress::bench::EndlessUpstream endless;

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
  const auto endless_url = [&](const std::string& path) {
    return absl::StrCat("http://127.0.0.1:", endless.port(), path);
  };
  const auto within_2s = [](FetchRequest& r) { r.mutable_timeout()->set_seconds(2); };
  const std::vector<Scenario> scenarios = {
      {"https 1 KiB, read", nginx->HttpsUrl("/cl/1k"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 400, false},
      {"http 4 KiB, unread (drained)", nginx->HttpUrl("/cl/4k"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 250, false},
      {"https chunked 1 KiB, read", nginx->HttpsUrl("/chunked/1k"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 100, false},
      {"https chunked 300 KiB, unread (abandoned)", nginx->HttpsUrl("/chunked/300k"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 30, false},
      {"https 262145 B, unread (skipped)", nginx->HttpsUrl("/cl/262145"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 30, false},
      {"http Connection: close", nginx->HttpUrl("/close/1k"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 50, false},
      {"fault: reset in body", fault("/reset-body"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: malformed status", fault("/bad-status"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: headers over limit", fault("/huge-headers"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: bad chunk", fault("/bad-chunk"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: Content-Length short", fault("/short-body"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 20, true},
      {"fault: bytes past the body", fault("/long-body"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 20, true},
      {"fault: closed as reused (retried)", fault("/close-on-reuse"), egress::v1::BODY_MODE_FULL, StatusCode::OK, 10, true},
      {"fault: never answers", fault("/never"), egress::v1::BODY_MODE_FULL, StatusCode::DEADLINE_EXCEEDED, 2, true},
      {"policy: metadata address", "http://169.254.169.254/latest", egress::v1::BODY_MODE_FULL, StatusCode::PERMISSION_DENIED, 8, true},
      // Hostile upstreams: responses that never end, each fetch bounded by a 2 s timeout.
      {"endless: chunked body, read (max_body_bytes 1 MiB)", endless_url("/body"), egress::v1::BODY_MODE_FULL, StatusCode::RESOURCE_EXHAUSTED, 3, true, [](FetchRequest& r) { r.set_max_body_bytes(1 << 20); r.mutable_timeout()->set_seconds(10); }},
      {"endless: chunked body, unread (drain abandoned)", endless_url("/body"), egress::v1::BODY_MODE_NONE, StatusCode::OK, 3, true, within_2s},
      {"endless: Content-Length 2^60, prefix 1 KiB", endless_url("/length"), egress::v1::BODY_MODE_PREFIX, StatusCode::OK, 3, true, [](FetchRequest& r) { r.set_max_body_bytes(1024); r.mutable_timeout()->set_seconds(2); }},
      {"endless: header lines", endless_url("/headers"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 3, true, within_2s},
      {"endless: chunk extension", endless_url("/chunk-ext"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 2, true, within_2s},
      {"endless: trailers", endless_url("/trailers"), egress::v1::BODY_MODE_FULL, StatusCode::UNAVAILABLE, 2, true, within_2s},
      // Hostile callers.
      {"caller: max_body_bytes 2^64-1, endless body", endless_url("/body"), egress::v1::BODY_MODE_FULL, StatusCode::INVALID_ARGUMENT, 2, true, [](FetchRequest& r) { r.set_max_body_bytes(~uint64_t{0}); r.mutable_timeout()->set_seconds(2); }},
      {"caller: method with a space", nginx->HttpUrl("/cl/1k"), egress::v1::BODY_MODE_FULL, StatusCode::INVALID_ARGUMENT, 3, true, [](FetchRequest& r) { r.set_method("GE T"); }},
      {"caller: CR/LF in a header value", nginx->HttpUrl("/cl/1k"), egress::v1::BODY_MODE_FULL, StatusCode::INVALID_ARGUMENT, 3, true, [](FetchRequest& r) { auto* h = r.add_headers(); h->set_name("X-Smuggle"); h->set_value("a\r\nHost: evil"); }},
      {"caller: TRACE with a body", nginx->HttpUrl("/cl/1k"), egress::v1::BODY_MODE_FULL, StatusCode::INVALID_ARGUMENT, 2, true, [](FetchRequest& r) { r.set_method("TRACE"); r.set_body("hello"); }},
      {"caller: 1 MiB of headers", nginx->HttpUrl("/cl/1k"), egress::v1::BODY_MODE_FULL, StatusCode::RESOURCE_EXHAUSTED, 2, true, [](FetchRequest& r) { auto* h = r.add_headers(); h->set_name("X-Big"); h->set_value(std::string(1 << 20, 'x')); }},
  };
  std::vector<const Scenario*> wheel;  // each scenario by its weight in every 1000+ fetches
  for (const auto& s : scenarios) {
    const auto& only = absl::GetFlag(FLAGS_only);
    if ((!only.empty() && !NameHasAny(s.name, only)) || NameHasAny(s.name, absl::GetFlag(FLAGS_skip))) {
      continue;
    }
    wheel.insert(wheel.end(), s.weight, &s);
  }
  if (wheel.empty()) {
    std::fprintf(stderr, "--only and --skip leave no scenario\n");
    return 1;
  }

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
  const int limit_seconds = absl::GetFlag(FLAGS_seconds);
  const auto stop_at = std::chrono::steady_clock::now() +
                       std::chrono::seconds(limit_seconds > 0 ? limit_seconds : 1000000000);
  std::atomic<int> done{0};

  auto run = [&] {
    auto stub = egress::v1::Egress::NewStub(channel);
    std::map<std::string, std::map<StatusCode, long>> mine;
    for (int i; (i = next++) < total && std::chrono::steady_clock::now() < stop_at;) {
      const Scenario& s = *wheel[(static_cast<size_t>(i) * 7919) % wheel.size()];
      FetchRequest request;
      request.set_url(s.url);
      request.set_body_mode(s.mode);
      if (s.shape) s.shape(request);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      egress::v1::FetchResponse response;
      const grpc::Status status = stub->Fetch(&context, request, &response);
      ++mine[s.name][status.error_code()];
      ++done;
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
  // egressd's RSS through the run, every 250 ms: a slow leak or a burst shows as a climb
  // between the samples that the start and end figures alone would hide.
  std::atomic<bool> sampling{true};
  std::vector<std::pair<double, long>> rss_samples;  // seconds since start, KiB
  std::thread sampler([&] {
    while (sampling) {
      const double at =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      const long rss = RssKib(pid);
      if (rss < 0) return;  // egressd is gone
      rss_samples.emplace_back(at, rss);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
  std::vector<std::thread> callers;
  for (int c = 0; c < absl::GetFlag(FLAGS_callers); ++c) callers.emplace_back(run);
  for (auto& t : callers) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // drains under way finish
  sampling = false;
  sampler.join();
  const Snapshot end = Take(pid, metrics_port);

  std::printf("soak: %d fetches by %d callers in %.0f s (%.0f/s)\n", done.load(),
              absl::GetFlag(FLAGS_callers), seconds, done / seconds);
  if (!rss_samples.empty()) {
    auto peak = rss_samples.front();
    for (const auto& sample : rss_samples) {
      if (sample.second > peak.second) peak = sample;
    }
    std::printf("egressd RSS, %zu samples every 250 ms: first %ld KiB, last %ld KiB, highest "
                "%ld KiB (at %.1f s)\n",
                rss_samples.size(), rss_samples.front().second, rss_samples.back().second,
                peak.second, peak.first);
    std::string tenths;  // ten evenly spaced samples, for the shape of the curve
    for (size_t k = 0; k < 10; ++k) {
      const auto& sample = rss_samples[k * (rss_samples.size() - 1) / 9];
      absl::StrAppend(&tenths, k ? ", " : "", static_cast<int>(sample.first), " s: ",
                      sample.second / 1024, " MiB");
    }
    std::printf("egressd RSS over the run: %s\n", tenths.c_str());
  }
  std::printf("bytes the endless upstream sent: %.1f MiB\n", endless.bytes_sent() / 1048576.0);
  std::printf("| scenario | expected | outcomes |\n|---|---|---|\n");
  for (const auto& s : scenarios) {
    if (outcomes[s.name].empty()) continue;  // left out by --only or --skip
    std::string line;
    for (const auto& [code, n] : outcomes[s.name]) absl::StrAppend(&line, "code ", code, ": ", n, "; ");
    std::printf("| %s | %d | %s |\n", s.name.c_str(), s.expected, line.c_str());
  }
  std::printf("unexpected outcomes: %ld (%ld outside the injected faults)\n", unexpected.load(),
              unexpected_not_injected.load());
  std::printf("egressd before any fetch: %d fds, RSS %ld KiB\n", before.fds, before.rss_kib);
  // Each pooled connection holds one descriptor; the rest must not grow.
  if (warm) {
    std::printf("egressd after %d fetches (warm): %d fds, RSS %ld KiB, %.0f pooled connections "
                "(%.0f fds besides them)\n",
                warm_up, start.fds, start.rss_kib, start.pooled, start.fds - start.pooled);
  }
  std::printf("egressd at the end: %d fds, RSS %ld KiB, %.0f pooled connections (%.0f fds "
              "besides them)\n",
              end.fds, end.rss_kib, end.pooled, end.fds - end.pooled);
  std::printf("upstream connections opened: %.0f (%.2f per 1000 fetches)\n", end.opened,
              1000.0 * end.opened / std::max(1, done.load()));
  if (end.rss_kib < 0) {
    std::printf("egressd EXITED during the soak; see %s/egressd.log\n", dir.c_str());
    return 1;
  }
  return unexpected_not_injected == 0 ? 0 : 1;
}

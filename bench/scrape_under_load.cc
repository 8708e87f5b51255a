// Does scraping /metrics stall fetches? 64 concurrent callers fetch a 1 KiB body through
// egress for a fixed time, first alone, then while a scraper reads /metrics in a tight
// loop. Prints fetch throughput and latency percentiles for both, side by side.
//
//   bazel run //bench:scrape_under_load -- --seconds=10
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/exposer.h"
#include "service/config/config.h"
#include "service/metrics/metrics.h"
#include "service/server/server.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"

ABSL_FLAG(int, seconds, 10, "duration of each phase");
ABSL_FLAG(int, callers, 64, "concurrent fetch loops");

namespace {

struct PhaseResult {
  double fetches_per_second = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  int scrapes = 0;
  double scrape_p50_ms = 0, scrape_max_ms = 0;
};

double Percentile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(q * values.size()))];
}

PhaseResult RunPhase(const std::string& grpc_target, const std::string& url, int metrics_port,
                     bool scrape) {
  const int callers = absl::GetFlag(FLAGS_callers);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<std::vector<double>> latencies(callers);
  std::vector<std::thread> threads;
  auto channel = grpc::CreateChannel(grpc_target, grpc::InsecureChannelCredentials());
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      auto stub = egress::v1::Egress::NewStub(channel);
      egress::v1::FetchRequest request;
      request.set_url(url);
      while (std::chrono::steady_clock::now() < end) {
        egress::v1::FetchResponse response;
        grpc::ClientContext context;
        const auto start = std::chrono::steady_clock::now();
        if (!stub->Fetch(&context, request, &response).ok()) std::abort();
        latencies[c].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    });
  }
  std::vector<double> scrape_ms;
  if (scrape) {
    while (std::chrono::steady_clock::now() < end) {
      const auto start = std::chrono::steady_clock::now();
      auto page = egress::testing::HttpGet(metrics_port, "/metrics");
      if (!page.ok() || page->status != 200) std::abort();
      scrape_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  }
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  PhaseResult r;
  r.fetches_per_second = all.size() / static_cast<double>(absl::GetFlag(FLAGS_seconds));
  r.p50_ms = Percentile(all, 0.5);
  r.p99_ms = Percentile(all, 0.99);
  r.max_ms = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
  r.scrapes = static_cast<int>(scrape_ms.size());
  r.scrape_p50_ms = Percentile(scrape_ms, 0.5);
  r.scrape_max_ms = scrape_ms.empty() ? 0 : *std::max_element(scrape_ms.begin(), scrape_ms.end());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::StrCat("/tmp/egress-scrape-bench-", getpid());
  auto nginx = egress::testing::NginxUpstream::Start(dir);

  egress::v1::Config proto;
  proto.mutable_transport()->set_extra_ca_file(nginx->ca_file());
  proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");  // the local nginx
  auto config = egress::BuildConfig(proto);
  auto metrics = std::make_shared<egress::Metrics>(config->max_origin_labels);
  const int metrics_port = egress::testing::FreePort();
  prometheus::Exposer exposer(absl::StrCat("127.0.0.1:", metrics_port));
  exposer.RegisterCollectable(metrics);
  auto server = egress::EgressServer::Start(*config, "127.0.0.1:0", *metrics, *metrics);
  if (!server.ok()) return 1;
  const std::string target = absl::StrCat("127.0.0.1:", (*server)->grpc_port());
  const std::string url = nginx->HttpsUrl("/cl/1k");

  RunPhase(target, url, metrics_port, false);  // warm-up: pool filled, caches hot
  const PhaseResult quiet = RunPhase(target, url, metrics_port, false);
  const PhaseResult scraped = RunPhase(target, url, metrics_port, true);

  std::printf("| phase | fetches/s | p50 ms | p99 ms | max ms | scrapes | scrape p50 ms | scrape max ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& [name, r] : {std::pair{"no scraping", quiet}, std::pair{"scraping in a tight loop", scraped}}) {
    std::printf("| %s | %.0f | %.2f | %.2f | %.2f | %d | %.2f | %.2f |\n", name, r.fetches_per_second,
                r.p50_ms, r.p99_ms, r.max_ms, r.scrapes, r.scrape_p50_ms, r.scrape_max_ms);
  }
  std::printf("p99 ratio (scraping / quiet): %.2f\n", scraped.p99_ms / quiet.p99_ms);
  return 0;
}

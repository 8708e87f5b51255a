// egressd's metrics as a real Prometheus server sees them, egressd and Prometheus each in
// their own process: a scripted workload of the
// drain scenarios, one origin each, then exact counts through Prometheus' HTTP API, the
// invariants on every scrape, promtool on /metrics, and every dashboard panel's query.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "egress/v1/egress.grpc.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/base/files.h"
#include "tests/support/egressd_process.h"
#include "tests/support/http_get.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/wait_for.h"

namespace egress::testing {
namespace {

// Logs and outputs the test reads back (service/base/files.h wants a bound).
constexpr size_t kMaxTestFileBytes = 256 << 20;

using google::protobuf::Struct;
using google::protobuf::Value;

std::string ReadFile(const std::string& path) { return ReadBoundedFile(path, kMaxTestFileBytes).value_or(""); }

class PrometheusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/prometheus-test-", getpid());
    nginx_ = NginxUpstream::Start(dir_ + "/nginx");

    // egressd itself, as deployed: its own process, flags and config file.
    std::ofstream(dir_ + "/egress.textproto")
        << "transport { extra_ca_file: \"" << nginx_->ca_file() << "\"\n"
        // Drains to "localhost" end by bytes, never by the clock, however slow the build
        // (sanitizers): the byte-cap and completed-drain counts stay exact.
        << "  origins { host: \"localhost\" drain { mode: DRAIN_MODE_FIXED "
           "max_duration { seconds: 5 } } }\n"
        // ADAPTIVE, with pauses of up to 1000 loopback dials let through, for the same reason.
        << "  origins { host: \"127.0.0.2\" drain { mode: DRAIN_MODE_ADAPTIVE "
           "cost_factor: 1000 max_duration { seconds: 5 } } } }\n"
        << "policy { allow_cidrs: \"127.0.0.0/8\" }  # the test upstream\n"
        // A quota of one request for an address nobody serves, for the dashboard's panel.
        << "quotas { name: \"dashboard\" caller: \"*\" hosts: \"127.0.0.9\" "
           "requests_per_second: 0.001 burst: 1 }\n";
    egressd_ = std::make_unique<EgressdProcess>(
        Runfile("service/egressd"), dir_ + "/egress.textproto", dir_ + "/egressd.log");
    ASSERT_TRUE(egressd_->WaitUntilListening()) << ReadFile(egressd_->log_file());

    prometheus_port_ = FreePort();
    const std::string rules = Runfile("k8s/base/prometheus/egress-rules.yaml");
    ASSERT_FALSE(ReadFile(rules).empty()) << rules;
    std::ofstream(dir_ + "/prometheus.yml") << absl::StrCat(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: ['", rules, "']\n"
        "scrape_configs:\n"
        "  - job_name: egressd\n"
        "    static_configs: [{targets: ['127.0.0.1:", egressd_->metrics_port(), "']}]\n");
    prometheus_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"prometheus", "--config.file=" + dir_ + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir_ + "/tsdb",
                                 absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port_),
                                 "--log.level=warn"},
        dir_ + "/prometheus.log");
    ASSERT_TRUE(WaitForPort(prometheus_port_, 30)) << ReadFile(dir_ + "/prometheus.log");
    RunWorkload();
  }

  static void TearDownTestSuite() {
    prometheus_.reset();
    egressd_.reset();
    nginx_.reset();
  }

  // Whether egressd's /metrics shows no connection active or draining.
  static bool PoolIsQuiet() {
    const auto page = HttpGet(egressd_->metrics_port(), "/metrics");
    if (!page.ok()) return false;
    for (const absl::string_view line : absl::StrSplit(page->body, '\n')) {
      if (!absl::StartsWith(line, "egress_pool_connections{") ||
          absl::StrContains(line, "state=\"idle\"")) {
        continue;
      }
      double count = 0;
      if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &count) || count != 0) return false;
    }
    return true;
  }

  // `count` head-only fetches, `gap` apart, each once the one before has left the pool
  // quiet (its drain over, however busy the machine); all must succeed.
  static void HeadOnlyFetches(egress::v1::Egress::Stub& stub, const std::string& url, int count,
                              std::chrono::milliseconds gap) {
    for (int i = 0; i < count; ++i) {
      egress::v1::FetchRequest request;
      request.set_url(url);
      request.set_body_mode(egress::v1::BODY_MODE_NONE);
      egress::v1::FetchResponse response;
      grpc::ClientContext context;
      const grpc::Status status = stub.Fetch(&context, request, &response);
      ASSERT_TRUE(status.ok()) << url << ": " << status.error_message();
      ++fetches_;
      std::this_thread::sleep_for(gap);
      ASSERT_TRUE(WaitFor(PoolIsQuiet, absl::Seconds(20))) << url << ": the pool stayed busy";
    }
  }

  static void RunWorkload() {
    auto stub = egress::v1::Egress::NewStub(grpc::CreateChannel(
        egressd_->grpc_target(), grpc::InsecureChannelCredentials()));
    const int https = nginx_->https_port(), http = nginx_->http_port();
    small_ = absl::StrCat("https://localhost:", https);
    over_cap_ = absl::StrCat("https://127.0.0.1:", https);
    chunked_ = absl::StrCat("http://localhost:", http);
    stalled_ = absl::StrCat("http://127.0.0.1:", http);
    closing_ = absl::StrCat("https://localhost:", nginx_->idle_close_port());
    adaptive_ = absl::StrCat("http://127.0.0.2:", http);
    workload_start_ = absl::Now();
    const auto gap = std::chrono::milliseconds(20);
    HeadOnlyFetches(*stub, small_ + "/cl/1k", 10, gap);
    HeadOnlyFetches(*stub, over_cap_ + "/cl/262145", 5, gap);
    HeadOnlyFetches(*stub, chunked_ + "/chunked/300k", 5, gap);
    HeadOnlyFetches(*stub, stalled_ + "/stall", 5, std::chrono::milliseconds(100));
    HeadOnlyFetches(*stub, closing_ + "/close/1k", 5, gap);
    // Each drain ends before the next fetch, however slow the build: one connection.
    HeadOnlyFetches(*stub, adaptive_ + "/cl/262145", 5, std::chrono::milliseconds(300));
    WaitForScrapeOfAllFetches();
    // Counters that appear already at their final value show no rate; a second round on
    // the small-body origin, after its series exist, gives rate() something to see.
    HeadOnlyFetches(*stub, small_ + "/cl/1k", 10, gap);
    WaitForScrapeOfAllFetches();
    workload_end_ = absl::Now();
  }

  // Waits for drains to end, then for a scrape that has seen every fetch, then two more.
  static void WaitForScrapeOfAllFetches() {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up && Query("sum(egress_fetches_total)") != fetches_) {
      absl::SleepFor(absl::Milliseconds(250));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  }

  // Runs a PromQL query; returns the parsed "data" object of the API's answer.
  static Struct Api(const std::string& path_and_query) {
    auto reply = HttpGet(prometheus_port_, path_and_query);
    EXPECT_TRUE(reply.ok()) << reply.status();
    Struct answer;
    if (!reply.ok()) return answer;
    EXPECT_EQ(reply->status, 200) << path_and_query << ": " << reply->body;
    const bool parsed = google::protobuf::util::JsonStringToMessage(reply->body, &answer).ok();
    const auto data = answer.fields().find("data");
    if (!parsed || data == answer.fields().end()) {
      ADD_FAILURE() << path_and_query << ": " << reply->body;
      return Struct();
    }
    return data->second.struct_value();
  }

  static const google::protobuf::ListValue& Result(const Struct& data) {
    static const google::protobuf::ListValue none;
    const auto result = data.fields().find("result");
    return result == data.fields().end() ? none : result->second.list_value();
  }

  // The value of a query that yields one series (NaN when it yields none).
  static double Query(const std::string& expr) {
    const Struct data = Api("/api/v1/query?query=" + UrlEncode(expr));
    const auto& result = Result(data);
    if (result.values_size() != 1) return std::nan("");
    return std::stod(result.values(0).struct_value().fields().at("value").list_value().values(1).string_value());
  }

  static double Count(const std::string& metric, const std::string& origin,
                      const std::string& extra = "") {
    const double value = Query(absl::StrCat("sum(", metric, "{origin=\"", origin, "\"", extra, "})"));
    return std::isnan(value) ? 0 : value;
  }

  static inline std::string dir_;
  static inline std::unique_ptr<NginxUpstream> nginx_;
  static inline std::unique_ptr<EgressdProcess> egressd_;
  static inline std::unique_ptr<ChildProcess> prometheus_;
  static inline int prometheus_port_ = 0;
  static inline int fetches_ = 0;
  static inline std::string small_, over_cap_, chunked_, stalled_, closing_, adaptive_;
  static inline absl::Time workload_start_, workload_end_;
};

TEST_F(PrometheusTest, SmallBodiesDrainAndShareOneConnection) {
  EXPECT_EQ(Count("egress_drains_started_total", small_), 20);
  EXPECT_EQ(Count("egress_drains_completed_total", small_), 20);
  EXPECT_EQ(Count("egress_drains_abandoned_total", small_), 0);
  EXPECT_EQ(Count("egress_drains_skipped_total", small_), 0);
  EXPECT_EQ(Count("egress_upstream_connections_opened_total", small_), 1);
  EXPECT_EQ(Count("egress_upstream_requests_total", small_, ",connection=\"reused\""), 19);
  EXPECT_EQ(Count("egress_drain_bytes_total", small_), 20 * 1024);
}

TEST_F(PrometheusTest, ContentLengthOverTheCapIsSkipped) {
  EXPECT_EQ(Count("egress_drains_started_total", over_cap_), 0);
  EXPECT_EQ(Count("egress_drains_skipped_total", over_cap_, ",reason=\"over_byte_cap\""), 5);
  EXPECT_EQ(Count("egress_upstream_connections_opened_total", over_cap_), 5);
}

TEST_F(PrometheusTest, ChunkedBodyOverTheCapIsAbandonedAtTheByteCap) {
  EXPECT_EQ(Count("egress_drains_started_total", chunked_), 5);
  EXPECT_EQ(Count("egress_drains_abandoned_total", chunked_, ",reason=\"byte_cap\""), 5);
  EXPECT_EQ(Count("egress_drains_completed_total", chunked_), 0);
  EXPECT_EQ(Count("egress_upstream_connections_opened_total", chunked_), 5);
}

TEST_F(PrometheusTest, StalledBodyIsAbandonedAtTheTimeCap) {
  EXPECT_EQ(Count("egress_drains_started_total", stalled_), 5);
  EXPECT_EQ(Count("egress_drains_abandoned_total", stalled_, ",reason=\"time_cap\""), 5);
  EXPECT_EQ(Count("egress_upstream_connections_opened_total", stalled_), 5);
}

TEST_F(PrometheusTest, AdaptiveDrainsWhatFixedSkipsAndExportsWhatItLearned) {
  EXPECT_EQ(Count("egress_drains_completed_total", adaptive_), 5);
  EXPECT_EQ(Count("egress_drains_skipped_total", adaptive_), 0);
  EXPECT_EQ(Count("egress_upstream_connections_opened_total", adaptive_), 1);
  EXPECT_EQ(Count("egress_drain_bytes_total", adaptive_), 5 * 262145);
  EXPECT_GT(Count("egress_origin_dial_seconds", adaptive_), 0);
  // Four drains on a connection that had carried a response before: a rate was learned.
  EXPECT_GT(Count("egress_origin_body_bytes_per_second", adaptive_), 0);
  EXPECT_GT(Count("egress_origin_drain_seconds", adaptive_), 0);
  // Each drain reserved its whole known length of the budget, and gave it back.
  EXPECT_EQ(Query("egress_drain_budget_bytes{state=\"limit\"}"), 32 * 1024 * 1024);
  EXPECT_GE(Query("egress_drain_budget_bytes{state=\"peak\"}"), 262145);
  EXPECT_LE(Query("egress_drain_budget_bytes{state=\"peak\"}"), 32 * 1024 * 1024);
  EXPECT_EQ(Query("egress_drain_budget_bytes{state=\"in_use\"}"), 0);
  // FIXED origins learn dial costs too (for a switch to ADAPTIVE), but never race.
  EXPECT_EQ(Count("egress_drain_aware_acquisitions_total", small_), 0);
}

TEST_F(PrometheusTest, ConnectionCloseSkipsTheDrain) {
  EXPECT_EQ(Count("egress_drains_started_total", closing_), 0);
  EXPECT_EQ(Count("egress_drains_skipped_total", closing_, ",reason=\"connection_close\""), 5);
  EXPECT_EQ(Count("egress_upstream_connections_opened_total", closing_), 5);
  EXPECT_EQ(Count("egress_upstream_connections_closed_total", closing_, ",reason=\"connection_close\""), 5);
}

TEST_F(PrometheusTest, NewConnectionsToAnHttpsOriginResumeItsTlsSession) {
  // Five connections each (every response closes or is not drained): one full handshake.
  for (const std::string& origin : {closing_, over_cap_}) {
    EXPECT_EQ(Count("egress_tls_handshakes_total", origin, ",resumed=\"false\""), 1) << origin;
    EXPECT_EQ(Count("egress_tls_handshakes_total", origin, ",resumed=\"true\""), 4) << origin;
  }
  // A plain-HTTP origin has no such series.
  EXPECT_TRUE(std::isnan(
      Query(absl::StrCat("sum(egress_tls_handshakes_total{origin=\"", chunked_, "\"})"))));
}

TEST_F(PrometheusTest, ReuseRateIsWhatTheWorkloadImplies) {
  // 45 requests; the small-body origin reuses 19 of its 20, the ADAPTIVE one 4 of 5.
  EXPECT_DOUBLE_EQ(Query("sum(egress_upstream_requests_total{connection=\"reused\"}) / "
                         "sum(egress_upstream_requests_total)"),
                   23.0 / 45.0);
  EXPECT_EQ(Query("sum(egress_fetches_total{code=\"OK\"})"), 45);
}

TEST_F(PrometheusTest, PoolWaitIsObservedOncePerUpstreamRequest) {
  EXPECT_EQ(Query("egress_pool_wait_seconds_count"), 45);
  EXPECT_EQ(Query("sum(egress_upstream_requests_total)"), 45);
}

TEST_F(PrometheusTest, InvariantsHoldOnEveryScrape) {
  const std::string range = absl::StrCat(
      "&start=", absl::ToUnixSeconds(workload_start_ - absl::Seconds(1)),
      "&end=", absl::ToUnixSeconds(workload_end_), "&step=1");
  for (const std::string expr : {
           "sum(egress_drains_started_total) - sum(egress_drains_completed_total)"
           " - sum(egress_drains_abandoned_total) - sum(egress_pool_connections{state=\"draining\"})",
           "sum(egress_upstream_connections_opened_total)"
           " - sum(egress_upstream_connections_closed_total) - sum(egress_pool_connections)"}) {
    const Struct data = Api("/api/v1/query_range?query=" + UrlEncode(expr) + range);
    ASSERT_EQ(Result(data).values_size(), 1) << expr;
    const auto& samples = Result(data).values(0).struct_value().fields().at("values").list_value();
    EXPECT_GE(samples.values_size(), 3);
    for (const auto& sample : samples.values()) {
      EXPECT_EQ(sample.list_value().values(1).string_value(), "0") << expr;
    }
  }
}

TEST_F(PrometheusTest, PromtoolAcceptsTheMetricsPage) {
  auto page = HttpGet(egressd_->metrics_port(), "/metrics");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->status, 200);
  const std::string file = dir_ + "/metrics.txt";
  std::ofstream(file) << page->body;
  int status = -1;
  const std::string output = RunShell("promtool check metrics < " + file + " 2>&1", &status);
  EXPECT_EQ(status, 0) << output;
}

TEST_F(PrometheusTest, RecordingRulesEvaluate) {
  const Struct rules = Api("/api/v1/rules");
  ASSERT_EQ(rules.fields().at("groups").list_value().values_size(), 2);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up && std::isnan(Query("egress:drain_completion_ratio:rate5m"))) {
    absl::SleepFor(absl::Milliseconds(250));
  }
  // Within the rate window, only the second round's 10 reused requests and 10
  // completed drains increased.
  EXPECT_NEAR(Query("egress:reuse_ratio:rate5m"), 1.0, 0.001);
  EXPECT_NEAR(Query("egress:drain_completion_ratio:rate5m"), 1.0, 0.001);
  EXPECT_NEAR(Query("egress:fetch_error_ratio:rate5m"), 0.0, 0.001);
}

TEST_F(PrometheusTest, EveryDashboardPanelQueryReturnsData) {
  // A quota refusal for the "Quotas" panel, after the workload whose ratios other tests
  // check: the first fetch takes the rule's one token (and finds nothing listening).
  auto stub = egress::v1::Egress::NewStub(
      grpc::CreateChannel(egressd_->grpc_target(), grpc::InsecureChannelCredentials()));
  for (grpc::StatusCode expected :
       {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    egress::v1::FetchRequest request;
    request.set_url("http://127.0.0.9:1/");
    egress::v1::FetchResponse response;
    grpc::ClientContext context;
    EXPECT_EQ(stub->Fetch(&context, request, &response).error_code(), expected);
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::Now() < give_up && std::isnan(Query("sum(egress_quota_rejected_total)"))) {
    absl::SleepFor(absl::Milliseconds(250));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // a second scrape of it

  const std::string path = Runfile("k8s/base/grafana/egress-dashboard.json");
  Struct dashboard;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(path), &dashboard).ok());
  int queries = 0;
  for (const Value& panel : dashboard.fields().at("panels").list_value().values()) {
    const std::string title = panel.struct_value().fields().at("title").string_value();
    for (const Value& target : panel.struct_value().fields().at("targets").list_value().values()) {
      const std::string expr = absl::StrReplaceAll(
          target.struct_value().fields().at("expr").string_value(),
          {{"$origin", ".*"}, {"$__rate_interval", "1m"}});
      const Struct data = Api("/api/v1/query?query=" + UrlEncode(expr));
      EXPECT_GT(Result(data).values_size(), 0) << title << ": " << expr;
      ++queries;
    }
  }
  EXPECT_GE(queries, 15);
}

}  // namespace
}  // namespace egress::testing

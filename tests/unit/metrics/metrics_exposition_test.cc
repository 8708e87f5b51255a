// What /metrics says for a Metrics object that saw one of each kind of event: the text
// exposition, byte for byte, as tests/unit/metrics/testdata/metrics_exposition.txt holds it; and
// that the families in it are exactly those service/metrics/families.h declares, with the
// declared help, type and labels. The state has one origin, one caller, one quota key and
// one report-only rule, so that the hash maps' iteration order cannot change the text
// between runs.
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "service/metrics/families.h"
#include "service/metrics/metrics.h"

namespace egress::testing {
namespace {

using metrics::FamilySpec;
using metrics::kFamilies;
using transport::ConnectionState;
using transport::Origin;

// One event of each kind, on one https origin.
void RecordOneOfEach(Metrics& metrics) {
  const Origin origin{true, "example.com", 443};
  metrics.OnConnectionOpened(
      origin, {absl::Milliseconds(2), absl::Milliseconds(3), absl::Milliseconds(7), false});
  metrics.OnUpstreamRequest(origin, false);
  metrics.OnConnectionStateChanged(origin, ConnectionState::kActive, ConnectionState::kIdle);
  metrics.OnConnectionStateChanged(origin, ConnectionState::kIdle, ConnectionState::kActive);
  metrics.OnUpstreamRequest(origin, true);
  metrics.OnDrainStarted(origin);
  metrics.OnDrainCompleted(origin, 4096, absl::Microseconds(800));
  metrics.OnDrainStarted(origin);
  metrics.OnDrainAbandoned(origin, transport::DrainAbandonReason{}, 100, absl::Milliseconds(20));
  metrics.OnDrainSkipped(origin, transport::DrainSkipReason{});
  metrics.OnRetry(origin, transport::RetryReason{});
  metrics.OnRetryBudgetExhausted(origin);
  metrics.OnPoolWait(origin, absl::Milliseconds(4));
  metrics.OnPolicyDenied(origin, transport::DenyReason{});
  metrics.OnPolicyWouldDeny(origin, "no-metadata");
  metrics.OnOriginCost(origin, {absl::Milliseconds(12), 1e6, absl::Milliseconds(5)});
  metrics.OnDrainBudget(2048, 1 << 20);
  metrics.OnDrainBudget(1024, 1 << 20);
  metrics.OnDrainAwareAcquisition(origin, transport::DrainAwareChoice::kDial, true);
  metrics.OnSurplusConnection(origin, true);
  metrics.OnUpstreamLimit(origin, transport::UpstreamLimit{});
  metrics.OnTransportException();
  metrics.OnDnsLookup(transport::DnsResult{});
  metrics.OnDnsCacheHit();
  metrics.OnDnsLookupAvoided();
  metrics.OnDnsStaleServed();
  metrics.OnConnectAttempt(transport::ConnectAttemptResult{});
  metrics.OnCircuitBreakerStateChanged(origin, transport::BreakerState::kClosed,
                                       transport::BreakerState::kOpen);
  metrics.OnCircuitBreakerRejected(origin);
  metrics.OnStreamOpened(origin);
  metrics.OnStreamReset(origin);
  metrics.OnHttp2ConnectionClosed(3);
  metrics.OnConnectionClosed(origin, transport::CloseReason{}, ConnectionState::kActive);
  metrics.OnFetchDone(grpc::StatusCode::UNAVAILABLE, absl::Milliseconds(30));
  metrics.OnBufferedBodyBytes(512);
  metrics.OnQuotaRejected("per-caller", "billing", QuotaLimit::kRequestsPerSecond);
  metrics.OnQuotaStoreError(true);
  metrics.OnCallRefused(CallRefusal::kBadTimeout);
  CallerCost cost;
  cost.fetches = 1;
  cost.request_bytes = 10;
  cost.response_bytes = 20;
  cost.connections_opened = 1;
  cost.tls_handshakes = 1;
  cost.drain_bytes = 4096;
  metrics.OnCallerCost("billing", cost);
  metrics.OnAccessLogWritten(5);
  metrics.OnAccessLogDropped(AccessLogDrop::kRateLimited, 2);
}

std::string Golden() {
  std::ifstream in("tests/unit/metrics/testdata/metrics_exposition.txt");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(MetricsExposition, SaysWhatTheGoldenFileSaysForOneEventOfEachKind) {
  Metrics metrics(10);
  RecordOneOfEach(metrics);
  const std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    std::ofstream(std::string(dir) + "/metrics_exposition.txt") << text;
  }
  const std::string golden = Golden();
  ASSERT_FALSE(golden.empty());
  EXPECT_EQ(text, golden);
}

const char* TypeName(prometheus::MetricType type) {
  switch (type) {
    case prometheus::MetricType::Counter: return "counter";
    case prometheus::MetricType::Gauge: return "gauge";
    case prometheus::MetricType::Histogram: return "histogram";
    default: return "other";
  }
}

std::string Collected() {
  Metrics metrics(10);
  RecordOneOfEach(metrics);
  return prometheus::TextSerializer().Serialize(metrics.Collect());
}

TEST(MetricsFamilies, EveryHelpAndTypeLineOfTheExpositionIsAnEntryOfTheList) {
  std::map<std::string, std::string> declared;  // "# HELP ..." and "# TYPE ..." lines
  for (const FamilySpec& spec : kFamilies) {
    declared[std::string("# HELP ") + spec.name] = spec.help;
    declared[std::string("# TYPE ") + spec.name] = TypeName(spec.type);
  }
  std::istringstream text(Collected());
  int headers = 0;
  for (std::string line; std::getline(text, line);) {
    if (line.rfind("# ", 0) != 0) continue;
    ++headers;
    const size_t name_end = line.find(' ', 7);
    ASSERT_NE(name_end, std::string::npos) << line;
    const auto entry = declared.find(line.substr(0, name_end));
    ASSERT_NE(entry, declared.end()) << "not in kFamilies: " << line;
    EXPECT_EQ(line.substr(name_end + 1), entry->second) << line;
  }
  EXPECT_EQ(headers, 2 * static_cast<int>(std::size(kFamilies)));
}

TEST(MetricsFamilies, EveryEntryOfTheListIsCollectedOnce) {
  Metrics metrics(10);
  RecordOneOfEach(metrics);
  std::map<std::string, int> collected;
  for (const auto& family : metrics.Collect()) ++collected[family.name];
  for (const FamilySpec& spec : kFamilies) {
    EXPECT_EQ(collected[spec.name], 1) << spec.name;
  }
}

TEST(MetricsFamilies, EverySampleCarriesTheLabelsItsEntryNamesInThatOrder) {
  Metrics metrics(10);
  RecordOneOfEach(metrics);
  for (const auto& family : metrics.Collect()) {
    const FamilySpec* spec = nullptr;
    for (const FamilySpec& entry : kFamilies) {
      if (family.name == entry.name) spec = &entry;
    }
    ASSERT_NE(spec, nullptr) << family.name;
    std::vector<std::string> declared;
    for (const char* label : spec->labels) {
      if (label != nullptr) declared.push_back(label);
    }
    EXPECT_FALSE(family.metric.empty()) << family.name << " has no sample to check";
    for (const auto& metric : family.metric) {
      std::vector<std::string> names;
      for (const auto& label : metric.label) names.push_back(label.name);
      EXPECT_EQ(names, declared) << family.name;
    }
  }
}

TEST(MetricsFamilies, OnlyHistogramsHaveBuckets) {
  for (const FamilySpec& spec : kFamilies) {
    EXPECT_EQ(spec.type == prometheus::MetricType::Histogram, !spec.buckets.empty())
        << spec.name;
  }
}

}  // namespace
}  // namespace egress::testing

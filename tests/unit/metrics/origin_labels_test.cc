// The `origin` label slots of egressd's metrics: a bounded number, given to the least
// recently used origin's successor when that origin has no live connection, and changed
// at run time through ApplyConfig (metrics.max_origin_labels). And the one HTTP/2
// family without the label: streams per closed connection.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "service/config/config.h"
#include "service/metrics/metrics.h"
#include "service/server/server.h"

namespace egress::testing {
namespace {

using prometheus::MetricFamily;
using transport::CloseReason;
using transport::ConnectionState;
using transport::Origin;

Origin Host(const std::string& host) { return Origin{true, host, 443}; }
std::string Label(const std::string& host) { return "https://" + host + ":443"; }

// One sample of a family, by its labels; NaN when there is none.
double Sample(const std::vector<MetricFamily>& families, const std::string& name,
              const std::map<std::string, std::string>& labels) {
  for (const auto& family : families) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : metric.label) have[label.name] = label.value;
      if (have != labels) continue;
      return family.type == prometheus::MetricType::Gauge ? metric.gauge.value
                                                           : metric.counter.value;
    }
  }
  return std::nan("");
}

bool HasOrigin(const Metrics& metrics, const std::string& origin) {
  return !std::isnan(Sample(metrics.Collect(), "egress_upstream_connections_opened_total",
                            {{"origin", origin}}));
}

double Pool(const Metrics& metrics, const std::string& origin, const std::string& state) {
  return Sample(metrics.Collect(), "egress_pool_connections",
                {{"origin", origin}, {"state", state}});
}

// The invariants docs/metrics.md states, summed over the origins of one snapshot.
void ExpectInvariants(const Metrics& metrics) {
  double opened = 0, closed = 0, live = 0, started = 0, ended = 0, draining = 0;
  for (const auto& family : metrics.Collect()) {
    for (const auto& metric : family.metric) {
      const double counter = metric.counter.value, gauge = metric.gauge.value;
      if (family.name == "egress_upstream_connections_opened_total") opened += counter;
      if (family.name == "egress_upstream_connections_closed_total") closed += counter;
      if (family.name == "egress_drains_started_total") started += counter;
      if (family.name == "egress_drains_completed_total" ||
          family.name == "egress_drains_abandoned_total") {
        ended += counter;
      }
      if (family.name != "egress_pool_connections") continue;
      live += gauge;
      for (const auto& label : metric.label) {
        if (label.value == "draining") draining += gauge;
      }
    }
  }
  EXPECT_EQ(opened - closed, live);
  EXPECT_EQ(started, ended + draining);
}

// A connection's life: opened, one drained request, then idle in the pool.
void OpenToIdle(Metrics& metrics, const Origin& origin) {
  metrics.OnConnectionOpened(origin, {});
  metrics.OnUpstreamRequest(origin, false);
  metrics.OnDrainStarted(origin);
  metrics.OnDrainCompleted(origin, 100, absl::Milliseconds(1));
  metrics.OnConnectionStateChanged(origin, ConnectionState::kActive, ConnectionState::kIdle);
}

void CloseIdle(Metrics& metrics, const Origin& origin) {
  metrics.OnConnectionClosed(origin, CloseReason::kIdleTimeout, ConnectionState::kIdle);
}

TEST(OriginLabelsTest, AnOriginWithoutConnectionsGivesItsSlotToANewOrigin) {
  Metrics metrics(2);
  for (const char* host : {"a", "b"}) {
    OpenToIdle(metrics, Host(host));
    CloseIdle(metrics, Host(host));
  }
  metrics.OnUpstreamRequest(Host("a"), true);  // a is now used more recently than b
  OpenToIdle(metrics, Host("c"));
  EXPECT_TRUE(HasOrigin(metrics, Label("a")));
  EXPECT_FALSE(HasOrigin(metrics, Label("b")));  // removed, not folded into "other"
  EXPECT_TRUE(HasOrigin(metrics, Label("c")));
  EXPECT_FALSE(HasOrigin(metrics, "other"));
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_label_evictions_total", {}), 1);
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_labels", {{"state", "in_use"}}), 2);
  ExpectInvariants(metrics);
}

TEST(OriginLabelsTest, AnOriginWithALiveConnectionKeepsItsSlot) {
  Metrics metrics(1);
  OpenToIdle(metrics, Host("a"));
  OpenToIdle(metrics, Host("b"));
  EXPECT_EQ(Pool(metrics, Label("a"), "idle"), 1);
  EXPECT_EQ(Pool(metrics, "other", "idle"), 1);
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_label_evictions_total", {}), 0);
  ExpectInvariants(metrics);
}

TEST(OriginLabelsTest, AnOriginCountedAsOtherStaysThereUntilItsConnectionsClose) {
  Metrics metrics(1);
  OpenToIdle(metrics, Host("a"));
  OpenToIdle(metrics, Host("b"));  // into "other": a is live
  CloseIdle(metrics, Host("a"));   // a's slot could go to b now, but b's connection is in other
  metrics.OnConnectionStateChanged(Host("b"), ConnectionState::kIdle, ConnectionState::kActive);
  EXPECT_FALSE(HasOrigin(metrics, Label("b")));
  EXPECT_EQ(Pool(metrics, "other", "active"), 1);
  metrics.OnConnectionClosed(Host("b"), CloseReason::kConnectionClose, ConnectionState::kActive);
  EXPECT_EQ(Pool(metrics, "other", "active"), 0);
  ExpectInvariants(metrics);

  OpenToIdle(metrics, Host("b"));  // nothing of b left in other: a's slot is b's
  EXPECT_EQ(Pool(metrics, Label("b"), "idle"), 1);
  EXPECT_FALSE(HasOrigin(metrics, Label("a")));
  ExpectInvariants(metrics);
}

TEST(OriginLabelsTest, FewerSlotsAtRunTimeEvictQuietOriginsAtOnceAndLiveOnesWhenTheyClose) {
  Metrics metrics(3);
  for (const char* host : {"a", "b", "c"}) OpenToIdle(metrics, Host(host));
  CloseIdle(metrics, Host("a"));
  CloseIdle(metrics, Host("c"));
  metrics.SetMaxOrigins(1);
  // a and c, quiet, go at once; b, live, keeps its slot.
  EXPECT_FALSE(HasOrigin(metrics, Label("a")));
  EXPECT_TRUE(HasOrigin(metrics, Label("b")));
  EXPECT_FALSE(HasOrigin(metrics, Label("c")));
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_labels", {{"state", "limit"}}), 1);
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_label_evictions_total", {}), 2);
  ExpectInvariants(metrics);

  metrics.SetMaxOrigins(0);  // b's slot is given up when b's last connection closes
  EXPECT_TRUE(HasOrigin(metrics, Label("b")));
  CloseIdle(metrics, Host("b"));
  EXPECT_FALSE(HasOrigin(metrics, Label("b")));
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_labels", {{"state", "in_use"}}), 0);
  ExpectInvariants(metrics);
}

TEST(OriginLabelsTest, MaxOriginLabelsChangesAtRunTimeThroughApplyConfig) {
  Metrics metrics(100);
  auto config = BuildConfig(egress::v1::Config());
  ASSERT_TRUE(config.ok()) << config.status();
  auto server = EgressServer::Start(*config, "127.0.0.1:0", metrics, metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->OnMaxOriginLabels([&metrics](size_t max) { metrics.SetMaxOrigins(max); });

  egress::v1::Config fewer;
  fewer.mutable_metrics()->set_max_origin_labels(7);
  auto applied = (*server)->ApplyConfig(fewer);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->metrics().max_origin_labels(), 7u);
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_labels", {{"state", "limit"}}), 7);

  egress::v1::Config too_many;
  too_many.mutable_metrics()->set_max_origin_labels(10001);
  const absl::Status refused = (*server)->ApplyConfig(too_many).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("metrics.max_origin_labels: at most 10000"),
            absl::string_view::npos)
      << refused;
  EXPECT_EQ(Sample(metrics.Collect(), "egress_origin_labels", {{"state", "limit"}}), 7);
}

TEST(Http2MetricsTest, StreamsPerConnectionIsAHistogramOfClosedConnections) {
  Metrics metrics(100);
  metrics.OnHttp2ConnectionClosed(0);  // dialed, never used
  metrics.OnHttp2ConnectionClosed(3);
  metrics.OnHttp2ConnectionClosed(12);
  metrics.OnHttp2ConnectionClosed(12);
  const prometheus::ClientMetric* histogram = nullptr;
  const auto families = metrics.Collect();
  for (const auto& family : families) {
    if (family.name == "egress_http2_streams_per_connection") histogram = &family.metric.at(0);
  }
  ASSERT_NE(histogram, nullptr);
  EXPECT_EQ(histogram->histogram.sample_count, 4u);
  EXPECT_EQ(histogram->histogram.sample_sum, 27);
  std::map<double, uint64_t> cumulative;
  for (const auto& bucket : histogram->histogram.bucket) {
    cumulative[bucket.upper_bound] = bucket.cumulative_count;
  }
  EXPECT_EQ(cumulative[0], 1u);
  EXPECT_EQ(cumulative[2], 1u);
  EXPECT_EQ(cumulative[5], 2u);
  EXPECT_EQ(cumulative[10], 2u);
  EXPECT_EQ(cumulative[20], 4u);
}

}  // namespace
}  // namespace egress::testing

#include "service/metrics/metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "prometheus/client_metric.h"
#include "prometheus/family.h"
#include "prometheus/metric_family.h"

namespace egress {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using transport::CloseReason;
using transport::ConnectionState;
using transport::DrainAbandonReason;
using transport::DrainSkipReason;

constexpr const char* kOther = "other";

// Drains are capped at tens of milliseconds by default; fetches and dials span more.
const prometheus::Histogram::BucketBoundaries kDrainBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

prometheus::Histogram& MakeHistogram(prometheus::Registry& registry, const std::string& name,
                                     const std::string& help,
                                     const prometheus::Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

MetricFamily Family(std::string name, std::string help, MetricType type) {
  return MetricFamily{std::move(name), std::move(help), type, {}};
}

void AddSample(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == MetricType::Gauge) {
    metric.gauge.value = value;
  } else {
    metric.counter.value = value;
  }
  family.metric.push_back(std::move(metric));
}

}  // namespace

Metrics::Metrics(size_t max_origins)
    : histograms_(std::make_shared<prometheus::Registry>()),
      drain_duration_(MakeHistogram(*histograms_, "egress_drain_duration_seconds",
                                    "How long drains took, completed or abandoned.",
                                    kDrainBuckets)),
      fetch_duration_(MakeHistogram(*histograms_, "egress_fetch_duration_seconds",
                                    "Fetch and FetchStream RPCs from start to finish.",
                                    kLatencyBuckets)),
      pool_wait_(MakeHistogram(*histograms_, "egress_pool_wait_seconds",
                               "Time from asking the pool to getting a connection (not dialing).",
                               kDrainBuckets)),
      http2_streams_per_connection_(MakeHistogram(
          *histograms_, "egress_http2_streams_per_connection",
          "Streams an HTTP/2 connection carried, observed when it closed.",
          {0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000, 100000})),
      dial_duration_(prometheus::BuildHistogram()
                         .Name("egress_upstream_dial_duration_seconds")
                         .Help("Phases of opening an upstream connection: dns, connect, tls.")
                         .Register(*histograms_)),
      dial_dns_(dial_duration_.Add({{"phase", "dns"}}, kLatencyBuckets)),
      dial_connect_(dial_duration_.Add({{"phase", "connect"}}, kLatencyBuckets)),
      dial_tls_(dial_duration_.Add({{"phase", "tls"}}, kLatencyBuckets)),
      max_origins_(max_origins) {}

void Metrics::SetMaxOrigins(size_t max_origins) {
  std::lock_guard<std::mutex> lock(mu_);
  max_origins_ = max_origins;
  EvictDownTo(max_origins_);
}

size_t Metrics::labelled_origins() const {
  return origins_.size() - (origins_.contains(kOther) ? 1 : 0);
}

bool Metrics::EvictDownTo(size_t keep) {
  // Only quiet rows: a live connection's gauges and drains must end in the row they
  // started in.
  while (labelled_origins() > keep && !quiet_.empty()) {
    origins_.erase(quiet_.back());
    quiet_.pop_back();
    ++evictions_;
  }
  return labelled_origins() <= keep;
}

void Metrics::TrackLive(const transport::Origin& origin, OriginCounts& c, int delta) {
  std::string key = origin.Key();
  if (!origins_.contains(key)) {
    int64_t& live = live_in_other_[key];
    live += delta;
    if (live <= 0) live_in_other_.erase(key);
  } else if (c.live() && c.quiet) {
    quiet_.erase(*c.quiet);
    c.quiet.reset();
  } else if (!c.live() && !c.quiet) {
    quiet_.push_front(std::move(key));
    c.quiet = quiet_.begin();
  }
}

Metrics::OriginCounts& Metrics::For(const transport::Origin& origin) {
  std::string key = origin.Key();
  auto it = origins_.find(key);
  if (it != origins_.end()) {
    if (it->second.quiet) quiet_.splice(quiet_.begin(), quiet_, *it->second.quiet);
    return it->second;
  }
  if (live_in_other_.contains(key) || max_origins_ == 0 || !EvictDownTo(max_origins_ - 1)) {
    return origins_[kOther];
  }
  quiet_.push_front(key);  // until its first connection opens
  OriginCounts& row = origins_[std::move(key)];
  row.quiet = quiet_.begin();
  return row;
}

int64_t& Metrics::Gauge(OriginCounts& counts, ConnectionState state) {
  switch (state) {
    case ConnectionState::kIdle: return counts.idle;
    case ConnectionState::kDraining: return counts.draining;
    default: return counts.active;
  }
}

void Metrics::OnUpstreamRequest(const transport::Origin& origin, bool reused) {
  std::lock_guard<std::mutex> lock(mu_);
  OriginCounts& c = For(origin);
  ++(reused ? c.requests_reused : c.requests_new);
}

void Metrics::OnConnectionOpened(const transport::Origin& origin,
                                 const transport::DialTiming& timing) {
  dial_dns_.Observe(absl::ToDoubleSeconds(timing.dns));
  dial_connect_.Observe(absl::ToDoubleSeconds(timing.connect));
  if (origin.tls) dial_tls_.Observe(absl::ToDoubleSeconds(timing.tls_handshake));
  std::lock_guard<std::mutex> lock(mu_);
  OriginCounts& c = For(origin);
  ++c.opened;
  if (timing.tls_resumed) ++c.tls_handshakes[*timing.tls_resumed];
  ++c.active;
  TrackLive(origin, c, +1);
}

void Metrics::OnConnectionStateChanged(const transport::Origin& origin, ConnectionState from,
                                       ConnectionState to) {
  std::lock_guard<std::mutex> lock(mu_);
  OriginCounts& c = For(origin);
  --Gauge(c, from);
  ++Gauge(c, to);
}

void Metrics::OnConnectionClosed(const transport::Origin& origin, CloseReason reason,
                                 ConnectionState from) {
  std::lock_guard<std::mutex> lock(mu_);
  OriginCounts& c = For(origin);
  ++c.closed[static_cast<size_t>(reason)];
  --Gauge(c, from);
  TrackLive(origin, c, -1);
  // Slots taken away at run time are given up as their origins' last connections close.
  if (labelled_origins() > max_origins_) EvictDownTo(max_origins_);
}

void Metrics::OnDrainStarted(const transport::Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  OriginCounts& c = For(origin);
  ++c.drains_started;
  --c.active;
  ++c.draining;
}

Metrics::OriginCounts& Metrics::EndDrain(const transport::Origin& origin, uint64_t bytes,
                                         absl::Duration duration) {
  drain_duration_.Observe(absl::ToDoubleSeconds(duration));
  OriginCounts& c = For(origin);
  c.drain_bytes += bytes;
  --c.draining;
  ++c.active;
  return c;
}

void Metrics::OnDrainCompleted(const transport::Origin& origin, uint64_t bytes,
                               absl::Duration duration) {
  std::lock_guard<std::mutex> lock(mu_);
  ++EndDrain(origin, bytes, duration).drains_completed;
}

void Metrics::OnDrainAbandoned(const transport::Origin& origin, DrainAbandonReason reason,
                               uint64_t bytes, absl::Duration duration) {
  std::lock_guard<std::mutex> lock(mu_);
  ++EndDrain(origin, bytes, duration).abandoned[static_cast<size_t>(reason)];
}

void Metrics::OnDrainSkipped(const transport::Origin& origin, DrainSkipReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).skipped[static_cast<size_t>(reason)];
}

void Metrics::OnRetryBudgetExhausted(const transport::Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).retry_budget_exhausted;
}

void Metrics::OnRetry(const transport::Origin& origin, transport::RetryReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).retries[static_cast<size_t>(reason)];
}

void Metrics::OnPoolWait(const transport::Origin&, absl::Duration waited) {
  pool_wait_.Observe(absl::ToDoubleSeconds(waited));
}

void Metrics::OnPolicyDenied(const transport::Origin&, transport::DenyReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++policy_denied_[static_cast<size_t>(reason)];
}

void Metrics::OnPolicyWouldDeny(const transport::Origin&, absl::string_view rule) {
  std::lock_guard<std::mutex> lock(mu_);
  ++policy_would_deny_[rule];
}

void Metrics::OnOriginCost(const transport::Origin& origin, const transport::OriginCost& cost) {
  std::lock_guard<std::mutex> lock(mu_);
  For(origin).cost = cost;
}

void Metrics::OnDrainBudget(uint64_t in_use, uint64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_in_use_ = in_use;
  budget_peak_ = std::max(budget_peak_, in_use);
  budget_limit_ = limit;
}

void Metrics::OnDrainAwareAcquisition(const transport::Origin& origin,
                                      transport::DrainAwareChoice choice, bool got_drained) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).drain_aware[static_cast<size_t>(choice)][got_drained];
}

void Metrics::OnUpstreamLimit(const transport::Origin&, transport::UpstreamLimit limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++upstream_limits_[static_cast<size_t>(limit)];
}

void Metrics::OnTransportException() {
  std::lock_guard<std::mutex> lock(mu_);
  ++transport_exceptions_;
}

void Metrics::CollectUpstreamInput(std::vector<MetricFamily>& families) const {
  MetricFamily limits = Family("egress_upstream_protocol_errors_total",
                               "Responses that went past a bound on upstream input, by the "
                               "bound; the fetch failed and the connection was closed.",
                               MetricType::Counter);
  MetricFamily exceptions = Family("egress_transport_exceptions_total",
                                   "Exceptions caught at the transport's I/O handlers; the "
                                   "connection involved was closed.",
                                   MetricType::Counter);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < upstream_limits_.size(); ++i) {
    AddSample(limits,
              {{"limit", std::string(ToString(static_cast<transport::UpstreamLimit>(i)))}},
              upstream_limits_[i]);
  }
  AddSample(exceptions, {}, transport_exceptions_);
  families.push_back(std::move(limits));
  families.push_back(std::move(exceptions));
}

void Metrics::OnSurplusConnection(const transport::Origin& origin, bool kept) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).surplus[kept];
}

void Metrics::OnDnsLookup(transport::DnsResult result) {
  std::lock_guard<std::mutex> lock(mu_);
  ++dns_lookups_[static_cast<size_t>(result)];
}

void Metrics::OnDnsCacheHit() {
  std::lock_guard<std::mutex> lock(mu_);
  ++dns_cache_hits_;
}

void Metrics::OnDnsLookupAvoided() {
  std::lock_guard<std::mutex> lock(mu_);
  ++dns_lookups_avoided_;
}

void Metrics::OnDnsStaleServed() {
  std::lock_guard<std::mutex> lock(mu_);
  ++dns_stale_served_;
}

void Metrics::OnConnectAttempt(transport::ConnectAttemptResult result) {
  std::lock_guard<std::mutex> lock(mu_);
  ++connect_attempts_[static_cast<size_t>(result)];
}

void Metrics::OnAccessLogWritten(uint64_t lines) {
  std::lock_guard<std::mutex> lock(mu_);
  access_log_written_ += lines;
}

void Metrics::OnAccessLogDropped(AccessLogDrop reason, uint64_t lines) {
  std::lock_guard<std::mutex> lock(mu_);
  access_log_dropped_[static_cast<size_t>(reason)] += lines;
}

void Metrics::CollectAccessLog(std::vector<MetricFamily>& families) const {
  MetricFamily written = Family("egress_access_log_lines_total",
                                "Access log lines written to the sink.", MetricType::Counter);
  MetricFamily dropped = Family("egress_access_log_dropped_total",
                                "Access log lines not written, by reason (queue_full: the "
                                "sink is slow or blocked; rate_limited; write_error).",
                                MetricType::Counter);
  std::lock_guard<std::mutex> lock(mu_);
  AddSample(written, {}, access_log_written_);
  for (size_t i = 0; i < access_log_dropped_.size(); ++i) {
    AddSample(dropped, {{"reason", std::string(ToString(static_cast<AccessLogDrop>(i)))}},
              access_log_dropped_[i]);
  }
  families.push_back(std::move(written));
  families.push_back(std::move(dropped));
}

void Metrics::CollectDialing(std::vector<MetricFamily>& families) const {
  MetricFamily hits = Family("egress_dns_cache_hits_total",
                             "Names answered from the DNS cache (fresh or negative answers).",
                             MetricType::Counter);
  MetricFamily avoided = Family("egress_dns_lookups_avoided_total",
                                "Names not looked up because a name rule of the policy "
                                "(deny_hosts, a caller's rule) denied them first.",
                                MetricType::Counter);
  MetricFamily stale = Family("egress_dns_stale_served_total",
                              "Expired cached answers used because the resolver failed "
                              "(within transport.dns.stale_for).",
                              MetricType::Counter);
  MetricFamily attempts = Family("egress_connect_attempts_total",
                                 "TCP connects to one address, by how they ended (happy "
                                 "eyeballs: abandoned = another address connected first).",
                                 MetricType::Counter);
  std::lock_guard<std::mutex> lock(mu_);
  AddSample(hits, {}, dns_cache_hits_);
  AddSample(avoided, {}, dns_lookups_avoided_);
  AddSample(stale, {}, dns_stale_served_);
  for (size_t i = 0; i < connect_attempts_.size(); ++i) {
    AddSample(attempts,
              {{"result", std::string(ToString(static_cast<transport::ConnectAttemptResult>(i)))}},
              connect_attempts_[i]);
  }
  families.push_back(std::move(hits));
  families.push_back(std::move(avoided));
  families.push_back(std::move(stale));
  families.push_back(std::move(attempts));
}

void Metrics::OnCircuitBreakerStateChanged(const transport::Origin& origin,
                                           transport::BreakerState from,
                                           transport::BreakerState to) {
  std::lock_guard<std::mutex> lock(mu_);
  if (from != transport::BreakerState::kClosed) --breakers_by_state_[static_cast<size_t>(from)];
  if (to != transport::BreakerState::kClosed) ++breakers_by_state_[static_cast<size_t>(to)];
  if (to == transport::BreakerState::kOpen) ++For(origin).breaker_opened;
}

void Metrics::OnCircuitBreakerRejected(const transport::Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).breaker_rejected;
}

void Metrics::OnStreamOpened(const transport::Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).streams;
}

void Metrics::OnStreamClosed(const transport::Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  --For(origin).streams;
}

void Metrics::OnStreamReset(const transport::Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  ++For(origin).streams_reset;
}

void Metrics::OnHttp2ConnectionClosed(uint64_t streams) {
  http2_streams_per_connection_.Observe(static_cast<double>(streams));
}

void Metrics::OnFetchDone(grpc::StatusCode code, absl::Duration duration) {
  fetch_duration_.Observe(absl::ToDoubleSeconds(duration));
  const auto index = static_cast<size_t>(code);
  std::lock_guard<std::mutex> lock(mu_);
  if (index < fetches_by_code_.size()) ++fetches_by_code_[index];
}

void Metrics::OnBufferedBodyBytes(uint64_t in_use) {
  std::lock_guard<std::mutex> lock(mu_);
  buffered_body_bytes_ = in_use;
}

absl::string_view Metrics::CallerLabel(absl::string_view caller) {
  // Looked up without a copy: every fetch comes here, under the lock.
  if (auto it = caller_labels_.find(caller); it != caller_labels_.end()) return *it;
  if (caller_labels_.size() >= kMaxCallerLabels) return "other";
  return *caller_labels_.emplace(caller).first;
}

void Metrics::OnQuotaRejected(absl::string_view rule, absl::string_view caller,
                              QuotaLimit limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++quota_rejected_[{std::string(rule), std::string(CallerLabel(caller))}]
                   [static_cast<size_t>(limit)];
}

void Metrics::OnCallerCost(absl::string_view caller, const CallerCost& cost) {
  std::lock_guard<std::mutex> lock(mu_);
  caller_costs_[CallerLabel(caller)] += cost;
}

void Metrics::CollectCallerCosts(std::vector<MetricFamily>& families) const {
  struct Column {
    const char* name;
    const char* help;
    uint64_t CallerCost::*field;
  };
  static constexpr Column kColumns[] = {
      {"egress_caller_fetches_total", "Fetch and FetchStream RPCs, by caller.",
       &CallerCost::fetches},
      {"egress_caller_request_bytes_total", "Request body bytes sent upstream, by caller.",
       &CallerCost::request_bytes},
      {"egress_caller_response_bytes_total",
       "Response body bytes given to the caller, by caller.", &CallerCost::response_bytes},
      {"egress_caller_connections_opened_total",
       "Upstream connections dialed for a caller's requests, by caller.",
       &CallerCost::connections_opened},
      {"egress_caller_tls_handshakes_total",
       "TLS handshakes (full or resumed) of the connections dialed for a caller, by caller.",
       &CallerCost::tls_handshakes},
      {"egress_caller_drain_bytes_total",
       "Body bytes read and discarded on a caller's behalf (its unread bodies), by caller.",
       &CallerCost::drain_bytes},
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (const Column& column : kColumns) {
    MetricFamily family = Family(column.name, column.help, MetricType::Counter);
    for (const auto& [caller, cost] : caller_costs_) {
      AddSample(family, {{"caller", caller}}, cost.*column.field);
    }
    families.push_back(std::move(family));
  }
}

void Metrics::OnQuotaStoreError(bool failed_closed) {
  std::lock_guard<std::mutex> lock(mu_);
  ++quota_store_errors_[failed_closed ? 1 : 0];
}

void Metrics::CollectQuotas(std::vector<MetricFamily>& families) const {
  MetricFamily rejected = Family("egress_quota_rejected_total",
                                 "Upstream requests refused by a quota rule (Config.quotas), "
                                 "by rule, caller and limit.",
                                 MetricType::Counter);
  MetricFamily store_errors = Family("egress_quota_store_errors_total",
                                     "Global quota checks the quota store (Redis) could not "
                                     "answer, by what the fetch did: fail_open or fail_closed.",
                                     MetricType::Counter);
  std::lock_guard<std::mutex> lock(mu_);
  AddSample(store_errors, {{"outcome", "fail_open"}}, quota_store_errors_[0]);
  AddSample(store_errors, {{"outcome", "fail_closed"}}, quota_store_errors_[1]);
  for (const auto& [key, counts] : quota_rejected_) {
    for (size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] == 0) continue;
      AddSample(rejected,
                {{"rule", key.first},
                 {"caller", key.second},
                 {"limit", std::string(ToString(static_cast<QuotaLimit>(i)))}},
                counts[i]);
    }
  }
  families.push_back(std::move(rejected));
  families.push_back(std::move(store_errors));
}

std::vector<MetricFamily> Metrics::Collect() const {
  MetricFamily requests = Family("egress_upstream_requests_total",
                                 "Requests sent upstream, on a new or a reused connection.",
                                 MetricType::Counter);
  MetricFamily opened = Family("egress_upstream_connections_opened_total",
                               "Upstream connections opened (TCP connected, TLS done).",
                               MetricType::Counter);
  MetricFamily tls = Family("egress_tls_handshakes_total",
                            "TLS handshakes of opened upstream connections: full, or resumed "
                            "(transport.tls_session_resumption).",
                            MetricType::Counter);
  MetricFamily closed = Family("egress_upstream_connections_closed_total",
                               "Opened upstream connections closed, by reason.",
                               MetricType::Counter);
  MetricFamily started = Family("egress_drains_started_total",
                                "Background drains of unread response bodies started.",
                                MetricType::Counter);
  MetricFamily completed = Family("egress_drains_completed_total",
                                  "Drains that reached the end of the body within the caps.",
                                  MetricType::Counter);
  MetricFamily abandoned = Family("egress_drains_abandoned_total",
                                  "Drains given up, by reason; the connection was closed.",
                                  MetricType::Counter);
  MetricFamily skipped = Family("egress_drains_skipped_total",
                                "Unread bodies not drained, by reason; the connection was closed.",
                                MetricType::Counter);
  MetricFamily bytes = Family("egress_drain_bytes_total", "Bytes read and discarded by drains.",
                              MetricType::Counter);
  MetricFamily retries = Family("egress_upstream_retries_total",
                                "Fetches sent again, by reason: stale (a dead pooled "
                                "connection), connect_failed, reset, status (502/503/504), "
                                "refused_stream (HTTP/2: not processed by the server).",
                                MetricType::Counter);
  MetricFamily budget_exhausted = Family(
      "egress_retry_budget_exhausted_total",
      "Retries not made because the origin's retry budget was spent.", MetricType::Counter);
  MetricFamily breaker_opened = Family(
      "egress_circuit_breaker_opened_total",
      "Times an origin's circuit breaker opened (transport.circuit_breaker).",
      MetricType::Counter);
  MetricFamily breaker_rejected = Family(
      "egress_circuit_breaker_rejected_total",
      "Fetches failed at once (UNAVAILABLE, CIRCUIT_OPEN) by an open circuit breaker.",
      MetricType::Counter);
  MetricFamily breakers = Family("egress_circuit_breakers",
                                 "Origins whose circuit breaker is open or half-open.",
                                 MetricType::Gauge);
  MetricFamily pool = Family("egress_pool_connections",
                             "Opened upstream connections by state.", MetricType::Gauge);
  MetricFamily streams = Family("egress_http2_streams",
                                "HTTP/2 streams open on the origin's connections.",
                                MetricType::Gauge);
  MetricFamily streams_reset = Family(
      "egress_http2_streams_reset_total",
      "HTTP/2 response bodies let go of unread and ended with RST_STREAM(CANCEL) instead of "
      "a drain; the connection carried on.",
      MetricType::Counter);
  MetricFamily fetches = Family("egress_fetches_total", "Fetch and FetchStream RPCs by gRPC code.",
                                MetricType::Counter);
  MetricFamily denied = Family("egress_policy_denied_total",
                               "Destinations refused by the egress policy, by reason.",
                               MetricType::Counter);
  MetricFamily would_deny = Family(
      "egress_policy_would_deny_total",
      "Fetches a report-only rule (policy.report_only) would have denied, by rule.",
      MetricType::Counter);
  MetricFamily dial_cost = Family("egress_origin_dial_seconds",
                                  "Moving estimate of a new connection's time (DNS, connect, TLS).",
                                  MetricType::Gauge);
  MetricFamily body_rate = Family("egress_origin_body_bytes_per_second",
                                  "Moving estimate of how fast drained bodies arrive (warm "
                                  "connections, drains of 16 KiB or more).",
                                  MetricType::Gauge);
  MetricFamily drain_time = Family("egress_origin_drain_seconds",
                                   "Moving estimate of how long a completed drain takes.",
                                   MetricType::Gauge);
  MetricFamily drain_aware = Family(
      "egress_drain_aware_acquisitions_total",
      "Requests that found no idle connection while one was draining (ADAPTIVE): whether "
      "they waited or dialed, and which connection carried them.",
      MetricType::Counter);
  MetricFamily surplus = Family(
      "egress_surplus_connections_total",
      "Dials that lost the race to a drained connection: kept idle, or closed (pool full).",
      MetricType::Counter);
  MetricFamily labels = Family("egress_origin_labels",
                               "Origin label slots: in use, and the limit "
                               "(metrics.max_origin_labels).",
                               MetricType::Gauge);
  MetricFamily evictions = Family(
      "egress_origin_label_evictions_total",
      "Origins whose label slot went to a new origin (least recently used, no live "
      "connection); their series were removed.",
      MetricType::Counter);
  MetricFamily budget = Family("egress_drain_budget_bytes",
                               "The global budget of bytes ADAPTIVE drains may read at once: "
                               "in use, the most ever in use, and the limit.",
                               MetricType::Gauge);
  MetricFamily dns = Family("egress_dns_lookups_total",
                            "Name lookups asked of the resolver (cache hits are not), by result "
                            "(over_limit: refused by transport.dns limits).",
                            MetricType::Counter);
  MetricFamily buffered = Family("egress_buffered_body_bytes",
                                 "Response body bytes that fetches hold in memory now "
                                 "(limits.buffered_body_budget_bytes is the limit).",
                                 MetricType::Gauge);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, c] : origins_) {
      const ClientMetric::Label origin{"origin", key};
      AddSample(requests, {origin, {"connection", "new"}}, c.requests_new);
      AddSample(requests, {origin, {"connection", "reused"}}, c.requests_reused);
      AddSample(opened, {origin}, c.opened);
      // https origins (and "other" once it has any): a plain origin's would never move.
      if (absl::StartsWith(key, "https:") || c.tls_handshakes[false] + c.tls_handshakes[true]) {
        AddSample(tls, {origin, {"resumed", "false"}}, c.tls_handshakes[false]);
        AddSample(tls, {origin, {"resumed", "true"}}, c.tls_handshakes[true]);
      }
      for (size_t i = 0; i < c.closed.size(); ++i) {
        AddSample(closed, {origin, {"reason", std::string(ToString(static_cast<CloseReason>(i)))}},
                  c.closed[i]);
      }
      AddSample(started, {origin}, c.drains_started);
      AddSample(completed, {origin}, c.drains_completed);
      for (size_t i = 0; i < c.abandoned.size(); ++i) {
        AddSample(abandoned,
                  {origin, {"reason", std::string(ToString(static_cast<DrainAbandonReason>(i)))}},
                  c.abandoned[i]);
      }
      for (size_t i = 0; i < c.skipped.size(); ++i) {
        AddSample(skipped,
                  {origin, {"reason", std::string(ToString(static_cast<DrainSkipReason>(i)))}},
                  c.skipped[i]);
      }
      AddSample(bytes, {origin}, c.drain_bytes);
      for (size_t i = 0; i < c.retries.size(); ++i) {
        AddSample(retries,
                  {origin, {"reason", std::string(ToString(static_cast<transport::RetryReason>(i)))}},
                  c.retries[i]);
      }
      AddSample(budget_exhausted, {origin}, c.retry_budget_exhausted);
      AddSample(breaker_opened, {origin}, c.breaker_opened);
      AddSample(breaker_rejected, {origin}, c.breaker_rejected);
      AddSample(pool, {origin, {"state", "idle"}}, c.idle);
      AddSample(pool, {origin, {"state", "active"}}, c.active);
      AddSample(pool, {origin, {"state", "draining"}}, c.draining);
      AddSample(streams, {origin}, c.streams);
      AddSample(streams_reset, {origin}, c.streams_reset);
      if (c.cost.dial) AddSample(dial_cost, {origin}, absl::ToDoubleSeconds(*c.cost.dial));
      if (c.cost.body_bytes_per_second) {
        AddSample(body_rate, {origin}, *c.cost.body_bytes_per_second);
      }
      if (c.cost.drain_time) {
        AddSample(drain_time, {origin}, absl::ToDoubleSeconds(*c.cost.drain_time));
      }
      for (auto choice : {transport::DrainAwareChoice::kWait, transport::DrainAwareChoice::kDial}) {
        for (bool got_drained : {false, true}) {
          AddSample(drain_aware,
                    {origin,
                     {"choice", std::string(ToString(choice))},
                     {"connection", got_drained ? "drained" : "new"}},
                    c.drain_aware[static_cast<size_t>(choice)][got_drained]);
        }
      }
      AddSample(surplus, {origin, {"fate", "kept_idle"}}, c.surplus[true]);
      AddSample(surplus, {origin, {"fate", "closed"}}, c.surplus[false]);
    }
    AddSample(labels, {{"state", "in_use"}}, labelled_origins());
    AddSample(labels, {{"state", "limit"}}, max_origins_);
    AddSample(evictions, {}, evictions_);
    AddSample(budget, {{"state", "in_use"}}, budget_in_use_);
    AddSample(budget, {{"state", "peak"}}, budget_peak_);
    AddSample(budget, {{"state", "limit"}}, budget_limit_);
    AddSample(buffered, {}, buffered_body_bytes_);
    for (auto state : {transport::BreakerState::kOpen, transport::BreakerState::kHalfOpen}) {
      AddSample(breakers, {{"state", std::string(ToString(state))}},
                breakers_by_state_[static_cast<size_t>(state)]);
    }
    for (size_t i = 0; i < fetches_by_code_.size(); ++i) {
      AddSample(fetches, {{"code", std::string(GrpcCodeName(static_cast<grpc::StatusCode>(i)))}},
                fetches_by_code_[i]);
    }
    for (size_t i = 0; i < policy_denied_.size(); ++i) {
      AddSample(denied,
                {{"reason", std::string(ToString(static_cast<transport::DenyReason>(i)))}},
                policy_denied_[i]);
    }
    for (const auto& [rule, count] : policy_would_deny_) {
      AddSample(would_deny, {{"rule", rule}}, count);
    }
    for (size_t i = 0; i < dns_lookups_.size(); ++i) {
      AddSample(dns, {{"result", std::string(ToString(static_cast<transport::DnsResult>(i)))}},
                dns_lookups_[i]);
    }
  }
  std::vector<MetricFamily> families = {
      requests,       opened,           closed,     started,   completed,  abandoned,
      skipped,        bytes,            retries,    budget_exhausted, breaker_opened,
      breaker_rejected,
      breakers,       pool,             streams,    streams_reset,         fetches,    denied,    would_deny, dial_cost,
      body_rate,      drain_time,       drain_aware, surplus,  budget,     dns,
      buffered,       labels,           evictions,  tls};
  CollectUpstreamInput(families);
  CollectDialing(families);
  CollectAccessLog(families);
  CollectQuotas(families);
  CollectCallerCosts(families);
  for (auto& family : histograms_->Collect()) families.push_back(std::move(family));
  return families;
}

}  // namespace egress

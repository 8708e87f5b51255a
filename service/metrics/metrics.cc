#include "service/metrics/metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "prometheus/client_metric.h"
#include "prometheus/family.h"
#include "prometheus/metric_family.h"
#include "service/metrics/families.h"

namespace egress {
namespace {

using metrics::Id;
using metrics::Spec;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using transport::CloseReason;
using transport::ConnectionState;
using transport::DrainAbandonReason;
using transport::DrainSkipReason;

constexpr const char* kOther = "other";

prometheus::Family<prometheus::Histogram>& RegisterHistogram(prometheus::Registry& registry,
                                                             Id id) {
  return prometheus::BuildHistogram().Name(Spec(id).name).Help(Spec(id).help).Register(registry);
}

// A histogram family's bucket boundaries, as prometheus-cpp takes them.
prometheus::Histogram::BucketBoundaries Buckets(Id id) {
  return {Spec(id).buckets.begin(), Spec(id).buckets.end()};
}

// A histogram family without labels, and its one histogram.
prometheus::Histogram& MakeHistogram(prometheus::Registry& registry, Id id) {
  return RegisterHistogram(registry, id).Add({}, Buckets(id));
}

// An empty family, named and typed as kFamilies declares it.
MetricFamily Family(Id id) {
  return MetricFamily{Spec(id).name, Spec(id).help, Spec(id).type, {}};
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
      drain_duration_(MakeHistogram(*histograms_, Id::kDrainDuration)),
      fetch_duration_(MakeHistogram(*histograms_, Id::kFetchDuration)),
      pool_wait_(MakeHistogram(*histograms_, Id::kPoolWait)),
      http2_streams_per_connection_(MakeHistogram(*histograms_, Id::kHttp2StreamsPerConnection)),
      dial_duration_(RegisterHistogram(*histograms_, Id::kDialDuration)),
      dial_dns_(dial_duration_.Add({{"phase", "dns"}}, Buckets(Id::kDialDuration))),
      dial_connect_(dial_duration_.Add({{"phase", "connect"}}, Buckets(Id::kDialDuration))),
      dial_tls_(dial_duration_.Add({{"phase", "tls"}}, Buckets(Id::kDialDuration))),
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
  MetricFamily limits = Family(Id::kUpstreamProtocolErrors);
  MetricFamily exceptions = Family(Id::kTransportExceptions);
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
  MetricFamily written = Family(Id::kAccessLogLines);
  MetricFamily dropped = Family(Id::kAccessLogDropped);
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
  MetricFamily hits = Family(Id::kDnsCacheHits);
  MetricFamily avoided = Family(Id::kDnsLookupsAvoided);
  MetricFamily stale = Family(Id::kDnsStaleServed);
  MetricFamily attempts = Family(Id::kConnectAttempts);
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
    Id id;
    uint64_t CallerCost::*field;
  };
  static constexpr Column kColumns[] = {
      {Id::kCallerFetches, &CallerCost::fetches},
      {Id::kCallerRequestBytes, &CallerCost::request_bytes},
      {Id::kCallerResponseBytes, &CallerCost::response_bytes},
      {Id::kCallerConnectionsOpened, &CallerCost::connections_opened},
      {Id::kCallerTlsHandshakes, &CallerCost::tls_handshakes},
      {Id::kCallerDrainBytes, &CallerCost::drain_bytes},
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (const Column& column : kColumns) {
    MetricFamily family = Family(column.id);
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
  MetricFamily rejected = Family(Id::kQuotaRejected);
  MetricFamily store_errors = Family(Id::kQuotaStoreErrors);
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
  MetricFamily requests = Family(Id::kUpstreamRequests);
  MetricFamily opened = Family(Id::kConnectionsOpened);
  MetricFamily tls = Family(Id::kTlsHandshakes);
  MetricFamily closed = Family(Id::kConnectionsClosed);
  MetricFamily started = Family(Id::kDrainsStarted);
  MetricFamily completed = Family(Id::kDrainsCompleted);
  MetricFamily abandoned = Family(Id::kDrainsAbandoned);
  MetricFamily skipped = Family(Id::kDrainsSkipped);
  MetricFamily bytes = Family(Id::kDrainBytes);
  MetricFamily retries = Family(Id::kRetries);
  MetricFamily budget_exhausted = Family(Id::kRetryBudgetExhausted);
  MetricFamily breaker_opened = Family(Id::kBreakerOpened);
  MetricFamily breaker_rejected = Family(Id::kBreakerRejected);
  MetricFamily breakers = Family(Id::kBreakers);
  MetricFamily pool = Family(Id::kPoolConnections);
  MetricFamily streams = Family(Id::kHttp2Streams);
  MetricFamily streams_reset = Family(Id::kHttp2StreamsReset);
  MetricFamily fetches = Family(Id::kFetches);
  MetricFamily denied = Family(Id::kPolicyDenied);
  MetricFamily would_deny = Family(Id::kPolicyWouldDeny);
  MetricFamily dial_cost = Family(Id::kOriginDialSeconds);
  MetricFamily body_rate = Family(Id::kOriginBodyBytesPerSecond);
  MetricFamily drain_time = Family(Id::kOriginDrainSeconds);
  MetricFamily drain_aware = Family(Id::kDrainAwareAcquisitions);
  MetricFamily surplus = Family(Id::kSurplusConnections);
  MetricFamily labels = Family(Id::kOriginLabels);
  MetricFamily evictions = Family(Id::kOriginLabelEvictions);
  MetricFamily budget = Family(Id::kDrainBudget);
  MetricFamily dns = Family(Id::kDnsLookups);
  MetricFamily buffered = Family(Id::kBufferedBodyBytes);
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

// Metrics as a prometheus::Collectable: one consistent snapshot of the counts, as the
// families service/metrics/families.h declares.
#include "service/metrics/metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
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
using transport::DrainAbandonReason;
using transport::DrainSkipReason;

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

void Metrics::CollectQuotas(std::vector<MetricFamily>& families) const {
  MetricFamily rejected = Family(Id::kQuotaRejected);
  MetricFamily store_errors = Family(Id::kQuotaStoreErrors);
  MetricFamily refused = Family(Id::kCallsRefused);
  std::lock_guard<std::mutex> lock(mu_);
  AddSample(store_errors, {{"outcome", "fail_open"}}, quota_store_errors_[0]);
  AddSample(store_errors, {{"outcome", "fail_closed"}}, quota_store_errors_[1]);
  for (size_t i = 0; i < calls_refused_.size(); ++i) {
    AddSample(refused, {{"reason", std::string(ToString(static_cast<CallRefusal>(i)))}},
              calls_refused_[i]);
  }
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
  families.push_back(std::move(refused));
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
    // One origin's row; `https` for an https origin.
    const auto add_row = [&](std::string label, bool https, const OriginCounts& c) {
      const ClientMetric::Label origin{"origin", std::move(label)};
      AddSample(requests, {origin, {"connection", "new"}}, c.requests_new);
      AddSample(requests, {origin, {"connection", "reused"}}, c.requests_reused);
      AddSample(opened, {origin}, c.opened);
      // https origins (and "other" once it has any): a plain origin's would never move.
      if (https || c.tls_handshakes[false] + c.tls_handshakes[true]) {
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
    };
    for (const auto& [key, c] : origins_) add_row(key.Key(), key.tls, c);
    if (other_) add_row("other", false, *other_);
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

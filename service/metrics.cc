#include "service/metrics.h"

#include <string>

#include "prometheus/family.h"

namespace egress {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using transport::CloseReason;
using transport::DrainAbandonReason;
using transport::DrainSkipReason;

// Drains are capped at tens of milliseconds by default; the buckets resolve that range.
const prometheus::Histogram::BucketBoundaries kDrainBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

constexpr const char* kOther = "other";

}  // namespace

Metrics::Metrics(size_t max_origins)
    : max_origins_(max_origins),
      registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter()
                    .Name("egress_upstream_requests_total")
                    .Help("Requests sent upstream, by whether the connection was new or reused.")
                    .Register(*registry_)),
      opened_(BuildCounter()
                  .Name("egress_upstream_connections_opened_total")
                  .Help("Upstream connections opened (TCP connected and TLS done).")
                  .Register(*registry_)),
      closed_(BuildCounter()
                  .Name("egress_upstream_connections_closed_total")
                  .Help("Upstream connections closed, by reason.")
                  .Register(*registry_)),
      drains_started_(BuildCounter()
                          .Name("egress_drains_started_total")
                          .Help("Background drains of unread response bodies started.")
                          .Register(*registry_)),
      drains_completed_(BuildCounter()
                            .Name("egress_drains_completed_total")
                            .Help("Drains that reached the end of the body within the caps.")
                            .Register(*registry_)),
      drains_abandoned_(BuildCounter()
                            .Name("egress_drains_abandoned_total")
                            .Help("Drains given up, by reason; the connection was closed.")
                            .Register(*registry_)),
      drains_skipped_(BuildCounter()
                          .Name("egress_drains_skipped_total")
                          .Help("Unread bodies not drained, by reason; the connection was closed.")
                          .Register(*registry_)),
      drain_bytes_(BuildCounter()
                       .Name("egress_drain_bytes_total")
                       .Help("Bytes read and discarded by drains.")
                       .Register(*registry_)),
      retries_(BuildCounter()
                   .Name("egress_upstream_retries_total")
                   .Help("Idempotent requests sent again because a pooled connection was dead.")
                   .Register(*registry_)),
      drain_duration_(BuildHistogram()
                          .Name("egress_drain_duration_seconds")
                          .Help("How long drains took, completed or abandoned.")
                          .Register(*registry_)
                          .Add({}, kDrainBuckets)) {}

Metrics::OriginMetrics Metrics::MakeOriginMetrics(const std::string& label) {
  OriginMetrics m;
  m.requests_new = &requests_.Add({{"origin", label}, {"connection", "new"}});
  m.requests_reused = &requests_.Add({{"origin", label}, {"connection", "reused"}});
  m.opened = &opened_.Add({{"origin", label}});
  for (size_t i = 0; i < m.closed.size(); ++i) {
    m.closed[i] = &closed_.Add(
        {{"origin", label}, {"reason", std::string(ToString(static_cast<CloseReason>(i)))}});
  }
  m.drains_started = &drains_started_.Add({{"origin", label}});
  m.drains_completed = &drains_completed_.Add({{"origin", label}});
  for (size_t i = 0; i < m.abandoned.size(); ++i) {
    m.abandoned[i] = &drains_abandoned_.Add(
        {{"origin", label},
         {"reason", std::string(ToString(static_cast<DrainAbandonReason>(i)))}});
  }
  for (size_t i = 0; i < m.skipped.size(); ++i) {
    m.skipped[i] = &drains_skipped_.Add(
        {{"origin", label}, {"reason", std::string(ToString(static_cast<DrainSkipReason>(i)))}});
  }
  m.drain_bytes = &drain_bytes_.Add({{"origin", label}});
  m.retries = &retries_.Add({{"origin", label}});
  return m;
}

Metrics::OriginMetrics& Metrics::For(const transport::Origin& origin) {
  const std::string key = origin.Key();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = origins_.find(key);
  if (it != origins_.end()) return *it->second;
  // Over the bound, a new origin shares the "other" children (made on first use).
  const bool bounded = origins_.size() >= max_origins_ && key != kOther;
  if (bounded) {
    auto other = origins_.find(kOther);
    if (other == origins_.end()) {
      other = origins_
                  .emplace(kOther, std::make_unique<OriginMetrics>(MakeOriginMetrics(kOther)))
                  .first;
    }
    return *other->second;
  }
  return *origins_.emplace(key, std::make_unique<OriginMetrics>(MakeOriginMetrics(key)))
              .first->second;
}

void Metrics::OnUpstreamRequest(const transport::Origin& origin, bool reused) {
  OriginMetrics& m = For(origin);
  (reused ? m.requests_reused : m.requests_new)->Increment();
}

void Metrics::OnConnectionOpened(const transport::Origin& origin) { For(origin).opened->Increment(); }

void Metrics::OnConnectionClosed(const transport::Origin& origin, CloseReason reason) {
  For(origin).closed[static_cast<size_t>(reason)]->Increment();
}

void Metrics::OnDrainStarted(const transport::Origin& origin) {
  For(origin).drains_started->Increment();
}

void Metrics::OnDrainCompleted(const transport::Origin& origin, uint64_t bytes,
                               absl::Duration duration) {
  OriginMetrics& m = For(origin);
  m.drains_completed->Increment();
  m.drain_bytes->Increment(static_cast<double>(bytes));
  drain_duration_.Observe(absl::ToDoubleSeconds(duration));
}

void Metrics::OnDrainAbandoned(const transport::Origin& origin, DrainAbandonReason reason,
                               uint64_t bytes, absl::Duration duration) {
  OriginMetrics& m = For(origin);
  m.abandoned[static_cast<size_t>(reason)]->Increment();
  m.drain_bytes->Increment(static_cast<double>(bytes));
  drain_duration_.Observe(absl::ToDoubleSeconds(duration));
}

void Metrics::OnDrainSkipped(const transport::Origin& origin, DrainSkipReason reason) {
  For(origin).skipped[static_cast<size_t>(reason)]->Increment();
}

void Metrics::OnRetry(const transport::Origin& origin) { For(origin).retries->Increment(); }

}  // namespace egress

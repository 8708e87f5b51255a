// Metrics as a transport::TransportObserver: the transport's events counted per origin
// and observed in the histograms.
#include "service/metrics/metrics.h"

#include <algorithm>

namespace egress {
namespace {

using transport::CloseReason;
using transport::ConnectionState;
using transport::DrainAbandonReason;
using transport::DrainSkipReason;

}  // namespace

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

}  // namespace egress

#ifndef EGRESS_TESTS_SUPPORT_COUNTING_OBSERVER_H_
#define EGRESS_TESTS_SUPPORT_COUNTING_OBSERVER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "service/fetch/fetch_observer.h"
#include "service/transport/observer.h"

namespace egress::testing {

// Counts the transport's and the front end's events in plain atomics, across origins.
class CountingObserver final : public transport::TransportObserver, public FetchObserver {
 public:
  void OnUpstreamRequest(const transport::Origin&, bool reused) override {
    ++(reused ? requests_reused : requests_new);
  }
  void OnConnectionOpened(const transport::Origin&,
                          const transport::DialTiming& timing) override {
    ++opened;
    if (timing.tls_resumed) ++(*timing.tls_resumed ? tls_resumed : tls_full);
  }
  void OnConnectionStateChanged(const transport::Origin&, transport::ConnectionState,
                                transport::ConnectionState) override {}
  void OnConnectionClosed(const transport::Origin&, transport::CloseReason reason,
                          transport::ConnectionState) override {
    ++closed[static_cast<size_t>(reason)];
  }
  void OnDrainStarted(const transport::Origin&) override { ++drains_started; }
  void OnDrainCompleted(const transport::Origin&, uint64_t bytes, absl::Duration) override {
    ++drains_completed;
    drain_bytes += bytes;
  }
  void OnDrainAbandoned(const transport::Origin&, transport::DrainAbandonReason reason,
                        uint64_t bytes, absl::Duration) override {
    ++abandoned[static_cast<size_t>(reason)];
    drain_bytes += bytes;
  }
  void OnDrainSkipped(const transport::Origin&, transport::DrainSkipReason reason) override {
    ++skipped[static_cast<size_t>(reason)];
  }
  void OnRetry(const transport::Origin&, transport::RetryReason reason) override {
    ++retries;
    ++retries_by_reason[static_cast<size_t>(reason)];
  }
  void OnRetryBudgetExhausted(const transport::Origin&) override { ++retry_budget_exhausted; }
  void OnPoolWait(const transport::Origin&, absl::Duration) override { ++pool_waits; }
  void OnPolicyDenied(const transport::Origin&, transport::DenyReason reason) override {
    ++policy_denied[static_cast<size_t>(reason)];
  }
  void OnPolicyWouldDeny(const transport::Origin&, absl::string_view rule) override {
    std::lock_guard<std::mutex> lock(would_deny_mu);
    ++would_deny[std::string(rule)];
  }
  // Fetches report-only `rule` would have denied.
  int WouldDeny(const std::string& rule) const {
    std::lock_guard<std::mutex> lock(would_deny_mu);
    const auto it = would_deny.find(rule);
    return it == would_deny.end() ? 0 : it->second;
  }
  void OnOriginCost(const transport::Origin&, const transport::OriginCost&) override {}
  void OnDrainBudget(uint64_t in_use, uint64_t limit) override {
    uint64_t peak = budget_peak.load();
    while (in_use > peak && !budget_peak.compare_exchange_weak(peak, in_use)) {
    }
    budget_in_use = in_use;
    budget_limit = limit;
  }
  void OnDrainAwareAcquisition(const transport::Origin&, transport::DrainAwareChoice choice,
                               bool got_drained) override {
    ++(choice == transport::DrainAwareChoice::kWait ? waited_for_drain : dialed_during_drain);
    if (got_drained) ++got_drained_connection;
  }
  void OnSurplusConnection(const transport::Origin&, bool kept) override {
    ++(kept ? surplus_kept : surplus_closed);
  }
  void OnUpstreamLimit(const transport::Origin&, transport::UpstreamLimit limit) override {
    ++upstream_limits[static_cast<size_t>(limit)];
  }
  void OnTransportException() override { ++exceptions; }
  int LimitHit(transport::UpstreamLimit l) const { return upstream_limits[static_cast<size_t>(l)]; }
  void OnDnsLookup(transport::DnsResult result) override {
    ++dns_lookups[static_cast<size_t>(result)];
  }
  int DnsLookups(transport::DnsResult r) const { return dns_lookups[static_cast<size_t>(r)]; }
  void OnDnsCacheHit() override { ++dns_cache_hits; }
  void OnDnsLookupAvoided() override { ++dns_lookups_avoided; }
  void OnDnsStaleServed() override { ++dns_stale_served; }
  void OnConnectAttempt(transport::ConnectAttemptResult result) override {
    ++connect_attempts[static_cast<size_t>(result)];
  }
  void OnCircuitBreakerStateChanged(const transport::Origin&, transport::BreakerState,
                                    transport::BreakerState to) override {
    ++breaker_transitions_to[static_cast<size_t>(to)];
  }
  void OnCircuitBreakerRejected(const transport::Origin&) override { ++breaker_rejected; }
  void OnStreamOpened(const transport::Origin&) override { ++streams_opened; }
  void OnStreamClosed(const transport::Origin&) override { ++streams_closed; }
  void OnStreamReset(const transport::Origin&) override { ++streams_reset; }
  void OnHttp2ConnectionClosed(uint64_t streams) override {
    std::lock_guard<std::mutex> lock(streams_mu);
    streams_per_closed_connection.push_back(streams);
  }
  std::vector<uint64_t> StreamsPerClosedConnection() const {
    std::lock_guard<std::mutex> lock(streams_mu);
    return streams_per_closed_connection;
  }
  int BreakerTransitionsTo(transport::BreakerState s) const {
    return breaker_transitions_to[static_cast<size_t>(s)];
  }
  int ConnectAttempts(transport::ConnectAttemptResult r) const {
    return connect_attempts[static_cast<size_t>(r)];
  }
  int Denied(transport::DenyReason r) const { return policy_denied[static_cast<size_t>(r)]; }
  int AllDenied() const {
    int total = 0;
    for (const auto& d : policy_denied) total += d;
    return total;
  }
  void OnFetchDone(grpc::StatusCode code, absl::Duration) override {
    if (static_cast<size_t>(code) < fetches.size()) ++fetches[static_cast<size_t>(code)];
  }
  void OnQuotaRejected(absl::string_view, absl::string_view, QuotaLimit limit) override {
    ++quota_rejected[static_cast<size_t>(limit)];
  }
  void OnCallerCost(absl::string_view caller, const CallerCost& cost) override {
    std::lock_guard<std::mutex> lock(caller_cost_mu);
    caller_costs[std::string(caller)] += cost;
  }
  CallerCost CostOf(const std::string& caller) const {
    std::lock_guard<std::mutex> lock(caller_cost_mu);
    const auto it = caller_costs.find(caller);
    return it == caller_costs.end() ? CallerCost{} : it->second;
  }
  void OnQuotaStoreError(bool failed_closed) override {
    ++quota_store_errors[failed_closed ? 1 : 0];
  }
  void OnBufferedBodyBytes(uint64_t in_use) override {
    uint64_t peak = buffered_body_peak.load();
    while (in_use > peak && !buffered_body_peak.compare_exchange_weak(peak, in_use)) {
    }
    buffered_body_bytes = in_use;
  }

  int Closed(transport::CloseReason r) const { return closed[static_cast<size_t>(r)]; }
  int Abandoned(transport::DrainAbandonReason r) const {
    return abandoned[static_cast<size_t>(r)];
  }
  int Skipped(transport::DrainSkipReason r) const { return skipped[static_cast<size_t>(r)]; }
  int Fetches(grpc::StatusCode code) const { return fetches[static_cast<size_t>(code)]; }
  void OnCallRefused(CallRefusal reason) override { ++refused[static_cast<size_t>(reason)]; }
  int Refused(CallRefusal reason) const { return refused[static_cast<size_t>(reason)]; }
  int AllClosed() const {
    int total = 0;
    for (const auto& c : closed) total += c;
    return total;
  }

  std::atomic<int> requests_new{0};
  std::atomic<int> requests_reused{0};
  std::atomic<int> opened{0};
  std::atomic<int> tls_full{0};     // TLS handshakes of opened connections, full
  std::atomic<int> tls_resumed{0};  // ... and resumed
  std::array<std::atomic<int>, transport::kCloseReasonCount> closed{};
  std::atomic<int> drains_started{0};
  std::atomic<int> drains_completed{0};
  std::array<std::atomic<int>, transport::kDrainAbandonReasonCount> abandoned{};
  std::array<std::atomic<int>, transport::kDrainSkipReasonCount> skipped{};
  std::atomic<uint64_t> drain_bytes{0};
  std::atomic<int> retries{0};
  std::array<std::atomic<int>, 3> breaker_transitions_to{};  // by BreakerState
  std::atomic<int> breaker_rejected{0};
  std::atomic<int> streams_opened{0};
  std::atomic<int> streams_closed{0};
  std::atomic<int> streams_reset{0};
  mutable std::mutex streams_mu;
  std::vector<uint64_t> streams_per_closed_connection;  // under streams_mu
  std::atomic<int> pool_waits{0};
  std::array<std::atomic<int>, 17> fetches{};
  std::array<std::atomic<int>, kCallRefusalCount> refused{};
  std::array<std::atomic<int>, transport::kDenyReasonCount> policy_denied{};
  mutable std::mutex would_deny_mu;
  std::map<std::string, int> would_deny;  // by rule
  std::atomic<uint64_t> budget_in_use{0};
  std::atomic<uint64_t> budget_peak{0};
  std::atomic<uint64_t> budget_limit{0};
  std::atomic<int> waited_for_drain{0};
  std::atomic<int> dialed_during_drain{0};
  std::atomic<int> got_drained_connection{0};
  std::atomic<int> surplus_kept{0};
  std::atomic<int> surplus_closed{0};
  std::array<std::atomic<int>, transport::kUpstreamLimitCount> upstream_limits{};
  std::atomic<int> exceptions{0};
  std::array<std::atomic<int>, transport::kDnsResultCount> dns_lookups{};
  std::atomic<int> dns_cache_hits{0};
  std::atomic<int> dns_lookups_avoided{0};
  std::atomic<int> dns_stale_served{0};
  std::array<std::atomic<int>, transport::kConnectAttemptResultCount> connect_attempts{};
  std::atomic<uint64_t> buffered_body_bytes{0};
  std::atomic<uint64_t> buffered_body_peak{0};
  mutable std::mutex caller_cost_mu;
  std::map<std::string, CallerCost> caller_costs;  // under caller_cost_mu
  std::array<std::atomic<int>, transport::kRetryReasonCount> retries_by_reason{};
  std::atomic<int> retry_budget_exhausted{0};
  std::array<std::atomic<int>, 2> quota_rejected{};      // by QuotaLimit
  std::array<std::atomic<int>, 2> quota_store_errors{};  // [failed open, failed closed]
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_COUNTING_OBSERVER_H_

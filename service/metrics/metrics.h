#ifndef EGRESS_SERVICE_METRICS_METRICS_H_
#define EGRESS_SERVICE_METRICS_METRICS_H_

#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "prometheus/collectable.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/fetch/fetch_observer.h"
#include "service/transport/observer.h"

namespace egress {

// The transport's and the front end's events as Prometheus metrics (names fixed in
// shared/design.md). Per-origin counts and gauges live in one table under one lock and
// are exported as a consistent snapshot, so that on every scrape
//   drains started = completed + abandoned + draining now, and
//   connections opened - closed = idle + active + draining.
// At most max_origins origins have a label of their own. A new origin takes a free slot,
// else the least recently used origin's slot if that origin has no live connection (its
// series are removed: a counter that comes back later starts from 0, which rate() takes
// for a reset); else it is counted as origin="other". An origin keeps one row while it
// has live connections, so both sums above hold per row and removing a row keeps them.
class Metrics final : public transport::TransportObserver,
                      public FetchObserver,
                      public AccessLogObserver,
                      public prometheus::Collectable {
 public:
  explicit Metrics(size_t max_origins);

  // Changes the number of origin label slots at run time (metrics.max_origin_labels).
  // Fewer slots evict least recently used origins without live connections now, others
  // as their last connection closes.
  void SetMaxOrigins(size_t max_origins);

  // TransportObserver
  void OnUpstreamRequest(const transport::Origin& origin, bool reused) override;
  void OnConnectionOpened(const transport::Origin& origin,
                          const transport::DialTiming& timing) override;
  void OnConnectionStateChanged(const transport::Origin& origin, transport::ConnectionState from,
                                transport::ConnectionState to) override;
  void OnConnectionClosed(const transport::Origin& origin, transport::CloseReason reason,
                          transport::ConnectionState from) override;
  void OnDrainStarted(const transport::Origin& origin) override;
  void OnDrainCompleted(const transport::Origin& origin, uint64_t bytes,
                        absl::Duration duration) override;
  void OnDrainAbandoned(const transport::Origin& origin, transport::DrainAbandonReason reason,
                        uint64_t bytes, absl::Duration duration) override;
  void OnDrainSkipped(const transport::Origin& origin,
                      transport::DrainSkipReason reason) override;
  void OnRetry(const transport::Origin& origin, transport::RetryReason reason) override;
  void OnRetryBudgetExhausted(const transport::Origin& origin) override;
  void OnPoolWait(const transport::Origin& origin, absl::Duration waited) override;
  void OnPolicyDenied(const transport::Origin& origin, transport::DenyReason reason) override;
  void OnPolicyWouldDeny(const transport::Origin& origin, absl::string_view rule) override;
  void OnOriginCost(const transport::Origin& origin, const transport::OriginCost& cost) override;
  void OnDrainBudget(uint64_t in_use, uint64_t limit) override;
  void OnDrainAwareAcquisition(const transport::Origin& origin,
                               transport::DrainAwareChoice choice, bool got_drained) override;
  void OnSurplusConnection(const transport::Origin& origin, bool kept) override;
  void OnUpstreamLimit(const transport::Origin& origin, transport::UpstreamLimit limit) override;
  void OnTransportException() override;
  void OnDnsLookup(transport::DnsResult result) override;
  void OnDnsCacheHit() override;
  void OnDnsLookupAvoided() override;
  void OnDnsStaleServed() override;
  void OnConnectAttempt(transport::ConnectAttemptResult result) override;
  void OnCircuitBreakerStateChanged(const transport::Origin& origin, transport::BreakerState from,
                                    transport::BreakerState to) override;
  void OnCircuitBreakerRejected(const transport::Origin& origin) override;
  void OnStreamOpened(const transport::Origin& origin) override;
  void OnStreamClosed(const transport::Origin& origin) override;
  void OnStreamReset(const transport::Origin& origin) override;
  void OnHttp2ConnectionClosed(uint64_t streams) override;

  // FetchObserver
  void OnFetchDone(grpc::StatusCode code, absl::Duration duration) override;
  void OnBufferedBodyBytes(uint64_t in_use) override;
  void OnQuotaRejected(absl::string_view rule, absl::string_view caller,
                       QuotaLimit limit) override;
  void OnQuotaStoreError(bool failed_closed) override;
  void OnCallRefused(CallRefusal reason) override;
  void OnCallerCost(absl::string_view caller, const CallerCost& cost) override;

  // AccessLogObserver
  void OnAccessLogWritten(uint64_t lines) override;
  void OnAccessLogDropped(AccessLogDrop reason, uint64_t lines) override;

  // prometheus::Collectable
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct OriginCounts {
    uint64_t requests_new = 0;
    uint64_t requests_reused = 0;
    uint64_t opened = 0;
    std::array<uint64_t, 2> tls_handshakes{};  // [full, resumed]
    std::array<uint64_t, transport::kCloseReasonCount> closed{};
    uint64_t drains_started = 0;
    uint64_t drains_completed = 0;
    std::array<uint64_t, transport::kDrainAbandonReasonCount> abandoned{};
    std::array<uint64_t, transport::kDrainSkipReasonCount> skipped{};
    uint64_t drain_bytes = 0;
    std::array<uint64_t, transport::kRetryReasonCount> retries{};
    uint64_t retry_budget_exhausted = 0;
    uint64_t breaker_opened = 0;    // the circuit breaker went to open
    uint64_t breaker_rejected = 0;  // fetches it failed at once
    int64_t idle = 0;
    int64_t active = 0;
    int64_t draining = 0;
    int64_t streams = 0;         // HTTP/2 streams open
    uint64_t streams_reset = 0;  // unread HTTP/2 bodies ended by RST_STREAM
    transport::OriginCost cost;
    std::array<std::array<uint64_t, 2>, 2> drain_aware{};  // [wait, dial][new, drained]
    std::array<uint64_t, 2> surplus{};                     // [closed, kept]
    // Its place in quiet_: set while the origin has a row and no live connection.
    std::optional<std::list<transport::Origin>::iterator> quiet;
    bool live() const { return idle != 0 || active != 0 || draining != 0; }
  };

  // The row for an origin's label, marked most recently used; creates it in a free or
  // freed slot, or falls back to "other".
  OriginCounts& For(const transport::Origin& origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a connection of `origin` (counted in `c`) opened (+1) or closed (-1): its row
  // leaves or joins quiet_, or, counted in "other", live_in_other_ follows.
  void TrackLive(const transport::Origin& origin, OriginCounts& c, int delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the least recently used quiet rows until at most `keep` origins have rows.
  // True if it got there.
  bool EvictDownTo(size_t keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t labelled_origins() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t& Gauge(OriginCounts& counts, transport::ConnectionState state);
  // A drain ended: its bytes and duration counted, the connection active again.
  OriginCounts& EndDrain(const transport::Origin& origin, uint64_t bytes,
                         absl::Duration duration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Histograms are thread-safe on their own; families built once.
  std::shared_ptr<prometheus::Registry> histograms_;
  prometheus::Histogram& drain_duration_;
  prometheus::Histogram& fetch_duration_;
  prometheus::Histogram& pool_wait_;
  prometheus::Histogram& http2_streams_per_connection_;
  prometheus::Family<prometheus::Histogram>& dial_duration_;
  prometheus::Histogram& dial_dns_;
  prometheus::Histogram& dial_connect_;
  prometheus::Histogram& dial_tls_;

  mutable std::mutex mu_;
  size_t max_origins_ ABSL_GUARDED_BY(mu_);
  // Keyed by the origin itself: each event finds its row without building a label.
  absl::flat_hash_map<transport::Origin, OriginCounts> origins_ ABSL_GUARDED_BY(mu_);
  // The row of the origins without one of their own (origin="other"), once it is used.
  std::optional<OriginCounts> other_ ABSL_GUARDED_BY(mu_);
  // Origins with a row and no live connection, most recently used first: the ones whose
  // slots may go to new origins.
  std::list<transport::Origin> quiet_ ABSL_GUARDED_BY(mu_);
  // Live connections, by origin, of origins counted in "other": such an origin stays in
  // "other" until they are closed, so that each connection's counts stay in one row.
  absl::flat_hash_map<transport::Origin, int64_t> live_in_other_ ABSL_GUARDED_BY(mu_);
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<uint64_t, 17> fetches_by_code_ ABSL_GUARDED_BY(mu_){};
  // Not by origin: a caller probing many internal names must not explode the label.
  std::array<uint64_t, transport::kDenyReasonCount> policy_denied_ ABSL_GUARDED_BY(mu_){};
  // By report-only rule: labels from the config, not from requests.
  absl::flat_hash_map<std::string, uint64_t> policy_would_deny_ ABSL_GUARDED_BY(mu_);
  std::array<uint64_t, transport::kDnsResultCount> dns_lookups_ ABSL_GUARDED_BY(mu_){};
  uint64_t dns_cache_hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dns_lookups_avoided_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dns_stale_served_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<uint64_t, transport::kConnectAttemptResultCount> connect_attempts_
      ABSL_GUARDED_BY(mu_){};
  // Origins whose circuit breaker is in each state (closed ones are not counted).
  std::array<int64_t, 3> breakers_by_state_ ABSL_GUARDED_BY(mu_){};
  // egress_dns_cache_hits_total, egress_dns_lookups_avoided_total,
  // egress_dns_stale_served_total and egress_connect_attempts_total.
  void CollectDialing(std::vector<prometheus::MetricFamily>& families) const;
  uint64_t budget_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t budget_peak_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t budget_limit_ ABSL_GUARDED_BY(mu_) = 0;
  // Not by origin either: one hostile upstream is enough to look at the logs.
  std::array<uint64_t, transport::kUpstreamLimitCount> upstream_limits_ ABSL_GUARDED_BY(mu_){};
  uint64_t transport_exceptions_ ABSL_GUARDED_BY(mu_) = 0;
  // egress_upstream_protocol_errors_total and egress_transport_exceptions_total.
  void CollectUpstreamInput(std::vector<prometheus::MetricFamily>& families) const;
  uint64_t buffered_body_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t access_log_written_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<uint64_t, 3> access_log_dropped_ ABSL_GUARDED_BY(mu_){};  // by AccessLogDrop
  // egress_access_log_lines_total and egress_access_log_dropped_total.
  void CollectAccessLog(std::vector<prometheus::MetricFamily>& families) const;
  // At most kMaxCallerLabels callers get a `caller` label of their own (first come),
  // later ones count as caller="other".
  static constexpr size_t kMaxCallerLabels = 100;
  // Valid until the next call.
  absl::string_view CallerLabel(absl::string_view caller) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_set<std::string> caller_labels_ ABSL_GUARDED_BY(mu_);
  // Quota refusals by (rule, caller label), then QuotaLimit.
  absl::flat_hash_map<std::pair<std::string, std::string>, std::array<uint64_t, 2>>
      quota_rejected_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, CallerCost> caller_costs_ ABSL_GUARDED_BY(mu_);
  // egress_caller_*_total.
  void CollectCallerCosts(std::vector<prometheus::MetricFamily>& families) const;
  std::array<uint64_t, 2> quota_store_errors_ ABSL_GUARDED_BY(mu_){};  // [open, closed]
  std::array<uint64_t, kCallRefusalCount> calls_refused_ ABSL_GUARDED_BY(mu_){};
  // egress_quota_rejected_total, egress_quota_store_errors_total and
  // egress_calls_refused_total.
  void CollectQuotas(std::vector<prometheus::MetricFamily>& families) const;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_METRICS_METRICS_H_

#ifndef EGRESS_SERVICE_METRICS_FAMILIES_H_
#define EGRESS_SERVICE_METRICS_FAMILIES_H_

// Every metric family that Metrics exports, declared once: its name, type, help, label
// names and (histograms) bucket boundaries, in the manner of Envoy's ALL_*_STATS lists.
// Metrics::Collect and its helpers build each family from its entry here, by Id; a name or
// a help text is written nowhere else. The names are a contract (shared/design.md,
// docs/metrics.md, the alert rules and the dashboard): change one only with them.

#include <array>
#include <cstddef>
#include <iterator>

#include "absl/types/span.h"
#include "prometheus/metric_type.h"

namespace egress::metrics {

// Histogram bucket boundaries, in seconds unless said otherwise. Drains are capped at
// tens of milliseconds by default; fetches and dials span more.
inline constexpr double kDrainBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                           0.05,   0.1,   0.25,   0.5,   1};
inline constexpr double kLatencyBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,  0.5,    1,     2.5,  5,     10,   30};
// Streams, not seconds.
inline constexpr double kStreamsBuckets[] = {0,   1,   2,    5,     10,    20,    50,
                                             100, 200, 500, 1000, 10000, 100000};

// One per family, in the order of kFamilies (and of the exposition).
enum class Id {
  // By origin: the pool, drains, retries and the circuit breaker.
  kUpstreamRequests,
  kConnectionsOpened,
  kConnectionsClosed,
  kDrainsStarted,
  kDrainsCompleted,
  kDrainsAbandoned,
  kDrainsSkipped,
  kDrainBytes,
  kRetries,
  kRetryBudgetExhausted,
  kBreakerOpened,
  kBreakerRejected,
  kBreakers,
  kPoolConnections,
  kHttp2Streams,
  kHttp2StreamsReset,
  kFetches,
  kPolicyDenied,
  kPolicyWouldDeny,
  kOriginDialSeconds,
  kOriginBodyBytesPerSecond,
  kOriginDrainSeconds,
  kDrainAwareAcquisitions,
  kSurplusConnections,
  kDrainBudget,
  kDnsLookups,
  kBufferedBodyBytes,
  kOriginLabels,
  kOriginLabelEvictions,
  kTlsHandshakes,
  // Upstream input, dialing, the access log, quotas and callers.
  kUpstreamProtocolErrors,
  kTransportExceptions,
  kDnsCacheHits,
  kDnsLookupsAvoided,
  kDnsStaleServed,
  kConnectAttempts,
  kAccessLogLines,
  kAccessLogDropped,
  kQuotaRejected,
  kQuotaStoreErrors,
  kCallsRefused,
  kCallerFetches,
  kCallerRequestBytes,
  kCallerResponseBytes,
  kCallerConnectionsOpened,
  kCallerTlsHandshakes,
  kCallerDrainBytes,
  // Histograms.
  kDrainDuration,
  kFetchDuration,
  kPoolWait,
  kHttp2StreamsPerConnection,
  kDialDuration,
};

struct FamilySpec {
  Id id;
  const char* name;
  prometheus::MetricType type;
  const char* help;
  // Label names in the order every sample carries them (histograms: besides `le`);
  // unused places are null.
  std::array<const char*, 3> labels;
  // Histograms only.
  absl::Span<const double> buckets;
};

namespace internal {
inline constexpr auto kCounter = prometheus::MetricType::Counter;
inline constexpr auto kGauge = prometheus::MetricType::Gauge;
inline constexpr auto kHistogram = prometheus::MetricType::Histogram;
}  // namespace internal

inline constexpr FamilySpec kFamilies[] = {
    {Id::kUpstreamRequests, "egress_upstream_requests_total", internal::kCounter,
     "Requests sent upstream, on a new or a reused connection.",
     {"origin", "connection"}, {}},
    {Id::kConnectionsOpened, "egress_upstream_connections_opened_total", internal::kCounter,
     "Upstream connections opened (TCP connected, TLS done).",
     {"origin"}, {}},
    {Id::kConnectionsClosed, "egress_upstream_connections_closed_total", internal::kCounter,
     "Opened upstream connections closed, by reason.",
     {"origin", "reason"}, {}},
    {Id::kDrainsStarted, "egress_drains_started_total", internal::kCounter,
     "Background drains of unread response bodies started.",
     {"origin"}, {}},
    {Id::kDrainsCompleted, "egress_drains_completed_total", internal::kCounter,
     "Drains that reached the end of the body within the caps.",
     {"origin"}, {}},
    {Id::kDrainsAbandoned, "egress_drains_abandoned_total", internal::kCounter,
     "Drains given up, by reason; the connection was closed.",
     {"origin", "reason"}, {}},
    {Id::kDrainsSkipped, "egress_drains_skipped_total", internal::kCounter,
     "Unread bodies not drained, by reason; the connection was closed.",
     {"origin", "reason"}, {}},
    {Id::kDrainBytes, "egress_drain_bytes_total", internal::kCounter,
     "Bytes read and discarded by drains.",
     {"origin"}, {}},
    {Id::kRetries, "egress_upstream_retries_total", internal::kCounter,
     "Fetches sent again, by reason: stale (a dead pooled connection), connect_failed, "
     "reset, status (502/503/504), refused_stream (HTTP/2: not processed by the server).",
     {"origin", "reason"}, {}},
    {Id::kRetryBudgetExhausted, "egress_retry_budget_exhausted_total", internal::kCounter,
     "Retries not made because the origin's retry budget was spent.",
     {"origin"}, {}},
    {Id::kBreakerOpened, "egress_circuit_breaker_opened_total", internal::kCounter,
     "Times an origin's circuit breaker opened (transport.circuit_breaker).",
     {"origin"}, {}},
    {Id::kBreakerRejected, "egress_circuit_breaker_rejected_total", internal::kCounter,
     "Fetches failed at once (UNAVAILABLE, CIRCUIT_OPEN) by an open circuit breaker.",
     {"origin"}, {}},
    {Id::kBreakers, "egress_circuit_breakers", internal::kGauge,
     "Origins whose circuit breaker is open or half-open.",
     {"state"}, {}},
    {Id::kPoolConnections, "egress_pool_connections", internal::kGauge,
     "Opened upstream connections by state.",
     {"origin", "state"}, {}},
    {Id::kHttp2Streams, "egress_http2_streams", internal::kGauge,
     "HTTP/2 streams open on the origin's connections.",
     {"origin"}, {}},
    {Id::kHttp2StreamsReset, "egress_http2_streams_reset_total", internal::kCounter,
     "HTTP/2 response bodies let go of unread and ended with RST_STREAM(CANCEL) instead of "
     "a drain; the connection carried on.",
     {"origin"}, {}},
    {Id::kFetches, "egress_fetches_total", internal::kCounter,
     "Fetch and FetchStream RPCs by gRPC code.",
     {"code"}, {}},
    {Id::kPolicyDenied, "egress_policy_denied_total", internal::kCounter,
     "Destinations refused by the egress policy, by reason.",
     {"reason"}, {}},
    {Id::kPolicyWouldDeny, "egress_policy_would_deny_total", internal::kCounter,
     "Fetches a report-only rule (policy.report_only) would have denied, by rule.",
     {"rule"}, {}},
    {Id::kOriginDialSeconds, "egress_origin_dial_seconds", internal::kGauge,
     "Moving estimate of a new connection's time (DNS, connect, TLS).",
     {"origin"}, {}},
    {Id::kOriginBodyBytesPerSecond, "egress_origin_body_bytes_per_second", internal::kGauge,
     "Moving estimate of how fast drained bodies arrive (warm connections, drains of 16 KiB "
     "or more).",
     {"origin"}, {}},
    {Id::kOriginDrainSeconds, "egress_origin_drain_seconds", internal::kGauge,
     "Moving estimate of how long a completed drain takes.",
     {"origin"}, {}},
    {Id::kDrainAwareAcquisitions, "egress_drain_aware_acquisitions_total", internal::kCounter,
     "Requests that found no idle connection while one was draining (ADAPTIVE): whether "
     "they waited or dialed, and which connection carried them.",
     {"origin", "choice", "connection"}, {}},
    {Id::kSurplusConnections, "egress_surplus_connections_total", internal::kCounter,
     "Dials that lost the race to a drained connection: kept idle, or closed (pool full).",
     {"origin", "fate"}, {}},
    {Id::kDrainBudget, "egress_drain_budget_bytes", internal::kGauge,
     "The global budget of bytes ADAPTIVE drains may read at once: in use, the most ever in "
     "use, and the limit.",
     {"state"}, {}},
    {Id::kDnsLookups, "egress_dns_lookups_total", internal::kCounter,
     "Name lookups asked of the resolver (cache hits are not), by result (over_limit: "
     "refused by transport.dns limits).",
     {"result"}, {}},
    {Id::kBufferedBodyBytes, "egress_buffered_body_bytes", internal::kGauge,
     "Response body bytes that fetches hold in memory now (limits.buffered_body_budget_bytes "
     "is the limit).",
     {}, {}},
    {Id::kOriginLabels, "egress_origin_labels", internal::kGauge,
     "Origin label slots: in use, and the limit (metrics.max_origin_labels).",
     {"state"}, {}},
    {Id::kOriginLabelEvictions, "egress_origin_label_evictions_total", internal::kCounter,
     "Origins whose label slot went to a new origin (least recently used, no live "
     "connection); their series were removed.",
     {}, {}},
    {Id::kTlsHandshakes, "egress_tls_handshakes_total", internal::kCounter,
     "TLS handshakes of opened upstream connections: full, or resumed "
     "(transport.tls_session_resumption).",
     {"origin", "resumed"}, {}},
    {Id::kUpstreamProtocolErrors, "egress_upstream_protocol_errors_total", internal::kCounter,
     "Responses that went past a bound on upstream input, by the bound; the fetch failed "
     "and the connection was closed.",
     {"limit"}, {}},
    {Id::kTransportExceptions, "egress_transport_exceptions_total", internal::kCounter,
     "Exceptions caught at the transport's I/O handlers; the connection involved was closed.",
     {}, {}},
    {Id::kDnsCacheHits, "egress_dns_cache_hits_total", internal::kCounter,
     "Names answered from the DNS cache (fresh or negative answers).",
     {}, {}},
    {Id::kDnsLookupsAvoided, "egress_dns_lookups_avoided_total", internal::kCounter,
     "Names not looked up because a name rule of the policy (deny_hosts, a caller's rule) "
     "denied them first.",
     {}, {}},
    {Id::kDnsStaleServed, "egress_dns_stale_served_total", internal::kCounter,
     "Expired cached answers used because the resolver failed (within "
     "transport.dns.stale_for).",
     {}, {}},
    {Id::kConnectAttempts, "egress_connect_attempts_total", internal::kCounter,
     "TCP connects to one address, by how they ended (happy eyeballs: abandoned = another "
     "address connected first).",
     {"result"}, {}},
    {Id::kAccessLogLines, "egress_access_log_lines_total", internal::kCounter,
     "Access log lines written to the sink.",
     {}, {}},
    {Id::kAccessLogDropped, "egress_access_log_dropped_total", internal::kCounter,
     "Access log lines not written, by reason (queue_full: the sink is slow or blocked; "
     "rate_limited; write_error).",
     {"reason"}, {}},
    {Id::kQuotaRejected, "egress_quota_rejected_total", internal::kCounter,
     "Upstream requests refused by a quota rule (Config.quotas), by rule, caller and limit.",
     {"rule", "caller", "limit"}, {}},
    {Id::kQuotaStoreErrors, "egress_quota_store_errors_total", internal::kCounter,
     "Global quota checks the quota store (Redis) could not answer, by what the fetch did: "
     "fail_open or fail_closed.",
     {"outcome"}, {}},
    {Id::kCallsRefused, "egress_calls_refused_total", internal::kCounter,
     "Calls (or connections) the data plane's own server (--data_plane=loops) refused "
     "before a fetch, by reason: unimplemented, metadata_too_large, bad_request_message, "
     "bad_timeout, protocol_error, accept_failed, deadline_before_request, "
     "bad_metadata, tls_handshake_failed, tls_handshake_timeout, tls_no_h2, too_many_streams, "
     "too_many_connections, preface_timeout, preface_evicted, idle_evicted, rapid_reset, "
     "continuation_flood, settings_flood, ping_flood, after_goaway, too_many_pings, "
     "stalled_caller.",
     {"reason"}, {}},
    {Id::kCallerFetches, "egress_caller_fetches_total", internal::kCounter,
     "Fetch and FetchStream RPCs, by caller.",
     {"caller"}, {}},
    {Id::kCallerRequestBytes, "egress_caller_request_bytes_total", internal::kCounter,
     "Request body bytes sent upstream, by caller.",
     {"caller"}, {}},
    {Id::kCallerResponseBytes, "egress_caller_response_bytes_total", internal::kCounter,
     "Response body bytes given to the caller, by caller.",
     {"caller"}, {}},
    {Id::kCallerConnectionsOpened, "egress_caller_connections_opened_total", internal::kCounter,
     "Upstream connections dialed for a caller's requests, by caller.",
     {"caller"}, {}},
    {Id::kCallerTlsHandshakes, "egress_caller_tls_handshakes_total", internal::kCounter,
     "TLS handshakes (full or resumed) of the connections dialed for a caller, by caller.",
     {"caller"}, {}},
    {Id::kCallerDrainBytes, "egress_caller_drain_bytes_total", internal::kCounter,
     "Body bytes read and discarded on a caller's behalf (its unread bodies), by caller.",
     {"caller"}, {}},
    {Id::kDrainDuration, "egress_drain_duration_seconds", internal::kHistogram,
     "How long drains took, completed or abandoned.",
     {}, kDrainBuckets},
    {Id::kFetchDuration, "egress_fetch_duration_seconds", internal::kHistogram,
     "Fetch and FetchStream RPCs from start to finish.",
     {}, kLatencyBuckets},
    {Id::kPoolWait, "egress_pool_wait_seconds", internal::kHistogram,
     "Time from asking the pool to getting a connection (not dialing).",
     {}, kDrainBuckets},
    {Id::kHttp2StreamsPerConnection, "egress_http2_streams_per_connection",
     internal::kHistogram, "Streams an HTTP/2 connection carried, observed when it closed.",
     {}, kStreamsBuckets},
    {Id::kDialDuration, "egress_upstream_dial_duration_seconds", internal::kHistogram,
     "Phases of opening an upstream connection: dns, connect, tls.",
     {"phase"}, kLatencyBuckets},
};

// Each entry sits at its Id's place, so that Spec() is an index.
constexpr bool EntriesInIdOrder() {
  for (size_t i = 0; i < std::size(kFamilies); ++i) {
    if (static_cast<size_t>(kFamilies[i].id) != i) return false;
  }
  return true;
}
static_assert(EntriesInIdOrder(), "kFamilies must list the families in the order of Id");
static_assert(static_cast<size_t>(Id::kDialDuration) + 1 == std::size(kFamilies),
              "every Id has an entry in kFamilies");

constexpr const FamilySpec& Spec(Id id) { return kFamilies[static_cast<size_t>(id)]; }

}  // namespace egress::metrics

#endif  // EGRESS_SERVICE_METRICS_FAMILIES_H_

#ifndef EGRESS_SERVICE_TRANSPORT_OBSERVER_H_
#define EGRESS_SERVICE_TRANSPORT_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/time/time.h"
#include "service/transport/policy/address_policy.h"
#include "service/transport/http/origin.h"

namespace egress::transport {

enum class ConnectionState {
  kConnecting,  // resolving, connecting or in the TLS handshake
  kActive,      // carrying a request, or its response body for a caller
  kDraining,    // reading a body its caller left unread, in the background
  kIdle,        // in the pool, ready for the next request
  kClosed,      // retired; the socket is closed
};

// How long each part of a dial took; zero for a phase that did not happen.
struct DialTiming {
  absl::Duration dns;
  absl::Duration connect;
  absl::Duration tls_handshake;
  // https only: whether the handshake resumed an earlier session of the origin.
  std::optional<bool> tls_resumed;
};

// Why a connection was retired.
enum class CloseReason {
  kDialFailed,       // DNS, TCP connect or TLS handshake failed
  kConnectionClose,  // either side said "Connection: close" (or HTTP/1.0 without keep-alive)
  kUnreadBody,       // body bytes left unread and no drain was attempted
  kDrainAbandoned,   // a drain hit a cap or an error
  kIdleTimeout,      // idle longer than the idle timeout
  kPoolFull,         // the origin already had max_idle_per_origin idle connections
  kError,            // an I/O or protocol error while carrying a request
  kStale,            // a reused idle connection turned out to be closed by the server
  kCancelled,        // the caller gave up while the connection was busy
  kShutdown,         // the transport is shutting down
  kPolicy,           // the egress policy now in force denies its host or address
  kServerHint,       // past what the server announced in Keep-Alive (timeout less the margin, max)
  kMaxAge,           // older than max_connection_age (less its jitter), retired when idle
  kMaxRequests,      // carried max_requests_per_connection requests
  kGoaway,           // HTTP/2: the server sent GOAWAY, or the session ended, and its streams did
  kHttp2Off,         // HTTP/2, and the config in force turned it off for the origin
};
inline constexpr size_t kCloseReasonCount = 16;

enum class DrainSkipReason {
  kConnectionClose,  // the response says Connection: close: the connection is lost anyway
  kOverByteCap,      // Content-Length left to read is above the byte cap
  kDisabled,         // drain mode OFF
  kOverBudget,       // ADAPTIVE: the global drain byte budget has no room for this body
  kSlowerThanDial,   // ADAPTIVE: at the origin's body rate, finishing costs more than a dial
};
inline constexpr size_t kDrainSkipReasonCount = 5;

enum class DrainAbandonReason {
  kByteCap,  // more than max_bytes without reaching the end
  kTimeCap,  // the body did not end within max_duration
  kError,    // the connection failed while draining
  kSlowerThanDial,  // ADAPTIVE: no byte came for longer than a new connection costs
  kBudget,          // ADAPTIVE: the global drain byte budget had no room for more
};
inline constexpr size_t kDrainAbandonReasonCount = 5;

// Why a fetch was sent again; these strings are the `reason` label of
// egress_upstream_retries_total.
enum class RetryReason {
  kStale,          // a pooled connection the server had closed while idle (always on)
  kConnectFailed,  // the connection or its TLS handshake failed: nothing was written
  kReset,          // the connection failed or closed before a response (idempotent only)
  kStatus,         // a 502, 503 or 504 response (idempotent only)
  kRefusedStream,  // HTTP/2: the server did not process the stream (GOAWAY, REFUSED_STREAM)
};
inline constexpr size_t kRetryReasonCount = 5;

// A bound on upstream input that a response went past; the fetch failed UNAVAILABLE
// and the connection was closed.
enum class UpstreamLimit {
  kResponseHead,      // a status line and headers past transport.max_response_header_bytes
  kChunkLine,         // a chunk-size line longer than transport.max_chunk_line_bytes
  kTrailers,          // trailers past transport.max_response_header_bytes
  kInterimResponses,  // more 1xx responses than transport.max_interim_responses
};
inline constexpr size_t kUpstreamLimitCount = 4;
// How a name lookup ended.
enum class DnsResult {
  kOk,         // addresses found (in /etc/hosts or from a DNS server)
  kNxdomain,   // the name does not exist, or has no address records
  kTimeout,    // no answer: the servers' retries ran out, or connect timeout or deadline came
  kError,      // the servers refused or failed, or the lookup could not start
  kCancelled,  // the caller gave up first
  kOverLimit,  // refused: transport.dns.max_lookups(_per_caller) were in flight
};
inline constexpr size_t kDnsResultCount = 6;

// How one connection attempt to one address of a host ended (happy eyeballs races them).
enum class ConnectAttemptResult {
  kConnected,  // it connected first: the connection uses it
  kFailed,     // refused, unreachable or another socket error
  kAbandoned,  // still under way when another attempt won, the dial timed out or ended
};
inline constexpr size_t kConnectAttemptResultCount = 3;

// An origin's circuit breaker (see CircuitBreakers).
enum class BreakerState {
  kClosed,    // fetches go; failures in a row are counted
  kOpen,      // fetches fail at once until open_for has passed
  kHalfOpen,  // one fetch at a time goes as a probe; the others fail at once
};

// What the transport has learned about an origin: moving estimates, none until seen.
struct OriginCost {
  std::optional<absl::Duration> dial;              // DNS + TCP connect + TLS handshake
  std::optional<double> body_bytes_per_second;     // how fast drained bodies arrive
  std::optional<absl::Duration> drain_time;        // how long a completed drain takes
};

// How a request that found no idle connection, while one was draining, got one.
enum class DrainAwareChoice {
  kWait,  // it waited for the draining connection (expected sooner than a dial)
  kDial,  // it dialed at once (the drain was expected to take longer, or is unknown)
};

absl::string_view ToString(CloseReason reason);
absl::string_view ToString(DrainSkipReason reason);
absl::string_view ToString(DrainAbandonReason reason);
absl::string_view ToString(DrainAwareChoice choice);
absl::string_view ToString(UpstreamLimit limit);
absl::string_view ToString(DnsResult result);
absl::string_view ToString(ConnectAttemptResult result);
absl::string_view ToString(BreakerState state);
absl::string_view ToString(RetryReason reason);

// What the transport reports at its decision points. The metrics module implements it
// with Prometheus types and tests with plain counters; the transport links neither.
// Calls come from I/O threads, concurrently: implementations must be thread-safe and
// must not block.
//
// Every state change of an opened connection is reported exactly once, so that an
// implementation can keep per-state gauges that agree with the counters at all times:
// opened (-> active), state changed (active <-> idle), drain started (active ->
// draining), drain completed or abandoned (draining -> active), closed (any -> gone).
class TransportObserver {
 public:
  virtual ~TransportObserver() = default;

  // A request went out on a new (reused = false) or a pooled connection.
  virtual void OnUpstreamRequest(const Origin& origin, bool reused) = 0;
  // A dial succeeded: TCP connected and, for https, the TLS handshake completed. The
  // connection is now active.
  virtual void OnConnectionOpened(const Origin& origin, const DialTiming& timing) = 0;
  // An opened connection went from active to idle (pooled) or from idle to active.
  virtual void OnConnectionStateChanged(const Origin& origin, ConnectionState from,
                                        ConnectionState to) = 0;
  // An opened connection was retired from state `from`.
  virtual void OnConnectionClosed(const Origin& origin, CloseReason reason,
                                  ConnectionState from) = 0;
  // The connection went from active to draining.
  virtual void OnDrainStarted(const Origin& origin) = 0;
  // The body ended within the caps; the connection is active again, to be pooled.
  virtual void OnDrainCompleted(const Origin& origin, uint64_t bytes,
                                absl::Duration duration) = 0;
  // The drain gave up; the connection is active again, to be closed.
  virtual void OnDrainAbandoned(const Origin& origin, DrainAbandonReason reason,
                                uint64_t bytes, absl::Duration duration) = 0;
  virtual void OnDrainSkipped(const Origin& origin, DrainSkipReason reason) = 0;
  // A fetch is sent again: on a fresh connection at once (kStale), or, with retries on
  // (RetrySettings), as a new attempt after its backoff.
  virtual void OnRetry(const Origin& origin, RetryReason reason) = 0;
  // A retry the fetch could have made was not, because the origin's retry budget was
  // spent; the fetch ended with its last attempt's outcome.
  virtual void OnRetryBudgetExhausted(const Origin& origin) = 0;
  // A request got its connection (idle, new, or after waiting for room under
  // max_conns_per_origin) `waited` after asking the pool.
  virtual void OnPoolWait(const Origin& origin, absl::Duration waited) = 0;
  // The egress policy refused a destination; nothing was sent.
  virtual void OnPolicyDenied(const Origin& origin, DenyReason reason) = 0;
  // A report-only rule (PolicyVerdict's naming) would have denied a fetch the policy
  // let through; once per fetch and rule.
  virtual void OnPolicyWouldDeny(const Origin& origin, absl::string_view rule) = 0;
  // The cost estimates of an origin changed (after a dial or a drain).
  virtual void OnOriginCost(const Origin& origin, const OriginCost& cost) = 0;
  // Bytes ADAPTIVE drains hold of the global drain budget, after a change. Calls come in
  // the order of the changes.
  virtual void OnDrainBudget(uint64_t in_use, uint64_t limit) = 0;
  // A request found no idle connection while one was draining (ADAPTIVE): what it chose,
  // and whether it ended up on the drained connection or a new one.
  virtual void OnDrainAwareAcquisition(const Origin& origin, DrainAwareChoice choice,
                                       bool got_drained) = 0;
  // A dial made while a drain was under way finished after the drained connection had
  // served the request: the new connection idles in the pool (kept) or, with the pool
  // full, is closed.
  virtual void OnSurplusConnection(const Origin& origin, bool kept) = 0;
  // A response went past a bound on upstream input; nothing more is read from it.
  virtual void OnUpstreamLimit(const Origin& origin, UpstreamLimit limit) = 0;
  // An exception escaped an I/O handler (or a callback it ran): it was caught, the
  // connection involved (if known) closed, and the I/O thread carried on.
  virtual void OnTransportException() = 0;
  // A name lookup ended (or was refused). Not by origin: names are unbounded.
  virtual void OnDnsLookup(DnsResult result) = 0;
  // A name was answered from the DNS cache (a fresh or a negative answer), unasked.
  virtual void OnDnsCacheHit() = 0;
  // A name the policy's name rules (deny_hosts, the caller's rule) denied was not looked
  // up: no DNS query left for it.
  virtual void OnDnsLookupAvoided() = 0;
  // The resolver failed and an answer whose TTL had run out (within
  // transport.dns.stale_for) was used instead.
  virtual void OnDnsStaleServed() = 0;
  // A TCP connect to one address ended (not by origin either: one per address).
  virtual void OnConnectAttempt(ConnectAttemptResult result) = 0;
  // An origin's circuit breaker changed state (to closed also when a new config resets it).
  virtual void OnCircuitBreakerStateChanged(const Origin& origin, BreakerState from,
                                            BreakerState to) = 0;
  // A fetch failed at once because its origin's breaker is open (or half-open, probing).
  virtual void OnCircuitBreakerRejected(const Origin& origin) = 0;
  // HTTP/2: a request got a stream on one of the origin's connections, or its stream
  // ended; the difference is the streams open now.
  virtual void OnStreamOpened(const Origin& origin) = 0;
  virtual void OnStreamClosed(const Origin& origin) = 0;
  // HTTP/2: a body its caller let go of unread was ended with RST_STREAM(CANCEL), not
  // drained; the connection carries on.
  virtual void OnStreamReset(const Origin& origin) = 0;
  // HTTP/2: an opened connection closed after carrying `streams` streams.
  virtual void OnHttp2ConnectionClosed(uint64_t streams) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_OBSERVER_H_

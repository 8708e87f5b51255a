#ifndef EGRESS_SERVICE_FETCH_FETCH_OBSERVER_H_
#define EGRESS_SERVICE_FETCH_FETCH_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status_code_enum.h"

namespace egress {

// A gRPC code's name ("OK", "PERMISSION_DENIED", ...), as egress_fetches_total's `code`
// label and the access log's grpc_code say it.
inline absl::string_view GrpcCodeName(grpc::StatusCode code) {
  static constexpr absl::string_view kNames[] = {
      "OK",          "CANCELLED",          "UNKNOWN",   "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",    "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",         "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  const auto index = static_cast<size_t>(code);
  return index < std::size(kNames) ? kNames[index] : "UNKNOWN";
}

// Which limit of a quota rule (Config.quotas) refused a request; these strings are the
// `limit` label of egress_quota_rejected_total and the QUOTA_EXCEEDED error's metadata.
enum class QuotaLimit {
  kMaxConcurrent,
  kRequestsPerSecond,
};
inline absl::string_view ToString(QuotaLimit limit) {
  switch (limit) {
    case QuotaLimit::kMaxConcurrent: return "max_concurrent";
    case QuotaLimit::kRequestsPerSecond: return "requests_per_second";
  }
  return "unknown";
}

// What one caller's fetch cost, reported when its RPC ends and again (drain_bytes only)
// when its body is settled.
struct CallerCost {
  uint64_t fetches = 0;
  uint64_t request_bytes = 0;      // request body bytes sent upstream, every hop
  uint64_t response_bytes = 0;     // response body bytes given to the caller
  uint64_t connections_opened = 0; // hops that got a new connection (dialed for them)
  uint64_t tls_handshakes = 0;     // ... of which over TLS (full or resumed)
  uint64_t drain_bytes = 0;        // read and discarded on its behalf

  CallerCost& operator+=(const CallerCost& other) {
    fetches += other.fetches;
    request_bytes += other.request_bytes;
    response_bytes += other.response_bytes;
    connections_opened += other.connections_opened;
    tls_handshakes += other.tls_handshakes;
    drain_bytes += other.drain_bytes;
    return *this;
  }
};

// Why the data plane's own server (service/dataplane) refused a call before it reached
// FetchCall, or a connection; these strings are the `reason` label of
// egress_calls_refused_total.
enum class CallRefusal {
  kUnimplemented,      // a method it does not serve
  kMetadataTooLarge,   // a header list over the limit
  kBadRequestMessage,  // too large, compressed, cut short, more than one, unreadable
  kBadTimeout,         // an unreadable grpc-timeout
  kProtocolError,      // a connection that broke HTTP/2 (closed, its calls with it)
  kAcceptFailed,       // a connection not accepted (descriptors exhausted, say)
  kDeadlineBeforeRequest,  // the call's deadline came before its request message did
  kBadMetadata,            // a -bin metadata value that is not base64
  kTlsHandshakeFailed,     // a TLS handshake that failed (plaintext, no or bad certificate)
  kTlsHandshakeTimeout,    // a TLS handshake not done in time (a caller that stalls)
  kTlsNoH2,                // a TLS caller that did not offer h2 by ALPN
  // Limits against hostile callers (service/dataplane/caller_limits.h), each ending the
  // connection (too_many_streams before SETTINGS_MAX_CONCURRENT_STREAMS was acknowledged:
  // the one stream):
  kTooManyStreams,      // a stream past SETTINGS_MAX_CONCURRENT_STREAMS
  kTooManyConnections,  // past --grpc_max_connections(_per_source), closed as accepted
  kPrefaceTimeout,      // no client preface and SETTINGS within the handshake timeout
  kPrefaceEvicted,      // no client preface yet when a new connection needed its slot
  kIdleEvicted,         // no call open for longest when a new connection needed its slot
  kRapidReset,          // streams reset before their answer faster than the reset budget
  kContinuationFlood,   // a header block of more CONTINUATION frames than allowed
  kSettingsFlood,       // SETTINGS acks left unread past the bound, or too many entries
  kPingFlood,           // PING acks left unread past the bound
  kAfterGoAway,            // a stream opened after the final GOAWAY (REFUSED_STREAM)
  kTooManyPings,           // a connection that PINGed too often (GOAWAY ENHANCE_YOUR_CALM)
  kStalledCaller,          // a connection whose caller took no bytes past a reset's time
};
inline constexpr size_t kCallRefusalCount = 23;
inline absl::string_view ToString(CallRefusal reason) {
  switch (reason) {
    case CallRefusal::kUnimplemented: return "unimplemented";
    case CallRefusal::kMetadataTooLarge: return "metadata_too_large";
    case CallRefusal::kBadRequestMessage: return "bad_request_message";
    case CallRefusal::kBadTimeout: return "bad_timeout";
    case CallRefusal::kProtocolError: return "protocol_error";
    case CallRefusal::kAcceptFailed: return "accept_failed";
    case CallRefusal::kDeadlineBeforeRequest: return "deadline_before_request";
    case CallRefusal::kBadMetadata: return "bad_metadata";
    case CallRefusal::kTlsHandshakeFailed: return "tls_handshake_failed";
    case CallRefusal::kTlsHandshakeTimeout: return "tls_handshake_timeout";
    case CallRefusal::kTlsNoH2: return "tls_no_h2";
    case CallRefusal::kTooManyStreams: return "too_many_streams";
    case CallRefusal::kTooManyConnections: return "too_many_connections";
    case CallRefusal::kPrefaceTimeout: return "preface_timeout";
    case CallRefusal::kPrefaceEvicted: return "preface_evicted";
    case CallRefusal::kIdleEvicted: return "idle_evicted";
    case CallRefusal::kRapidReset: return "rapid_reset";
    case CallRefusal::kContinuationFlood: return "continuation_flood";
    case CallRefusal::kSettingsFlood: return "settings_flood";
    case CallRefusal::kPingFlood: return "ping_flood";
    case CallRefusal::kAfterGoAway: return "after_goaway";
    case CallRefusal::kTooManyPings: return "too_many_pings";
    case CallRefusal::kStalledCaller: return "stalled_caller";
  }
  return "unknown";
}

// What the gRPC front end reports: one call per finished Fetch or FetchStream.
// Thread-safe and non-blocking, like transport::TransportObserver.
class FetchObserver {
 public:
  virtual ~FetchObserver() = default;
  virtual void OnFetchDone(grpc::StatusCode code, absl::Duration duration) = 0;
  // Response body bytes that fetches hold now (limits.buffered_body_budget_bytes).
  virtual void OnBufferedBodyBytes(uint64_t in_use) = 0;
  // A quota rule refused one of `caller`'s upstream requests ("" for no identity).
  virtual void OnQuotaRejected(absl::string_view rule, absl::string_view caller,
                               QuotaLimit limit) = 0;
  // What a fetch of `caller` ("" for no identity) cost; see CallerCost.
  virtual void OnCallerCost(absl::string_view caller, const CallerCost& cost) = 0;
  // The quota store could not answer for a global rule; the fetch went on (fail open) or
  // was refused (fail closed).
  virtual void OnQuotaStoreError(bool failed_closed) = 0;
  // The data plane's own server refused a call (or a connection) for `reason`.
  virtual void OnCallRefused(CallRefusal reason) = 0;
};

// Why an access log line was not written; these strings are the `reason` label of
// egress_access_log_dropped_total.
enum class AccessLogDrop {
  kQueueFull,    // the sink is slower than the fetches (or blocked)
  kRateLimited,  // over access_log.max_lines_per_second
  kWriteError,   // the sink failed (or was still blocked when egressd stopped)
};
inline absl::string_view ToString(AccessLogDrop reason) {
  switch (reason) {
    case AccessLogDrop::kQueueFull: return "queue_full";
    case AccessLogDrop::kRateLimited: return "rate_limited";
    case AccessLogDrop::kWriteError: return "write_error";
  }
  return "unknown";
}

// What the access log reports of its lines. Thread-safe and non-blocking.
class AccessLogObserver {
 public:
  virtual ~AccessLogObserver() = default;
  virtual void OnAccessLogWritten(uint64_t lines) = 0;
  virtual void OnAccessLogDropped(AccessLogDrop reason, uint64_t lines) = 0;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_FETCH_OBSERVER_H_

#ifndef EGRESS_SERVICE_FETCH_OBSERVER_H_
#define EGRESS_SERVICE_FETCH_OBSERVER_H_

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
  // The quota store could not answer for a global rule; the fetch went on (fail open) or
  // was refused (fail closed).
  virtual void OnQuotaStoreError(bool failed_closed) = 0;
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

#endif  // EGRESS_SERVICE_FETCH_OBSERVER_H_

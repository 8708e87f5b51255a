#ifndef EGRESS_SERVICE_TRANSPORT_OBSERVER_H_
#define EGRESS_SERVICE_TRANSPORT_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/time/time.h"
#include "service/transport/origin.h"

namespace egress::transport {

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
};
inline constexpr size_t kCloseReasonCount = 10;

enum class DrainSkipReason {
  kConnectionClose,  // the response says Connection: close: the connection is lost anyway
  kOverByteCap,      // Content-Length left to read is above the byte cap
  kDisabled,         // drain mode OFF
};
inline constexpr size_t kDrainSkipReasonCount = 3;

enum class DrainAbandonReason {
  kByteCap,  // more than max_bytes without reaching the end
  kTimeCap,  // the body did not end within max_duration
  kError,    // the connection failed while draining
};
inline constexpr size_t kDrainAbandonReasonCount = 3;

absl::string_view ToString(CloseReason reason);
absl::string_view ToString(DrainSkipReason reason);
absl::string_view ToString(DrainAbandonReason reason);

// What the transport reports at its decision points. The metrics module implements it
// with Prometheus types and tests with plain counters; the transport links neither.
// Calls come from I/O threads, concurrently: implementations must be thread-safe and
// must not block.
class TransportObserver {
 public:
  virtual ~TransportObserver() = default;

  // A request went out on a new (reused = false) or a pooled connection.
  virtual void OnUpstreamRequest(const Origin& origin, bool reused) = 0;
  // A dial succeeded: TCP connected and, for https, the TLS handshake completed.
  virtual void OnConnectionOpened(const Origin& origin) = 0;
  // An opened connection was retired.
  virtual void OnConnectionClosed(const Origin& origin, CloseReason reason) = 0;
  virtual void OnDrainStarted(const Origin& origin) = 0;
  virtual void OnDrainCompleted(const Origin& origin, uint64_t bytes,
                                absl::Duration duration) = 0;
  virtual void OnDrainAbandoned(const Origin& origin, DrainAbandonReason reason,
                                uint64_t bytes, absl::Duration duration) = 0;
  virtual void OnDrainSkipped(const Origin& origin, DrainSkipReason reason) = 0;
  // A dead pooled connection was replaced by a fresh one for an idempotent request.
  virtual void OnRetry(const Origin& origin) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_OBSERVER_H_

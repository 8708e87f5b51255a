#ifndef EGRESS_SERVICE_TRANSPORT_BODY_SETTLER_H_
#define EGRESS_SERVICE_TRANSPORT_BODY_SETTLER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "service/transport/drain/drain_budget.h"
#include "service/transport/http2/stream.h"
#include "service/transport/observer.h"
#include "service/transport/pool/connection.h"
#include "service/transport/pool/connection_pool.h"
#include "service/transport/settings.h"

namespace egress::transport {

// What became of a response's connection once its body was let go of, for the access
// log: "pooled" (nothing was left to read), "drained", "drain_abandoned:<reason>",
// "drain_skipped:<reason>" or "closed:<reason>" (the reasons as the metrics name them);
// for HTTP/2, "pooled", "reset" (RST_STREAM for a body left unread) or "stream_failed".
struct BodySettlement {
  std::string outcome;
  uint64_t drained_bytes = 0;
};
using SettledCallback = std::function<void(const BodySettlement&)>;

// The decisions, without I/O:
// The connection close a skipped drain leaves: the server's own "Connection: close",
// else the unread body.
CloseReason CloseReasonOfSkip(DrainSkipReason skip);
// An HTTP/2 stream let go of: "stream_failed" when it failed, "reset" when it had to be
// reset (its body not read to its end) before the server had sent all of it, else
// "pooled" (read to its end, or all here but unread).
std::string StreamOutcome(bool failed, bool reset, bool body_received);

// The end of a response whose body the caller is done with: an HTTP/1.1 connection goes
// back to the pool, drained first, or closed (per the drain policy in force when the
// drain starts); an HTTP/2 stream left unread is reset and given back. Each ends with
// its SettledCallback. Thread-safe; the pool, budget and observer outlive it.
class BodySettler {
 public:
  // The drain settings in force for a host, asked when a drain starts.
  using DrainSettingsFor = std::function<DrainSettings(absl::string_view host)>;

  BodySettler(ConnectionPool& pool, DrainBudget& drain_budget, TransportObserver& observer,
              DrainSettingsFor drain_settings);

  // HTTP/1.1: pooled, drained first, or closed.
  void FinishResponse(const std::shared_ptr<Connection>& connection, SettledCallback settled);
  // HTTP/1.1: the connection was closed under a read of a body let go of.
  void FinishCancelled(const std::shared_ptr<Connection>& connection,
                       const SettledCallback& settled);
  // HTTP/2: a body left unread is reset (RST_STREAM), unless the stream `failed`; the
  // stream goes back to the pool.
  void FinishStream(const std::shared_ptr<Connection>& connection, http2::Stream& stream,
                    bool failed, const SettledCallback& settled);

  DrainSettings DrainFor(absl::string_view host) const { return drain_settings_(host); }

 private:
  void AfterDrain(const std::shared_ptr<Connection>& connection, const DrainOutcome& outcome,
                  const SettledCallback& settled);

  ConnectionPool& pool_;
  DrainBudget& drain_budget_;
  TransportObserver& observer_;
  const DrainSettingsFor drain_settings_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_BODY_SETTLER_H_

#ifndef EGRESS_SERVICE_TRANSPORT_FETCH_ATTEMPT_H_
#define EGRESS_SERVICE_TRANSPORT_FETCH_ATTEMPT_H_

#include <memory>

#include "absl/time/time.h"
#include "boost/asio/io_context.hpp"
#include "service/transport/body_settler.h"
#include "service/transport/dns/resolver.h"
#include "service/transport/http/request.h"
#include "service/transport/observer.h"
#include "service/transport/policy/policy_history.h"
#include "service/transport/pool/connection_pool.h"
#include "service/transport/resilience/circuit_breaker.h"
#include "service/transport/response.h"
#include "service/transport/settings_snapshot.h"

namespace egress::transport {

// What an attempt works with, all owned by the transport and outliving every attempt.
struct FetchAttemptContext {
  TransportObserver& observer;
  ConnectionPool& pool;
  CircuitBreakers& breakers;
  PolicyHistory& policy_history;
  Resolver& resolver;
  // Where the pool's waits are cancelled and resend backoffs wait (the pool's own loop).
  boost::asio::io_context& timers;
  BodySettler& settler;
};

// Starts one attempt at `request` under `snapshot`'s settings: the policy's name check,
// the origin's circuit breaker, a connection (pooled or dialed, checked against the
// policy), the request sent and the response head read; `done` runs once, with the
// response or the error that prevented it. A reused connection found dead before any
// response byte is replaced once (idempotent requests only), and an HTTP/2 stream the
// server did not process goes again after a backoff.
std::shared_ptr<PendingFetch> StartFetchAttempt(const FetchAttemptContext& context,
                                                std::shared_ptr<const Snapshot> snapshot,
                                                HttpRequest request, absl::Time deadline,
                                                ResponseCallback done);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_FETCH_ATTEMPT_H_

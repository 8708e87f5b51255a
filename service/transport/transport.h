#ifndef EGRESS_SERVICE_TRANSPORT_TRANSPORT_H_
#define EGRESS_SERVICE_TRANSPORT_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "absl/time/time.h"
#include "boost/asio/ssl/context.hpp"
#include "service/transport/body_settler.h"
#include "service/transport/fetch_attempt.h"
#include "service/transport/pool/connection.h"
#include "service/transport/resilience/circuit_breaker.h"
#include "service/transport/dns/resolver.h"
#include "service/transport/drain/drain_budget.h"
#include "service/transport/io/event_loops.h"
#include "service/transport/observer.h"
#include "service/transport/policy/policy_history.h"
#include "service/transport/resilience/retry_budget.h"
#include "service/transport/pool/connection_pool.h"
#include "service/transport/http/request.h"
#include "service/transport/response.h"
#include "service/transport/settings.h"
#include "service/transport/settings_snapshot.h"

namespace egress::transport {

// The shared HTTP/1.1 + TLS transport: one connection pool for every caller, I/O on its
// own threads, auto-drain of unread bodies. Knows nothing of gRPC.
class Transport {
 public:
  using ResponseCallback = transport::ResponseCallback;

  // Fails when the TLS settings cannot be loaded (e.g. a missing extra CA file).
  static absl::StatusOr<std::unique_ptr<Transport>> Create(TransportSettings settings,
                                                           TransportObserver& observer);
  ~Transport();

  // Sends the request on a pooled or new connection; `done` runs once, on an I/O
  // thread, with the response head and body or with the error that prevented them.
  // The deadline bounds every phase, waiting for a connection included.
  std::shared_ptr<PendingFetch> Fetch(HttpRequest request, absl::Time deadline,
                                      ResponseCallback done);

  // The addresses `host` has now, up to `max_per_family` of each family, asked of
  // transport.dns's servers (within `deadline`; from the cache only when no more than an
  // origin's lookup keeps are asked for) for egressd itself, not for a fetch: no egress
  // policy applies, and the lookup counts against the pool's own allowance (as a warm-up
  // dial's does), not a caller's. `done` runs once, on an I/O thread. For the names
  // egressd follows besides origins (affinity.service, service/fleet).
  using Addresses = absl::StatusOr<std::vector<boost::asio::ip::address>>;
  void LookUp(const std::string& host, size_t max_per_family, absl::Time deadline,
              std::function<void(Addresses)> done);

  // The transport's I/O loops, for a front end that serves its callers on them (the data
  // plane, service/dataplane): the transport still runs them and stops them when it goes.
  EventLoops& loops() { return loops_; }

  std::vector<OriginStats> PoolStats() const { return pool_.Stats(); }
  // The origins whose circuit breaker is not closed or has failures counted.
  std::vector<BreakerStats> CircuitBreakerStats() const {
    return breakers_.Stats(absl::Now());
  }
  // The latest policy decisions (settings.policy_history_size), oldest first.
  std::vector<PolicyDecision> RecentPolicyDecisions() const { return policy_history_.Recent(); }

  // The settings new requests get, and the TLS contexts built from them.
  using Snapshot = transport::Snapshot;
  std::shared_ptr<const Snapshot> Current() const;

  // Swaps in new settings: requests under way finish with the ones they started with,
  // new requests and drains that start afterwards use these; lowered pool limits retire
  // surplus idle connections at once. A new egress policy reaches pooled connections at
  // once too: idle ones it denies are retired, busy ones when their exchange or drain
  // ends, and a request checks a connection it reuses against the policy it started
  // with (PERMISSION_DENIED). io_threads cannot change (restart egressd).
  absl::Status UpdateSettings(TransportSettings settings);

 private:
  Transport(TransportObserver& observer, std::shared_ptr<const Snapshot> snapshot);
  std::shared_ptr<Connection> MakeConnection(const Origin& origin);
  // Dials a connection the pool wants ready (min_idle_per_origin) and hands it back.
  void Warm(std::shared_ptr<Connection> connection);

  TransportObserver& observer_;
  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> current_ ABSL_GUARDED_BY(mu_);
  // Before loops_: lookups their handlers hold end (and report) with it.
  const std::unique_ptr<Resolver> resolver_;
  EventLoops loops_;
  DrainBudget drain_budget_;
  PolicyHistory policy_history_;
  CircuitBreakers breakers_;
  RetryBudgets retry_budgets_;
  std::atomic<uint64_t> next_connection_id_{1};
  ConnectionPool pool_;  // its timers run on loops_.first()
  BodySettler settler_;
  const FetchAttemptContext attempt_context_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_TRANSPORT_H_

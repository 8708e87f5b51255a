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
#include "service/transport/resilience/circuit_breaker.h"
#include "service/transport/pool/connection.h"
#include "service/transport/dns/resolver.h"
#include "service/transport/drain/drain_budget.h"
#include "service/transport/io/event_loops.h"
#include "service/transport/observer.h"
#include "service/transport/policy/policy_history.h"
#include "service/transport/resilience/retry_budget.h"
#include "service/transport/pool/connection_pool.h"
#include "service/transport/http/request.h"
#include "service/transport/settings.h"

namespace egress::transport {

class Transport;

// How a request got its connection, like Go's httptrace.GotConnInfo, plus timings.
struct ConnectionDetails {
  uint64_t connection_id = 0;
  bool reused = false;    // the connection had carried an earlier request
  bool was_idle = false;  // it came from the idle pool
  absl::Duration idle_time;
  std::string remote_address;
  std::string protocol;  // "http/1.1" or "h2"
  DialTiming dial;  // zero for a reused connection
  absl::Duration time_to_first_byte;
  bool retried = false;  // sent more than once: a dead pooled connection replaced, or retried
};

// What became of a response's connection once its body was let go of, for the access
// log: "pooled" (nothing was left to read), "drained", "drain_abandoned:<reason>",
// "drain_skipped:<reason>" or "closed:<reason>" (the reasons as the metrics name them);
// for HTTP/2, "pooled", "reset" (RST_STREAM for a body left unread) or "stream_failed".
struct BodySettlement {
  std::string outcome;
  uint64_t drained_bytes = 0;
};
using SettledCallback = std::function<void(const BodySettlement&)>;

// The body of a response, read by its caller in pieces, like Go's resp.Body. What the
// caller does not read is drained in the background (or the connection closed) per the
// drain policy when the body is closed or destroyed. Thread-safe; one Read at a time.
class ResponseBody {
 public:
  ~ResponseBody();
  ResponseBody(const ResponseBody&) = delete;
  ResponseBody& operator=(const ResponseBody&) = delete;

  // Reads up to max_bytes (at least one byte unless the body has ended); an empty
  // string means the body ended. Close during a read gives that read the drain's time
  // cap to finish (the rest then drains as usual), else the connection closes under it;
  // its callback gets CANCELLED either way.
  void Read(size_t max_bytes, Connection::ReadCallback done);
  // Lets go of the body; returns at once. Idempotent. What is left is drained or the
  // connection closed, per the drain policy.
  void Close();
  // `settled` runs once when the connection has been pooled, drained or closed after
  // the body: on the thread that ends it (an I/O thread, or the one calling Close or
  // destroying the body). Set it before the body ends or is closed.
  void OnSettled(SettledCallback settled);

 private:
  friend class Exchange;
  friend class Transport;
  struct State;
  explicit ResponseBody(std::shared_ptr<State> state);
  void ReadStream(size_t max_bytes, Connection::ReadCallback done);

  std::shared_ptr<State> state_;
};

struct Response {
  ResponseHead head;
  ConnectionDetails connection;
  std::unique_ptr<ResponseBody> body;
  // The report-only rules that would have denied this fetch (policy.report_only), named
  // as PolicyVerdict names them; for the access log's "would deny". A reused connection
  // is judged by the address it is connected to.
  std::vector<std::string> would_deny_rules;
  // The rule that let the fetch through, named the same way ("allow_cidrs:10.0.0.0/8",
  // "default_allow", ...), for the access log.
  std::string policy_rule;
};

// A request under way; Cancel aborts it (its callback gets CANCELLED) unless its
// response has already been delivered.
class PendingFetch {
 public:
  virtual ~PendingFetch() = default;
  virtual void Cancel() = 0;
};

// The shared HTTP/1.1 + TLS transport: one connection pool for every caller, I/O on its
// own threads, auto-drain of unread bodies. Knows nothing of gRPC.
class Transport {
 public:
  using ResponseCallback = std::function<void(absl::StatusOr<Response>)>;

  // Fails when the TLS settings cannot be loaded (e.g. a missing extra CA file).
  static absl::StatusOr<std::unique_ptr<Transport>> Create(TransportSettings settings,
                                                           TransportObserver& observer);
  ~Transport();

  // Sends the request on a pooled or new connection; `done` runs once, on an I/O
  // thread, with the response head and body or with the error that prevented them.
  // The deadline bounds every phase, waiting for a connection included.
  std::shared_ptr<PendingFetch> Fetch(HttpRequest request, absl::Time deadline,
                                      ResponseCallback done);

  std::vector<OriginStats> PoolStats() const { return pool_.Stats(); }
  // The origins whose circuit breaker is not closed or has failures counted.
  std::vector<BreakerStats> CircuitBreakerStats() const {
    return breakers_.Stats(absl::Now());
  }
  // The latest policy decisions (settings.policy_history_size), oldest first.
  std::vector<PolicyDecision> RecentPolicyDecisions() const { return policy_history_.Recent(); }

  // The settings new requests get, and the TLS context built from them.
  struct Snapshot {
    TransportSettings settings;
    std::shared_ptr<boost::asio::ssl::context> tls_context;
    // One per settings.origin_overrides entry; null where the override sets no TLS.
    std::vector<std::shared_ptr<boost::asio::ssl::context>> override_tls;
    // The settings as they apply to a host no override matches, and to each override's
    // hosts (settings.With), made once per config rather than copied for every fetch.
    TransportSettings for_other_hosts;
    std::vector<TransportSettings> for_override;

    // The TLS context for connections to `host`.
    std::shared_ptr<boost::asio::ssl::context> TlsFor(absl::string_view host) const;
    // The settings for `host` (settings.ForHost), as long as this snapshot lives.
    const TransportSettings& SettingsFor(absl::string_view host) const;
    // The first of settings.origin_overrides matching `host`, if any.
    std::optional<size_t> OverrideIndex(absl::string_view host) const;
  };
  std::shared_ptr<const Snapshot> Current() const;

  // Swaps in new settings: requests under way finish with the ones they started with,
  // new requests and drains that start afterwards use these; lowered pool limits retire
  // surplus idle connections at once. A new egress policy reaches pooled connections at
  // once too: idle ones it denies are retired, busy ones when their exchange or drain
  // ends, and a request checks a connection it reuses against the policy it started
  // with (PERMISSION_DENIED). io_threads cannot change (restart egressd).
  absl::Status UpdateSettings(TransportSettings settings);

 private:
  friend class Exchange;
  friend class ResponseBody;

  Transport(TransportObserver& observer, std::shared_ptr<const Snapshot> snapshot);
  // Builds the TLS contexts the settings need; fails on unreadable certificate files.
  static absl::StatusOr<std::shared_ptr<const Snapshot>> MakeSnapshot(
      TransportSettings settings);
  static PoolLimitsByHost PoolLimitsOf(const TransportSettings& settings);
  std::shared_ptr<Connection> MakeConnection(const Origin& origin);
  // Dials a connection the pool wants ready (min_idle_per_origin) and hands it back.
  void Warm(std::shared_ptr<Connection> connection);
  // The end of an exchange whose body the caller is done with: back to the pool,
  // drained first, or closed.
  void FinishResponse(const std::shared_ptr<Connection>& connection, SettledCallback settled);
  void AfterDrain(const std::shared_ptr<Connection>& connection, const DrainOutcome& outcome,
                  const SettledCallback& settled);
  // The end of an HTTP/2 response whose body the caller is done with (or whose stream
  // `failed`): a body left unread is reset (RST_STREAM), and the stream goes back to the
  // pool.
  void FinishStream(ResponseBody::State& body, bool failed);

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
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_TRANSPORT_H_

#ifndef EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_POOL_H_
#define EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/steady_timer.hpp"
#include "service/transport/pool/connection.h"
#include "service/transport/pool/connection_lifetime.h"
#include "service/transport/pool/pool_limits.h"
#include "service/transport/drain/cost_model.h"
#include "service/transport/drain/drain_decision.h"
#include "service/transport/observer.h"
#include "service/transport/http/origin.h"
#include "service/transport/pool/origin_stats.h"

namespace egress::transport {

// The one pool of upstream connections shared by all callers, keyed by origin.
// It decides which connection a request gets and keeps the per-origin limits; it does
// no I/O of its own beyond closing connections. Thread-safe.
//
// Locks here and elsewhere are std::mutex rather than absl::Mutex: Debian's Abseil is
// not built with ThreadSanitizer, so its locks would be invisible to our TSan runs.
class ConnectionPool {
 public:
  using ConnectionFactory = std::function<std::shared_ptr<Connection>(const Origin&)>;
  // Dials a new connection for no request (pre-warming): the dialer Returns it to the
  // pool when it is open, or Retires it (kDialFailed).
  using WarmDialer = std::function<void(std::shared_ptr<Connection>)>;

  // A connection for one request: an idle one (reused), or a new one still to dial.
  struct Lease {
    std::shared_ptr<Connection> connection;
    bool reused = false;
    absl::Duration idle_for;  // how long it sat idle, when reused
    // Set when the request found no idle connection while one was draining.
    std::optional<DrainAwareChoice> drain_choice;
    // A new connection while drains are under way: one of them may end before the dial
    // does, and AwaitReturn hands it over.
    bool may_race = false;
    // A stream on an HTTP/2 connection others may be using too: the request opens its
    // stream on connection->session() and gives it back with ReturnStream.
    bool multiplexed = false;
    // An HTTP/2 connection idle for PoolLimits::http2_ping_interval: the request checks
    // it with a PING and tells Checked the answer; nobody else gets a stream on it first.
    bool check_first = false;
  };
  using LeaseCallback = std::function<void(absl::StatusOr<Lease>)>;
  using WaitId = uint64_t;

  // Timers run on `executor`; destroy the pool only once it has stopped running.
  ConnectionPool(boost::asio::any_io_executor executor, PoolLimitsByHost limits,
                 ConnectionFactory factory, WarmDialer warm_dialer = nullptr);
  ~ConnectionPool();

  // Hands out the most recently used idle connection, or a new one while the origin is
  // under max_conns_per_origin; otherwise queues the request until a connection frees or
  // the deadline passes (DEADLINE_EXCEEDED), unless max_waiting requests already wait
  // (RESOURCE_EXHAUSTED at once). `fresh` skips idle connections (a retry).
  // `done` may run before Acquire returns. The returned id names a queued wait.
  //
  // For a drain-aware origin (ADAPTIVE), a request that finds no idle connection while
  // some are draining asks the cost model: it waits for the one expected to end before a
  // dial would (bounded; it dials after that, or at once when a connection is retired),
  // or it gets a new connection with may_race set.
  WaitId Acquire(const Origin& origin, bool fresh, absl::Time deadline, LeaseCallback done);
  // For a request dialing a may_race connection: `done` gets the first connection that
  // comes back to the pool before the wait is cancelled or the deadline passes.
  WaitId AwaitReturn(const Origin& origin, absl::Time deadline, LeaseCallback done);
  // Gives up a queued wait: its callback gets CANCELLED. No effect once served.
  void CancelWait(WaitId id);

  // A connection whose exchange ended cleanly (or a new one nobody needed any more): it
  // goes to a waiting request or idles. False when the pool was full and closed it.
  bool Return(std::shared_ptr<Connection> connection);
  // Closes a connection and frees its place.
  void Retire(const std::shared_ptr<Connection>& connection, CloseReason reason);

  // A connection a request has just dialed: what it speaks is what its origin speaks.
  // One that speaks HTTP/2 carries that request's stream (the request's lease becomes a
  // stream lease) and from now on other requests' streams too, up to its session's
  // stream limit; requests queued for it get streams at once, or, when it speaks
  // HTTP/1.1, dial their own.
  void Dialed(const std::shared_ptr<Connection>& connection);
  // A stream leased on an HTTP/2 connection has ended: a queued request gets its place;
  // a connection left with no stream idles (or is retired, as Return decides, or because
  // its session takes no more streams: kGoaway).
  void ReturnStream(const std::shared_ptr<Connection>& connection);
  // The answer to a lease's check_first PING: a connection that answered takes streams
  // from others again; one that did not is retired (kStale).
  void Checked(const std::shared_ptr<Connection>& connection, bool answered);
  // An HTTP/2 connection's session takes no more streams (GOAWAY, an error, the server's
  // close): one idle is retired now (kGoaway), one with streams when they end.
  void SessionEnded(const std::shared_ptr<Connection>& connection);

  OriginCost CostOf(const Origin& origin);
  // What was learned of an origin's costs (see CostModel); each returns the new estimate.
  OriginCost RecordDial(const Origin& origin, absl::Duration duration);
  OriginCost RecordDrain(const Origin& origin, uint64_t bytes, absl::Duration duration,
                         bool completed, bool warm);

  std::vector<OriginStats> Stats() const;
  // New limits for every origin: surplus idle connections are retired at once, and
  // queued requests get any room that opened up.
  void SetLimits(PoolLimitsByHost limits);
  // The egress policy now in force: idle connections it denies (host, or the address
  // connected to) are retired at once, and from now on a connection coming back that it
  // denies is retired instead of idling (CloseReason::kPolicy).
  void SetPolicy(std::shared_ptr<const AddressPolicy> policy);
  // Closes every idle connection and refuses new requests. Returns every connection it
  // had (idle ones closing, busy ones under way), for their owner to let go of what they
  // hold once no loop runs (a close posted to a loop that stops never happens).
  std::vector<std::shared_ptr<Connection>> Shutdown();

  // Cost models kept of origins whose last connection is gone (see OriginPool).
  static constexpr size_t kMaxRecentCosts = 1024;
  // Origins kept warm (min_idle) at once: the most recently used, each for its idle
  // timeout after its last use.
  static constexpr size_t kMaxWarmOrigins = 32;

 private:
  struct IdleEntry {
    std::shared_ptr<Connection> connection;
    absl::Time since;
  };
  enum class WaitFor {
    kRoom,    // room under max_conns_per_origin (or an idle connection)
    kDrain,   // a draining connection to come back; dials when the timer fires first
    kReturn,  // a connection coming back, while the request's own dial goes on
  };
  struct Waiter {
    WaitId id;
    WaitFor what;
    bool fresh;
    absl::Time deadline;
    LeaseCallback done;
    std::shared_ptr<boost::asio::steady_timer> timer;
  };
  // One origin's connections and waiters; erased as soon as it has neither (an origin
  // asked for once must not cost memory and lock time for good). References to it stay
  // valid only until the public call that took them returns. Its cost model (and whether
  // it speaks HTTP/2) outlives it in recent_costs_ when it learned anything.
  struct OriginPool {
    Origin origin;
    std::map<uint64_t, std::shared_ptr<Connection>> live;  // by connection id
    std::vector<IdleEntry> idle;                           // most recent last
    std::deque<Waiter> waiters;
    uint64_t opened = 0;
    uint64_t reused = 0;
    CostModel cost;
    std::optional<KeepAliveHint> last_hint;
    std::set<uint64_t> warming;  // ids of connections dialed for min_idle, until they idle
    // HTTP/2 connections with streams leased, by id: how many. A shared connection with
    // none left idles in `idle` like any other.
    std::map<uint64_t, uint32_t> streams;
    // What the origin's connections speak, once one has been dialed: while one is being
    // dialed to an origin that speaks (or may speak) HTTP/2, a request finding no stream
    // waits for it rather than dialing another.
    std::optional<Connection::Protocol> speaks;
    // Ids of connections handed out to be dialed, until Dialed, Return or Retire: what
    // they will speak is not known yet.
    std::set<uint64_t> dialing;
    // A dial failed since the last one succeeded: requests dial their own again, each
    // failing in its own time rather than one after another behind a single dial.
    bool dial_failed = false;
    // HTTP/2 connections being checked with a PING (Lease::check_first).
    std::set<uint64_t> checking;
    // Pre-warming: the last request for it, and whether it is among warm_origins_ (at
    // warm_slot). Only such an origin, used within its idle timeout, is warmed.
    absl::Time last_used = absl::InfinitePast();
    bool warm = false;
    std::list<Origin>::iterator warm_slot;
    // Idle connections dialed for min_idle that no request has taken yet: closed
    // (kPoolFull) when the origin is pushed out of warm_origins_.
    std::set<uint64_t> warmed;
  };
  // Work decided under the lock and carried out after it: callbacks and closes.
  struct Deferred {
    std::vector<std::pair<LeaseCallback, absl::StatusOr<Lease>>> callbacks;
    std::vector<std::shared_ptr<Connection>> closes;
    std::vector<std::shared_ptr<Connection>> warms;  // to dial (pre-warming)
  };

  using OriginIterator = std::map<Origin, OriginPool>::iterator;
  // The origin's entry, made (with what was learned of it before) if it has none.
  OriginIterator EntryFor(const Origin& origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  OriginPool& PoolFor(const Origin& origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return EntryFor(origin)->second;
  }
  // Runs change(pool, deferred) on the origin's pool under the lock, erases the entry if
  // that left it unused, then runs what was deferred. `origin` is read before the change
  // only (the change may let go of the connection it belongs to).
  template <class Change>
  void ChangePool(const Origin& origin, Change change) ABSL_LOCKS_EXCLUDED(mu_);
  // Erases the origin's entry if it has no connection and no waiter, keeping its cost
  // model; returns the next entry. The last use of a reference to that entry.
  OriginIterator EraseIfUnused(OriginIterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseIfUnused(const Origin& origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the policy in force denies an opened connection.
  bool DeniedByPolicy(const Connection& connection) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasRoom(const OriginPool& pool) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the lifetime decisions look at, of one of this pool's connections.
  ConnectionFacts FactsOf(const Connection& connection) const;
  // Retires the most recently used idle connections while they are past their idle
  // deadline (see IdleDeadlineOf), so that the next one TakeIdle hands out is not.
  void RetireExpiredNewest(OriginPool& pool, absl::Time now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const PoolLimits& LimitsOf(const OriginPool& pool) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return limits_.For(pool.origin.host);
  }
  Lease NewConnection(OriginPool& pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stream on a shared HTTP/2 connection with room for one, if any.
  std::optional<Lease> LeaseStream(OriginPool& pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a request finding no stream should wait for a dial under way: the origin
  // speaks HTTP/2, or has not said and is offered it.
  bool AwaitsHttp2Dial(const OriginPool& pool) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A connection that has no exchange or stream left: to a waiter, to `idle`, or
  // retired (shutdown, policy, lifetime, pool full). True when it idles.
  bool KeepOrRetire(OriginPool& pool, std::shared_ptr<Connection> connection,
                    Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The most recently used idle connection, taken out of the pool.
  Lease TakeIdle(OriginPool& pool, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AnyDraining(const OriginPool& pool) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts dials until the origin has min_idle idle or warming connections, within
  // max_conns_per_origin; only when nobody waits (they get the room first), and only for
  // an origin among warm_origins_ used within its idle timeout.
  void Warm(OriginPool& pool, Deferred& deferred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A request for the origin at `now`: with min_idle, it becomes the most recently used
  // of warm_origins_ (the least recently used past kMaxWarmOrigins is warm no more).
  // Its idle connections dialed only for warmth are closed, then.
  void MarkUsed(OriginPool& pool, absl::Time now, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the origin is kept warm now (see Warm).
  bool KeptWarm(const OriginPool& pool, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pool.warm && now - pool.last_used < LimitsOf(pool).idle_timeout;
  }
  // What the cost model says for a request finding no idle connection; none when the
  // origin is not drain-aware or nothing is draining.
  std::optional<AcquireDecision> DrainAwareDecision(const OriginPool& pool) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a request under `id` (a new one if 0); its timer fires at `until`.
  WaitId Enqueue(OriginPool& pool, WaitFor what, bool fresh, absl::Time until,
                 absl::Time deadline, LeaseCallback done, WaitId id = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveIdle(OriginPool& pool, const Connection& connection)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Serves queued requests that the origin now has an idle connection or room for;
  // `retired`: a connection went away, so those waiting for a drain dial now.
  // A waiter's timer, cancelled on its own strand (wait_queue.cc).
  static void CancelTimer(const std::shared_ptr<boost::asio::steady_timer>& timer);
  void ServeWaiters(OriginPool& pool, bool retired, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetireLocked(OriginPool& pool, const std::shared_ptr<Connection>& connection,
                    CloseReason reason, Deferred& deferred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a queued wait and says for which origin; none if it is no longer queued.
  std::optional<Waiter> TakeWaiter(WaitId id, Origin* origin)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(Deferred& deferred);
  void OnWaitExpired(WaitId id);
  void ScheduleIdleSweep();
  // Retires idle connections past the idle timeout; false once the pool is shut down.
  bool SweepIdle();

  boost::asio::any_io_executor executor_;
  const ConnectionFactory factory_;
  const WarmDialer warm_dialer_;
  boost::asio::steady_timer sweep_timer_;
  const uint64_t age_seed_;  // each connection's age jitter is drawn from it and its id

  mutable std::mutex mu_;
  PoolLimitsByHost limits_ ABSL_GUARDED_BY(mu_);
  std::map<Origin, OriginPool> origins_ ABSL_GUARDED_BY(mu_);
  // What erased origins taught (cost models, HTTP/2), most recently used first, at most
  // kMaxRecentCosts.
  struct Learned {
    CostModel cost;
    std::optional<Connection::Protocol> speaks;
  };
  std::list<std::pair<Origin, Learned>> recent_costs_ ABSL_GUARDED_BY(mu_);
  std::map<Origin, std::list<std::pair<Origin, Learned>>::iterator>
      recent_cost_index_ ABSL_GUARDED_BY(mu_);
  // Keys of the origins that may be warmed, most recently used first, at most
  // kMaxWarmOrigins; each is in origins_ (EraseIfUnused takes it out).
  std::list<Origin> warm_origins_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const AddressPolicy> policy_ ABSL_GUARDED_BY(mu_);  // none: no check
  WaitId next_wait_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_POOL_H_

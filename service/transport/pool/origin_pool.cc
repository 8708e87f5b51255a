// ConnectionPool's decisions about one origin's connections: room for another, which
// idle one to lease, which HTTP/2 session has a stream free, when to retire or warm.
#include <algorithm>
#include <utility>

#include "service/base/error_reason.h"
#include "service/transport/pool/connection_pool.h"

namespace egress::transport {

namespace {

// splitmix64: spreads consecutive connection ids over the whole range.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

}  // namespace

bool ConnectionPool::HasRoom(const OriginPool& pool) const {
  const PoolLimits& limits = LimitsOf(pool);
  return limits.max_conns_per_origin == 0 || pool.live.size() < limits.max_conns_per_origin;
}

ConnectionFacts ConnectionPool::FactsOf(const Connection& connection) const {
  ConnectionFacts facts;
  facts.created = connection.created();
  facts.requests = connection.requests();
  facts.hint = connection.keep_alive_hint();
  facts.age_draw = static_cast<double>(Mix(age_seed_ ^ connection.id()) >> 11) * 0x1.0p-53;
  return facts;
}

void ConnectionPool::RetireExpiredNewest(OriginPool& pool, absl::Time now, Deferred& deferred) {
  while (!pool.idle.empty()) {
    const IdleEntry& newest = pool.idle.back();
    const IdleDeadline deadline = IdleDeadlineOf(FactsOf(*newest.connection), newest.since,
                                                 LimitsOf(pool).idle_timeout,
                                                 LimitsOf(pool).lifetime);
    if (now < deadline.at) return;
    const std::shared_ptr<Connection> expired = newest.connection;
    RetireLocked(pool, expired, deadline.reason, deferred);
  }
}

void ConnectionPool::Warm(OriginPool& pool, Deferred& deferred) {
  if (!warm_dialer_ || shut_down_ || !pool.waiters.empty()) return;
  // Not for every name a caller ever asked for: an origin unused for its idle timeout,
  // or pushed out of warm_origins_, is let go (its idle connections time out as usual).
  if (!KeptWarm(pool, absl::Now())) return;
  const uint32_t min_idle = std::min(LimitsOf(pool).min_idle, LimitsOf(pool).max_idle_per_origin);
  while (pool.idle.size() + pool.warming.size() < min_idle && HasRoom(pool)) {
    Lease lease = NewConnection(pool);
    pool.warming.insert(lease.connection->id());
    deferred.warms.push_back(std::move(lease.connection));
  }
}

void ConnectionPool::MarkUsed(OriginPool& pool, absl::Time now, Deferred& deferred) {
  pool.last_used = now;
  if (LimitsOf(pool).min_idle == 0) return;
  if (pool.warm) {
    warm_origins_.splice(warm_origins_.begin(), warm_origins_, pool.warm_slot);
  } else {
    warm_origins_.push_front(pool.origin);
    pool.warm = true;
  }
  pool.warm_slot = warm_origins_.begin();
  if (warm_origins_.size() > kMaxWarmOrigins) {
    const OriginIterator coldest = origins_.find(warm_origins_.back());
    warm_origins_.pop_back();
    OriginPool& cold = coldest->second;
    cold.warm = false;
    std::vector<std::shared_ptr<Connection>> unused;
    for (const uint64_t id : cold.warmed) unused.push_back(cold.live.at(id));
    for (const auto& connection : unused) {
      RetireLocked(cold, connection, CloseReason::kPoolFull, deferred);
    }
    EraseIfUnused(coldest);
  }
}

ConnectionPool::Lease ConnectionPool::NewConnection(OriginPool& pool) {
  Lease lease;
  lease.connection = factory_(pool.origin);
  pool.live.emplace(lease.connection->id(), lease.connection);
  pool.dialing.insert(lease.connection->id());
  ++pool.opened;
  return lease;
}

ConnectionPool::Lease ConnectionPool::TakeIdle(OriginPool& pool, absl::Time now) {
  // The most recently used connection of the caller's own loop, so that a fetch made on a
  // loop (the loop data plane) keeps its I/O on its thread; else the most recently used.
  auto taken = std::prev(pool.idle.end());
  for (auto it = pool.idle.rbegin(); it != pool.idle.rend(); ++it) {
    if (!it->connection->OnCallersLoop()) continue;
    const IdleDeadline deadline = IdleDeadlineOf(FactsOf(*it->connection), it->since,
                                                 LimitsOf(pool).idle_timeout,
                                                 LimitsOf(pool).lifetime);
    if (now < deadline.at) taken = std::prev(it.base());
    break;
  }
  IdleEntry entry = std::move(*taken);
  pool.idle.erase(taken);
  pool.warmed.erase(entry.connection->id());
  entry.connection->SetPooled(false);
  ++pool.reused;
  Lease lease;
  lease.connection = std::move(entry.connection);
  lease.reused = true;
  lease.idle_for = now - entry.since;
  if (lease.connection->protocol() == Connection::Protocol::kHttp2) {
    pool.streams.emplace(lease.connection->id(), 1);  // shared from now on
    lease.multiplexed = true;
    const absl::Duration ping_interval = LimitsOf(pool).http2_ping_interval;
    if (ping_interval > absl::ZeroDuration() && lease.idle_for >= ping_interval) {
      lease.check_first = true;
      pool.checking.insert(lease.connection->id());
    }
  }
  return lease;
}

std::optional<ConnectionPool::Lease> ConnectionPool::LeaseStream(OriginPool& pool) {
  const absl::Time now = absl::Now();
  // A connection of the caller's own loop first (see TakeIdle), then any.
  decltype(pool.streams)::value_type* chosen = nullptr;
  for (auto& entry : pool.streams) {
    const auto& [id, leased] = entry;
    const std::shared_ptr<Connection>& connection = pool.live.at(id);
    const http2::Session& session = *connection->session();
    // Being checked, past its lifetime, denied by a new policy or HTTP/2 turned off: its
    // streams finish, and it retires (or, checked, takes streams again).
    if (!session.Usable() || leased >= session.StreamLimit() || pool.checking.count(id) != 0 ||
        LimitsOf(pool).http2_mode == Http2Mode::kOff || DeniedByPolicy(*connection) ||
        RetireAfterExchange(FactsOf(*connection), LimitsOf(pool).lifetime, now)) {
      continue;
    }
    const bool own_loop = connection->OnCallersLoop();
    if (!chosen || own_loop) chosen = &entry;
    if (own_loop) break;
  }
  if (!chosen) return std::nullopt;
  ++chosen->second;
  ++pool.reused;
  Lease lease;
  lease.connection = pool.live.at(chosen->first);
  lease.reused = true;
  lease.multiplexed = true;
  return lease;
}

bool ConnectionPool::AwaitsHttp2Dial(const OriginPool& pool) const {
  const Http2Mode mode = LimitsOf(pool).http2_mode;
  const bool offered = mode != Http2Mode::kOff &&
                       (pool.origin.tls || mode == Http2Mode::kRequired ||
                        mode == Http2Mode::kPriorKnowledge);
  const bool may_share = pool.speaks ? *pool.speaks == Connection::Protocol::kHttp2 : offered;
  return may_share && !pool.dial_failed && !pool.dialing.empty();
}

void ConnectionPool::RemoveIdle(OriginPool& pool, const Connection& connection) {
  auto& idle = pool.idle;
  idle.erase(std::remove_if(idle.begin(), idle.end(),
                            [&](const IdleEntry& e) { return e.connection.get() == &connection; }),
             idle.end());
}

bool ConnectionPool::AnyDraining(const OriginPool& pool) const {
  return std::any_of(pool.live.begin(), pool.live.end(), [](const auto& entry) {
    return entry.second->state() == ConnectionState::kDraining;
  });
}

std::optional<AcquireDecision> ConnectionPool::DrainAwareDecision(const OriginPool& pool) const {
  const PoolLimits& limits = LimitsOf(pool);
  if (!limits.drain_aware) return std::nullopt;
  std::vector<std::optional<absl::Duration>> finishes;
  for (const auto& [id, connection] : pool.live) {
    if (connection->state() != ConnectionState::kDraining) continue;
    finishes.push_back(ExpectedTimeToFinish(connection->drain_progress(), pool.cost.estimate()));
  }
  if (finishes.empty()) return std::nullopt;
  return DecideAcquire(DialCost(limits.min_dial_cost, pool.cost.estimate()), finishes);
}

}  // namespace egress::transport

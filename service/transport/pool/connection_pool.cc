#include "service/transport/pool/connection_pool.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "boost/asio/strand.hpp"
#include "service/base/error_reason.h"

namespace egress::transport {

namespace net = boost::asio;

ConnectionPool::ConnectionPool(net::any_io_executor executor, PoolLimitsByHost limits,
                               ConnectionFactory factory, WarmDialer warm_dialer)
    : executor_(std::move(executor)),
      factory_(std::move(factory)),
      warm_dialer_(std::move(warm_dialer)),
      sweep_timer_(net::make_strand(executor_)),
      age_seed_((uint64_t{std::random_device{}()} << 32) | std::random_device{}()),
      limits_(limits) {
  ScheduleIdleSweep();
}

ConnectionPool::~ConnectionPool() { Shutdown(); }

ConnectionPool::OriginIterator ConnectionPool::EntryFor(const Origin& origin) {
  auto [it, inserted] = origins_.try_emplace(origin);
  if (inserted) {
    it->second.origin = origin;
    if (auto recent = recent_cost_index_.find(it->first); recent != recent_cost_index_.end()) {
      it->second.cost = std::move(recent->second->second.cost);
      it->second.speaks = recent->second->second.speaks;
      recent_costs_.erase(recent->second);
      recent_cost_index_.erase(recent);
    }
  }
  return it;
}

template <class Change>
void ConnectionPool::ChangePool(const Origin& origin, Change change) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const OriginIterator entry = EntryFor(origin);
    change(entry->second, deferred);
    EraseIfUnused(entry);
  }
  Run(deferred);
}

ConnectionPool::OriginIterator ConnectionPool::EraseIfUnused(OriginIterator it) {
  OriginPool& pool = it->second;
  if (!pool.live.empty() || !pool.waiters.empty()) return std::next(it);
  if (pool.warm) warm_origins_.erase(pool.warm_slot);
  // ADAPTIVE's estimates survive a quiet spell (the idle timeout retiring the last
  // connection); an origin that never got as far as a dial has none to keep.
  const OriginCost& learned = pool.cost.estimate();
  if (learned.dial || learned.body_bytes_per_second || learned.drain_time || pool.speaks) {
    recent_costs_.emplace_front(it->first, Learned{std::move(pool.cost), pool.speaks});
    recent_cost_index_[it->first] = recent_costs_.begin();
    if (recent_costs_.size() > kMaxRecentCosts) {
      recent_cost_index_.erase(recent_costs_.back().first);
      recent_costs_.pop_back();
    }
  }
  return origins_.erase(it);
}

void ConnectionPool::EraseIfUnused(const Origin& origin) {
  if (auto it = origins_.find(origin); it != origins_.end()) EraseIfUnused(it);
}

bool ConnectionPool::DeniedByPolicy(const Connection& connection) const {
  if (!policy_) return false;
  const std::optional<net::ip::address> address = connection.remote_ip();
  return address && policy_->Check(connection.origin().host, *address).has_value();
}

ConnectionPool::WaitId ConnectionPool::Acquire(const Origin& origin, bool fresh,
                                               absl::Time deadline, LeaseCallback done) {
  Deferred deferred;
  WaitId wait_id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      deferred.callbacks.emplace_back(std::move(done),
                                      absl::UnavailableError("egress is shutting down"));
    } else {
      OriginPool& pool = PoolFor(origin);
      const absl::Time now = absl::Now();
      MarkUsed(pool, now, deferred);
      bool served = false;
      // A stream on a busy HTTP/2 connection first; then idle connections, most
      // recently used first, expired ones retired on the way.
      if (!fresh) {
        if (std::optional<Lease> stream = LeaseStream(pool)) {
          deferred.callbacks.emplace_back(std::move(done), *std::move(stream));
          served = true;
        }
      }
      if (!served && !fresh) RetireExpiredNewest(pool, now, deferred);
      if (!served && !fresh && !pool.idle.empty()) {
        deferred.callbacks.emplace_back(std::move(done), TakeIdle(pool, now));
        served = true;
        Warm(pool, deferred);
      }
      if (!served) {
        const std::optional<AcquireDecision> decision =
            fresh ? std::nullopt : DrainAwareDecision(pool);
        if (decision && decision->choice == DrainAwareChoice::kWait) {
          wait_id = Enqueue(pool, WaitFor::kDrain, fresh, std::min(now + decision->wait, deadline),
                            deadline, std::move(done));
        } else if (!fresh && AwaitsHttp2Dial(pool) &&
                   pool.waiters.size() < LimitsOf(pool).max_waiting) {
          // The connection being dialed will carry this request's stream too.
          wait_id = Enqueue(pool, WaitFor::kRoom, fresh, deadline, deadline, std::move(done));
        } else if (!fresh && AwaitsHttp2Dial(pool)) {
          deferred.callbacks.emplace_back(
              std::move(done),
              WithReason(absl::ResourceExhaustedError(absl::StrCat(
                             pool.waiters.size(), " requests already wait for the connection "
                             "being dialed to ", origin.Key(),
                             " (transport.max_waiting_per_origin); retry later")),
                         "ORIGIN_BUSY", {{"origin", origin.Key()}}, kRetryAfterLoad));
        } else if (HasRoom(pool)) {
          Lease lease = NewConnection(pool);
          if (decision) {
            lease.drain_choice = DrainAwareChoice::kDial;
            lease.may_race = true;
          }
          deferred.callbacks.emplace_back(std::move(done), std::move(lease));
        } else if (pool.waiters.size() >= LimitsOf(pool).max_waiting) {
          deferred.callbacks.emplace_back(
              std::move(done),
              WithReason(absl::ResourceExhaustedError(absl::StrCat(
                             "all ", LimitsOf(pool).max_conns_per_origin, " connections to ",
                             origin.Key(), " are busy and ", pool.waiters.size(),
                             " requests already wait for one (transport.max_conns_per_origin, "
                             "transport.max_waiting_per_origin); retry later")),
                         "ORIGIN_BUSY", {{"origin", origin.Key()}}, kRetryAfterLoad));
        } else {
          wait_id = Enqueue(pool, WaitFor::kRoom, fresh, deadline, deadline, std::move(done));
        }
      }
    }
  }
  Run(deferred);
  return wait_id;
}

ConnectionPool::WaitId ConnectionPool::AwaitReturn(const Origin& origin, absl::Time deadline,
                                                   LeaseCallback done) {
  WaitId wait_id = 0;
  ChangePool(origin, [&](OriginPool& pool, Deferred& deferred) {
    if (shut_down_) {
      deferred.callbacks.emplace_back(std::move(done),
                                      absl::UnavailableError("egress is shutting down"));
      return;
    }
    RetireExpiredNewest(pool, absl::Now(), deferred);
    if (!pool.idle.empty()) {  // one came back since Acquire
      deferred.callbacks.emplace_back(std::move(done), TakeIdle(pool, absl::Now()));
    } else {
      wait_id = Enqueue(pool, WaitFor::kReturn, false, deadline, deadline, std::move(done));
    }
  });
  return wait_id;
}

bool ConnectionPool::KeepOrRetire(OriginPool& pool, std::shared_ptr<Connection> connection,
                                  Deferred& deferred) {
  const bool warmed = pool.warming.erase(connection->id()) != 0;
  pool.dialing.erase(connection->id());
  if (connection->opened()) pool.speaks = connection->protocol();
  const ConnectionFacts facts = FactsOf(*connection);
  if (facts.hint) pool.last_hint = facts.hint;
  std::optional<CloseReason> spent;
  if (shut_down_) {
    RetireLocked(pool, connection, CloseReason::kShutdown, deferred);
  } else if (connection->protocol() == Connection::Protocol::kHttp2 &&
             LimitsOf(pool).http2_mode == Http2Mode::kOff) {
    RetireLocked(pool, connection, CloseReason::kHttp2Off, deferred);
  } else if (DeniedByPolicy(*connection)) {  // dialed under a policy since replaced
    RetireLocked(pool, connection, CloseReason::kPolicy, deferred);
  } else if (spent = RetireAfterExchange(facts, LimitsOf(pool).lifetime, absl::Now()); spent) {
    RetireLocked(pool, connection, *spent, deferred);
  } else if (pool.idle.size() >= LimitsOf(pool).max_idle_per_origin ||
             (warmed && !KeptWarm(pool, absl::Now()))) {  // dialed for warmth no longer kept
    RetireLocked(pool, connection, CloseReason::kPoolFull, deferred);
  } else {
    if (warmed) pool.warmed.insert(connection->id());
    connection->SetPooled(true);
    pool.idle.push_back(IdleEntry{std::move(connection), absl::Now()});
    return true;
  }
  return false;
}

bool ConnectionPool::Return(std::shared_ptr<Connection> connection) {
  bool kept = false;
  ChangePool(connection->origin(), [&](OriginPool& pool, Deferred& deferred) {
    kept = KeepOrRetire(pool, std::move(connection), deferred);
    ServeWaiters(pool, /*retired=*/!kept, deferred);
    Warm(pool, deferred);
  });
  return kept;
}

void ConnectionPool::Dialed(const std::shared_ptr<Connection>& connection) {
  ChangePool(connection->origin(), [&](OriginPool& pool, Deferred& deferred) {
    if (pool.live.count(connection->id()) == 0) return;  // retired meanwhile
    pool.dialing.erase(connection->id());
    pool.dial_failed = false;
    pool.speaks = connection->protocol();
    if (connection->protocol() == Connection::Protocol::kHttp2) {
      pool.streams.emplace(connection->id(), 1);  // the dialing request's
    }
    ServeWaiters(pool, /*retired=*/false, deferred);
  });
}

void ConnectionPool::Checked(const std::shared_ptr<Connection>& connection, bool answered) {
  ChangePool(connection->origin(), [&](OriginPool& pool, Deferred& deferred) {
    if (pool.checking.erase(connection->id()) == 0) return;
    if (!answered) RetireLocked(pool, connection, CloseReason::kStale, deferred);
    ServeWaiters(pool, /*retired=*/!answered, deferred);
  });
}

void ConnectionPool::SessionEnded(const std::shared_ptr<Connection>& connection) {
  ChangePool(connection->origin(), [&](OriginPool& pool, Deferred& deferred) {
    const bool idle = pool.live.count(connection->id()) != 0 &&
                      pool.streams.count(connection->id()) == 0 &&
                      pool.dialing.count(connection->id()) == 0;
    if (!idle) return;
    RetireLocked(pool, connection, CloseReason::kGoaway, deferred);
    ServeWaiters(pool, /*retired=*/true, deferred);
  });
}

void ConnectionPool::ReturnStream(const std::shared_ptr<Connection>& connection) {
  ChangePool(connection->origin(), [&](OriginPool& pool, Deferred& deferred) {
    // Not found: retired already, and its streams with it.
    auto it = pool.streams.find(connection->id());
    if (it == pool.streams.end()) return;
    bool retired = false;
    if (--it->second == 0) {
      pool.streams.erase(it);
      pool.checking.erase(connection->id());  // a check given up on: no one waits for it
      if (!connection->StillOpenAndQuiet()) {  // GOAWAY, or the session ended
        RetireLocked(pool, connection, CloseReason::kGoaway, deferred);
        retired = true;
      } else {
        retired = !KeepOrRetire(pool, connection, deferred);
      }
    }
    ServeWaiters(pool, retired, deferred);
    Warm(pool, deferred);
  });
}

void ConnectionPool::Retire(const std::shared_ptr<Connection>& connection, CloseReason reason) {
  ChangePool(connection->origin(), [&](OriginPool& pool, Deferred& deferred) {
    RetireLocked(pool, connection, reason, deferred);
    ServeWaiters(pool, /*retired=*/true, deferred);
    // Not after a failed dial: the next sweep tries again, at most once per period.
    if (reason != CloseReason::kDialFailed) Warm(pool, deferred);
  });
}

void ConnectionPool::RetireLocked(OriginPool& pool,
                                  const std::shared_ptr<Connection>& connection,
                                  CloseReason reason, Deferred& deferred) {
  RemoveIdle(pool, *connection);
  pool.warming.erase(connection->id());
  pool.warmed.erase(connection->id());
  if (pool.dialing.erase(connection->id()) != 0 && reason == CloseReason::kDialFailed) {
    pool.dial_failed = true;
  }
  pool.streams.erase(connection->id());
  pool.checking.erase(connection->id());
  if (pool.live.erase(connection->id()) == 0) return;  // retired already
  connection->MarkClosed(reason);
  deferred.closes.push_back(connection);
}

OriginCost ConnectionPool::CostOf(const Origin& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  const OriginCost cost = PoolFor(origin).cost.estimate();
  EraseIfUnused(origin);
  return cost;
}

OriginCost ConnectionPool::RecordDial(const Origin& origin, absl::Duration duration) {
  std::lock_guard<std::mutex> lock(mu_);
  CostModel& cost = PoolFor(origin).cost;
  cost.RecordDial(duration);
  const OriginCost estimate = cost.estimate();
  EraseIfUnused(origin);
  return estimate;
}

OriginCost ConnectionPool::RecordDrain(const Origin& origin, uint64_t bytes,
                                       absl::Duration duration, bool completed, bool warm) {
  std::lock_guard<std::mutex> lock(mu_);
  CostModel& cost = PoolFor(origin).cost;
  cost.RecordDrain(bytes, duration, completed, warm);
  const OriginCost estimate = cost.estimate();
  EraseIfUnused(origin);
  return estimate;
}

void ConnectionPool::Run(Deferred& deferred) {
  for (auto& connection : deferred.closes) connection->Close();
  for (auto& [done, lease] : deferred.callbacks) done(std::move(lease));
  for (auto& connection : deferred.warms) warm_dialer_(std::move(connection));
}

void ConnectionPool::SetLimits(PoolLimitsByHost limits) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    limits_ = limits;
    for (auto it = origins_.begin(); it != origins_.end();) {
      OriginPool& pool = it->second;
      while (pool.idle.size() > LimitsOf(pool).max_idle_per_origin) {
        const std::shared_ptr<Connection> oldest = pool.idle.front().connection;
        RetireLocked(pool, oldest, CloseReason::kPoolFull, deferred);
      }
      if (LimitsOf(pool).http2_mode == Http2Mode::kOff) {
        std::vector<std::shared_ptr<Connection>> http2;
        for (const IdleEntry& entry : pool.idle) {
          if (entry.connection->protocol() == Connection::Protocol::kHttp2) {
            http2.push_back(entry.connection);
          }
        }
        for (const auto& connection : http2) {
          RetireLocked(pool, connection, CloseReason::kHttp2Off, deferred);
        }
        if (pool.speaks == Connection::Protocol::kHttp2) pool.speaks.reset();
      }
      // No Warm here: the transport swaps its settings in after the limits, and a dial
      // started now would still use the old ones. The next sweep warms.
      ServeWaiters(pool, /*retired=*/true, deferred);
      it = EraseIfUnused(it);
    }
  }
  Run(deferred);
}

void ConnectionPool::SetPolicy(std::shared_ptr<const AddressPolicy> policy) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    policy_ = std::move(policy);
    // Only idle ones: the others are retired when they come back (see Return).
    for (auto it = origins_.begin(); it != origins_.end();) {
      OriginPool& pool = it->second;
      std::vector<std::shared_ptr<Connection>> denied;
      for (const IdleEntry& entry : pool.idle) {
        if (DeniedByPolicy(*entry.connection)) denied.push_back(entry.connection);
      }
      for (const auto& connection : denied) {
        RetireLocked(pool, connection, CloseReason::kPolicy, deferred);
      }
      if (!denied.empty()) ServeWaiters(pool, /*retired=*/true, deferred);
      it = EraseIfUnused(it);
    }
  }
  Run(deferred);
}

void ConnectionPool::ScheduleIdleSweep() {
  absl::Duration idle_timeout;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_timeout = limits_.defaults.idle_timeout;
    for (const auto& [pattern, limits] : limits_.overrides) {
      idle_timeout = std::min(idle_timeout, limits.idle_timeout);
    }
  }
  const absl::Duration period =
      std::clamp(idle_timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
  sweep_timer_.expires_after(absl::ToChronoNanoseconds(period));
  sweep_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;  // cancelled: the pool is shutting down
    if (SweepIdle()) ScheduleIdleSweep();
  });
}

bool ConnectionPool::SweepIdle() {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return false;
    const absl::Time now = absl::Now();
    for (auto it = origins_.begin(); it != origins_.end();) {
      OriginPool& pool = it->second;
      std::vector<std::pair<std::shared_ptr<Connection>, CloseReason>> expired;
      for (const IdleEntry& entry : pool.idle) {
        const IdleDeadline deadline =
            IdleDeadlineOf(FactsOf(*entry.connection), entry.since, LimitsOf(pool).idle_timeout,
                           LimitsOf(pool).lifetime);
        if (now >= deadline.at) expired.emplace_back(entry.connection, deadline.reason);
      }
      for (const auto& [connection, reason] : expired) {
        RetireLocked(pool, connection, reason, deferred);
      }
      Warm(pool, deferred);
      it = EraseIfUnused(it);
    }
  }
  Run(deferred);
  return true;
}

std::vector<OriginStats> ConnectionPool::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OriginStats> stats;
  for (const auto& [origin, pool] : origins_) {
    OriginStats s;
    s.origin = origin.Key();
    s.opened = pool.opened;
    s.reused = pool.reused;
    s.waiting = static_cast<int>(pool.waiters.size());
    for (const auto& [id, leased] : pool.streams) {
      s.streams += static_cast<int>(leased);
      // An HTTP/2 connection: its session was set before its streams were first leased.
      s.http2_buffered_body_bytes += pool.live.at(id)->session()->stats().buffered_body_bytes;
    }
    s.server_hint = pool.last_hint;
    const absl::Time now = absl::Now();
    for (const IdleEntry& entry : pool.idle) {
      s.oldest_idle_age = std::max(s.oldest_idle_age, now - entry.connection->created());
    }
    for (const auto& [id, connection] : pool.live) {
      s.requests_served += static_cast<uint64_t>(connection->requests());
      switch (connection->state()) {
        case ConnectionState::kConnecting: ++s.connecting; break;
        case ConnectionState::kActive: ++s.active; break;
        case ConnectionState::kDraining: ++s.draining; break;
        case ConnectionState::kIdle: ++s.idle; break;
        case ConnectionState::kClosed: break;
      }
    }
    stats.push_back(std::move(s));
  }
  return stats;
}

std::vector<std::shared_ptr<Connection>> ConnectionPool::Shutdown() {
  Deferred deferred;
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return all;
    shut_down_ = true;  // the idle sweep sees it and stops
    for (auto it = origins_.begin(); it != origins_.end();) {
      OriginPool& pool = it->second;
      for (const auto& [id, connection] : pool.live) all.push_back(connection);
      while (!pool.idle.empty()) {
        const std::shared_ptr<Connection> connection = pool.idle.back().connection;
        RetireLocked(pool, connection, CloseReason::kShutdown, deferred);
      }
      for (Waiter& waiter : pool.waiters) {
        CancelTimer(waiter.timer);
        deferred.callbacks.emplace_back(std::move(waiter.done),
                                        absl::UnavailableError("egress is shutting down"));
      }
      pool.waiters.clear();
      it = EraseIfUnused(it);
    }
  }
  Run(deferred);
  return all;
}

}  // namespace egress::transport

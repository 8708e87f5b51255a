// ConnectionPool's waiters: a fetch that found no connection to lease waits in its
// origin's queue until one is returned, a dial ends or its deadline passes.
#include <utility>

#include "boost/asio/post.hpp"
#include "boost/asio/strand.hpp"
#include "service/base/error_reason.h"
#include "service/transport/pool/connection_pool.h"

namespace egress::transport {

namespace net = boost::asio;

// Timers are not thread-safe: each is cancelled on its own strand. A wait that expires
// anyway finds its waiter gone and does nothing.
void ConnectionPool::CancelTimer(const std::shared_ptr<net::steady_timer>& timer) {
  net::post(timer->get_executor(), [timer] { timer->cancel(); });
}

ConnectionPool::WaitId ConnectionPool::Enqueue(OriginPool& pool, WaitFor what, bool fresh,
                                               absl::Time until, absl::Time deadline,
                                               LeaseCallback done, WaitId id) {
  const WaitId wait_id = id ? id : next_wait_id_++;
  auto timer = std::make_shared<net::steady_timer>(net::make_strand(executor_));
  const absl::Duration wait = std::min(until - absl::Now(), absl::Hours(24));
  timer->expires_after(absl::ToChronoNanoseconds(std::max(wait, absl::ZeroDuration())));
  timer->async_wait([this, wait_id](boost::system::error_code ec) {
    if (ec == net::error::operation_aborted) return;  // served or cancelled first
    OnWaitExpired(wait_id);
  });
  pool.waiters.push_back(Waiter{wait_id, what, fresh, deadline, std::move(done), std::move(timer)});
  return wait_id;
}

std::optional<ConnectionPool::Waiter> ConnectionPool::TakeWaiter(WaitId id, Origin* origin) {
  for (auto& [key, pool] : origins_) {
    auto it = std::find_if(pool.waiters.begin(), pool.waiters.end(),
                           [id](const Waiter& w) { return w.id == id; });
    if (it == pool.waiters.end()) continue;
    Waiter waiter = std::move(*it);
    pool.waiters.erase(it);
    *origin = key;
    return waiter;
  }
  return std::nullopt;  // served, expired or cancelled already
}

void ConnectionPool::OnWaitExpired(WaitId id) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Origin origin;
    if (auto waiter = TakeWaiter(id, &origin)) {
      OriginPool& pool = origins_.at(origin);
      const absl::Time now = absl::Now();
      if (waiter->what == WaitFor::kDrain && now < waiter->deadline) {
        // The drain it waited for is late: dial after all, or wait for room.
        if (HasRoom(pool)) {
          Lease lease = NewConnection(pool);
          lease.drain_choice = DrainAwareChoice::kWait;
          lease.may_race = AnyDraining(pool);
          deferred.callbacks.emplace_back(std::move(waiter->done), std::move(lease));
        } else {
          Enqueue(pool, WaitFor::kRoom, waiter->fresh, waiter->deadline, waiter->deadline,
                  std::move(waiter->done), id);  // the same id: CancelWait still finds it
        }
      } else {
        const uint32_t max_conns = LimitsOf(pool).max_conns_per_origin;
        deferred.callbacks.emplace_back(
            std::move(waiter->done),
            absl::DeadlineExceededError(
                max_conns == 0 || HasRoom(pool)
                    ? absl::StrCat("deadline expired while waiting for the connection being "
                                   "dialed to ", origin.Key())
                    : absl::StrCat("deadline expired while waiting for a connection to ",
                                   origin.Key(), ": all ", max_conns,
                                   " connections allowed by transport.max_conns_per_origin "
                                   "are busy")));
      }
      EraseIfUnused(origins_.find(origin));
    }
  }
  Run(deferred);
}

void ConnectionPool::CancelWait(WaitId id) {
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Origin origin;
    if (auto waiter = TakeWaiter(id, &origin)) {
      CancelTimer(waiter->timer);
      deferred.callbacks.emplace_back(
          std::move(waiter->done),
          absl::CancelledError(
              absl::StrCat("cancelled while waiting for a connection to ", origin.Key())));
      EraseIfUnused(origins_.find(origin));
    }
  }
  Run(deferred);
}

void ConnectionPool::ServeWaiters(OriginPool& pool, bool retired, Deferred& deferred) {
  const absl::Time now = absl::Now();
  const size_t live = pool.live.size();
  RetireExpiredNewest(pool, now, deferred);
  retired = retired || pool.live.size() < live;
  for (auto it = pool.waiters.begin(); it != pool.waiters.end();) {
    Waiter& waiter = *it;
    std::optional<Lease> lease;
    if (!waiter.fresh && waiter.what == WaitFor::kRoom) lease = LeaseStream(pool);
    if (lease) {
      // A stream on a shared HTTP/2 connection.
    } else if (!waiter.fresh && !pool.idle.empty()) {
      lease = TakeIdle(pool, now);
      if (waiter.what == WaitFor::kDrain) lease->drain_choice = DrainAwareChoice::kWait;
    } else if (waiter.what == WaitFor::kRoom && !waiter.fresh && AwaitsHttp2Dial(pool)) {
      return;  // the HTTP/2 connection being dialed is for them all
    } else if (waiter.what == WaitFor::kRoom && HasRoom(pool)) {
      lease = NewConnection(pool);
    } else if (waiter.what == WaitFor::kDrain && retired && HasRoom(pool)) {
      // Perhaps the very drain it waited for was abandoned: no point waiting longer.
      lease = NewConnection(pool);
      lease->drain_choice = DrainAwareChoice::kWait;
      lease->may_race = AnyDraining(pool);
    } else if (waiter.what == WaitFor::kRoom) {
      return;  // first come, first served: no one behind it gets room before it
    } else {
      ++it;
      continue;
    }
    CancelTimer(waiter.timer);
    deferred.callbacks.emplace_back(std::move(waiter.done), *std::move(lease));
    it = pool.waiters.erase(it);
  }
}

}  // namespace egress::transport

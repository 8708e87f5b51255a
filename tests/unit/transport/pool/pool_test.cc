// The pool's decisions, with real (undialed) connections and a running io_context.
#include "service/transport/pool/connection_pool.h"

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include <chrono>
#include <functional>
#include <future>
#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/ssl/context.hpp"
#include "gtest/gtest.h"
#include "service/transport/dns/caching_resolver.h"
#include "tests/support/counting_observer.h"
#include "tests/support/wait_for.h"

namespace egress::transport {
namespace {

namespace net = boost::asio;
using testing::CountingObserver;

// A one-shot signal that TSan can see (Signal locks inside Debian's
// uninstrumented Abseil).
class Signal {
 public:
  void Notify() { promise_.set_value(); }
  void WaitForNotification() { future_.wait(); }
  bool HasBeenNotified() const {
    return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

class PoolTest : public ::testing::Test {
 protected:
  PoolTest()
      : work_(io_.get_executor()),
        thread_([this] { io_.run(); }),
        other_work_(other_io_.get_executor()),
        other_thread_([this] { other_io_.run(); }) {}
  ~PoolTest() override {
    if (pool_) pool_->Shutdown();
    work_.reset();
    other_work_.reset();
    io_.stop();
    other_io_.stop();
    thread_.join();
    other_thread_.join();
  }

  // The connections here are never dialed: they model HTTP/1.1 unless `limits` offers
  // HTTP/2 (see MakeHttp2Pool).
  void MakePool(PoolLimits limits) {
    if (limits.http2_mode == Http2Mode::kAuto) limits.http2_mode = Http2Mode::kOff;
    MakeHttp2Pool(limits);
  }
  void MakeHttp2Pool(PoolLimits limits) {
    pool_ = std::make_unique<ConnectionPool>(
        io_.get_executor(), PoolLimitsByHost{limits, {}},
        [this](const Origin& origin) {
          return std::make_shared<Connection>(dial_on_->get_executor(), tls_, origin,
                                              ++next_id_, observer_);
        });
  }

  // An Acquire whose answer may come later.
  struct PendingLease {
    Signal served;
    std::optional<absl::StatusOr<ConnectionPool::Lease>> result;
    ConnectionPool::WaitId id = 0;
  };

  std::unique_ptr<PendingLease> StartAcquire(absl::Duration deadline_in = absl::Seconds(5)) {
    auto pending = std::make_unique<PendingLease>();
    PendingLease* p = pending.get();
    p->id = pool_->Acquire(origin_, false, absl::Now() + deadline_in,
                           [p](absl::StatusOr<ConnectionPool::Lease> lease) {
                             p->result = std::move(lease);
                             p->served.Notify();
                           });
    return pending;
  }

  // Acquires and returns the lease or the error, waiting for a queued one.
  absl::StatusOr<ConnectionPool::Lease> Acquire(absl::Duration deadline_in = absl::Seconds(5)) {
    auto pending = StartAcquire(deadline_in);
    pending->served.WaitForNotification();
    return *std::move(pending->result);
  }

  // Acquire called on `loop`'s thread, as a fetch the loop data plane serves calls it.
  absl::StatusOr<ConnectionPool::Lease> AcquireOn(net::io_context& loop) {
    std::promise<absl::StatusOr<ConnectionPool::Lease>> leased;
    net::post(loop, [&] {
      pool_->Acquire(origin_, false, absl::Now() + absl::Seconds(5),
                     [&](absl::StatusOr<ConnectionPool::Lease> lease) {
                       leased.set_value(std::move(lease));
                     });
    });
    return leased.get_future().get();
  }

  OriginStats Stats() {
    auto all = pool_->Stats();
    return all.empty() ? OriginStats{} : all.front();
  }

  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::thread thread_;
  // A second loop, as the transport runs one per core.
  net::io_context other_io_;
  net::executor_work_guard<net::io_context::executor_type> other_work_;
  std::thread other_thread_;
  net::io_context* dial_on_ = &io_;  // the loop of the connections the pool makes
  std::shared_ptr<net::ssl::context> tls_ =
      std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  CountingObserver observer_;
  std::unique_ptr<ConnectionPool> pool_;
  uint64_t next_id_ = 0;
  Origin origin_{true, "example.test", 443};
};

TEST_F(PoolTest, EmptyPoolHandsOutANewConnection) {
  MakePool({});
  auto lease = Acquire();
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE(lease->reused);
  EXPECT_EQ(Stats().connecting, 1);
  EXPECT_EQ(Stats().opened, 1u);
}

// HTTP/2 offered to an origin whose protocol is not known yet: a request finding no
// connection while one is being dialed waits for that dial (which may carry it as a
// stream); the dial turning out HTTP/1.1, it gets a connection of its own.
TEST_F(PoolTest, ARequestWaitsForTheDialUnderWayUntilItsProtocolIsKnown) {
  MakeHttp2Pool({});
  auto first = Acquire();
  ASSERT_TRUE(first.ok());
  auto second = StartAcquire();
  EXPECT_FALSE(second->served.HasBeenNotified());
  EXPECT_EQ(Stats().waiting, 1);
  pool_->Dialed(first->connection);  // an undialed connection: HTTP/1.1
  second->served.WaitForNotification();
  ASSERT_TRUE(second->result->ok());
  EXPECT_NE((*second->result)->connection, first->connection);
  EXPECT_FALSE((*second->result)->multiplexed);
  // Known for HTTP/1.1 now: the next request dials at once, however many are dialing.
  auto third = Acquire();
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(Stats().opened, 3u);
}

TEST_F(PoolTest, ReturnedConnectionIsReusedMostRecentFirst) {
  MakePool({});
  auto a = Acquire();
  auto b = Acquire();
  pool_->Return(a->connection);
  pool_->Return(b->connection);
  EXPECT_EQ(Stats().idle, 2);
  auto again = Acquire();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->reused);
  EXPECT_EQ(again->connection, b->connection);
  EXPECT_EQ(again->connection->state(), ConnectionState::kActive);
  EXPECT_EQ(Stats().idle, 1);
  EXPECT_EQ(Stats().active, 1);
  EXPECT_EQ(Stats().reused, 1u);
}

// The loop data plane makes a fetch on one of the transport's loops: it takes an idle
// connection of that loop before a more recently used one of another, so that its I/O
// stays on its thread. Elsewhere (gRPC's library threads) the most recent comes first.
TEST_F(PoolTest, AFetchOnALoopTakesAnIdleConnectionOfItsOwnLoopFirst) {
  MakePool({});
  auto own = Acquire();
  dial_on_ = &other_io_;
  auto other = Acquire();
  pool_->Return(own->connection);
  pool_->Return(other->connection);  // the most recently used
  auto on_loop = AcquireOn(io_);
  ASSERT_TRUE(on_loop.ok());
  EXPECT_EQ(on_loop->connection->id(), own->connection->id());
  EXPECT_TRUE(on_loop->reused);
  pool_->Return(own->connection);  // the most recently used now
  auto on_other_loop = AcquireOn(other_io_);
  ASSERT_TRUE(on_other_loop.ok());
  EXPECT_EQ(on_other_loop->connection->id(), other->connection->id());
  pool_->Return(other->connection);
  auto elsewhere = Acquire();
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->connection->id(), other->connection->id());
  EXPECT_EQ(Stats().opened, 2u);
}

TEST_F(PoolTest, IdleConnectionsOverTheLimitAreClosed) {
  MakePool({/*max_idle_per_origin=*/1, 0, absl::Seconds(90)});
  auto a = Acquire();
  auto b = Acquire();
  pool_->Return(a->connection);
  pool_->Return(b->connection);
  EXPECT_EQ(Stats().idle, 1);
  EXPECT_EQ(a->connection->state(), ConnectionState::kIdle);
  EXPECT_EQ(b->connection->state(), ConnectionState::kClosed);
}

TEST_F(PoolTest, RequestOverMaxConnsWaitsForAReturnedConnection) {
  MakePool({100, /*max_conns_per_origin=*/1, absl::Seconds(90)});
  auto first = Acquire();
  auto second = StartAcquire();
  EXPECT_FALSE(second->served.HasBeenNotified());
  pool_->Return(first->connection);
  second->served.WaitForNotification();
  ASSERT_TRUE(second->result->ok());
  EXPECT_EQ((*second->result)->connection, first->connection);
  EXPECT_EQ(Stats().opened, 1u);
}

TEST_F(PoolTest, WaiterGetsANewConnectionWhenOneIsRetired) {
  MakePool({100, 1, absl::Seconds(90)});
  auto first = Acquire();
  auto second = StartAcquire();
  pool_->Retire(first->connection, CloseReason::kError);
  second->served.WaitForNotification();
  ASSERT_TRUE(second->result->ok());
  EXPECT_FALSE((*second->result)->reused);
  EXPECT_NE((*second->result)->connection, first->connection);
}

TEST_F(PoolTest, WaitingPastTheDeadlineIsDeadlineExceeded) {
  MakePool({100, 1, absl::Seconds(90)});
  auto first = Acquire();
  auto second = Acquire(absl::Milliseconds(50));
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(second.status()));
  EXPECT_NE(second.status().message().find("max_conns_per_origin"), absl::string_view::npos);
}

TEST_F(PoolTest, CancelledWaitIsCancelled) {
  MakePool({100, 1, absl::Seconds(90)});
  auto first = Acquire();
  auto second = StartAcquire();
  ASSERT_NE(second->id, 0u);
  pool_->CancelWait(second->id);
  second->served.WaitForNotification();
  EXPECT_TRUE(absl::IsCancelled(second->result->status()));
}

// Pre-warming follows the origins in use, not every name a caller ever fetched: only the
// kMaxWarmOrigins most recently used are kept warm, and an origin not used for its idle
// timeout is let go (its idle connections time out and none is dialed in their place).
// The case: min_idle on a wildcard, one fetch to each of many names, then none.
TEST_F(PoolTest, PreWarmingKeepsOnlyRecentlyUsedOriginsWarmAndLetsUnusedOnesGo) {
  PoolLimits limits;
  limits.idle_timeout = absl::Milliseconds(500);
  limits.min_idle = 5;
  limits.http2_mode = Http2Mode::kOff;
  std::atomic<int> dials{0};
  pool_ = std::make_unique<ConnectionPool>(
      io_.get_executor(),
      PoolLimitsByHost{PoolLimits{}, {{*HostPattern::Parse("*.warm.test"), limits}}},
      [this, &dials](const Origin& origin) {
        ++dials;
        return std::make_shared<Connection>(io_.get_executor(), tls_, origin, ++next_id_,
                                            observer_);
      },
      [this](std::shared_ptr<Connection> connection) {  // a dial that succeeds at once
        net::post(io_, [this, connection] { pool_->Return(connection); });
      });
  const auto count = [this](bool dialing_only) {
    int total = 0;
    for (const OriginStats& s : pool_->Stats()) {
      total += s.connecting + (dialing_only ? 0 : s.idle + s.active + s.draining);
    }
    return total;
  };
  const int names = static_cast<int>(ConnectionPool::kMaxWarmOrigins) + 16;
  for (int i = 0; i < names; ++i) {
    const Origin origin{false, absl::StrCat("n", i, ".warm.test"), 80};
    Signal served;
    std::optional<absl::StatusOr<ConnectionPool::Lease>> lease;
    pool_->Acquire(origin, false, absl::Now() + absl::Seconds(5),
                   [&](absl::StatusOr<ConnectionPool::Lease> result) {
                     lease = std::move(result);
                     served.Notify();
                   });
    served.WaitForNotification();
    ASSERT_TRUE(lease->ok()) << lease->status();
    pool_->Return((*lease)->connection);
  }
  // Once the warming dials are done: the warm origins' min_idle each (the connection its
  // fetch returned and those dialed beside it), the others only their own.
  testing::WaitFor([&] { return count(/*dialing_only=*/true) == 0; });
  const int warm = static_cast<int>(ConnectionPool::kMaxWarmOrigins);
  EXPECT_LE(count(false), warm * static_cast<int>(limits.min_idle) + (names - warm));
  // No more traffic: every origin ends with no connection (its entry gone), and nothing
  // was dialed beyond one warm-up per fetch.
  testing::WaitFor([&] { return pool_->Stats().empty(); }, absl::Seconds(10));
  EXPECT_EQ(pool_->Stats().size(), 0u) << count(false) << " connections still open";
  EXPECT_LE(dials.load(), names * static_cast<int>(limits.min_idle))
      << "dials to origins nobody used again";
}

TEST_F(PoolTest, IdleConnectionsPastTheIdleTimeoutAreClosed) {
  MakePool({100, 0, absl::Milliseconds(50)});
  auto a = Acquire();
  pool_->Return(a->connection);
  EXPECT_EQ(Stats().idle, 1);
  testing::WaitFor([&] { return Stats().idle == 0; });
  EXPECT_EQ(Stats().idle, 0);
  EXPECT_EQ(a->connection->state(), ConnectionState::kClosed);
}

TEST_F(PoolTest, RetiredConnectionLeavesEveryCountAndFreesItsPlace) {
  MakePool({100, /*max_conns_per_origin=*/1, absl::Seconds(90)});
  auto a = Acquire();
  pool_->Retire(a->connection, CloseReason::kError);
  pool_->Retire(a->connection, CloseReason::kError);  // twice: harmless
  const OriginStats stats = Stats();
  EXPECT_EQ(stats.connecting + stats.active + stats.draining + stats.idle, 0);
  EXPECT_EQ(a->connection->state(), ConnectionState::kClosed);
  auto b = Acquire();  // the place it held is free again
  EXPECT_EQ(Stats().connecting, 1);
}

TEST_F(PoolTest, ShutdownClosesIdleAndRefusesNewRequests) {
  MakePool({});
  auto a = Acquire();
  pool_->Return(a->connection);
  pool_->Shutdown();
  EXPECT_EQ(Stats().idle, 0);
  auto b = Acquire();
  EXPECT_TRUE(absl::IsUnavailable(b.status()));
}

TEST_F(PoolTest, AnOriginIsDroppedOnceItHasNoConnectionAndNoWaiter) {
  MakePool({});
  auto a = Acquire();
  pool_->Return(a->connection);
  ASSERT_EQ(pool_->Stats().size(), 1u);  // an idle connection keeps it
  auto again = Acquire();
  pool_->Retire(again->connection, CloseReason::kError);
  EXPECT_TRUE(pool_->Stats().empty());
}

TEST_F(PoolTest, ThousandsOfOriginsWhoseDialsFailedLeaveNoEntries) {
  MakePool({});
  for (int i = 0; i < 3000; ++i) {
    origin_ = Origin{false, "10.0.0.1", static_cast<uint16_t>(1000 + i)};
    auto lease = Acquire();
    ASSERT_TRUE(lease.ok());
    pool_->Retire(lease->connection, CloseReason::kDialFailed);
  }
  EXPECT_TRUE(pool_->Stats().empty());
}

TEST_F(PoolTest, AnOriginWhoseLastIdleConnectionTimesOutIsDropped) {
  MakePool({100, 0, absl::Milliseconds(50)});
  auto a = Acquire();
  pool_->Return(a->connection);
  testing::WaitFor([&] { return pool_->Stats().empty(); });
  EXPECT_TRUE(pool_->Stats().empty());
}

TEST_F(PoolTest, AnOriginIsDroppedWhenItsLastWaiterGivesUpAndItsConnectionGoes) {
  MakePool({100, /*max_conns_per_origin=*/1, absl::Seconds(90)});
  auto first = Acquire();
  auto expired = Acquire(absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsDeadlineExceeded(expired.status()));
  auto cancelled = StartAcquire();
  pool_->CancelWait(cancelled->id);
  cancelled->served.WaitForNotification();
  EXPECT_EQ(Stats().waiting, 0);
  pool_->Retire(first->connection, CloseReason::kError);
  EXPECT_TRUE(pool_->Stats().empty());
  EXPECT_TRUE(Acquire().ok());  // and comes back when asked for again
  EXPECT_EQ(Stats().connecting, 1);
}

TEST_F(PoolTest, WhatAnOriginsCostModelLearnedOutlivesItsEntry) {
  MakePool({});
  auto a = Acquire();
  pool_->RecordDial(origin_, absl::Milliseconds(30));
  pool_->Retire(a->connection, CloseReason::kIdleTimeout);
  ASSERT_TRUE(pool_->Stats().empty());
  EXPECT_EQ(pool_->CostOf(origin_).dial, absl::Milliseconds(30));
  EXPECT_TRUE(pool_->Stats().empty());  // asking for costs makes no entry
}

TEST_F(PoolTest, OnlyTheMostRecentlyUsedCostModelsAreKept) {
  MakePool({});
  const Origin first = origin_;
  for (size_t i = 0; i <= ConnectionPool::kMaxRecentCosts; ++i) {
    origin_ = Origin{false, "example.test", static_cast<uint16_t>(1000 + i)};
    if (i == 0) origin_ = first;
    auto lease = Acquire();
    pool_->RecordDial(origin_, absl::Milliseconds(30));
    pool_->Retire(lease->connection, CloseReason::kIdleTimeout);
  }
  EXPECT_EQ(pool_->CostOf(first).dial, std::nullopt);
  EXPECT_EQ(pool_->CostOf(origin_).dial, absl::Milliseconds(30));
}

// Pooled connections that really connected (to a loopback socket that listens and never
// accepts: the kernel completes the handshake), so that the policy has an address to judge.
class PoolPolicyTest : public PoolTest {
 protected:
  // A listening socket on `address`; the origin for it.
  Origin Listen(const std::string& address) {
    listeners_.push_back(std::make_unique<net::ip::tcp::acceptor>(
        idle_io_, net::ip::tcp::endpoint(net::ip::make_address(address), 0)));
    return Origin{false, address, listeners_.back()->local_endpoint().port()};
  }

  // A connection to `origin`, dialed, leased (active).
  std::shared_ptr<Connection> Dialed(const Origin& origin) {
    origin_ = origin;
    auto lease = Acquire();
    EXPECT_TRUE(lease.ok());
    std::promise<absl::Status> dialed;
    TransportSettings settings;
    settings.policy = Policy({});
    // An IP literal: the resolver is never asked.
    lease->connection->Dial(settings, absl::Now() + absl::Seconds(5), resolver_, "",
                            [&](absl::Status status) { dialed.set_value(status); });
    EXPECT_TRUE(dialed.get_future().get().ok());
    return lease->connection;
  }

  // Loopback allowed, and whatever `configure` adds.
  static std::shared_ptr<const AddressPolicy> Policy(
      const std::function<void(PolicyRules&)>& configure) {
    PolicyRules rules;
    rules.allow_cidrs.push_back(*Cidr::Parse("127.0.0.0/8"));
    if (configure) configure(rules);
    return std::make_shared<AddressPolicy>(rules);
  }

  OriginStats StatsOf(const Origin& origin) {
    for (const auto& stats : pool_->Stats()) {
      if (stats.origin == origin.Key()) return stats;
    }
    return {};
  }

  net::io_context idle_io_;  // never run: the listeners only listen
  std::vector<std::unique_ptr<net::ip::tcp::acceptor>> listeners_;
  CachingResolver resolver_{observer_};
};

TEST_F(PoolPolicyTest, ANewPolicyRetiresTheIdleConnectionsItDeniesAndKeepsTheOthers) {
  MakePool({});
  const Origin kept = Listen("127.0.0.1");
  const Origin denied_by_address = Listen("127.0.0.2");
  const Origin denied_by_host = Listen("127.0.0.3");
  std::vector<std::shared_ptr<Connection>> connections;
  for (const Origin& origin : {kept, denied_by_address, denied_by_host}) {
    connections.push_back(Dialed(origin));
    ASSERT_TRUE(pool_->Return(connections.back()));
  }
  pool_->SetPolicy(Policy([](PolicyRules& rules) {
    rules.deny_cidrs.push_back(*Cidr::Parse("127.0.0.2/32"));
    rules.deny_hosts.push_back(*HostPattern::Parse("127.0.0.3"));
  }));
  EXPECT_EQ(StatsOf(kept).idle, 1);
  EXPECT_EQ(pool_->Stats().size(), 1u);  // the others' entries are gone with them
  EXPECT_EQ(connections[0]->state(), ConnectionState::kIdle);
  EXPECT_EQ(connections[1]->state(), ConnectionState::kClosed);
  EXPECT_EQ(connections[2]->state(), ConnectionState::kClosed);
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 2);
}

TEST_F(PoolPolicyTest, ABusyConnectionThePolicyNowDeniesIsRetiredWhenItComesBack) {
  MakePool({});
  const Origin origin = Listen("127.0.0.1");
  auto connection = Dialed(origin);
  pool_->SetPolicy(Policy([](PolicyRules& rules) {
    rules.deny_cidrs.push_back(*Cidr::Parse("127.0.0.1/32"));
  }));
  EXPECT_EQ(StatsOf(origin).active, 1);  // its exchange goes on
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 0);
  EXPECT_FALSE(pool_->Return(connection));
  EXPECT_EQ(connection->state(), ConnectionState::kClosed);
  EXPECT_EQ(observer_.Closed(CloseReason::kPolicy), 1);
  EXPECT_TRUE(pool_->Stats().empty());
}

// Issue 14 item 10: a cancel closes the connection on its loop while its exchange may
// still be returning it; once its socket is gone, poll() skips the descriptor (-1) and
// reports nothing, which must not read as "open and quiet".
TEST_F(PoolPolicyTest, AConnectionClosedUnderItsExchangeIsNeverReusable) {
  MakePool({});
  const Origin origin = Listen("127.0.0.1");
  auto connection = Dialed(origin);
  net::ip::tcp::socket server_side(idle_io_);
  listeners_.back()->accept(server_side);
  connection->Close();
  char byte;
  boost::system::error_code ec;
  server_side.read_some(net::buffer(&byte, 1), ec);  // returns once egress closed its end
  EXPECT_EQ(ec, net::error::eof);
  EXPECT_FALSE(connection->StillOpenAndQuiet());
  EXPECT_EQ(connection->ReuseVerdict(), CloseReason::kCancelled);
}

}  // namespace
}  // namespace egress::transport

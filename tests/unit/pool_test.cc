// The pool's decisions, with real (undialed) connections and a running io_context.
#include "service/transport/pool.h"

#include <memory>
#include <optional>
#include <thread>

#include <chrono>
#include <future>
#include "boost/asio/io_context.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/strand.hpp"
#include "gtest/gtest.h"
#include "tests/support/counting_observer.h"

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
  PoolTest() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~PoolTest() override {
    if (pool_) pool_->Shutdown();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  void MakePool(PoolLimits limits) {
    pool_ = std::make_unique<ConnectionPool>(
        io_.get_executor(), PoolLimitsByHost{limits, {}},
        [this](const Origin& origin) {
          return std::make_shared<Connection>(net::make_strand(io_), tls_, origin, ++next_id_,
                                              observer_);
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

  OriginStats Stats() {
    auto all = pool_->Stats();
    return all.empty() ? OriginStats{} : all.front();
  }

  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::thread thread_;
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

TEST_F(PoolTest, IdleConnectionsPastTheIdleTimeoutAreClosed) {
  MakePool({100, 0, absl::Milliseconds(50)});
  auto a = Acquire();
  pool_->Return(a->connection);
  EXPECT_EQ(Stats().idle, 1);
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (Stats().idle > 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
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

}  // namespace
}  // namespace egress::transport

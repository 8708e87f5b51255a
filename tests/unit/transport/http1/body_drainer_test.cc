// The auto-drain loop's decisions, without a socket: when it stops (the body's end, the
// byte cap, the time cap, a pause longer than a dial, the drain budget, an error) and what
// it leaves behind (bytes counted, budget released, one callback).
#include "service/transport/http1/body_drainer.h"

#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "boost/asio/error.hpp"
#include "gtest/gtest.h"

namespace egress::transport {
namespace {

namespace beast = boost::beast;

constexpr uint64_t kKiB = 1024;
constexpr size_t kBufferBytes = 64 * kKiB;  // Connection::kDrainReadBytes

// FIXED's defaults: 256 KiB within 50 ms.
Drain DefaultCaps() {
  Drain caps{};
  caps.max_bytes = 256 * kKiB;
  caps.max_duration = absl::Milliseconds(50);
  return caps;
}

// A body of known length served from a script: each read returns what is asked for (up
// to the rest), or the scripted error, and moves the fake clock on.
class ScriptedBody : public BodyDrainer::Source {
 public:
  explicit ScriptedBody(uint64_t length) : left_(length) {}

  bool BodyEnded() const override { return left_ == 0; }
  std::optional<uint64_t> KnownBytesLeft() const override { return left_; }
  void ReadSome(char* /*buffer*/, size_t size, absl::Duration pause, absl::Time deadline,
                BodyDrainer::ReadDone done) override {
    ++reads;
    last_pause = pause;
    last_deadline = deadline;
    now += per_read;
    if (hold_reads) {
      held = std::move(done);
      return;
    }
    if (fail_after_reads && reads > *fail_after_reads) return done(failure, 0);
    const uint64_t got = std::min<uint64_t>(size, left_);
    left_ -= got;
    done({}, static_cast<size_t>(got));
  }

  absl::Time now = absl::FromUnixSeconds(1000);
  absl::Duration per_read = absl::ZeroDuration();
  std::optional<int> fail_after_reads;  // reads that succeed before `failure`
  beast::error_code failure;
  bool hold_reads = false;  // keep the read pending in `held`
  BodyDrainer::ReadDone held;
  int reads = 0;
  absl::Duration last_pause;
  absl::Time last_deadline;

 private:
  uint64_t left_;
};

class QuietObserver : public TransportObserver {
 public:
  void OnUpstreamRequest(const Origin&, bool) override {}
  void OnConnectionOpened(const Origin&, const DialTiming&) override {}
  void OnConnectionStateChanged(const Origin&, ConnectionState, ConnectionState) override {}
  void OnConnectionClosed(const Origin&, CloseReason, ConnectionState) override {}
  void OnDrainStarted(const Origin&) override {}
  void OnDrainCompleted(const Origin&, uint64_t, absl::Duration) override {}
  void OnDrainAbandoned(const Origin&, DrainAbandonReason, uint64_t, absl::Duration) override {}
  void OnDrainSkipped(const Origin&, DrainSkipReason) override {}
  void OnRetry(const Origin&, RetryReason) override {}
  void OnRetryBudgetExhausted(const Origin&) override {}
  void OnPoolWait(const Origin&, absl::Duration) override {}
  void OnPolicyDenied(const Origin&, DenyReason) override {}
  void OnPolicyWouldDeny(const Origin&, absl::string_view) override {}
  void OnOriginCost(const Origin&, const OriginCost&) override {}
  void OnDrainBudget(uint64_t, uint64_t) override {}
  void OnDrainAwareAcquisition(const Origin&, DrainAwareChoice, bool) override {}
  void OnSurplusConnection(const Origin&, bool) override {}
  void OnUpstreamLimit(const Origin&, UpstreamLimit) override {}
  void OnTransportException() override {}
  void OnDnsLookup(DnsResult) override {}
  void OnDnsCacheHit() override {}
  void OnDnsLookupAvoided() override {}
  void OnDnsStaleServed() override {}
  void OnConnectAttempt(ConnectAttemptResult) override {}
  void OnCircuitBreakerStateChanged(const Origin&, BreakerState, BreakerState) override {}
  void OnCircuitBreakerRejected(const Origin&) override {}
  void OnStreamOpened(const Origin&) override {}
  void OnStreamClosed(const Origin&) override {}
  void OnStreamReset(const Origin&) override {}
  void OnHttp2ConnectionClosed(uint64_t) override {}
};

struct Drained {
  int callbacks = 0;
  DrainOutcome outcome;
};

Drained DrainAll(ScriptedBody& body, const Drain& caps, DrainBudget* budget = nullptr,
                 uint64_t reserved = 0) {
  Drained result;
  BodyDrainer drainer(body, [&body] { return body.now; });
  drainer.Start(caps, budget, reserved, body.now, kBufferBytes,
                [&result](const DrainOutcome& outcome) {
                  ++result.callbacks;
                  result.outcome = outcome;
                });
  EXPECT_FALSE(drainer.active());
  return result;
}

TEST(BodyDrainer, ReadsABodyWithinTheCapsToItsEndAndCompletes) {
  ScriptedBody body(100 * kKiB);
  body.per_read = absl::Milliseconds(1);
  const Drained drained = DrainAll(body, DefaultCaps());
  EXPECT_EQ(drained.callbacks, 1);
  EXPECT_EQ(drained.outcome.abandoned, std::nullopt);
  EXPECT_EQ(drained.outcome.bytes, 100 * kKiB);
  EXPECT_TRUE(body.BodyEnded());
  EXPECT_EQ(body.reads, 2);  // 64 KiB at a time
  EXPECT_EQ(drained.outcome.duration, absl::Milliseconds(2));
}

TEST(BodyDrainer, DoesNotReadABodyThatHasAlreadyEnded) {
  ScriptedBody body(0);
  const Drained drained = DrainAll(body, DefaultCaps());
  EXPECT_EQ(drained.callbacks, 1);
  EXPECT_EQ(drained.outcome.abandoned, std::nullopt);
  EXPECT_EQ(drained.outcome.bytes, 0u);
  EXPECT_EQ(body.reads, 0);
}

TEST(BodyDrainer, AbandonsABodyOverTheByteCapOneBytePastTheCapLeavingTheRestUnread) {
  ScriptedBody body(1024 * kKiB);
  const Drained drained = DrainAll(body, DefaultCaps());
  EXPECT_EQ(drained.outcome.abandoned, DrainAbandonReason::kByteCap);
  EXPECT_EQ(drained.outcome.bytes, 256 * kKiB + 1);
  EXPECT_EQ(body.KnownBytesLeft(), 1024 * kKiB - 256 * kKiB - 1);
  EXPECT_FALSE(body.BodyEnded());  // the connection closes: its body is unread
}

TEST(BodyDrainer, CompletesABodyOfExactlyTheByteCap) {
  ScriptedBody body(256 * kKiB);
  const Drained drained = DrainAll(body, DefaultCaps());
  EXPECT_EQ(drained.outcome.abandoned, std::nullopt);
  EXPECT_EQ(drained.outcome.bytes, 256 * kKiB);
}

TEST(BodyDrainer, ReadsNeverPastTheTimeCapAndAbandonsForItOnATimeoutThere) {
  ScriptedBody body(1024 * kKiB);
  body.per_read = absl::Milliseconds(50);  // the first read reaches the time cap
  body.fail_after_reads = 0;
  body.failure = beast::error::timeout;
  const absl::Time start = body.now;
  const Drained drained = DrainAll(body, DefaultCaps());
  EXPECT_EQ(body.last_deadline, start + absl::Milliseconds(50));
  EXPECT_EQ(drained.outcome.abandoned, DrainAbandonReason::kTimeCap);
  EXPECT_EQ(drained.outcome.duration, absl::Milliseconds(50));
}

TEST(BodyDrainer, AbandonsAsSlowerThanADialWhenAPauseTimesOutBeforeTheTimeCap) {
  ScriptedBody body(1024 * kKiB);
  body.per_read = absl::Milliseconds(5);
  body.fail_after_reads = 1;
  body.failure = beast::error::timeout;
  Drain caps = DefaultCaps();
  caps.max_pause = absl::Milliseconds(5);
  const Drained drained = DrainAll(body, caps);
  EXPECT_EQ(body.last_pause, absl::Milliseconds(5));
  EXPECT_EQ(drained.outcome.abandoned, DrainAbandonReason::kSlowerThanDial);
  EXPECT_EQ(drained.outcome.bytes, kBufferBytes);
}

TEST(BodyDrainer, AbandonsForAnErrorOnARead) {
  ScriptedBody body(1024 * kKiB);
  body.fail_after_reads = 2;
  body.failure = boost::asio::error::connection_reset;
  const Drained drained = DrainAll(body, DefaultCaps());
  EXPECT_EQ(drained.outcome.abandoned, DrainAbandonReason::kError);
  EXPECT_EQ(drained.outcome.bytes, 2 * kBufferBytes);
}

TEST(BodyDrainer, StopsBeforeReadingWhenTheBudgetHasNoRoomAndReleasesWhatItHeld) {
  QuietObserver observer;
  DrainBudget budget(16 * kKiB, observer);
  ASSERT_TRUE(budget.TryReserve(8 * kKiB));  // the drain's own reservation, handed over
  ScriptedBody body(100 * kKiB);
  Drain caps = DefaultCaps();
  caps.budgeted = true;
  const Drained drained = DrainAll(body, caps, &budget, 8 * kKiB);
  EXPECT_EQ(drained.outcome.abandoned, DrainAbandonReason::kBudget);
  EXPECT_EQ(body.reads, 0);
  EXPECT_TRUE(budget.TryReserve(16 * kKiB));  // all of it is back
}

TEST(BodyDrainer, ReservesBeforeEachReadAndReleasesAllOfItWhenTheBodyEnds) {
  QuietObserver observer;
  DrainBudget budget(1024 * kKiB, observer);
  ScriptedBody body(200 * kKiB);
  Drain caps = DefaultCaps();
  caps.budgeted = true;
  const Drained drained = DrainAll(body, caps, &budget, 0);
  EXPECT_EQ(drained.outcome.abandoned, std::nullopt);
  EXPECT_EQ(drained.outcome.bytes, 200 * kKiB);
  EXPECT_TRUE(budget.TryReserve(1024 * kKiB));
}

TEST(BodyDrainer, AnAbortEndsTheDrainOnceAndIgnoresTheReadStillOnItsWay) {
  ScriptedBody body(1024 * kKiB);
  body.hold_reads = true;
  int callbacks = 0;
  DrainOutcome last;
  BodyDrainer drainer(body, [&body] { return body.now; });
  drainer.Start(DefaultCaps(), nullptr, 0, body.now, kBufferBytes,
                [&](const DrainOutcome& outcome) {
                  ++callbacks;
                  last = outcome;
                });
  ASSERT_TRUE(drainer.active());
  drainer.Abort(DrainAbandonReason::kError);
  EXPECT_FALSE(drainer.active());
  body.held({}, 100);  // the read completes after all
  EXPECT_EQ(callbacks, 1);
  EXPECT_EQ(last.abandoned, DrainAbandonReason::kError);
  EXPECT_EQ(body.reads, 1);
}

TEST(BodyDrainer, ReportsTheKnownRestAsItsProgress) {
  ScriptedBody body(100 * kKiB);
  BodyDrainer drainer(body, [&body] { return body.now; });
  drainer.Announce(body.now, 100 * kKiB);
  body.now += absl::Milliseconds(3);
  EXPECT_EQ(drainer.progress().remaining_length, 100 * kKiB);
  EXPECT_EQ(drainer.progress().elapsed, absl::Milliseconds(3));
}

}  // namespace
}  // namespace egress::transport

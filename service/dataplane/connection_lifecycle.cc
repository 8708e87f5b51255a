#include "service/dataplane/connection_lifecycle.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "absl/time/clock.h"

namespace egress::dataplane {
namespace {

// The PING that follows the first GOAWAY; its ACK is told apart by these bytes.
constexpr uint8_t kGoAwayPing[8] = {'g', 'o', 'a', 'w', 'a', 'y', '.', '1'};
// How long the final GOAWAY waits for that ACK: gRPC's 20 s.
constexpr absl::Duration kPingAckWait = absl::Seconds(20);
// At the max age, from the PING's ACK to the final GOAWAY (at most half the grace). A
// caller that has seen the first GOAWAY may still send a stream it had started before:
// grpc-java writes one from its queue after the ACK, and fails it "Abrupt GOAWAY closed
// sent stream" (not retried) when the final GOAWAY leaves it out (replicas_test, 1 call
// in 845 under ASan). Streams that come within this second are served. At shutdown the
// final GOAWAY goes at the ACK: the connections close soon after it.
constexpr absl::Duration kFinalGoAwayDelay = absl::Seconds(1);
// gRPC's server defaults (C-core 1.51): GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
// the 2 hours it allows with no call open (GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS
// false), and GRPC_ARG_HTTP2_MAX_PING_STRIKES.
constexpr absl::Duration kMinPingInterval = absl::Minutes(5);
constexpr absl::Duration kMinPingIntervalWithoutCalls = absl::Hours(2);
constexpr int kMaxPingStrikes = 2;
constexpr char kTooManyPings[] = "too_many_pings";

}  // namespace

absl::Duration JitteredAge(absl::Duration max_age) {
  thread_local std::mt19937 random{std::random_device{}()};
  return max_age * std::uniform_real_distribution<double>(0.9, 1.1)(random);
}

ConnectionLifecycle::ConnectionLifecycle(const boost::asio::any_io_executor& loop)
    : age_(loop), idle_(loop), ping_ack_(loop), grace_(loop) {}

void ConnectionLifecycle::Start(nghttp2_session* session, const ConnectionLifetime& lifetime,
                                std::weak_ptr<void> alive, Actions actions) {
  session_ = session;
  lifetime_ = lifetime;
  alive_ = std::move(alive);
  actions_ = std::move(actions);
  CallsOpen(false);
  if (lifetime_.max_age <= absl::ZeroDuration()) return;
  Arm(age_, JitteredAge(lifetime_.max_age), [this] {
    GoAway(lifetime_.grace, "max_age", FinalDelay());
  });
}

void ConnectionLifecycle::CallsOpen(bool open) {
  calls_open_ = open;
  if (open) {
    idle_.cancel();
  } else if (lifetime_.max_idle > absl::ZeroDuration() && state_ == State::kOpen) {
    // The graceful GOAWAY of the max age, with its second after the PING's ACK. (gRPC's
    // library server sends one GOAWAY and closes.) The handler of a timer that fired
    // before a call started and ended is stale: the timer has been set later since.
    Arm(idle_, lifetime_.max_idle, [this] {
      if (calls_open_ || idle_.expiry() > boost::asio::steady_timer::clock_type::now()) return;
      GoAway(lifetime_.grace, "max_idle", FinalDelay());
    });
  }
}

absl::Duration ConnectionLifecycle::FinalDelay() const {
  return std::min(kFinalGoAwayDelay, lifetime_.grace / 2);
}

void ConnectionLifecycle::Arm(boost::asio::steady_timer& timer, absl::Duration when,
                              std::function<void()> then) {
  timer.expires_after(absl::ToChronoNanoseconds(std::max(when, absl::ZeroDuration())));
  timer.async_wait([alive = alive_, then = std::move(then)](boost::system::error_code ec) {
    // Stopped, or the connection (which owns this lifecycle) went first.
    if (ec || !alive.lock()) return;
    then();
  });
}

void ConnectionLifecycle::GoAway(absl::Duration grace, const char* why,
                                 absl::Duration final_delay) {
  if (!session_) return;  // not started: nothing to say it on
  const absl::Time close_at = grace == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                : absl::Now() + grace;
  if (close_at < close_at_) {
    close_at_ = close_at;
    if (close_at_ != absl::InfiniteFuture()) {
      Arm(grace_, close_at_ - absl::Now(), [this] { actions_.close(); });
    }
  }
  if (state_ != State::kOpen) return;
  state_ = State::kAnnounced;
  why_ = why;
  final_delay_ = final_delay;
  age_.cancel();
  idle_.cancel();
  nghttp2_submit_shutdown_notice(session_);
  nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, kGoAwayPing);
  Arm(ping_ack_, kPingAckWait, [this] { SendFinalGoAway(); });
  actions_.flush();
}

void ConnectionLifecycle::OnPingAck(const nghttp2_frame& frame) {
  if (state_ == State::kAnnounced && !acked_ &&
      std::memcmp(frame.ping.opaque_data, kGoAwayPing, sizeof(kGoAwayPing)) == 0) {
    acked_ = true;  // once: more ACKs put nothing off
    if (final_delay_ <= absl::ZeroDuration()) return SendFinalGoAway();
    Arm(ping_ack_, final_delay_, [this] { SendFinalGoAway(); });
  }
}

void ConnectionLifecycle::SendFinalGoAway() {
  if (state_ != State::kAnnounced) return;
  state_ = State::kFinal;
  ping_ack_.cancel();
  last_stream_id_ = nghttp2_session_get_last_proc_stream_id(session_);
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, last_stream_id_, NGHTTP2_NO_ERROR,
                        reinterpret_cast<const uint8_t*>(why_), std::strlen(why_));
  actions_.flush();
}

bool ConnectionLifecycle::Admits(int32_t stream_id) {
  if (Serves(stream_id)) return true;
  refused_.push_back(stream_id);
  return false;
}

void ConnectionLifecycle::SendRefusals() {
  for (int32_t stream_id : refused_) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_REFUSED_STREAM);
  }
  refused_.clear();
}

bool ConnectionLifecycle::AcceptsPing(bool calls_open) {
  const absl::Time now = absl::Now();
  const absl::Duration interval = calls_open ? kMinPingInterval : kMinPingIntervalWithoutCalls;
  if (last_ping_ != absl::InfinitePast() && now < last_ping_ + interval) ++ping_strikes_;
  last_ping_ = now;
  return ping_strikes_ <= kMaxPingStrikes;
}

void ConnectionLifecycle::OnAnswerSent() {
  last_ping_ = absl::InfinitePast();
  ping_strikes_ = 0;
}

void ConnectionLifecycle::TooManyPings() {
  if (calmed_) return;  // said already
  calmed_ = true;
  Stop();
  state_ = State::kFinal;
  last_stream_id_ = nghttp2_session_get_last_proc_stream_id(session_);
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, last_stream_id_,
                        NGHTTP2_ENHANCE_YOUR_CALM,
                        reinterpret_cast<const uint8_t*>(kTooManyPings),
                        sizeof(kTooManyPings) - 1);
}

void ConnectionLifecycle::Stop() {
  age_.cancel();
  idle_.cancel();
  ping_ack_.cancel();
  grace_.cancel();
}

}  // namespace egress::dataplane

#ifndef EGRESS_SERVICE_DATAPLANE_CONNECTION_LIFECYCLE_H_
#define EGRESS_SERVICE_DATAPLANE_CONNECTION_LIFECYCLE_H_

// How a caller's connection to the data plane is told to go and then closed, as gRPC's
// library server (C-core 1.51) does it, at the connection's max age (with gRPC's
// jitter), after its max idle with no call open, or at shutdown: a graceful GOAWAY in
// two steps, so that no stream on its way is lost (the first GOAWAY names the last
// stream id 2^31-1 and comes with a PING; the final one, sent once the PING's ACK shows
// the caller has seen the first (a second later at the max age), or 20 s later, names
// the last stream the server took), the calls under way given a grace, then the
// connection closed. A stream the caller opens after the final GOAWAY is refused
// (REFUSED_STREAM: not processed, safe to retry elsewhere). And gRPC's keepalive
// enforcement: a caller that PINGs more often than the library server's defaults allow
// is sent GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (what tells gRPC clients to back
// their keepalive off) and its connection ends. Everything here runs on the
// connection's loop.

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/steady_timer.hpp"

namespace egress::dataplane {

// --grpc_max_connection_age, its grace and --grpc_max_connection_idle (EgressServer's
// ConnectionAge).
struct ConnectionLifetime {
  absl::Duration max_age = absl::ZeroDuration();   // zero: the connection lives on
  absl::Duration grace = absl::ZeroDuration();     // for calls under way at the GOAWAY
  absl::Duration max_idle = absl::ZeroDuration();  // with no call open; zero: no limit
};

// The age at which one connection gets its GOAWAY: max_age times a factor drawn
// uniformly from [0.9, 1.1], gRPC's jitter, so that connections opened together (after a
// deploy) do not all reconnect at once.
absl::Duration JitteredAge(absl::Duration max_age);

class ConnectionLifecycle {
 public:
  explicit ConnectionLifecycle(const boost::asio::any_io_executor& loop);
  ConnectionLifecycle(const ConnectionLifecycle&) = delete;
  ConnectionLifecycle& operator=(const ConnectionLifecycle&) = delete;

  // What the lifecycle asks of its connection: to write what nghttp2 has queued, and to
  // close at once.
  struct Actions {
    std::function<void()> flush;
    std::function<void()> close;
  };
  // Arms the age and idle timers of `lifetime` for `session` (no call is open yet). The
  // timers' handlers do nothing once `alive` has expired (the connection is gone).
  void Start(nghttp2_session* session, const ConnectionLifetime& lifetime,
             std::weak_ptr<void> alive, Actions actions);
  // Sends the first GOAWAY and its PING (once), and closes the connection `grace` from
  // now (or at a grace already running, whichever ends first). `why` is the final
  // GOAWAY's debug data (gRPC's library server says "max_age" at the age); it goes
  // `final_delay` after the PING's ACK (see kFinalGoAwayDelay in the .cc).
  void GoAway(absl::Duration grace, const char* why,
              absl::Duration final_delay = absl::ZeroDuration());
  // A PING's ACK came from the caller (nghttp2's frame): the final GOAWAY, when it is ours.
  void OnPingAck(const nghttp2_frame& frame);
  // A stream the caller opens (a HEADERS frame's header, before nghttp2 reads the frame):
  // false when it comes after the final GOAWAY, and is to be refused.
  bool Admits(int32_t stream_id);
  // Whether the stream is one the connection serves (none past the final GOAWAY's), with
  // no side effect: Admits has noted the refusal already.
  bool Serves(int32_t stream_id) const { return stream_id <= last_stream_id_; }
  // Refuses the streams Admits turned down since the last call (REFUSED_STREAM), once
  // nghttp2 has read their frames: it sends no RST_STREAM for a stream it has not seen.
  void SendRefusals();
  bool going_away() const { return state_ != State::kOpen; }
  // A PING (not an ACK) came, with calls open on the connection or none. As gRPC's
  // library server with its defaults: a PING sooner than 5 minutes after the last (2 hours
  // with no call open) since the server last sent an answer's HEADERS or DATA is a
  // strike; past 2 strikes, false: the caller is to be sent TooManyPings.
  bool AcceptsPing(bool calls_open);
  // The connection's first call started (true) or its last one ended (false): the idle
  // timer stops, or starts over.
  void CallsOpen(bool open);
  // The server sent HEADERS or DATA: the caller may PING again (gRPC resets its strikes).
  void OnAnswerSent();
  // GOAWAY ENHANCE_YOUR_CALM "too_many_pings", naming the last stream taken; the caller
  // resets the streams open, and the connection ends once the GOAWAY is written.
  void TooManyPings();
  // The connection has ended: the timers are stopped.
  void Stop();

 private:
  enum class State {
    kOpen,       // serving; the age and idle timers run when there are limits
    kAnnounced,  // the first GOAWAY (2^31-1) and its PING are sent; new streams still taken
    kFinal,      // the final GOAWAY is sent: streams past last_stream_id_ are refused
  };
  void SendFinalGoAway();
  // From the PING's ACK to the final GOAWAY at the max age or idle (kFinalGoAwayDelay).
  absl::Duration FinalDelay() const;
  // Runs `then` at `when` unless the connection is gone by then.
  void Arm(boost::asio::steady_timer& timer, absl::Duration when, std::function<void()> then);

  nghttp2_session* session_ = nullptr;
  ConnectionLifetime lifetime_;
  std::weak_ptr<void> alive_;
  Actions actions_;
  State state_ = State::kOpen;
  int32_t last_stream_id_ = INT32_MAX;  // what the final GOAWAY names
  const char* why_ = "";
  std::vector<int32_t> refused_;  // until SendRefusals
  absl::Time close_at_ = absl::InfiniteFuture();
  absl::Time last_ping_ = absl::InfinitePast();  // since the last answer sent
  int ping_strikes_ = 0;
  bool calmed_ = false;  // TooManyPings has sent its GOAWAY
  bool acked_ = false;   // the first GOAWAY's PING came back
  bool calls_open_ = false;  // CallsOpen's
  absl::Duration final_delay_;  // GoAway's
  boost::asio::steady_timer age_;
  boost::asio::steady_timer idle_;  // while no call is open
  boost::asio::steady_timer ping_ack_;  // the final GOAWAY without the ACK
  boost::asio::steady_timer grace_;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_CONNECTION_LIFECYCLE_H_

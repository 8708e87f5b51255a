#ifndef EGRESS_SERVICE_TRANSPORT_HTTP2_SESSION_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP2_SESSION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/error.hpp"
#include "service/base/guard.h"
#include "service/transport/http2/errors.h"
#include "service/transport/http2/session_limits.h"
#include "service/transport/http2/stream.h"
#include "service/transport/observer.h"
#include "service/transport/http/origin.h"
#include "service/transport/http/request.h"
#include "service/transport/io/upstream_stream.h"

struct nghttp2_session;

namespace egress::transport::http2 {

// One HTTP/2 client connection (RFC 9113), driven by nghttp2 (framing, HPACK, flow
// control), over an already connected UpstreamStream: plain TCP (h2c with prior
// knowledge) or TLS whose ALPN chose "h2". Over TLS the handshake must have been set up
// with OfferHttp2 (alpn.h), which also turns renegotiation off: the session reads and
// writes at once, which TlsStream carries only without it.
//
// Threading: all of its work runs on the stream's executor, one thread per loop (an
// implicit strand); the public methods may be called from any thread and dispatch onto
// it; callbacks run there, never inside the call that started them.
//
// Lifetime: the session does not own the socket. `upstream_owner` is what keeps
// `upstream` alive (the Connection holding both): the session holds it while its I/O
// can be pending, and lets go when it has ended. Holding a Session or one of its
// Streams keeps the session alive; a session ends (and closes the socket) after Close(),
// an error, the server's close, or a GOAWAY's last stream: an owner that drops it
// without Close() keeps both alive until the server closes the connection.
//
// I/O: after Start, one read is always in flight; what nghttp2 has to send is gathered
// into one buffer (up to 64 KiB) and written, one write in flight at a time.
//
// Failures are absl::Status with reasons (error_reason.h): UNAVAILABLE with
// kNotProcessedReason (retry on another connection), UPSTREAM_STREAM_RESET (the server
// reset the stream after taking it), UPSTREAM_INVALID_RESPONSE (a malformed response:
// nghttp2 reset the stream), UPSTREAM_PROTOCOL_ERROR (the connection broke HTTP/2),
// UPSTREAM_LIMIT_EXCEEDED (a bound in SessionLimits), UPSTREAM_CLOSED,
// UPSTREAM_CONNECTION_FAILED, UPSTREAM_TIMEOUT (a write or a PING); DEADLINE_EXCEEDED
// (reason DEADLINE_EXCEEDED) for a stream's deadline; CANCELLED for Reset and Close;
// RESOURCE_EXHAUSTED (REQUEST_TOO_LARGE) for request headers over 64 KiB compressed.
// The observer hears of OnUpstreamLimit (kResponseHead, kTrailers, kInterimResponses)
// and OnTransportException.
class Session : public std::enable_shared_from_this<Session> {
 public:
  using HeadCallback = Stream::HeadCallback;
  using StatusCallback = std::function<void(absl::Status)>;

  // What the owner hears of, on the session's executor.
  struct Events {
    // A stream gave back its place among the open ones: a waiter may Open now.
    std::function<void()> stream_closed;
    // Once, when the session takes no more streams: GOAWAY received (streams it covers
    // still finish), an error, the server's close, or Close().
    std::function<void(const absl::Status& why)> unusable;
  };

  Session(UpstreamStream& upstream, std::shared_ptr<void> upstream_owner, Origin origin,
          SessionLimits limits, TransportObserver& observer, Events events = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Sends the client preface and SETTINGS (our windows, header list size, no push), and
  // starts reading. Once.
  void Start();

  // Sends `request` on a new stream (after Start). `on_head` gets the final response
  // head (1xx interim heads are skipped, at most limits.max_interim_responses) or why
  // there is none. `deadline` bounds the stream (each Read may move it): when it passes
  // before the response has ended, the stream is reset and whatever waits gets
  // DEADLINE_EXCEEDED. Without a free stream (CanOpenStream), on_head gets UNAVAILABLE
  // kNotProcessedReason; a request that cannot be written, INTERNAL.
  std::shared_ptr<Stream> Open(const HttpRequest& request, absl::Time deadline,
                               HeadCallback on_head);

  // Sends a PING; `done` gets OK when the server answers within `timeout`, else
  // DEADLINE_EXCEEDED (UPSTREAM_TIMEOUT), or why the session ended. For checking an idle
  // connection before reuse; the session stays as it is either way.
  void Ping(absl::Duration timeout, StatusCallback done);

  // Ends the session: open streams and pings fail with CANCELLED (or kNotProcessedReason
  // when their request was never sent), the socket closes. Idempotent.
  void Close();

  // For a transport whose loops have stopped (no handler will run again): closes the
  // socket and drops the callbacks of the open streams and pings without running them,
  // so that what they hold is freed (as Connection::Abandon). On the loop's thread, or
  // once it has stopped.
  void Abandon();

  // Whether Open would get a stream now: the session is usable (started or about to be,
  // no GOAWAY, not ended) and fewer than min(server's SETTINGS_MAX_CONCURRENT_STREAMS,
  // limits.max_concurrent_streams) streams are open. From any thread.
  bool CanOpenStream() const;
  // Whether the session takes new streams at all (no GOAWAY, not ended or closing),
  // however many are open. From any thread.
  bool Usable() const;
  // Streams it may have open at once: min(server's SETTINGS_MAX_CONCURRENT_STREAMS,
  // limits.max_concurrent_streams). From any thread.
  uint32_t StreamLimit() const;
  uint32_t open_streams() const { return open_streams_; }
  uint64_t streams_opened() const { return streams_opened_; }
  SessionStats stats() const;
  const Origin& origin() const { return origin_; }

 private:
  friend class Stream;
  struct Callbacks;  // nghttp2's callbacks, with access to the session

  enum class State {
    kNew,        // made; Start has not run
    kOpen,       // takes new streams
    kGoingAway,  // GOAWAY received (or stream ids ran out): the open streams finish
    kEnded,      // closed: every stream has ended, no I/O starts again
  };

  struct PendingPing {
    std::unique_ptr<boost::asio::steady_timer> timer;
    StatusCallback done;
  };

  // The exception boundary of every handler: an exception (from the session's code or
  // a callback it ran) is counted and ends the session with INTERNAL.
  template <class F>
  void Guard(F&& step) {
    RunGuarded(std::forward<F>(step), [this](absl::string_view what) { OnException(what); });
  }
  void OnException(absl::string_view what);

  void StartOnLoop();
  void Submit(const std::shared_ptr<Stream>& stream, const HeaderList& headers,
              absl::Time deadline);
  void PingOnLoop(absl::Duration timeout, StatusCallback done);
  void ReadMore();
  void OnRead(boost::beast::error_code ec, size_t bytes);
  // Takes what nghttp2 has to send (up to a batch) and writes it if no write is in
  // flight; ends the session when nghttp2 is done with it.
  void Flush();
  void OnWrite(boost::beast::error_code ec);
  void OnWriteTimeout();
  // Runs what nghttp2's callbacks left to do, and sends what that made, until both are
  // done: after every step that fed or asked nghttp2.
  void Settle();
  void DeliverReady();
  void End(absl::Status why);
  void ReportUnusable(const absl::Status& why);

  // Takes a place among the open streams, if there is one. From any thread.
  bool TakeSlot();
  // Gives the stream's place back, once (from any thread); true if this call did.
  bool ReleasePlace(Stream& stream);

  // The window a stream is given first (SETTINGS_INITIAL_WINDOW_SIZE, see SessionLimits).
  uint32_t InitialStreamWindow() const;
  // A Stream let go of with body bytes unread: their windows reopen.
  void OnStreamDropped(uint64_t unread_bytes);
  void OnStreamClosed(int32_t id, uint32_t error_code);
  void OnGoaway(int32_t last_stream_id, uint32_t error_code, absl::string_view debug);
  Stream* Find(int32_t id) const;
  // Whether the stream's id is above the last stream id of a GOAWAY received.
  bool AboveGoaway(const Stream& stream) const;

  // Why nghttp2 failed with `code`: what a callback of its decided (ending_), else the
  // code in words (errors.h).
  absl::Status LibraryFailure(int code);
  // Counts body bytes buffered (`body_delta`) and the write buffer, now and at the most.
  void UpdateBufferStats(int64_t body_delta);

  UpstreamStream& upstream_;
  std::shared_ptr<void> upstream_owner_;  // until the session has ended
  const UpstreamStream::executor_type executor_;
  const Origin origin_;
  const std::string origin_key_;
  const SessionLimits limits_;
  TransportObserver& observer_;
  const Events events_;
  std::unique_ptr<nghttp2_session, void (*)(nghttp2_session*)> session_;

  std::atomic<State> state_{State::kNew};
  std::atomic<bool> closing_{false};  // Close() was called; state_ follows on the loop
  std::atomic<uint32_t> open_streams_{0};
  std::atomic<uint32_t> server_max_streams_;
  std::atomic<uint64_t> streams_opened_{0};
  bool unusable_reported_ = false;

  absl::flat_hash_map<int32_t, std::shared_ptr<Stream>> streams_;  // known to nghttp2
  std::vector<std::shared_ptr<Stream>> ready_;  // with something to deliver
  std::vector<std::function<void()>> deferred_;  // callbacks nghttp2's callbacks owe
  uint64_t received_bytes_ = 0;  // DATA received: the connection window reopens in Settle
  absl::flat_hash_map<uint64_t, PendingPing> pings_;
  uint64_t pings_sent_ = 0;

  // Why the session ends, when a callback of nghttp2's decided it (it then returns an
  // error from nghttp2 or makes nghttp2 send GOAWAY with an error code).
  std::optional<absl::Status> ending_;
  absl::Status ended_;  // why it ended, once it has
  std::string library_message_;  // nghttp2's latest error message
  std::optional<int32_t> goaway_last_stream_id_;
  uint32_t goaway_error_ = 0;

  std::vector<uint8_t> read_buffer_;
  std::string next_write_;  // gathered from nghttp2, to go out next
  std::string writing_;     // the write in flight
  bool write_in_flight_ = false;
  boost::asio::steady_timer write_timer_;

  std::atomic<uint64_t> buffered_body_bytes_{0};
  std::atomic<uint64_t> peak_buffered_body_bytes_{0};
  std::atomic<uint64_t> write_buffer_bytes_{0};
  std::atomic<uint64_t> peak_write_buffer_bytes_{0};
};

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP2_SESSION_H_

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
#include "service/transport/http2/stream.h"
#include "service/transport/observer.h"
#include "service/transport/http/origin.h"
#include "service/transport/http/request.h"
#include "service/transport/io/upstream_stream.h"

struct nghttp2_session;

namespace egress::transport::http2 {

// Bounds on what one HTTP/2 connection lets its server make egress hold or do.
struct SessionLimits {
  // Streams open at once, at most; the server's SETTINGS_MAX_CONCURRENT_STREAMS, when
  // lower, is the limit.
  uint32_t max_concurrent_streams = 100;
  // The receive windows egress advertises (1 to 2^31 - 1). A stream's window opens again only as its
  // caller reads (nghttp2_session_consume_stream), so a slow caller makes egress buffer
  // at most one stream window for its stream; the connection's reopens as bytes arrive,
  // so that callers who stop reading hold up nobody else's body (it bounds what is in
  // flight, not what is held: all streams together hold at most max_concurrent_streams
  // stream windows).
  //
  // A stream's window is what its request's BodyMemory has reserved, never more: bytes
  // a server may send must be buffered whatever happens. It starts at
  // initial_stream_window_bytes (SETTINGS_INITIAL_WINDOW_SIZE, at most
  // stream_window_bytes), reserved before the request goes out (a request that cannot
  // reserve it fails with BodyMemory's status, and nothing is sent), and grows by what
  // its caller reads, up to stream_window_bytes, as far as reservations succeed: a caller
  // that keeps up gets the whole window, one that stops holds only what it had. The
  // reservation shrinks to what is buffered once the body has all arrived, and goes
  // back as the rest is read, dropped or reset.
  uint32_t stream_window_bytes = 256 * 1024;
  // Every stream reserves its first window at submit, whether its answer has a body or
  // not (a HEAD, a 204), so this bounds how many fetches the budget lets be in flight:
  // 16 KiB lets the default limits.max_concurrent_fetches (10,000) all hold a stream
  // within the default buffered_body_budget_bytes (256 MiB: 160 MiB), where 64 KiB
  // refused every HTTP/2 fetch past 4,096. A fixed figure, not the budget divided by
  // max_concurrent_fetches: it goes out once per connection in SETTINGS, while both
  // limits change with UpdateConfig under live connections. 16 KiB is one DATA frame of
  // the default SETTINGS_MAX_FRAME_SIZE, so a server need not split frames; a body
  // larger than it costs a few more WINDOW_UPDATEs while its window doubles per read up
  // to stream_window_bytes.
  uint32_t initial_stream_window_bytes = 16 * 1024;
  uint32_t connection_window_bytes = 4 * 1024 * 1024;
  // A response's header block (and trailers), decoded, counted as RFC 9113 counts
  // SETTINGS_MAX_HEADER_LIST_SIZE (name + value + 32 a field): over it the stream fails
  // (the rest of the block is decoded for nobody). As transport.max_response_header_bytes.
  // A header block in more than 8 CONTINUATION frames ends the session (nghttp2's bound,
  // Debian's fix of CVE-2024-28182).
  uint32_t max_header_list_bytes = 64 * 1024;
  uint32_t max_interim_responses = 5;  // 1xx heads before the final one, per stream
  // SETTINGS and PING acknowledgements waiting to be sent (a server that floods them
  // and reads nothing), and entries in one SETTINGS frame; past either the session ends.
  uint32_t max_queued_acks = 1000;
  uint32_t max_settings_entries = 32;
  // A write that has not completed after this long (the server reads nothing) ends the
  // session.
  absl::Duration write_timeout = absl::Seconds(30);
};

// What a session holds and has done, for tests and metrics; from any thread.
struct SessionStats {
  uint32_t open_streams = 0;
  uint64_t streams_opened = 0;
  // Response body bytes received and not yet read by callers, now and at the most.
  uint64_t buffered_body_bytes = 0;
  uint64_t peak_buffered_body_bytes = 0;
  // Bytes taken from nghttp2 to be written (one write in flight and the next batch),
  // now and at the most.
  uint64_t write_buffer_bytes = 0;
  uint64_t peak_write_buffer_bytes = 0;
};

// The reason of the UNAVAILABLE a stream fails with when its server did not process its
// request: refused (REFUSED_STREAM) or above a GOAWAY's last stream id before any
// response head (interim ones included) came, or never sent (the session ended or went
// away first). Such a request may be sent again on another connection whatever its
// method (RFC 9113 8.7). Once a head has come, either is a reset (UPSTREAM_STREAM_RESET).
inline constexpr absl::string_view kNotProcessedReason = "UPSTREAM_REFUSED_STREAM";
// Whether `status` says the server did not process the request (kNotProcessedReason).
bool WasNotProcessed(const absl::Status& status);

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

  // Stream steps, on the loop.
  void CloseStream(Stream& stream);  // it gives its place back
  void MarkReady(Stream& stream);
  void FailStream(Stream& stream, absl::Status why);
  void ResetStream(Stream& stream, absl::Status why);  // RST_STREAM CANCEL, then fails it
  void EndBody(Stream& stream);
  // Hands a read up to its size from the stream's buffer, and lets the windows reopen
  // (and the stream's grow, see SessionLimits).
  std::string TakeBody(Stream& stream, size_t max_bytes);
  // The stream's window: `bytes` more reserved from its BodyMemory (always, without
  // one), or why not. The caller opens the window by as much.
  static absl::Status ReserveWindow(Stream& stream, uint64_t bytes);
  // After a read of `read` bytes from a stream whose body is still arriving: its window
  // grows by as much, up to limits_.stream_window_bytes, if that much can be reserved.
  void GrowWindow(Stream& stream, uint64_t read);
  // Once no more bytes can arrive for the stream (its body ended, or it failed): the
  // reservation beyond what it buffers goes back.
  static void ReleaseSpareWindow(Stream& stream);
  uint32_t InitialStreamWindow() const;
  void DropBody(Stream& stream);
  // A Stream let go of with body bytes unread: their windows reopen.
  void OnStreamDropped(uint64_t unread_bytes);
  void OnStreamDeadline(Stream& stream);
  void OnHeadersReceived(Stream& stream, bool end_stream);
  void OnStreamClosed(int32_t id, uint32_t error_code);
  void OnGoaway(int32_t last_stream_id, uint32_t error_code, absl::string_view debug);
  Stream* Find(int32_t id) const;
  // Whether the stream's id is above the last stream id of a GOAWAY received.
  bool AboveGoaway(const Stream& stream) const;

  // `status` for a callback, sharing nothing with the session's own copy: copies of an
  // absl::Status share a reference-counted representation, which the loop may let go of
  // while the caller still reads its copy; ThreadSanitizer cannot see that count
  // (Debian's Abseil is not instrumented) and would report a race.
  static absl::Status ForCaller(const absl::Status& status);
  // Failures, in words a caller can act on.
  absl::Status NotProcessed(absl::string_view why) const;
  absl::Status LimitExceeded(absl::string_view what) const;
  absl::Status LibraryFailure(int code);
  absl::Status IoFailure(absl::string_view phase, boost::beast::error_code ec) const;
  absl::Status DeadlineFailure(const Stream& stream) const;
  absl::Status StreamResetFailure(const Stream& stream, uint32_t error_code) const;
  absl::Status FailureAtEnd(const Stream& stream) const;
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

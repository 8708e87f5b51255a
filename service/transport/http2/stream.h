#ifndef EGRESS_SERVICE_TRANSPORT_HTTP2_STREAM_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP2_STREAM_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "service/transport/http/body_memory.h"
#include "service/transport/http/request_body.h"
#include "service/transport/http/response_head.h"

namespace egress::transport::http2 {

class Session;

// One request and its response on an HTTP/2 session, as its caller holds it (made by
// Session::Open). Its methods may be called from any thread; its callbacks run on the
// session's executor, never inside the call that started them. One Read at a time.
// Holding a Stream keeps its Session alive. A caller that lets go of a response before
// its end calls Reset: a stream merely dropped keeps its place among the open ones, and
// up to a window of bytes, until the server ends it or its deadline passes.
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  using HeadCallback = std::function<void(absl::StatusOr<ResponseHead>)>;
  // Bytes read; an empty string means the body ended (as Connection::ReadCallback).
  using ReadCallback = std::function<void(absl::StatusOr<std::string>)>;

  // Made by Session::Open only.
  Stream(std::shared_ptr<Session> session, RequestBody request_body,
         std::shared_ptr<BodyMemory> memory, HeadCallback on_head);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Reads up to max_bytes of the response body: what has arrived (at least one byte), or
  // waits for it. After the end, an empty string; after a failure, the failure. Reading
  // is what opens the stream's flow-control window again (see SessionLimits).
  // `deadline` becomes the stream's deadline (see Session::Open).
  void Read(size_t max_bytes, absl::Time deadline, ReadCallback done);

  // Whether the body has been read to its end: in a Read callback, it tells the last
  // read from one that needs another. From any thread.
  bool BodyEnded() const { return body_ended_; }
  // Whether the server has sent the whole body (END_STREAM), read or not: a Reset then
  // sends nothing. From any thread.
  bool BodyReceived() const { return body_received_; }

  // For a response the caller lets go of: unless the server has closed the stream, it
  // is reset (RST_STREAM CANCEL); bytes buffered for it are dropped and the flow-control
  // windows they held open again. The session stays usable. A head or read still waiting
  // gets CANCELLED. Idempotent; nothing happens to a stream already failed.
  void Reset();

  // Response body bytes received and not yet read. From any thread.
  uint64_t buffered_bytes() const { return buffered_bytes_; }

 private:
  friend class Session;

  enum class State {
    kAwaitingHead,  // the request is queued or sent; no final response head yet
    kBody,          // the final head has come; body bytes arrive as they are read
    kBodyEnded,     // the server ended the body (END_STREAM); body_ holds what is left
    kFailed,        // an error, the deadline or Reset ended it: failure_ says which
  };

  void ReadOnLoop(size_t max_bytes, absl::Time deadline, ReadCallback done);
  // Runs the callbacks that can run now: the head, or a read that has bytes, the end or
  // the failure to give.
  void Deliver();
  // Arms the deadline timer (on the loop); an infinite deadline disarms it.
  void SetDeadline(absl::Time deadline);

  // Steps on the session's loop, taken by the session and nghttp2's callbacks.
  // Puts it in the session's list of streams with something to deliver.
  void MarkReady();
  // Gives its place among the open streams back (once), and tells the session's owner.
  void Close();
  // Ends it with `why`: its place goes back, what it buffers is dropped, whatever waits
  // hears of it. Nothing happens to a stream already failed.
  void Fail(absl::Status why);
  // RST_STREAM CANCEL (when nghttp2 knows the stream), then Fail.
  void SendReset(absl::Status why);
  // The server ended the body (END_STREAM).
  void EndBody();
  // A header block has been received: a final head (delivered), an interim one
  // (counted), or trailers.
  void OnHeadersReceived(bool end_stream);
  void OnDeadline();
  // Hands a read up to its size from the buffer, and lets the windows reopen (and the
  // stream's grow, see SessionLimits).
  std::string TakeBody(size_t max_bytes);
  void DropBody();
  // The window: `bytes` more reserved from memory_ (always, without one), or why not.
  // The caller opens the window by as much.
  absl::Status ReserveWindow(uint64_t bytes);
  // After a read of `read` bytes while the body is still arriving: the window grows by
  // as much, up to limits.stream_window_bytes, if that much can be reserved.
  void GrowWindow(uint64_t read);
  // Once no more bytes can arrive (the body ended, or the stream failed): the
  // reservation beyond what it buffers goes back.
  void ReleaseSpareWindow();

  const std::shared_ptr<Session> session_;
  int32_t id_ = 0;  // the HTTP/2 stream id, once submitted
  State state_ = State::kAwaitingHead;
  absl::Status failure_;
  // The stream holds no place among the session's open streams any more: closed by
  // nghttp2, failed, reset by its caller, or never given one (Session::ReleasePlace). A
  // caller done with it lets its place go at once, so that the pool, which counts places
  // by caller, and the session agree; nghttp2 holds back a new request's HEADERS while
  // the server's own count (streams whose RST_STREAM has not gone out) is at its limit.
  std::atomic<bool> closed_{false};

  // The request body, as nghttp2 asks for it; let go of once sent.
  RequestBody request_body_;
  const size_t request_body_size_;
  size_t request_body_sent_ = 0;
  bool request_sent_ = false;  // its HEADERS frame went out

  // The response head being received (interim ones are counted and dropped), and the
  // final one until it is delivered.
  ResponseHead head_in_progress_;
  std::optional<ResponseHead> head_;
  uint32_t interim_responses_ = 0;
  uint64_t header_list_bytes_ = 0;  // of the header block being received

  HeadCallback head_done_;
  ReadCallback read_done_;
  size_t read_max_ = 0;
  boost::beast::flat_buffer body_;  // received and not yet read; at most window_
  // The flow-control window granted to the server for this stream, in total (reopened
  // bytes aside): reserved from memory_ (when there is one) and never less than body_
  // holds. See SessionLimits::stream_window_bytes.
  const std::shared_ptr<BodyMemory> memory_;
  uint64_t window_ = 0;
  absl::Time deadline_ = absl::InfiniteFuture();
  boost::asio::steady_timer deadline_timer_;
  bool ready_ = false;  // in the session's list of streams with something to deliver

  std::atomic<bool> body_ended_{false};
  std::atomic<bool> body_received_{false};
  std::atomic<uint64_t> buffered_bytes_{0};
};

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP2_STREAM_H_

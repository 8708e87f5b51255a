#ifndef EGRESS_SERVICE_DATAPLANE_SERVER_SESSION_H_
#define EGRESS_SERVICE_DATAPLANE_SERVER_SESSION_H_

// One caller's HTTP/2 connection to the data plane: an nghttp2 server session pumped on
// the event loop that accepted it. It collects each stream's request (headers, one
// length-prefixed message), hands it to the method its :path names, and sends the answer
// a method gives back, on the same loop. Everything here runs on that loop's thread.

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "grpcpp/support/status.h"
#include "service/dataplane/caller_stream.h"
#include "service/dataplane/caller_limits.h"
#include "service/dataplane/connection_lifecycle.h"
#include "service/dataplane/grpc_framing.h"
#include "service/fetch/fetch_observer.h"

namespace egress::dataplane {

// What a session refuses its caller, bounded and counted.
struct SessionLimits {
  // SETTINGS_MAX_CONCURRENT_STREAMS: nghttp2 refuses a stream past it, REFUSED_STREAM
  // (which clients retry) until the caller has acknowledged it, then by ending the
  // connection (GOAWAY PROTOCOL_ERROR); counted too_many_streams either way.
  uint32_t max_concurrent_streams = 100;
  // SETTINGS_MAX_HEADER_LIST_SIZE, as RFC 9113 counts it (name + value + 32 per field):
  // a request whose metadata is larger is answered RESOURCE_EXHAUSTED. gRPC's default.
  uint32_t max_header_list_bytes = 16 * 1024;
  // The largest request message accepted (RESOURCE_EXHAUSTED past it).
  uint64_t max_message_bytes = 4 << 20;
  // The bytes of request messages still arriving that one connection takes in, all its
  // streams together, in max_message_bytes. A message larger than a stream's first
  // flow-control window (64 KiB) waits, its window closed, until its whole size fits
  // beside those under way; first come, first in. Two: one whole message always fits.
  uint64_t max_buffered_messages = 2;
  // The longest a call may last from its request's headers, whatever its grpc-timeout
  // (limits.max_timeout, which LoopServer gives each connection; its default here).
  absl::Duration max_call_time = absl::Minutes(5);
  // What the connection may do besides its calls (caller_limits.h).
  CallerLimits caller;
  // When the connection gets its GOAWAY, and the grace its calls then have.
  ConnectionLifetime lifetime;
};

using Metadata = std::vector<std::pair<std::string, std::string>>;

// One request, whole, as a method gets it.
struct IncomingCall {
  int32_t stream_id = 0;
  std::string path;
  // The caller's metadata: names in lower case (HTTP/2 has no other), -bin values decoded.
  Metadata metadata;
  absl::Time deadline = absl::InfiniteFuture();  // from grpc-timeout
  std::string message;                           // the request message, unframed
};

// A call that wants to learn that its stream went before its answer (RST_STREAM, or the
// connection closed): gRPC's cancellation.
class StreamWatcher {
 public:
  virtual void OnStreamReset() = 0;

 protected:
  ~StreamWatcher() = default;
};

class ServerSession;

// The methods a server offers, by :path.
class Methods {
 public:
  virtual ~Methods() = default;
  // Whether a method answers `path`; a request for any other is answered UNIMPLEMENTED.
  virtual bool Serves(absl::string_view path) const = 0;
  // A whole request for a method that Serves; the answer comes back through
  // session->Answer, on the session's loop. Runs on the loop.
  virtual void Start(const std::shared_ptr<ServerSession>& session, IncomingCall call) = 0;
  // Whether `path` takes a stream of request messages (a bidi method): Start then comes
  // with the request's headers and no message, and the method takes each message with
  // session->Read.
  virtual bool StreamsRequests(absl::string_view) const { return false; }
};

class ServerSession : public std::enable_shared_from_this<ServerSession> {
 public:
  // Each refusal is reported to `observer` (egress_calls_refused_total).
  ServerSession(CallerStream socket, Methods& methods, const SessionLimits& limits,
                FetchObserver& observer);
  ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // Sends the server's SETTINGS and starts reading; once, on the socket's loop.
  void Start();
  // `slot` is let go of when the connection ends; meanwhile the ledger may evict the
  // connection for a newer one (preface_evicted, idle_evicted). Before Start.
  void Hold(ConnectionSlot slot) { slot_ = std::move(slot); }

  // The loop the session runs on: what a call posts its answer to.
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }
  // The caller's address as gRPC names it: "ipv4:127.0.0.1:41234", "ipv6:[::1]:41234".
  const std::string& peer() const { return peer_; }
  // The names of the caller's verified TLS client certificate (mTLS); none otherwise.
  const fetch::CertificateNames& certificate() const { return socket_.certificate(); }

  // Posted to the loop once a call's stream is over: nghttp2 has taken the answer's last
  // byte, or the stream went first (gRPC's OnDone).
  using OnFinished = std::function<void()>;
  // Answers a unary call: `message` then `status`, or `status` alone (Trailers-Only);
  // `on_finished` (when given) follows as Finish says.
  void Answer(int32_t stream_id, std::optional<std::string> message, const grpc::Status& status,
              OnFinished on_finished = nullptr);
  // Sends one message (framed here) on the stream, after the response headers the first
  // sends. `on_taken` follows, posted to the loop, once nghttp2 has taken the message's
  // last byte (as the caller's flow-control window lets it), or with CANCELLED when the
  // stream is gone or finished first; one message at a time.
  using OnTaken = std::function<void(absl::Status)>;
  void Send(int32_t stream_id, std::string message, OnTaken on_taken);
  // A call that StreamsRequests: `on_message` gets the next request message, posted to the
  // loop, or nullopt once the caller has sent its last; never once the stream is gone or
  // finished. One read at a time. Each message's flow-control window goes back only as
  // it is read, so a caller that sends faster than the method reads is held back by
  // HTTP/2: a stream holds at most its window's bytes (kStreamedMessageBound).
  using OnMessage = std::function<void(std::optional<std::string>)>;
  void Read(int32_t stream_id, OnMessage on_message);
  // A streamed message fits what its caller may always send: the stream's first window
  // (65,535) less what nghttp2 keeps of it before it gives window back (just under half).
  // The most of a caller's bytes an error message quotes: a status's trailers over 64 KiB
  // (nghttp2's bound on a header block it sends) would end the connection.
  static constexpr size_t kQuotedBytes = 256;
  static constexpr MessageBound kStreamedMessageBound = {
      65535 - 32766 - kMessagePrefixBytes, "",
      "a streamed request message fits half its stream's flow-control window"};
  // Ends the call with `status`: in the trailers after the messages sent, or alone
  // (Trailers-Only) when none was; nothing more when the stream is gone or ended already
  // (its deadline). `on_finished` (when given) follows once the stream is over.
  void Finish(int32_t stream_id, const grpc::Status& status, OnFinished on_finished = nullptr);
  // At `at`, resets the stream (RST_STREAM CANCEL, as gRPC's library cancels a call) if
  // a message of it still waits for the caller; the message's sender learns `why`. For a
  // FetchStream whose caller stops reading (fetch/stalled_write.h).
  void ResetIfStalledAt(int32_t stream_id, absl::Time at, absl::Status why);
  // `watcher` learns when stream_id goes before Unwatch (at once if it is gone already).
  void Watch(int32_t stream_id, StreamWatcher* watcher);
  void Unwatch(int32_t stream_id);

  // A graceful GOAWAY (see ConnectionLifecycle); the connection closes `grace` from now,
  // or once its last stream is over.
  void GoAway(absl::Duration grace, const char* why) { lifecycle_.GoAway(grace, why); }
  // Closes the connection now: every call not yet answered learns it, as of a reset.
  void Close() { End(); }
  // `on_end` runs once, on the loop, when the connection ends (at once if it has).
  void OnEnd(std::function<void()> on_end);

 private:
  struct Stream {
    Stream(uint64_t max_message_bytes, const boost::asio::any_io_executor& loop)
        : reader(max_message_bytes), deadline(loop) {}
    IncomingCall call;
    size_t header_bytes = 0;  // as SETTINGS_MAX_HEADER_LIST_SIZE counts them
    absl::Status refusal;     // what the request broke, answered once its headers are in
    MessageReader reader;
    uint64_t admitted = 0;  // the message's size, in the session's admitted_bytes_
    size_t unconsumed = 0;  // bytes received while waiting, not yet given back as window
    bool waiting = false;   // in waiting_
    // The call's deadline (grpc-timeout), at most limits_.max_call_time after the headers.
    boost::asio::steady_timer deadline;
    std::optional<boost::asio::steady_timer> stall_watch;  // see ResetIfStalledAt
    bool started = false;    // the method has the call
    bool head_sent = false;  // the response headers are submitted
    bool answered = false;   // Finish came: the status is given
    bool deferred = false;   // nghttp2 waits for ReadAnswer to have bytes again
    OutgoingMessage pending;  // the message being sent
    OnTaken on_taken;         // the pending message's
    Metadata trailers;
    StreamWatcher* watcher = nullptr;
    OnFinished on_finished;  // Finish's
    absl::Status reset;      // why the server reset the stream, told to a message's sender
    // A call that StreamsRequests: its DATA bytes not yet read (whole messages, then at
    // most part of one), and where the next message's prefix begins in them.
    bool streams_requests = false;
    std::string unread;
    uint64_t next_message_at = 0;
    bool requests_ended = false;  // the caller sent its last
    OnMessage on_message;         // Read's, until a message or the end comes
  };

  void Read();
  // Gives nghttp2's output to the socket, one write at a time; closes the connection once
  // neither side has more to say.
  void Flush();
  void End();
  // The method takes the call; the connection has a call open.
  void StartCall(Stream& stream);
  // The first call started (true), or the last one ended: the connection's slot in the
  // ledger and its max idle learn it.
  void CallsOpen(bool open);
  // Closes a connection the ledger evicted as idle (see the .cc).
  void EndIdle();
  static constexpr absl::Duration kEvictedCallsGrace = absl::Seconds(10);
  // The stream is gone: its call learns it, and so does a message's sender.
  void Gone(Stream& stream);
  // Tells a message's sender, on the loop, that the caller will not take it (`why`).
  void Cancelled(OnTaken on_taken, absl::Status why);
  // The call's deadline came (see OnDeadline in the .cc).
  void OnDeadline(int32_t stream_id);
  // Resets a stream whose answer is under way; a message's sender learns `why`.
  void Reset(int32_t stream_id, Stream& stream, absl::Status why);
  void EndIfWriteStuck();  // see the .cc
  static constexpr absl::Duration kStuckWriteGrace = absl::Seconds(10);
  static constexpr size_t kMaxWriteBytes = 64 * 1024;  // see Flush
  static constexpr size_t kMaxQueuedFrames = 1000;     // see ReadUnlessBacklogged
  void ReadUnlessBacklogged();
  void Refuse(int32_t stream_id, Stream& stream, const absl::Status& status);
  // Gives the caller window for `size` bytes of the stream's request: at once when its
  // message is admitted (or fits in its first window), else once Admit lets it in.
  void Consume(int32_t stream_id, Stream& stream, size_t size);
  // Lets the waiting messages in, first come first, while they fit (see max_buffered_messages).
  void Admit();
  // Lets go of the stream's incomplete request bytes (its message is whole, or refused,
  // or the stream is gone), and of its place among those admitted.
  void Unbuffer(Stream& stream);
  // Queues one message for the stream (Send without the write); false when the stream
  // is gone or finished.
  bool Queue(int32_t stream_id, std::string message, OnTaken& on_taken);
  void OnRequestHeaders(int32_t stream_id, Stream& stream);
  void OnRequestEnd(int32_t stream_id, Stream& stream);
  // A streamed call's DATA bytes: kept unread, each message's prefix checked as it comes.
  void Receive(int32_t stream_id, Stream& stream, absl::string_view bytes);
  // Gives a waiting Read its next message, or the end of the requests.
  void Deliver(int32_t stream_id, Stream& stream);
  Stream* Find(int32_t stream_id);

  static int OnBeginFrame(nghttp2_session*, const nghttp2_frame_hd* hd, void* self);
  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_size, const uint8_t* value, size_t value_size, uint8_t flags,
                      void* self);
  static int OnData(nghttp2_session*, uint8_t flags, int32_t stream_id, const uint8_t* data,
                    size_t size, void* self);
  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int OnInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int error,
                            void* self);
  static int OnFrameSent(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                           void* self);
  static ssize_t ReadAnswer(nghttp2_session* session, int32_t stream_id, uint8_t* buffer,
                            size_t length, uint32_t* flags, nghttp2_data_source* source,
                            void* self);

  CallerStream socket_;  // cleartext or TLS
  Methods& methods_;
  const SessionLimits limits_;
  FetchObserver& observer_;
  std::string peer_;
  nghttp2_session* session_ = nullptr;
  std::array<char, 16384> input_;
  std::string output_;
  bool writing_ = false;
  bool receiving_ = false;  // inside nghttp2_session_mem_recv: Flush comes after
  bool ended_ = false;
  // Calls whose method has them, not yet closed: none for long, the connection is idle.
  size_t calls_started_ = 0;
  uint64_t writes_done_ = 0;                // socket writes completed
  boost::asio::steady_timer write_watch_;  // see EndIfWriteStuck
  bool write_watched_ = false;
  bool read_paused_ = false;  // see ReadUnlessBacklogged
  uint64_t admitted_bytes_ = 0;  // the sizes of admitted messages still arriving
  std::deque<int32_t> waiting_;  // streams whose messages wait to be admitted, oldest first
  std::unordered_map<int32_t, Stream> streams_;  // node-based: a Stream stays put
  CallerGuard guard_;
  ConnectionSlot slot_;
  boost::asio::steady_timer preface_timer_;  // until the caller's first SETTINGS
  ConnectionLifecycle lifecycle_;
  std::function<void()> on_end_;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_SERVER_SESSION_H_

#ifndef EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_H_
#define EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http.hpp"
#include "service/transport/dial/connect_race.h"
#include "service/transport/dns/resolver.h"
#include "service/transport/drain/drain_budget.h"
#include "service/transport/drain/drain_decision.h"
#include "service/base/guard.h"
#include "service/transport/http2/session.h"
#include "service/transport/http1/body_drainer.h"
#include "service/transport/http1/keep_alive_hint.h"
#include "service/transport/http1/response_limits.h"
#include "service/transport/observer.h"
#include "service/transport/policy/policy_denial.h"
#include "service/transport/io/read_size.h"
#include "service/transport/http/request.h"
#include "service/transport/http1/response_parser.h"
#include "service/transport/settings.h"
#include "service/transport/io/upstream_stream.h"

namespace egress::transport {

// What the egress policy said of the addresses a dial resolved.
struct AddressCheck {
  std::vector<boost::asio::ip::address> addresses;  // all of them, in the resolver's order
  PolicyVerdict verdict;
};

// One upstream HTTP/1.1 connection, plain or TLS. Every I/O step runs on the
// connection's event loop, an io_context run by one thread (EventLoops): an implicit
// strand, in Asio's terms, which orders its handlers without a strand's queue and lock
// (design habit 4's strand per connection); the public methods may be
// called from any thread, one operation at a time. Kept alive by shared_from_this while
// I/O is pending.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // What the connection speaks once dialed: HTTP/1.1, one exchange at a time through
  // the methods below, or HTTP/2, many at once as streams of session().
  enum class Protocol { kHttp1, kHttp2 };

  // Run by one thread: a connection's handlers must never run concurrently.
  using Executor = boost::asio::io_context::executor_type;
  using StatusCallback = std::function<void(absl::Status)>;
  using HeadCallback = std::function<void(absl::StatusOr<ResponseHead>, bool response_started)>;
  // Bytes read; an empty string means the body ended.
  using ReadCallback = std::function<void(absl::StatusOr<std::string>)>;
  using DrainCallback = std::function<void(const DrainOutcome&)>;

  Connection(Executor executor, std::shared_ptr<boost::asio::ssl::context> tls_context,
             Origin origin, uint64_t id, TransportObserver& observer);

  uint64_t id() const { return id_; }
  // Whether the calling thread runs this connection's loop, so that a fetch made there
  // keeps its I/O on its own thread (the pool prefers such a connection). From any thread.
  bool OnCallersLoop() const { return loop_.running_in_this_thread(); }
  // Whether the dial succeeded. From any thread.
  bool opened() const { return opened_.load(); }
  // Set by the dial; kHttp1 until then. From any thread.
  Protocol protocol() const { return protocol_.load(); }
  // "h2" or "http/1.1", for ConnectionInfo.protocol.
  absl::string_view protocol_name() const {
    return protocol() == Protocol::kHttp2 ? "h2" : "http/1.1";
  }
  // The HTTP/2 session of a connection whose dial chose HTTP/2; null otherwise. Read it
  // after the dial's callback.
  const std::shared_ptr<http2::Session>& session() const { return session_; }
  const Origin& origin() const { return origin_; }
  ConnectionState state() const { return state_.load(); }
  // Moves an opened connection between the pool (idle) and a request (active).
  void SetPooled(bool idle);
  // Marks the connection closed (the socket closes with Close()), reporting why.
  void MarkClosed(CloseReason reason);
  // Requests this connection has carried, the current one included.
  int requests() const { return requests_.load(); }
  // When the connection was made (its dial began), for its age.
  absl::Time created() const { return created_; }
  // What the server has announced in Keep-Alive headers on this connection: the latest
  // timeout, and the lowest max. None until a response announced either. From any thread.
  std::optional<KeepAliveHint> keep_alive_hint() const;
  const DialTiming& dial_timing() const { return dial_timing_; }
  // "ip:port" ("[ip]:port" for IPv6) of the server; empty until the dial has connected.
  const std::string& remote_address() const { return remote_address_; }
  // The address connected to; none until the dial has succeeded. From any thread.
  std::optional<boost::asio::ip::address> remote_ip() const;
  // The egress policy's check of the addresses the host resolved to, once the dial got
  // that far; read it after the dial's callback.
  const std::optional<AddressCheck>& address_check() const { return address_check_; }

  // Resolves the origin's host (the lookup counts against `caller`'s limit; nullopt for
  // the pool's own dials, see Resolver::Query), connects
  // and, for https, verifies the server's certificate for the host name and completes
  // the handshake. `resolver` must outlive the dial. settings.http2 decides the
  // protocol: ALPN offers h2 to an https origin unless it is off, and an http origin
  // speaks HTTP/2 with prior knowledge when required; a connection that speaks it
  // starts its session before `done` runs. An https origin that must speak HTTP/2 and
  // whose server did not choose it fails the dial (UNAVAILABLE, HTTP2_NOT_NEGOTIATED).
  void Dial(const TransportSettings& settings, absl::Time deadline, Resolver& resolver,
            std::optional<std::string> caller, StatusCallback done);

  // Writes the request and reads the response head (skipping 1xx interim responses).
  // A request Beast cannot serialize fails with INTERNAL (MakeRequest refuses those).
  void Send(const HttpRequest& request, absl::Duration header_timeout,
            const ResponseLimits& limits, absl::Time deadline, HeadCallback done);

  // Reads up to max_bytes of the body (at least one unless the body has ended).
  void ReadBody(size_t max_bytes, absl::Time deadline, ReadCallback done);
  // Whether the response's body has been read to its end; in ReadBody's callback (on the
  // connection's executor), where it tells a last read from one that needs another.
  bool BodyEnded() const { return parser_ && parser_->is_done(); }

  // Bounds a ReadBody under way: if it has not finished `limit` from now, the connection
  // closes and the read fails. For a body the caller let go of mid-read.
  void CutReadShortAfter(absl::Duration limit);

  // A drain reads (and a budgeted one reserves) at most this much at a time.
  static constexpr uint64_t kDrainReadBytes = 64 * 1024;

  // Reads and discards the rest of the body within the given caps. The connection is
  // draining from the call until `done`, when it is active again. A budgeted drain
  // holds `reserved` bytes of `budget` already, reserves more before it reads past
  // them, and releases all of it when it ends.
  void DrainBody(const Drain& caps, DrainBudget* budget, uint64_t reserved, DrainCallback done);

  // How far a drain under way has come; for the pool, from any thread.
  DrainProgress drain_progress() const;

  // What is left of the body, for the drain decision.
  UnreadBody unread_body() const;

  // The one place that decides whether the connection may carry another request:
  // none when it may, else the reason to close it.
  std::optional<CloseReason> ReuseVerdict() const;

  // For an idle connection about to be reused: false when the server has closed it or
  // sent bytes nobody asked for. Needs no loop: no I/O is pending on an idle one. For
  // HTTP/2: whether the session still takes streams (no GOAWAY, not ended).
  bool StillOpenAndQuiet();

  // Runs `ended` (on the loop) when the connection's HTTP/2 session takes no more
  // streams: GOAWAY, an error, the server's close. Before the dial.
  void OnSessionEnded(std::function<void()> ended) { session_ended_ = std::move(ended); }

  // An HTTP/2 stream for `request` on session() (see Session::Open), counted as one of
  // the connection's requests.
  std::shared_ptr<http2::Stream> OpenStream(const HttpRequest& request, absl::Time deadline,
                                            http2::Stream::HeadCallback on_head);

  // Closes the socket, aborting any pending operation. Safe from any thread.
  void Close();

  // For a transport whose loops have stopped (no handler will run again): closes the
  // socket and drops the callbacks of the operation under way without running them.
  void Abandon();

 private:
  using StepCallback = std::function<void(boost::beast::error_code)>;

  // http::async_read_some with the bounds on a chunked body checked whenever the parser
  // waits for more bytes: a chunk line or trailers that never end fail with
  // http::error::buffer_overflow (limit_hit_ says which) instead of growing the buffer.
  void ReadSomeBounded(StepCallback done);
  void ReadMore();
  void ParseBuffered(bool after_read);
  void CompleteStep(boost::beast::error_code ec);
  // The bound a chunked body waiting for more bytes is past, if any.
  std::optional<UpstreamLimit> ExceededLimit() const;

  // The exception boundary of every completion handler: an exception (from the
  // connection's code or a callback it ran) closes the connection, is counted, and
  // fails the operation under way with INTERNAL.
  template <class... Args>
  auto Guarded(void (Connection::*step)(Args...)) {
    return [self = shared_from_this(), step](Args... args) {
      self->Guard([&] { ((*self).*step)(std::forward<Args>(args)...); });
    };
  }
  template <class F>
  void Guard(F&& step) {
    RunGuarded(std::forward<F>(step), [this](absl::string_view what) { OnException(what); });
  }
  void OnException(absl::string_view what);

  // Looks the host up, bounded by the connect timeout and the deadline.
  void Resolve(Resolver& resolver, std::optional<std::string> caller);
  void OnResolve(absl::StatusOr<Resolver::Endpoints> endpoints);
  // Connects to the endpoints the egress policy allows (happy eyeballs, see ConnectRace),
  // or fails with its denial.
  void ConnectChecked(const std::vector<boost::asio::ip::tcp::endpoint>& endpoints);
  void OnConnect(boost::beast::error_code ec, ConnectRace::Socket socket,
                 boost::asio::ip::tcp::endpoint endpoint);
  void OnHandshake(boost::beast::error_code ec);
  // An https origin that must speak HTTP/2 did not choose it.
  absl::Status Http2NotNegotiated() const;
  // The dial is done: starts the HTTP/2 session when the connection speaks it.
  void OnDialed(bool http2);
  void OnWrite(boost::beast::error_code ec, size_t bytes_transferred);
  void ReadHead();
  void OnReadHead(boost::beast::error_code ec, size_t bytes_transferred);
  // Takes in the Keep-Alive header of a final response, if it announces anything.
  void RecordKeepAliveHint();
  void ReadBodyStep();

  // Sets the TCP layer's expiry to the sooner of now + timeout and the request deadline.
  void ExpireAfter(absl::Duration timeout);
  // Maps an I/O error in a phase to a status a caller can act on (see WireFailure).
  absl::Status Fail(absl::string_view phase, boost::beast::error_code ec);
  void CloseOnStrand();
  // Between exchanges, on the loop: frees the read buffers that hold nothing.
  void ReleaseIdleBuffers();

  // What the drainer reads: the response's parser over the socket.
  class DrainSource : public BodyDrainer::Source {
   public:
    explicit DrainSource(Connection& connection) : connection_(connection) {}
    bool BodyEnded() const override;
    std::optional<uint64_t> KnownBytesLeft() const override;
    void ReadSome(char* buffer, size_t size, absl::Duration pause, absl::Time deadline,
                  BodyDrainer::ReadDone done) override;

   private:
    Connection& connection_;
  };

  const uint64_t id_;
  const Origin origin_;
  const Executor loop_;
  TransportObserver& observer_;
  std::atomic<ConnectionState> state_{ConnectionState::kConnecting};
  std::atomic<Protocol> protocol_{Protocol::kHttp1};
  std::shared_ptr<http2::Session> session_;  // set on the loop, before the dial's callback
  std::function<void()> session_ended_;      // see OnSessionEnded
  std::atomic<bool> opened_{false};  // the dial succeeded
  std::atomic<int> requests_{0};
  const absl::Time created_ = absl::Now();
  mutable std::mutex hint_mu_;
  std::optional<KeepAliveHint> hint_ ABSL_GUARDED_BY(hint_mu_);

  std::shared_ptr<boost::asio::ssl::context> tls_context_;  // outlives stream_
  UpstreamStream stream_;
  std::weak_ptr<DnsLookup> lookup_;  // kept alive by its own pending I/O
  std::weak_ptr<ConnectRace> race_;  // the same
  boost::asio::steady_timer read_cutoff_;  // see CutReadShortAfter
  boost::asio::ip::tcp::endpoint remote_endpoint_;
  std::string remote_address_;  // remote_endpoint_ as text
  boost::beast::flat_buffer buffer_;
  GrowingReadSize read_size_;  // ReadMore's, reset between exchanges
  std::optional<ResponseParser> parser_;
  std::string request_head_;       // the request being written (SerializeRequestHead)
  RequestBody request_body_;       // and its body, shared with the request
  bool request_keep_alive_ = true;  // it lets the connection be reused (KeepsAlive)
  bool request_is_head_ = false;    // its response has no body
  bool broken_ = false;  // an I/O or protocol error left the stream in an unknown state
  // Close() was called: the socket is closing or closed, whatever the loop has done.
  std::atomic<bool> closing_{false};

  // State of the operation in flight; one at a time.
  TransportSettings dial_settings_;
  DialTiming dial_timing_;
  std::optional<AddressCheck> address_check_;  // set on the loop, before the dial ends
  absl::Time phase_start_;
  absl::Time deadline_ = absl::InfiniteFuture();
  absl::Duration phase_timeout_;
  ResponseLimits limits_;
  uint32_t interim_responses_ = 0;  // 1xx responses read for the current request
  std::optional<UpstreamLimit> limit_hit_;
  StepCallback step_done_;  // see ReadSomeBounded
  StatusCallback status_done_;
  HeadCallback head_done_;
  ReadCallback read_done_;
  std::string read_buffer_;
  DrainSource drain_source_{*this};
  BodyDrainer drainer_{drain_source_};  // see DrainBody
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POOL_CONNECTION_H_

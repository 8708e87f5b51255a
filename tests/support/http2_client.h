#ifndef EGRESS_TESTS_SUPPORT_HTTP2_CLIENT_H_
#define EGRESS_TESTS_SUPPORT_HTTP2_CLIENT_H_

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ssl/context.hpp"
#include "service/transport/http2/session.h"
#include "service/transport/observer.h"

namespace egress::testing {

// One HTTP/2 session to 127.0.0.1:port for tests: its own event loop (an io_context on a
// thread), a TCP connection (h2c with prior knowledge) or TLS with ALPN, and a Session
// over it, as the pool will make them.
class Http2Client {
 public:
  struct Options {
    bool tls = false;
    std::string ca_file;      // trusted for TLS (with the system's)
    std::string host = "localhost";  // the origin's host: SNI, certificate, :authority
    transport::http2::SessionLimits limits;
  };

  // Connects (and, for TLS, completes the handshake offering "h2" and "http/1.1");
  // starts a Session when the server speaks HTTP/2 (always for h2c).
  static absl::StatusOr<std::unique_ptr<Http2Client>> Connect(int port, const Options& options,
                                                              transport::TransportObserver& observer);
  // Closes the session and stops the loop.
  ~Http2Client();

  // What ALPN chose ("h2", "http/1.1", or "" without TLS or without ALPN).
  const std::string& alpn() const { return alpn_; }
  // None when ALPN did not choose h2.
  transport::http2::Session* session() const { return session_.get(); }

  // Events::unusable's calls and its latest status; Events::stream_closed's calls.
  int unusable_events() const { return unusable_events_; }
  absl::Status unusable_status() const;
  int stream_closed_events() const { return stream_closed_events_; }

  struct Exchange {
    std::shared_ptr<transport::http2::Stream> stream;
    std::future<absl::StatusOr<transport::ResponseHead>> head;
  };
  // Opens a stream for METHOD origin+path with `body`, bounded by `deadline`.
  Exchange Open(const std::string& method, const std::string& path, std::string body = "",
                absl::Time deadline = absl::InfiniteFuture(),
                transport::HeaderList headers = {});
  // One Read, waited for.
  absl::StatusOr<std::string> Read(transport::http2::Stream& stream, size_t max_bytes,
                                   absl::Time deadline = absl::InfiniteFuture());
  // Reads to the end of the body (or a failure), `piece` bytes at a time.
  absl::StatusOr<std::string> ReadAll(transport::http2::Stream& stream, size_t piece = 64 * 1024,
                                      absl::Time deadline = absl::InfiniteFuture());
  // GET path, head and whole body.
  absl::StatusOr<std::string> Get(const std::string& path,
                                  absl::Time deadline = absl::InfiniteFuture());
  // A PING's outcome.
  absl::Status Ping(absl::Duration timeout);

  // Runs `step` on the session's loop and waits for it.
  void OnLoop(const std::function<void()>& step);
  // Stops the event loop for good, handlers not yet run left unrun (as a transport
  // shutting down stops its loops).
  void StopLoop();

 private:
  struct Connection;  // the socket the session runs over, shared with it

  Http2Client() = default;
  std::string Url(const std::string& path) const;

  Options options_;
  int port_ = 0;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
      io_.get_executor()};
  std::thread thread_;
  std::shared_ptr<boost::asio::ssl::context> tls_context_;
  std::shared_ptr<Connection> connection_;
  std::string alpn_;
  std::shared_ptr<transport::http2::Session> session_;
  std::atomic<int> unusable_events_{0};
  std::atomic<int> stream_closed_events_{0};
  mutable std::mutex mu_;
  absl::Status unusable_status_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_HTTP2_CLIENT_H_

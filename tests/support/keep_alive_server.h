#ifndef EGRESS_TESTS_SUPPORT_KEEP_ALIVE_SERVER_H_
#define EGRESS_TESTS_SUPPORT_KEEP_ALIVE_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace egress::testing {

// An HTTP/1.1 upstream on 127.0.0.1 that keeps its Keep-Alive promises strictly. Every
// response (200 "ok", to any method and path) says `Keep-Alive: timeout=T, max=M`; the
// server closes a connection exactly T after its last response when no request came, and
// right after the M-th response. The close takes `close_delay` to reach the client (on a
// real network, the FIN's flight): a request arriving from the moment the server decided
// to close is never answered, and counted in requests_on_closing_connections().
class KeepAliveServer {
 public:
  // max = 0 announces no max (and the server sets none).
  KeepAliveServer(int timeout_seconds, int max, std::chrono::milliseconds close_delay);
  ~KeepAliveServer();
  KeepAliveServer(const KeepAliveServer&) = delete;
  KeepAliveServer& operator=(const KeepAliveServer&) = delete;

  // Closes every connection and waits for their threads: the counts below are final.
  // Idempotent; the destructor calls it.
  void Stop();

  std::string Url(const std::string& path) const;
  int accepted() const { return accepted_; }
  int responses() const { return responses_; }
  // Connections on which bytes arrived after the server had decided to close them.
  int requests_on_closing_connections() const { return on_closing_; }
  int closed_at_timeout() const { return closed_at_timeout_; }
  int closed_at_max() const { return closed_at_max_; }

 private:
  using Clock = std::chrono::steady_clock;
  void AcceptLoop();
  void Serve(int fd);
  // Waits until `fd` is readable (true) or `until` passes or the server stops (false).
  bool WaitReadable(int fd, Clock::time_point until) const;
  // Reads one request (head and Content-Length body); false when the peer closed first.
  bool ReadRequest(int fd, std::string& pending) const;
  // Reads until `until` or the peer's close; true if any byte came.
  bool AnyBytesUntil(int fd, Clock::time_point until) const;

  const int timeout_seconds_;
  const int max_;
  const std::chrono::milliseconds close_delay_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> responses_{0};
  std::atomic<int> on_closing_{0};
  std::atomic<int> closed_at_timeout_{0};
  std::atomic<int> closed_at_max_{0};
  std::mutex mu_;
  std::condition_variable all_closed_;
  std::set<int> open_;  // connection fds, each served by a detached thread
  std::thread accept_thread_;
  bool stopped_ = false;  // only the test's thread calls Stop
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_KEEP_ALIVE_SERVER_H_

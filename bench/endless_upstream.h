#ifndef EGRESS_BENCH_ENDLESS_UPSTREAM_H_
#define EGRESS_BENCH_ENDLESS_UPSTREAM_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace egress::bench {

// An HTTP/1.1 upstream on 127.0.0.1 that never finishes a response: what it sends goes on
// until the peer closes the connection. One thread per connection. The path picks what
// streams forever:
//   /body           200, chunked, 16 KiB chunks
//   /length         200, Content-Length 2^60, the body
//   /headers        a status line, then header lines
//   /chunk-ext      200, chunked, one chunk-size line whose extension never ends
//   /trailers       200, chunked, a last chunk, then trailer lines
// For the soak's hostile upstreams (tests/support/fault_server's faults all end).
class EndlessUpstream {
 public:
  EndlessUpstream();
  ~EndlessUpstream();
  EndlessUpstream(const EndlessUpstream&) = delete;
  EndlessUpstream& operator=(const EndlessUpstream&) = delete;

  int port() const { return port_; }
  // Bytes sent so far, over every connection.
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  void AcceptLoop();
  void Serve(int fd);

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> bytes_sent_{0};
  std::mutex mu_;
  std::condition_variable all_closed_;
  std::set<int> open_;  // connection fds, each served by a detached thread
  std::thread accept_thread_;
};

}  // namespace egress::bench

#endif  // EGRESS_BENCH_ENDLESS_UPSTREAM_H_

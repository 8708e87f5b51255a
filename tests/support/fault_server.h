#ifndef EGRESS_TESTS_SUPPORT_FAULT_SERVER_H_
#define EGRESS_TESTS_SUPPORT_FAULT_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"

struct ssl_ctx_st;

namespace egress::testing {

// An HTTP/1.1 upstream on 127.0.0.1 that misbehaves on command, one thread per
// connection. On port() the request path picks the behaviour:
//   /ok               200, "ok", keep-alive
//   /chunked-ok       200, "ok" as one chunk, keep-alive, all in one send
//   /reset-headers    half a header block, then a TCP reset
//   /reset-body       the head and 1000 of 100000 body bytes, then a reset
//   /bad-status       a malformed status line
//   /low-status       status code 050, which HTTP/1.1 parsers may take
//   /bad-header       a header line without a colon
//   /huge-headers     a 100 KiB header
//   /short-body       Content-Length 1000, 10 bytes, then the connection closes
//   /close-delimited  no Content-Length, 100000 bytes, then the connection closes
//   /long-body        Content-Length 5 followed by 20 bytes, kept alive
//   /bad-chunk        a chunked body whose chunk size is not hex
//   /never            reads the request, never answers; never_requests() counts them
//   /unread-body      (PUT) reads the head only, never the body, never answers;
//                     unread_body_requests() counts them
//   /slow-head        the head trickles, one byte a second (slowloris)
//   /slow-body        the head, then the body one byte a second
//   /close-idle       200 kept alive, then the server closes it 100 ms later
//   /close-on-reuse   200 kept alive; the next request on the connection is read and
//                     the connection closed without an answer
//   /endless-chunk-ext      a chunked body whose first chunk line's extension never ends
//   /endless-trailer-line   a last chunk, then one trailer line that never ends
//   /endless-trailer-lines  a last chunk, then short trailer lines without end
//   /endless-interim        "100 Continue" interim responses without end
// (the endless ones stop when the peer closes, or after 2 GiB)
//   /endless-body     a chunked body that never ends, 64 KiB chunks as fast as read
//   /stall-body       Content-Length 2 MiB; 600 KiB are sent, then nothing more
//   /latin1-header    200 with Content-Disposition: attachment; filename="caf\xE9.txt"
//                     (one ISO-8859-1 byte, not UTF-8)
//   /latin1-location  302 to a Location holding the byte \xE9 and a space (invalid)
//   /redirect-other-origin  302 to http://localhost:<port>/echo-headers (another origin)
//   /redirect-same-origin   302 to /echo-headers
//   /redirect-to?L    302 to L percent-decoded, whatever its bytes (CR and LF left out)
//   /echo-headers     200 whose body is the request's line and header lines
//   /wide-answer      200 with 200 headers of 1,000 bytes \xE9 each (not UTF-8: about three
//                     times that as protobuf) and a body of 3,932,160 bytes (egressd's
//                     default_max_body_bytes)
//   /switch           as SetSwitch says: 200 "ok", a 503 (kept alive), a 503 with
//                     Retry-After: 1, or a TCP reset without an answer;
//                     switch_requests() counts the requests it got
// silent_port() accepts and never sends a byte (a stalled TLS handshake);
// garbage_port() answers every connection with plain text (a TLS handshake that fails).
//
// Made with a certificate and key, port() speaks HTTPS instead, with these paths only:
//   /ok               as above
//   /ok-then-ticket   200 "ok", then 50 ms later a TLS 1.3 session ticket (no data)
//   /ok-then-many-tickets  the same with 200 session tickets, one after the other
//   /204-then-extra   a 204, then 50 ms later a complete "200 EVIL!" response nobody
//                     asked for (a body on a 204, in its own TLS record)
//   /204-with-extra   the same, both TLS records in one TCP segment
class FaultServer {
 public:
  FaultServer();
  FaultServer(const std::string& cert_file, const std::string& key_file);
  ~FaultServer();
  FaultServer(const FaultServer&) = delete;
  FaultServer& operator=(const FaultServer&) = delete;

  int port() const { return ports_[0]; }
  int silent_port() const { return ports_[1]; }
  int garbage_port() const { return ports_[2]; }
  std::string Url(const std::string& path) const;
  // The URL of /redirect-to on port() whose 302 points to `location`, whatever its bytes.
  std::string RedirectUrl(absl::string_view location) const;

  // Connections accepted so far, and those still open on the server's side.
  int accepted() const { return accepted_; }
  enum class Switch { kOk, k503, k503RetryAfter1, kReset };
  void SetSwitch(Switch behaviour) { switch_ = behaviour; }
  int switch_requests() const { return switch_requests_; }
  int never_requests() const { return never_requests_; }
  int unread_body_requests() const { return unread_body_requests_; }
  int open_connections();
  // Connections the kernel has completed that no accept loop has taken yet (the
  // listeners' accept queues): a peer may have connected and even closed already.
  int unaccepted() const;

 private:
  enum class Kind { kHttp, kSilent, kGarbage };
  void Listen();
  void AcceptLoop(int listener, Kind kind);
  void Serve(int fd, Kind kind);
  void ServeHttp(int fd);
  void ServeTls(int fd);
  void Closed(int fd);

  ssl_ctx_st* tls_ = nullptr;  // HTTPS on port() when set
  std::vector<int> listeners_;
  std::vector<int> ports_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<Switch> switch_{Switch::kOk};
  std::atomic<int> switch_requests_{0};
  std::atomic<int> never_requests_{0};
  std::atomic<int> unread_body_requests_{0};
  std::mutex mu_;
  std::condition_variable all_closed_;
  std::set<int> open_;  // connection fds not yet closed, each served by a detached thread
  std::vector<std::thread> accept_threads_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_FAULT_SERVER_H_

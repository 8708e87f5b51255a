// The HTTP/2 client session (service/transport/http2) against a server whose every byte
// after its SETTINGS comes from the fuzzer. The session runs over one end of a socket
// pair (no network), on an event loop in this thread; it opens two streams first (a
// GET on stream 1, a GET or a POST on stream 3), then reads what the "server" sent. Each
// input checks that
//   - every head and read callback runs exactly once (nothing hangs past its deadline),
//   - no read returns more than it asked for, or more body bytes than the server sent,
//   - no failure is INTERNAL or unnamed, and no exception reached a handler,
//   - egress never held more body bytes than the connection window,
//   - once closed, the session has no stream open and no body byte buffered.
//
// Input: the first byte says what the caller does, the rest is the server's bytes:
//   bits 0-1  body reads ask for 1, 100, 4096 or 65536 bytes
//   bit 2     stream 1 is reset once its head has come
//   bit 3     stream 3 is a POST with a 40,000-byte body (request flow control)
//   bit 4     a PING is sent after the streams
//   bit 5     the server keeps the connection open after its bytes (the streams'
//             deadlines end them) instead of closing it
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ssl/context.hpp"
#include "service/base/error_reason.h"
#include "service/transport/http2/session.h"
#include "service/transport/http/request.h"
#include "service/transport/io/upstream_stream.h"
#include "tests/support/counting_observer.h"

namespace {

namespace net = boost::asio;
using namespace egress::transport;
using http2::Session;
using http2::Stream;

constexpr absl::Duration kStreamDeadline = absl::Milliseconds(30);
constexpr auto kGrace = std::chrono::seconds(5);  // far past every deadline
constexpr size_t kReadSizes[] = {1, 100, 4096, 65536};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "http2_response_fuzzer: %s\n", what.c_str());
  std::abort();
}

// The server's SETTINGS (none: the defaults) and its acknowledgement of the client's.
const std::string& ServerPreface() {
  static const std::string preface("\0\0\0\x04\0\0\0\0\0" "\0\0\0\x04\x01\0\0\0\0", 18);
  return preface;
}

// What a server's bytes may make a stream fail with: named, and never egress's own error.
void CheckFailure(const absl::Status& status, const std::string& what) {
  const bool expected = absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
                        absl::IsCancelled(status);
  if (!expected || !ReasonOf(status)) Fail(absl::StrCat(what, " failed with ", status.ToString()));
}

// One stream as the caller drives it.
struct Caller {
  std::shared_ptr<Stream> stream;
  int heads = 0;
  int reads_started = 0;
  int reads_done = 0;
  bool finished = false;  // the head failed, or a read ended the body or failed
  uint64_t body_bytes = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t choice = data[0];
  const size_t read_size = kReadSizes[choice & 3];
  const bool reset_first = choice & 4;
  const bool post = choice & 8;
  const bool ping = choice & 16;
  const bool keep_open = choice & 32;
  const std::string server_bytes =
      ServerPreface() + std::string(reinterpret_cast<const char*>(data) + 1, size - 1);

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) Fail("socketpair");
  net::io_context io(1);
  net::ssl::context tls(net::ssl::context::tls_client);  // unused: plain h2c
  auto upstream = std::make_shared<UpstreamStream>(io.get_executor(), tls, false);
  boost::system::error_code ec;
  upstream->tcp().socket().assign(net::ip::tcp::v4(), fds[0], ec);
  if (ec) Fail("assign: " + ec.message());

  http2::SessionLimits limits;
  limits.stream_window_bytes = 16 * 1024;  // small, so that inputs reach the bounds
  limits.connection_window_bytes = 32 * 1024;
  limits.max_header_list_bytes = 2048;
  limits.max_interim_responses = 2;
  egress::testing::CountingObserver observer;
  const Origin origin{false, "127.0.0.1", 8080};
  auto session = std::make_shared<Session>(*upstream, upstream, origin, limits, observer);
  session->Start();

  std::vector<Caller> callers(2);
  const absl::Time deadline = absl::Now() + kStreamDeadline;
  std::function<void(Caller&)> read_on;
  read_on = [&](Caller& caller) {
    ++caller.reads_started;
    caller.stream->Read(read_size, deadline, [&](absl::StatusOr<std::string> bytes) {
      ++caller.reads_done;
      if (!bytes.ok()) {
        CheckFailure(bytes.status(), "a read");
        caller.finished = true;
        return;
      }
      if (bytes->size() > read_size) Fail("a read returned more than it asked for");
      caller.body_bytes += bytes->size();
      if (caller.body_bytes > server_bytes.size()) Fail("more body bytes than the server sent");
      if (bytes->empty()) {
        caller.finished = true;
        return;
      }
      read_on(caller);
    });
  };
  for (size_t i = 0; i < callers.size(); ++i) {
    const bool posting = i == 1 && post;
    auto request = MakeRequest(posting ? "POST" : "GET", absl::StrCat("http://127.0.0.1:8080/", i),
                               {}, posting ? std::string(40000, 'p') : "");
    if (!request.ok()) Fail("MakeRequest");
    Caller& caller = callers[i];
    caller.stream = session->Open(*request, deadline, [&, i](absl::StatusOr<ResponseHead> head) {
      ++caller.heads;
      if (!head.ok()) {
        CheckFailure(head.status(), "a head");
        caller.finished = true;
        return;
      }
      if (head->status_code < 200 || head->status_code > 999) Fail("a final status outside 200-999");
      if (i == 0 && reset_first) {
        caller.stream->Reset();
        caller.finished = true;
        return;
      }
      read_on(caller);
    });
  }
  std::optional<absl::Status> pinged;
  if (ping) session->Ping(absl::Milliseconds(20), [&](absl::Status s) { pinged = s; });

  // The server: its bytes in, the client's out (read and dropped, so writes never stall).
  size_t written = 0;
  bool server_closed = false;
  char scratch[65536];
  const auto give_up = std::chrono::steady_clock::now() + kGrace;
  auto all_done = [&] {
    for (const Caller& caller : callers) {
      if (!caller.finished) return false;
    }
    return !ping || pinged.has_value();
  };
  while (!all_done() && std::chrono::steady_clock::now() < give_up) {
    if (written < server_bytes.size()) {
      const ssize_t n = ::send(fds[1], server_bytes.data() + written, server_bytes.size() - written,
                               MSG_NOSIGNAL);
      if (n > 0) written += static_cast<size_t>(n);
    } else if (!keep_open && !server_closed) {
      ::shutdown(fds[1], SHUT_WR);
      server_closed = true;
    }
    while (::recv(fds[1], scratch, sizeof(scratch), 0) > 0) {
    }
    io.run_one_for(std::chrono::milliseconds(1));
  }
  if (!all_done()) Fail("a callback did not run within 5 s of the deadline");

  session->Close();
  for (Caller& caller : callers) caller.stream.reset();  // bytes unread give their windows back
  io.restart();
  io.run_for(std::chrono::milliseconds(100));  // the close and what the streams left
  for (const Caller& caller : callers) {
    if (caller.heads != 1) Fail("a head callback ran other than once");
    if (caller.reads_done != caller.reads_started) Fail("a read callback did not run");
  }
  const http2::SessionStats stats = session->stats();
  if (stats.open_streams != 0) Fail("a stream is still open after Close");
  if (stats.buffered_body_bytes != 0) Fail("body bytes are still buffered after Close");
  if (stats.peak_buffered_body_bytes > limits.connection_window_bytes) {
    Fail("more body bytes buffered than the connection window");
  }
  if (observer.exceptions != 0) Fail("an exception reached a handler");
  session.reset();
  upstream.reset();
  ::close(fds[1]);
  return 0;
}

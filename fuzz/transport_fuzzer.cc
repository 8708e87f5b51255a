// The network-level fuzzer: the real Transport (pool, Connection, response parser,
// drain) over real loopback sockets, against an upstream whose every byte comes from the
// fuzzer. Several exchanges run per input, on one connection while the transport keeps
// it. After each exchange it checks that
//   - the fetch and every body read called back (no exchange hangs past its deadline),
//   - the caller got no more body bytes than the upstream sent, none after a HEAD, and
//     no read returned more than it asked for,
//   - no connection is left connecting, active or draining, and no request waiting,
//   - the counts balance: connections opened = closed + idle in the pool,
//   - heap in use stays within a fixed bound of where the input started;
// and, on the upstream's side, that a connection carries a second request only after
// the response before it was one complete, well-framed, keep-alive message with no byte
// after it (Beast's parser, run on exactly the bytes sent, is the judge).
//
// Input: replies separated by "~~~\n" (fuzz/transport.dict has it). A reply's first byte
// says what the caller and the upstream do; the rest is what the upstream sends:
//   bits 0-1  0 read the body to its end; 1 read one piece, then close the body;
//             2 close the body unread (auto-drain); 3 a HEAD request, body read to its end
//   bit 2     the upstream closes the connection after sending the reply
//   bits 3-6  body reads ask for 2^(n+4) bytes
//   bit 7     the caller cancels the fetch at once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sanitizer/allocator_interface.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "boost/asio/buffer.hpp"
#include "boost/beast/http.hpp"
#include "service/transport/transport.h"
#include "tests/support/counting_observer.h"

namespace {

namespace http = boost::beast::http;
using namespace egress::transport;

constexpr absl::string_view kSeparator = "~~~\n";
constexpr size_t kMaxExchanges = 8;
constexpr uint32_t kMaxHeaderBytes = 2048;  // below the input size, so it is reachable
constexpr absl::Duration kExchangeDeadline = absl::Milliseconds(150);
constexpr auto kCallbackGrace = std::chrono::seconds(5);  // far past every deadline
constexpr size_t kHeapSlack = 8 << 20;  // per input, over the heap in use at its start

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "transport_fuzzer: %s\n", what.c_str());
  std::abort();
}

// True when `bytes` are exactly one response (after any 1xx) that leaves the connection
// reusable: complete, keep-alive, not delimited by EOF, and nothing after it.
bool ReusableMessage(absl::string_view bytes, bool head) {
  for (int interim = 0; interim < 100; ++interim) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    parser.skip(head);
    parser.body_limit(boost::none);
    boost::system::error_code ec;
    while (!parser.is_done()) {
      const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
      bytes.remove_prefix(used);
      if (ec || used == 0) return false;  // malformed, or incomplete (need_more)
    }
    if (parser.get().result_int() / 100 == 1) continue;  // an interim response: the next
    return parser.keep_alive() && !parser.need_eof() && bytes.empty();
  }
  return false;
}

struct Reply {
  std::string bytes;
  bool close_after = false;
};

// A plain-HTTP upstream on 127.0.0.1: each request it reads gets the next reply, on
// whichever connection it came.
class ScriptedUpstream {
 public:
  ScriptedUpstream() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      Fail("cannot listen on 127.0.0.1");
    }
    port_ = ntohs(address.sin_port);
    std::thread([this] { AcceptLoop(); }).detach();  // lives as long as the process
  }

  int port() const { return port_; }

  void Load(std::deque<Reply> replies) {
    std::lock_guard<std::mutex> lock(mu_);
    replies_ = std::move(replies);
  }

  // Ends every connection it accepted, so that the next input starts from the same
  // place: what the transport still pools is found closed when it is reused.
  void Reset() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      open_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // The request head; empty when the peer closed. The transport sends GET and HEAD only.
  static std::string ReadRequest(int fd) {
    std::string request;
    char chunk[1024];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0 || request.size() > 64 * 1024) return "";
      request.append(chunk, static_cast<size_t>(n));
    }
    return request;
  }

  void Serve(int fd) {
    std::optional<std::pair<std::string, bool>> previous;  // reply bytes, HEAD
    for (;;) {
      const std::string request = ReadRequest(fd);
      if (request.empty()) break;
      const bool head = absl::StartsWith(request, "HEAD ");
      if (previous && !ReusableMessage(previous->first, previous->second)) {
        Fail(absl::StrCat("a connection was reused after a reply that is not one complete, "
                          "well-framed keep-alive message (", previous->first.size(),
                          " bytes, HEAD=", previous->second, ")"));
      }
      Reply reply;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (replies_.empty()) break;
        reply = std::move(replies_.front());
        replies_.pop_front();
      }
      for (size_t sent = 0; sent < reply.bytes.size();) {
        const ssize_t n = ::send(fd, reply.bytes.data() + sent, reply.bytes.size() - sent,
                                 MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      if (reply.close_after) break;
      previous.emplace(std::move(reply.bytes), head);
    }
    std::lock_guard<std::mutex> lock(mu_);
    ::close(fd);
    open_.erase(std::find(open_.begin(), open_.end(), fd));
  }

  int listener_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::deque<Reply> replies_;
  std::vector<int> open_;
  std::vector<std::thread> threads_;
};

struct World {
  ScriptedUpstream upstream;
  egress::testing::CountingObserver observer;
  std::unique_ptr<Transport> transport;
  std::string url;
};

World& TheWorld() {
  static World* world = [] {
    auto* w = new World;
    TransportSettings settings;
    settings.io_threads = 1;
    settings.max_idle_per_origin = 2;
    settings.connect_timeout = absl::Seconds(1);
    settings.response_header_timeout = absl::Milliseconds(30);
    settings.max_response_header_bytes = kMaxHeaderBytes;
    settings.drain.max_bytes = 1024;  // inputs are larger: drains complete and give up
    settings.drain.max_duration = absl::Milliseconds(10);
    PolicyRules open;
    open.enabled = false;  // the upstream is on loopback
    settings.policy = std::make_shared<AddressPolicy>(open);
    auto transport = Transport::Create(settings, w->observer);
    if (!transport.ok()) Fail(transport.status().ToString());
    w->transport = *std::move(transport);
    w->url = absl::StrCat("http://127.0.0.1:", w->upstream.port(), "/");
    return w;
  }();
  return *world;
}

template <typename T>
T Await(std::future<T> future, const char* what) {
  if (future.wait_for(kCallbackGrace) != std::future_status::ready) {
    Fail(absl::StrCat(what, " did not call back within 5 s of its deadline"));
  }
  return future.get();
}

// Waits for the pool to settle (drains end on their own), then checks it.
void CheckPoolSettles(World& world) {
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  for (;;) {
    int busy = 0, idle = 0;
    for (const auto& o : world.transport->PoolStats()) {
      busy += o.connecting + o.active + o.draining + o.waiting;
      idle += o.idle;
    }
    if (busy == 0) {
      const int open = world.observer.opened - world.observer.AllClosed();
      if (open != idle) {
        Fail(absl::StrCat("counts do not balance: opened - closed = ", open, " but ", idle,
                          " idle in the pool"));
      }
      return;
    }
    if (absl::Now() > give_up) Fail(absl::StrCat(busy, " connections or waits never settled"));
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void Exchange(World& world, uint8_t action, size_t reply_bytes) {
  const bool head = (action & 3) == 3;
  auto request = MakeRequest(head ? "HEAD" : "GET", world.url, {}, "");
  if (!request.ok()) Fail(request.status().ToString());
  std::promise<absl::StatusOr<Response>> fetched;
  auto pending = world.transport->Fetch(
      *std::move(request), absl::Now() + kExchangeDeadline,
      [&](absl::StatusOr<Response> r) { fetched.set_value(std::move(r)); });
  if (action & 0x80) pending->Cancel();
  absl::StatusOr<Response> response = Await(fetched.get_future(), "Fetch");
  if (!response.ok()) return;
  const size_t piece = size_t{16} << ((action >> 3) & 15);
  size_t received = 0;
  for (int reads = 0; (action & 3) != 2; ++reads) {
    std::promise<absl::StatusOr<std::string>> read;
    response->body->Read(piece, [&](absl::StatusOr<std::string> b) { read.set_value(std::move(b)); });
    absl::StatusOr<std::string> bytes = Await(read.get_future(), "ResponseBody::Read");
    if (!bytes.ok() || bytes->empty()) break;
    if (bytes->size() > piece) Fail("a body read returned more than it asked for");
    received += bytes->size();
    if (received > reply_bytes) Fail("the caller got more body bytes than the upstream sent");
    if (head) Fail("a HEAD response had body bytes");
    if ((action & 3) == 1) break;
  }
  response->body->Close();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  const size_t heap_at_start = __sanitizer_get_current_allocated_bytes();
  std::deque<Reply> replies;
  std::vector<uint8_t> actions;
  for (absl::string_view part : absl::StrSplit(
           absl::string_view(reinterpret_cast<const char*>(data), size), kSeparator)) {
    if (replies.size() == kMaxExchanges) break;
    const uint8_t action = part.empty() ? 0 : static_cast<uint8_t>(part[0]);
    if (!part.empty()) part.remove_prefix(1);
    actions.push_back(action);
    replies.push_back({std::string(part), (action & 4) != 0});
  }
  std::vector<size_t> sizes;
  for (const auto& r : replies) sizes.push_back(r.bytes.size());
  world.upstream.Load(std::move(replies));
  for (size_t i = 0; i < actions.size(); ++i) {
    // Any reply may be the one that answers (a retry moves them along): bound by all.
    size_t sent = 0;
    for (size_t s : sizes) sent += s;
    Exchange(world, actions[i], sent);
    CheckPoolSettles(world);
    const size_t heap = __sanitizer_get_current_allocated_bytes();
    if (heap > heap_at_start + kHeapSlack) {
      Fail(absl::StrCat("heap grew by ", heap - heap_at_start, " bytes in one input"));
    }
  }
  world.upstream.Reset();
  return 0;
}

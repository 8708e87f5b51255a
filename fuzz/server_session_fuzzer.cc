// egressd's own gRPC server session (service/dataplane/server_session) against a caller
// whose every byte after the HTTP/2 client preface comes from the fuzzer: frames of any
// kind, in any order, broken or not. The session runs over a loopback TCP connection on an
// event loop in this thread, with three methods:
//   /t.T/Unary   answers its request message back (Answer)
//   /t.T/Stream  a stream of requests (StreamsRequests): each message read is sent back,
//                and the call ends OK after the caller's last, as server reflection does
//   /t.T/Never   never answers: its deadline (grpc-timeout, at most 50 ms) or the
//                connection's end ends it
// The caller's side is closed once its bytes are sent. Each input checks that
//   - the session ends (a connection whose caller closed never hangs),
//   - every call started hears its end, each kind at most once: Answer's or Finish's
//     on_finished (gRPC's OnDone; every unary call's), its stream's reset through its
//     watcher (gRPC's OnCancel; every call left unanswered),
//   - once the loop has run every handler, nothing but this function holds the session
//     (no handler, timer or callback keeps it alive: a leak under load),
//   - protobuf logs no error (an error's message quoting the caller's bytes in a proto3
//     string that is not UTF-8),
//   - and, by ASan and UBSan, no memory error.
#include <array>
#include <chrono>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "google/protobuf/stubs/logging.h"
#include "service/dataplane/server_session.h"
#include "tests/support/counting_observer.h"

namespace {

namespace net = boost::asio;
using egress::dataplane::IncomingCall;
using egress::dataplane::Methods;
using egress::dataplane::ServerSession;
using egress::dataplane::SessionLimits;
using egress::dataplane::StreamWatcher;

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr auto kGrace = std::chrono::seconds(5);  // far past every deadline

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "server_session_fuzzer: %s\n", what.c_str());
  std::abort();
}

// One call a method started, and the ends it heard.
struct Call final : StreamWatcher {
  bool unary = false;
  int finished = 0;
  int resets = 0;
  void OnStreamReset() override { ++resets; }
};

class TestMethods final : public Methods {
 public:
  bool Serves(absl::string_view path) const override {
    return path == "/t.T/Unary" || path == "/t.T/Stream" || path == "/t.T/Never";
  }
  bool StreamsRequests(absl::string_view path) const override { return path == "/t.T/Stream"; }

  void Start(const std::shared_ptr<ServerSession>& session, IncomingCall call) override {
    calls_.push_back(std::make_unique<Call>());
    Call& started = *calls_.back();
    if (call.path == "/t.T/Unary") {
      started.unary = true;
      return session->Answer(call.stream_id, std::move(call.message), grpc::Status::OK,
                             [&started] { ++started.finished; });
    }
    session->Watch(call.stream_id, &started);
    if (call.path == "/t.T/Stream") Echo(session, call.stream_id, started);
  }

  const std::vector<std::unique_ptr<Call>>& calls() const { return calls_; }

 private:
  // Reads the next message and sends it back; Finish after the last.
  static void Echo(const std::shared_ptr<ServerSession>& session, int32_t stream_id,
                   Call& call) {
    session->Read(stream_id, [session, stream_id, &call](std::optional<std::string> message) {
      if (!message) {
        return session->Finish(stream_id, grpc::Status::OK, [&call] { ++call.finished; });
      }
      session->Send(stream_id, *message, [session, stream_id, &call](absl::Status taken) {
        if (taken.ok()) Echo(session, stream_id, call);
      });
    });
  }

  std::vector<std::unique_ptr<Call>> calls_;
};

// The loopback listener every input connects to, made once.
struct Listener {
  net::io_context loop;
  net::ip::tcp::acceptor acceptor{loop, {net::ip::address_v4::loopback(), 0}};
};

}  // namespace

void FailOnProtobufErrors(google::protobuf::LogLevel level, const char* file, int line,
                          const std::string& message) {
  if (level >= google::protobuf::LOGLEVEL_ERROR) {
    Fail(absl::StrCat("protobuf: ", file, ":", line, ": ", message));
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Listener* listener = [] {
    google::protobuf::SetLogHandler(FailOnProtobufErrors);
    return new Listener;
  }();
  net::io_context& loop = listener->loop;
  loop.restart();
  egress::testing::CountingObserver observer;
  TestMethods methods;
  SessionLimits limits;
  limits.max_call_time = absl::Milliseconds(50);
  limits.caller.preface_timeout = absl::Milliseconds(100);

  // On the loop, not blocking: libFuzzer's timer signals interrupt a blocking connect.
  net::ip::tcp::socket caller(loop);
  net::ip::tcp::socket accepted(loop);
  int steps = 0;
  const auto step = [&steps](boost::system::error_code ec) {
    if (ec) Fail("connecting the caller: " + ec.message());
    ++steps;
  };
  listener->acceptor.async_accept(accepted, step);
  caller.async_connect(listener->acceptor.local_endpoint(), step);
  while (steps < 2) loop.run_one();
  loop.restart();  // out of work after those two, the loop stopped
  // Closed with a reset, not a FIN: a hundred thousand runs leave no TIME_WAIT behind to
  // use up the loopback's ports.
  accepted.set_option(net::socket_base::linger(true, 0));
  auto session =
      std::make_shared<ServerSession>(std::move(accepted), methods, limits, observer);
  bool ended = false;
  session->OnEnd([&ended] { ended = true; });
  session->Start();

  // The caller's bytes, at once (a few KiB: the socket takes them all), then its side closed.
  std::string bytes(kPreface, sizeof(kPreface) - 1);
  bytes.append(reinterpret_cast<const char*>(data), size);
  net::async_write(caller, net::buffer(bytes), [&caller](boost::system::error_code, size_t) {
    boost::system::error_code ignored;  // the session may have closed first
    caller.shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  });
  // What the session answers is read and dropped, so that its writes never wait.
  std::array<char, 16384> sink;
  std::function<void()> drain = [&] {
    caller.async_read_some(net::buffer(sink), [&](boost::system::error_code ec, size_t) {
      if (!ec) drain();
    });
  };
  drain();

  const auto give_up = std::chrono::steady_clock::now() + kGrace;
  while (!ended && std::chrono::steady_clock::now() < give_up) {
    loop.run_one_for(std::chrono::milliseconds(100));
  }
  if (!ended) Fail("the session did not end after its caller closed");
  boost::system::error_code ignored;
  caller.close(ignored);
  loop.run_for(std::chrono::milliseconds(1));  // the handlers the end posted
  while (loop.poll() > 0) {
  }

  for (size_t i = 0; i < methods.calls().size(); ++i) {
    const Call& call = *methods.calls()[i];
    const std::string heard = absl::StrCat("call ", i, " heard on_finished ", call.finished,
                                           " times and its reset ", call.resets, " times");
    if (call.finished > 1 || call.resets > 1 || call.finished + call.resets == 0) Fail(heard);
    if (call.unary && call.finished != 1) Fail(heard);
  }
  if (session.use_count() != 1) {
    Fail(absl::StrCat("the ended session is still held ", session.use_count() - 1,
                      " times besides"));
  }
  return 0;
}

// HTTP/2 through the transport at its edges (issue 19; each was found by review and
// failed before its fix): slow readers on a shared connection, a stream's place given
// back before its reset went out, idle-connection PINGs against short deadlines and
// cancels, dials to an origin that never completes TLS, shutdown with idle connections,
// and a server closing a connection under a new request.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "service/transport/transport.h"
#include "tests/support/transport_fixture.h"
#include "tests/support/scripted_h2_server.h"

namespace egress::transport {
namespace {

using testing::H2Frame;
using testing::H2Peer;
using testing::NginxUpstream;
using testing::ScriptedH2Server;
namespace h2 = testing::h2;

int OpenFds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    if (fcntl(fd, F_GETFD) != -1) ++n;
  }
  return n;
}

class Http2EdgesTest : public testing::TransportTest {
 protected:
  // `threads` threads fetch `url` `per_thread` times each and let go of every body unread;
  // the fetches that failed, and one of their statuses.
  // A URL on `server` (h2c, prior knowledge) whose connection served one fetch and has
  // idled past ping_interval (50 ms): the next fetch on it sends a PING first.
  std::string IdleConnectionDueForAPing(const ScriptedH2Server& server) {
    StartTransport([](TransportSettings& s) {
      s.http2.mode = Http2Mode::kPriorKnowledge;
      s.http2.ping_interval = absl::Milliseconds(50);
    });
    const std::string url = absl::StrCat("http://127.0.0.1:", server.port(), "/x");
    EXPECT_TRUE(GetBody(url).ok());
    absl::SleepFor(absl::Milliseconds(120));
    return url;
  }

  std::pair<int, std::string> FetchAndLetGoOfBodies(const std::string& url, int threads,
                                                    int per_thread) {
    std::atomic<int> failed{0};
    std::string example;
    std::mutex mu;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < per_thread; ++i) {
          auto response = Get(url);
          if (response.ok()) continue;
          ++failed;
          std::lock_guard<std::mutex> lock(mu);
          example = std::string(response.status().ToString());
        }
      });
    }
    for (auto& worker : workers) worker.join();
    return {failed.load(), example};
  }

  // What 8 fetches at once (2 s deadline) get from an https origin that accepts and never
  // completes TLS (a 400 ms handshake timeout), with `mode`.
  std::vector<absl::Status> FetchesToAnOriginThatNeverCompletesTls(Http2Mode mode) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(listener, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(listener, 64), 0);  // the kernel accepts; nobody answers TLS
    socklen_t length = sizeof(address);
    getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    StartTransport([mode](TransportSettings& s) {
      s.tls_handshake_timeout = absl::Milliseconds(400);
      s.http2.mode = mode;
    });
    const std::string url = absl::StrCat("https://localhost:", ntohs(address.sin_port), "/x");
    std::vector<std::promise<absl::StatusOr<Response>>> promises(8);
    for (auto& promise : promises) Begin(url, promise, absl::Seconds(2));
    std::vector<absl::Status> statuses;
    for (auto& promise : promises) statuses.push_back(promise.get_future().get().status());
    close(listener);
    return statuses;
  }

  // Descriptors left open after a transport whose one loop is busy as it is destroyed,
  // with an idle connection to `idle_url`'s origin (its close is posted to that loop).
  int DescriptorsLeftAtShutdownWithAnIdleConnection(const std::string& idle_url) {
    transport_.reset();
    const int before = OpenFds();
    StartTransport([](TransportSettings& s) { s.io_threads = 1; });
    EXPECT_TRUE(GetBody(idle_url).ok());
    std::promise<void> released;
    auto request = MakeRequest("GET", idle_url, {}, "");
    EXPECT_TRUE(request.ok());
    transport_->Fetch(*std::move(request), absl::Now() + absl::Seconds(10),
                      [&](absl::StatusOr<Response> r) {  // on the connection's loop
                        if (r.ok()) r->body.reset();     // the connection idles
                        released.set_value();
                        absl::SleepFor(absl::Milliseconds(300));  // the loop is busy
                      });
    released.get_future().get();
    transport_.reset();
    return OpenFds() - before;
  }
};

// Callers that stop reading (slow FetchStream clients) hold their own stream windows,
// not the shared connection's: another caller's body on that connection still arrives.
TEST_F(Http2EdgesTest, UnreadBodiesDoNotStallAnotherCallersBodyOnTheSharedConnection) {
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=starve")).ok());
  std::vector<Response> slow;
  for (int i = 0; i < 4; ++i) {
    auto response = Get(nginx().Http2Url("/cl/6m?t=starve"));
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_EQ(response->connection.protocol, "h2");
    slow.push_back(*std::move(response));
  }
  absl::SleepFor(absl::Milliseconds(300));  // nginx fills their stream windows
  auto victim = Get(nginx().Http2Url("/cl/1k?t=victim"), absl::Seconds(2));
  ASSERT_TRUE(victim.ok()) << victim.status();  // HEADERS are not flow-controlled
  EXPECT_EQ(victim->connection.connection_id, slow[0].connection.connection_id);
  const absl::Time start = absl::Now();
  auto body = ReadAll(*victim->body);
  EXPECT_TRUE(body.ok()) << body.status() << " after " << absl::Now() - start;
}

// A body let go of unread gives its stream's place to the next request at once: the
// request is not refused for a place the session has not freed yet (its RST_STREAM has
// not gone out), and nothing is counted as refused by a server that refused nothing.
TEST_F(Http2EdgesTest, AStreamLetGoOfUnreadGivesItsPlaceToTheNextRequestAtOnce) {
  StartTransport([](TransportSettings& s) {
    s.http2.max_concurrent_streams = 1;
    s.max_conns_per_origin = 1;
  });
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=slot")).ok());
  auto holder = Get(nginx().Http2Url("/cl/6m?t=slot"));
  ASSERT_TRUE(holder.ok()) << holder.status();
  std::promise<absl::StatusOr<Response>> waiting;
  Begin(nginx().Http2Url("/cl/1k?t=slot"), waiting);
  absl::SleepFor(absl::Milliseconds(50));  // it waits for the one stream
  holder->body.reset();                    // let go of unread: RST_STREAM
  auto served = waiting.get_future().get();
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(observer_.retries_by_reason[static_cast<size_t>(RetryReason::kRefusedStream)], 0)
      << "nginx refused no stream";
}

TEST_F(Http2EdgesTest, BodiesLetGoOfUnderLoadRefuseNoOtherFetch) {
  StartTransport([](TransportSettings& s) {
    s.http2.max_concurrent_streams = 2;
    s.max_conns_per_origin = 1;
  });
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=load")).ok());
  const auto [failed, example] = FetchAndLetGoOfBodies(nginx().Http2Url("/cl/6m?t=load"), 16, 10);
  EXPECT_EQ(failed, 0) << example;
  EXPECT_EQ(observer_.retries_by_reason[static_cast<size_t>(RetryReason::kRefusedStream)], 0);
}

TEST_F(Http2EdgesTest, WithTheDefaultsBodiesLetGoOfUnderLoadRefuseNoOtherFetch) {
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=dload")).ok());
  const auto [failed, example] =
      FetchAndLetGoOfBodies(nginx().Http2Url("/cl/262145?t=dload"), 150, 6);
  EXPECT_EQ(failed, 0) << example;
  EXPECT_EQ(observer_.retries_by_reason[static_cast<size_t>(RetryReason::kRefusedStream)], 0);
}

// A scripted h2c server: answers the first request, then answers a PING only after
// `pong_delay`, then records the requests that come after it.
struct PingScript {
  explicit PingScript(absl::Duration delay) : pong_delay(delay) {}

  const absl::Duration pong_delay;
  std::mutex mu;
  std::vector<std::string> later_methods;
  std::atomic<int> pings{0};
  std::atomic<bool> ponged{false};  // the PING was answered

  void Run(H2Peer& peer) {
    if (!peer.Handshake()) return;
    auto first = peer.ReadRequest();
    if (!first) return;
    peer.Respond(first->stream_id, 200, "first");
    while (auto frame = peer.ReadFrame()) {
      if (frame->type == h2::kHeaders) {
        // Another request before the PING (a stream leased meanwhile): no answer.
        std::lock_guard<std::mutex> lock(mu);
        later_methods.push_back("before-pong");
        continue;
      }
      if (frame->type == h2::kPing && !(frame->flags & h2::kAck)) {
        ++pings;
        absl::SleepFor(pong_delay);
        peer.WriteFrame(h2::kPing, h2::kAck, 0, frame->payload);
        ponged = true;
        break;
      }
    }
    while (auto request = peer.ReadRequest()) {
      std::lock_guard<std::mutex> lock(mu);
      later_methods.push_back(request->headers[":method"]);
    }
  }
};

// A fetch whose deadline is shorter than an idle connection's PING round trip: the
// connection takes no other stream while it is checked, so the check failing for that
// deadline cancels no other caller's fetch.
TEST_F(Http2EdgesTest, AShortDeadlinesPingCancelsNoOtherCallersFetch) {
  PingScript script(absl::Milliseconds(150));
  ScriptedH2Server server([&](H2Peer& peer) { script.Run(peer); });
  const std::string url = IdleConnectionDueForAPing(server);
  std::promise<absl::StatusOr<Response>> hurried, other;
  Begin(url, hurried, absl::Milliseconds(30));  // pings with a 30 ms timeout
  Begin(url, other, absl::Seconds(5)); // a stream on the same connection
  auto other_result = other.get_future().get();
  const auto hurried_result = hurried.get_future().get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(hurried_result.status())) << hurried_result.status();
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 0)
      << "a healthy connection (its PONG came after 150 ms) was retired as stale";
  EXPECT_FALSE(absl::IsCancelled(other_result.status()))
      << "another caller's fetch: " << other_result.status();
}

// A cancel while an idle connection is being pinged ends the fetch at once, and its
// request is never sent.
TEST_F(Http2EdgesTest, ACancelDuringThePingEndsTheFetchAndSendsNothing) {
  PingScript script(absl::Milliseconds(400));
  ScriptedH2Server server([&](H2Peer& peer) { script.Run(peer); });
  const std::string url = IdleConnectionDueForAPing(server);
  std::promise<absl::StatusOr<Response>> promise;
  auto pending = Begin(url, promise, absl::Seconds(5), "POST", "charge the card");
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(script.pings.load(), 1);
  pending->Cancel();
  auto result = promise.get_future().get();
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
  EXPECT_FALSE(script.ponged) << "the cancel waited for the PONG";
  absl::SleepFor(absl::Milliseconds(200));
  std::lock_guard<std::mutex> lock(script.mu);
  EXPECT_TRUE(script.later_methods.empty())
      << "the server received a request the caller had cancelled: "
      << (script.later_methods.empty() ? "" : script.later_methods[0]);
}

// To an https origin whose first dial fails, fetches do not queue behind one dial after
// another (the later ones running out of time "waiting for a connection"): each dials,
// and fails with its own handshake's timeout, with HTTP/2 offered as without it.
TEST_F(Http2EdgesTest, DialsToAnHttpsOriginThatNeverCompletesTlsFailTogether) {
  for (Http2Mode mode : {Http2Mode::kAuto, Http2Mode::kOff}) {
    for (const absl::Status& status : FetchesToAnOriginThatNeverCompletesTls(mode)) {
      EXPECT_TRUE(absl::StrContains(status.message(), "TLS handshake with")) << status;
    }
  }
}

// At shutdown an idle connection whose close is posted to a loop that stops is freed
// all the same (an HTTP/2 connection and its session hold each other until abandoned).
TEST_F(Http2EdgesTest, AnIdleHttp2ConnectionIsFreedAtShutdownWhileItsLoopIsBusy) {
  EXPECT_EQ(DescriptorsLeftAtShutdownWithAnIdleConnection(nginx().Http2Url("/cl/1k")), 0);
}

TEST_F(Http2EdgesTest, AnIdleHttp1ConnectionIsFreedAtShutdownWhileItsLoopIsBusy) {
  EXPECT_EQ(DescriptorsLeftAtShutdownWithAnIdleConnection(nginx().HttpsUrl("/cl/1k")), 0);
}

// A server that closes an idle h2 connection (no GOAWAY) as a GET reaches it: the GET
// goes again on a fresh connection, as HTTP/1.1's stale retry does.
TEST_F(Http2EdgesTest, AGetOnAConnectionTheServerClosesUnderItIsSentAgainAsOnHttp1) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (!peer.Handshake()) return;
    auto first = peer.ReadRequest();
    if (!first) return;
    peer.Respond(first->stream_id, 200, "first");
    if (peer.ReadRequest()) peer.Close();  // idle timeout racing the next request
  });
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kPriorKnowledge; });
  const std::string url = absl::StrCat("http://127.0.0.1:", server.port(), "/x");
  ASSERT_TRUE(GetBody(url).ok());
  auto second = Get(url);
  EXPECT_TRUE(second.ok()) << second.status();
}

}  // namespace
}  // namespace egress::transport

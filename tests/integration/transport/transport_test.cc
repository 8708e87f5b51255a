// The transport on its own (no gRPC) against real nginx: concurrency, read/close races
// and drains. This is the suite ThreadSanitizer checks (see .bazelrc).
#include "service/transport/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fault_server.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/transport_fixture.h"

namespace egress::transport {
namespace {

using testing::NginxUpstream;

// The shared transport fixture (tests/support/transport_fixture.h), with paths on the
// suite's HTTPS listener and the drain helpers of these tests.
class TransportTest : public testing::TransportTest {
 protected:
  // `path` on the suite's HTTPS listener.
  absl::StatusOr<Response> GetHttps(const std::string& path) { return Get(nginx().HttpsUrl(path)); }

  // Switches the transport to DRAIN_MODE_ADAPTIVE, adjusted by `adjust`.
  void UseAdaptiveDrain(const std::function<void(TransportSettings&)>& adjust) {
    TransportSettings settings = transport_->Current()->settings;
    const uint64_t budget = settings.drain_budget_bytes;
    settings.drain = DrainSettings::DefaultsFor(DrainMode::kAdaptive);
    adjust(settings);
    ASSERT_TRUE(transport_->UpdateSettings(settings).ok());
    if (settings.drain_budget_bytes == budget) return;
    ASSERT_EQ(observer_.budget_limit, settings.drain_budget_bytes);
  }

  // Fetches /stall (1 KiB, 80 ms of silence, 1 KiB) and lets go of it: it drains.
  uint64_t StartStalledDrain() {
    auto stalled = GetHttps("/stall");
    EXPECT_TRUE(stalled.ok()) << stalled.status();
    if (!stalled.ok()) return 0;
    stalled->body->Close();
    return stalled->connection.connection_id;
  }

  // Lets one /stall body drain to its end, so that the origin's drain time is learned,
  // then starts a second drain; returns the connection it runs on.
  uint64_t StartStalledDrainOnceItsTimeIsKnown() {
    StartStalledDrain();
    WaitForDrainsCompleted(1);
    // The connection joins the pool just after its drain is counted: the second drain is
    // to run on it, warm, not on a new one (a TSan run dialed a second connection).
    testing::WaitFor([&] { return transport_->PoolStats().front().idle >= 1; });
    EXPECT_EQ(transport_->PoolStats().front().idle, 1);
    return StartStalledDrain();
  }

  void WaitForDrainsCompleted(int count) {
    testing::WaitFor([&] { return observer_.drains_completed >= count; });
    ASSERT_EQ(observer_.drains_completed, count);
  }
};

TEST_F(TransportTest, ReadsABodyToItsEndAndPoolsTheConnection) {
  auto response = GetHttps("/cl/100k");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->head.status_code, 200);
  EXPECT_THAT(response->head.headers,
              ::testing::Contains(::testing::Pair("Content-Length", "102400")));
  auto body = ReadAll(*response->body);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(*body, NginxUpstream::FileContent("100k"));
  EXPECT_EQ(transport_->PoolStats().front().idle, 1);
  EXPECT_EQ(observer_.drains_started, 0);
  EXPECT_EQ(observer_.pool_waits, 1);
}

// The read that takes a body's last bytes hands its connection back: the pool has it
// before the caller asks for more, and the caller's next Read ends without any I/O.
TEST_F(TransportTest, TheReadThatEndsTheBodyPoolsTheConnectionAtOnce) {
  auto response = GetHttps("/cl/1k");
  ASSERT_TRUE(response.ok()) << response.status();
  std::string body;
  int idle_at_last_bytes = -1;
  while (body.size() < 1024) {  // usually one read; the bytes may come in pieces
    std::promise<absl::StatusOr<std::string>> piece;
    response->body->Read(16 * 1024, [&](absl::StatusOr<std::string> bytes) {
      idle_at_last_bytes = transport_->PoolStats().front().idle;
      piece.set_value(std::move(bytes));
    });
    auto bytes = piece.get_future().get();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_FALSE(bytes->empty()) << "the body ended after " << body.size() << " bytes";
    body += *bytes;
  }
  EXPECT_EQ(body, NginxUpstream::FileContent("1k"));
  EXPECT_EQ(idle_at_last_bytes, 1);
  bool ended_inline = false;
  response->body->Read(16 * 1024, [&](absl::StatusOr<std::string> end) {
    ended_inline = end.ok() && end->empty();
  });
  EXPECT_TRUE(ended_inline);
  EXPECT_EQ(observer_.drains_started, 0);
}

TEST_F(TransportTest, ConcurrentFetchesFromManyThreadsAllSucceed) {
  constexpr int kThreads = 8, kPerThread = 25;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        auto response = GetHttps(i % 2 ? "/cl/4k" : "/chunked/1k");
        if (!response.ok()) continue;
        if (i % 3 == 0) {
          response->body->Close();  // left to drain
        } else if (ReadAll(*response->body).ok()) {
          ++ok;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok, kThreads * (kPerThread - (kPerThread + 2) / 3));
  EXPECT_EQ(observer_.requests_new + observer_.requests_reused, kThreads * kPerThread);
  EXPECT_LE(observer_.opened, kThreads * 2);
}

// Go 1.27.1 was reported to deadlock when a body is read and closed concurrently with
// its auto-drain (golang/go#81404). Here Close races a Read in flight, many times.
TEST_F(TransportTest, CloseWhileAReadIsInFlightNeitherDeadlocksNorLeaks) {
  for (int i = 0; i < 100; ++i) {
    auto response = GetHttps(i % 2 ? "/cl/262144" : "/chunked/300k");
    ASSERT_TRUE(response.ok()) << response.status();
    std::unique_ptr<ResponseBody> body = std::move(response->body);
    body->Read(1 + i * 97, [](absl::StatusOr<std::string>) {});
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50 * i));
    body->Close();
    body->Read(10, [](absl::StatusOr<std::string> b) { EXPECT_TRUE(b.ok() && b->empty()); });
  }
  testing::WaitFor([&] { return Quiet(); });
  EXPECT_EQ(observer_.drains_started,
            observer_.drains_completed + observer_.Abandoned(DrainAbandonReason::kByteCap) +
                observer_.Abandoned(DrainAbandonReason::kTimeCap) +
                observer_.Abandoned(DrainAbandonReason::kError));
  EXPECT_EQ(observer_.opened - observer_.AllClosed(), transport_->PoolStats().front().idle);
}

TEST_F(TransportTest, DestroyingABodyUnreadLeavesItToDrain) {
  {
    auto response = GetHttps("/cl/4k");
    ASSERT_TRUE(response.ok());
  }  // the body goes out of scope unread
  testing::WaitFor([&] { return Quiet(); });
  EXPECT_EQ(observer_.drains_completed, 1);
  EXPECT_EQ(transport_->PoolStats().front().idle, 1);
}

// A cap of 2^64 - 1 (the configuration refuses it; the transport must not depend on that)
// drains like any other: cap + 1 once wrapped to a read of nothing, and the drain of a
// body that came with its head spun its loop forever, its connection never pooled.
TEST_F(TransportTest, ADrainWhoseByteCapIsTheLargestNumberDrainsTheBody) {
  StartTransport([](transport::TransportSettings& settings) {
    settings.drain.max_bytes = std::numeric_limits<uint64_t>::max();
  });
  for (const char* path : {"/cl/4k", "/chunked/1k"}) {
    {
      auto response = Get(nginx().HttpUrl(path));
      ASSERT_TRUE(response.ok()) << response.status();
    }  // the body goes out of scope unread
    ASSERT_TRUE(testing::WaitFor([&] { return Quiet(); })) << path << ": the drain never ended";
  }
  EXPECT_EQ(observer_.drains_completed, 2);
  EXPECT_EQ(observer_.drain_bytes, 4096u + 1024u);
  EXPECT_EQ(transport_->PoolStats().front().idle, 1);
}

// Past the deadline no socket read starts (a body as fast as it is read would run on),
// but what has arrived is still parsed: a body whose end waits in the buffer ends, and
// its connection is pooled, however late the caller reads it.
TEST_F(TransportTest, ABodyThatHasArrivedEndsAfterTheDeadlineToo) {
  testing::FaultServer faults;
  auto response = Get(faults.Url("/chunked-ok"), absl::Milliseconds(300));
  ASSERT_TRUE(response.ok()) << response.status();
  const auto read = [&] {
    std::promise<absl::StatusOr<std::string>> promise;
    response->body->Read(16 * 1024, [&](absl::StatusOr<std::string> b) {
      promise.set_value(std::move(b));
    });
    return promise.get_future().get();
  };
  EXPECT_EQ(read().value_or("failed"), "ok");
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(read().value_or("failed"), "");
  response->body.reset();
  testing::WaitFor([&] { return Quiet(); });
  EXPECT_EQ(transport_->PoolStats().front().idle, 1);
  EXPECT_EQ(observer_.AllClosed(), 0);
}

// A transport destroyed under a fetch waiting for its head lets go of the fetch: its
// callback (which owns what the caller gave it) is destroyed, not kept forever by the
// connection that held it (CI's LeakSanitizer saw a connection and its TLS state leak
// when egressd stopped under a FetchStream).
TEST_F(TransportTest, DestroyingTheTransportUnderAPendingHeadReleasesTheFetch) {
  auto request = MakeRequest("GET", nginx().HttpsUrl("/slow-head"), {}, "");
  ASSERT_TRUE(request.ok());
  auto token = std::make_shared<int>(0);
  const std::weak_ptr<int> watch = token;
  transport_->Fetch(*std::move(request), absl::Now() + absl::Seconds(10),
                    [token = std::move(token)](absl::StatusOr<Response>) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the request is written
  transport_.reset();
  EXPECT_TRUE(watch.expired());
}

// The same for a body read waiting on the upstream (/stall's 80 ms of silence) whose
// body was let go of (a FetchStream cancelled as egressd stops).
TEST_F(TransportTest, DestroyingTheTransportUnderAPendingBodyReadReleasesTheRead) {
  auto response = GetHttps("/stall");
  ASSERT_TRUE(response.ok()) << response.status();
  for (size_t read = 0; read < 1024;) {  // the bytes before the silence
    std::promise<absl::StatusOr<std::string>> bytes;
    response->body->Read(1024 - read, [&](absl::StatusOr<std::string> b) { bytes.set_value(b); });
    auto got = bytes.get_future().get();
    ASSERT_TRUE(got.ok() && !got->empty()) << got.status();
    read += got->size();
  }
  auto token = std::make_shared<int>(0);
  const std::weak_ptr<int> watch = token;
  response->body->Read(1024, [token = std::move(token)](absl::StatusOr<std::string>) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the read waits on the socket
  response->body.reset();  // the read gets the drain's time cap to finish
  transport_.reset();
  EXPECT_TRUE(watch.expired());
}

TEST_F(TransportTest, CancelBeforeTheHeadArrivesEndsWithCancelled) {
  auto request = MakeRequest("GET", nginx().HttpsUrl("/slow-head"), {}, "");
  ASSERT_TRUE(request.ok());
  std::promise<absl::StatusOr<Response>> promise;
  auto pending = transport_->Fetch(*std::move(request), absl::Now() + absl::Seconds(10),
                                   [&](absl::StatusOr<Response> r) { promise.set_value(std::move(r)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pending->Cancel();
  auto result = promise.get_future().get();
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
  EXPECT_EQ(observer_.Closed(CloseReason::kCancelled), 1);
}

TEST_F(TransportTest, HeadRequestHasNoBodyAndKeepsTheConnection) {
  auto request = MakeRequest("HEAD", nginx().HttpsUrl("/cl/100k"), {}, "");
  ASSERT_TRUE(request.ok());
  std::promise<absl::StatusOr<Response>> promise;
  transport_->Fetch(*std::move(request), absl::Now() + absl::Seconds(10),
                    [&](absl::StatusOr<Response> r) { promise.set_value(std::move(r)); });
  auto response = promise.get_future().get();
  ASSERT_TRUE(response.ok());
  EXPECT_THAT(response->head.headers,
              ::testing::Contains(::testing::Pair("Content-Length", "102400")));
  auto body = ReadAll(*response->body);
  ASSERT_TRUE(body.ok());
  EXPECT_TRUE(body->empty());
  EXPECT_EQ(observer_.drains_started, 0);
  EXPECT_EQ(transport_->PoolStats().front().idle, 1);
}

// Drain-aware acquisition (ADAPTIVE). Each test first lets one /stall body drain to its
// end, so that the origin's drain time (80 ms) is learned; the next /stall is let go of
// and a request follows at once, while that drain is under way.

TEST_F(TransportTest, AdaptiveRequestWaitsForTheDrainingConnectionWhenADialIsExpensive) {
  UseAdaptiveDrain([](TransportSettings& s) { s.drain.min_dial_cost = absl::Seconds(10); });
  const uint64_t draining = StartStalledDrainOnceItsTimeIsKnown();

  auto next = GetHttps("/cl/1k");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->connection.connection_id, draining);
  EXPECT_TRUE(next->connection.reused);
  EXPECT_EQ(observer_.opened, 1);
  EXPECT_EQ(observer_.waited_for_drain, 1);
  EXPECT_EQ(observer_.dialed_during_drain, 0);
  EXPECT_EQ(observer_.got_drained_connection, 1);
  EXPECT_EQ(observer_.drains_completed, 2);
}

TEST_F(TransportTest, AdaptiveRequestDialsWhileTheDrainGoesOnWhenADialIsCheap) {
  // A loopback dial takes a few milliseconds, the drain 80: dial. The factor lets the
  // drain itself go on through the silence (up to the 1 s ceiling).
  UseAdaptiveDrain([](TransportSettings& s) { s.drain.cost_factor = 1000; });
  const uint64_t draining = StartStalledDrainOnceItsTimeIsKnown();

  auto next = GetHttps("/cl/1k");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(next->connection.connection_id, draining);
  EXPECT_FALSE(next->connection.reused);
  EXPECT_EQ(observer_.opened, 2);
  EXPECT_EQ(observer_.dialed_during_drain, 1);
  EXPECT_EQ(observer_.waited_for_drain, 0);
  EXPECT_EQ(observer_.got_drained_connection, 0);
  EXPECT_TRUE(ReadAll(*next->body).ok());
  // The drain still ends and its connection joins the pool (just after the drain is
  // counted as completed).
  WaitForDrainsCompleted(2);
  testing::WaitFor([&] { return transport_->PoolStats().front().idle >= 2; });
  EXPECT_EQ(transport_->PoolStats().front().idle, 2);
}

TEST_F(TransportTest, AdaptiveDrainsNeverHoldMoreThanTheBudget) {
  constexpr uint64_t kBudget = 1 << 20;  // room for three 262,145-byte bodies
  constexpr int kFetches = 64;
  UseAdaptiveDrain([](TransportSettings& s) { s.drain_budget_bytes = kBudget; });
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<Response>> responses(kFetches);
  for (int i = 0; i < kFetches; ++i) {
    threads.emplace_back([&, i] { responses[i] = GetHttps("/cl/262145"); });
  }
  for (auto& thread : threads) thread.join();
  // All 64 bodies let go of at once, none read: 64 drains want 16 MiB.
  for (auto& response : responses) {
    ASSERT_TRUE(response.ok()) << response.status();
    response->body->Close();
  }
  testing::WaitFor([&] { return Quiet(); }, absl::Seconds(10));

  const int skipped = observer_.Skipped(DrainSkipReason::kOverBudget);
  EXPECT_GT(skipped, 0);
  EXPECT_GT(observer_.drains_started, 0);
  EXPECT_EQ(observer_.drains_started + skipped, kFetches);
  EXPECT_GT(observer_.budget_peak, 0u);
  EXPECT_LE(observer_.budget_peak, kBudget);
  EXPECT_EQ(observer_.budget_in_use, 0u);
  EXPECT_EQ(observer_.drain_bytes, observer_.drains_completed * 262145u);
}

// An upstream whose new connections stall: one connection is served, then its accept
// queue is kept full so that the next SYN is dropped and retried a second later.
// Its one connection answers the first request with half of a 2 KiB body, 200 ms of
// silence and the rest; every later request on it with "ok", or, made with
// kCloseOnSecondRequest, the second with a close (as a server whose idle timeout ran out
// as the request came). Once LetNewConnectionsIn, each new connection answers "ok".
class StallingListener {
 public:
  enum Behaviour { kKeepServing, kCloseOnSecondRequest };
  explicit StallingListener(Behaviour behaviour = kKeepServing) : behaviour_(behaviour) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listener_, 0);  // room for one connection not yet accepted
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    server_ = std::thread([this] { ServeFirst(); });
  }
  ~StallingListener() {
    shutdown(listener_, SHUT_RDWR);
    if (served_ >= 0) shutdown(served_, SHUT_RDWR);
    server_.join();
    if (acceptor_.joinable()) acceptor_.join();
    for (int fd : later_) shutdown(fd, SHUT_RDWR);  // the acceptor has stopped adding
    for (std::thread& worker : workers_) worker.join();
    for (int fd : later_) close(fd);
    for (int fd : {listener_, served_, filler_}) close(fd);
  }

  std::string Url(const std::string& path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  // Fills the accept queue (after the first connection was accepted).
  void StallNewConnections() {
    filler_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port_);
    connect(filler_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  }
  // Accepts from now on (the filler first): a stalled connection gets through at its
  // next SYN.
  void LetNewConnectionsIn() {
    acceptor_ = std::thread([this] {
      while (true) {
        const int fd = accept(listener_, nullptr, nullptr);
        if (fd < 0) return;
        later_.push_back(fd);
        workers_.emplace_back([fd] { Serve(fd, [fd](int) { SendOk(fd); }); });
      }
    });
  }

 private:
  // Answers the requests on `fd` in turn: `answer` with each one's number (0, 1, ...).
  static void Serve(int fd, const std::function<void(int)>& answer) {
    std::string request;
    int requests = 0;
    char buffer[4096];
    while (true) {
      const ssize_t got = read(fd, buffer, sizeof(buffer));
      if (got <= 0) return;
      request.append(buffer, got);
      if (request.find("\r\n\r\n") == std::string::npos) continue;
      request.clear();
      answer(requests++);
    }
  }
  void ServeFirst() {
    served_ = accept(listener_, nullptr, nullptr);
    Serve(served_, [this](int request) {
      if (request == 0) {
        Send(served_, "HTTP/1.1 200 OK\r\nContent-Length: 2048\r\n\r\n" + std::string(1024, 'a'));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        Send(served_, std::string(1024, 'b'));
      } else if (request == 1 && behaviour_ == kCloseOnSecondRequest) {
        shutdown(served_, SHUT_RDWR);
      } else {
        SendOk(served_);
      }
    });
  }
  static void SendOk(int fd) { Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); }
  static void Send(int fd, const std::string& bytes) {
    (void)!write(fd, bytes.data(), bytes.size());  // a failed write ends the test's read
  }

  const Behaviour behaviour_;
  int listener_ = -1;
  int served_ = -1;
  int filler_ = -1;
  int port_ = 0;
  std::thread server_;
  std::thread acceptor_;
  std::vector<int> later_;  // the acceptor's connections
  std::vector<std::thread> workers_;
};

TEST_F(TransportTest, AdaptiveRequestDialingWhileADrainRunsTakesTheDrainedConnectionIfItIsFirst) {
  // Nothing learned of this origin's drains: the request dials at once. The floor on the
  // dial cost keeps the drain going through the silence.
  UseAdaptiveDrain([](TransportSettings& s) { s.drain.min_dial_cost = absl::Seconds(1); });
  StallingListener upstream;
  auto first = Get(upstream.Url("/half"));
  ASSERT_TRUE(first.ok()) << first.status();
  upstream.StallNewConnections();
  first->body->Close();

  auto next = Get(upstream.Url("/next"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->connection.connection_id, first->connection.connection_id);
  EXPECT_EQ(ReadAll(*next->body).value_or(""), "ok");
  EXPECT_EQ(observer_.dialed_during_drain, 1);
  EXPECT_EQ(observer_.got_drained_connection, 1);
  EXPECT_EQ(observer_.drains_completed, 1);

  // The dial still ends, and its connection waits in the pool for the next request.
  upstream.LetNewConnectionsIn();
  testing::WaitFor([&] { return observer_.surplus_kept != 0; }, absl::Seconds(10));
  EXPECT_EQ(observer_.surplus_kept, 1);
  EXPECT_EQ(observer_.opened, 2);
  EXPECT_EQ(transport_->PoolStats().front().idle, 2);
}

TEST_F(TransportTest, ARequestTheDrainedConnectionFailedAsStaleIsCarriedByADialOfItsOwn) {
  UseAdaptiveDrain([](TransportSettings& s) { s.drain.min_dial_cost = absl::Seconds(1); });
  StallingListener upstream(StallingListener::kCloseOnSecondRequest);
  auto first = Get(upstream.Url("/half"));
  ASSERT_TRUE(first.ok()) << first.status();
  upstream.StallNewConnections();
  first->body->Close();

  // The drained connection wins the race against the stalled dial, and the server closes
  // it under the request: stale, so the GET goes again on a fresh connection, a second
  // dial, which must carry it (the first dial, still stalled, is the surplus).
  std::promise<absl::StatusOr<Response>> promise;
  auto pending = Begin(upstream.Url("/next"), promise, absl::Seconds(30));
  testing::WaitFor([&] { return observer_.retries != 0; }, absl::Seconds(10));
  ASSERT_EQ(observer_.got_drained_connection, 1);
  ASSERT_EQ(observer_.retries_by_reason[static_cast<size_t>(RetryReason::kStale)], 1);
  upstream.LetNewConnectionsIn();

  std::future<absl::StatusOr<Response>> answer = promise.get_future();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "the fetch never finished";
  absl::StatusOr<Response> next = answer.get();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(ReadAll(*next->body).value_or(""), "ok");
  EXPECT_TRUE(next->connection.retried);
  testing::WaitFor([&] { return observer_.surplus_kept != 0; }, absl::Seconds(10));
  EXPECT_EQ(observer_.surplus_kept, 1);
  EXPECT_EQ(observer_.opened, 3);
}

}  // namespace
}  // namespace egress::transport

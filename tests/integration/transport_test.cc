// The transport on its own (no gRPC) against real nginx: concurrency, read/close races
// and drains. This is the suite ThreadSanitizer checks (see .bazelrc).
#include "service/transport/transport.h"

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/counting_observer.h"
#include "tests/support/nginx_upstream.h"

namespace egress::transport {
namespace {

using testing::CountingObserver;
using testing::NginxUpstream;

class TransportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    nginx_ = NginxUpstream::Start(absl::StrCat(tmp ? tmp : "/tmp", "/nginx-t-", getpid()));
  }
  static void TearDownTestSuite() { nginx_.reset(); }

  void SetUp() override {
    TransportSettings settings;
    settings.extra_ca_file = nginx_->ca_file();
    settings.io_threads = 2;
    PolicyRules open_policy;
    open_policy.enabled = false;  // the test upstream is on loopback
    settings.policy = std::make_shared<AddressPolicy>(open_policy);
    auto transport = Transport::Create(settings, observer_);
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = *std::move(transport);
  }

  void TearDown() override {
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (absl::Now() < give_up && !Quiet()) absl::SleepFor(absl::Milliseconds(5));
    EXPECT_TRUE(Quiet());
    transport_.reset();
  }

  bool Quiet() {
    for (const auto& o : transport_->PoolStats()) {
      if (o.active + o.draining + o.connecting > 0) return false;
    }
    return true;
  }

  absl::StatusOr<Response> Get(const std::string& path) {
    auto request = MakeRequest("GET", nginx_->HttpsUrl(path), {}, "");
    if (!request.ok()) return request.status();
    std::promise<absl::StatusOr<Response>> promise;
    transport_->Fetch(*std::move(request), absl::Now() + absl::Seconds(10),
                      [&](absl::StatusOr<Response> r) { promise.set_value(std::move(r)); });
    return promise.get_future().get();
  }

  // Reads the body to its end.
  static absl::StatusOr<std::string> ReadAll(ResponseBody& body) {
    std::string all;
    while (true) {
      std::promise<absl::StatusOr<std::string>> promise;
      body.Read(16 * 1024, [&](absl::StatusOr<std::string> b) { promise.set_value(std::move(b)); });
      auto piece = promise.get_future().get();
      if (!piece.ok()) return piece.status();
      if (piece->empty()) return all;
      all += *piece;
    }
  }

  static std::unique_ptr<NginxUpstream> nginx_;
  CountingObserver observer_;
  std::unique_ptr<Transport> transport_;
};

std::unique_ptr<NginxUpstream> TransportTest::nginx_;

TEST_F(TransportTest, ReadsABodyToItsEndAndPoolsTheConnection) {
  auto response = Get("/cl/100k");
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

TEST_F(TransportTest, ConcurrentFetchesFromManyThreadsAllSucceed) {
  constexpr int kThreads = 8, kPerThread = 25;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        auto response = Get(i % 2 ? "/cl/4k" : "/chunked/1k");
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
    auto response = Get(i % 2 ? "/cl/262144" : "/chunked/300k");
    ASSERT_TRUE(response.ok()) << response.status();
    std::unique_ptr<ResponseBody> body = std::move(response->body);
    body->Read(1 + i * 97, [](absl::StatusOr<std::string>) {});
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50 * i));
    body->Close();
    body->Read(10, [](absl::StatusOr<std::string> b) { EXPECT_TRUE(b.ok() && b->empty()); });
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (absl::Now() < give_up && !Quiet()) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(observer_.drains_started,
            observer_.drains_completed + observer_.Abandoned(DrainAbandonReason::kByteCap) +
                observer_.Abandoned(DrainAbandonReason::kTimeCap) +
                observer_.Abandoned(DrainAbandonReason::kError));
  EXPECT_EQ(observer_.opened - observer_.AllClosed(), transport_->PoolStats().front().idle);
}

TEST_F(TransportTest, DestroyingABodyUnreadLeavesItToDrain) {
  {
    auto response = Get("/cl/4k");
    ASSERT_TRUE(response.ok());
  }  // the body goes out of scope unread
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (absl::Now() < give_up && !Quiet()) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(observer_.drains_completed, 1);
  EXPECT_EQ(transport_->PoolStats().front().idle, 1);
}

TEST_F(TransportTest, CancelBeforeTheHeadArrivesEndsWithCancelled) {
  auto request = MakeRequest("GET", nginx_->HttpsUrl("/slow-head"), {}, "");
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
  auto request = MakeRequest("HEAD", nginx_->HttpsUrl("/cl/100k"), {}, "");
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

}  // namespace
}  // namespace egress::transport

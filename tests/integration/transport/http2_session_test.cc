// The HTTP/2 session (service/transport/http2) against real nginx over TLS, ALPN "h2":
// streams share the connection, bodies arrive whole, resets and deadlines leave the
// connection usable, and a slow reader holds egress to one window per stream.
#include "service/transport/http2/session.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "tests/support/counting_observer.h"
#include "tests/support/http2_client.h"
#include "tests/support/nginx_upstream.h"
#include "tests/support/wait_for.h"

namespace egress::transport::http2 {
namespace {

using ::testing::HasSubstr;
using testing::CountingObserver;
using testing::Http2Client;
using testing::NginxUpstream;
using testing::Scaled;

constexpr uint32_t kWindow = 256 * 1024;

std::string ReasonName(const absl::Status& status) {
  const auto reason = transport::ReasonOf(status);
  return reason ? reason->reason : "";
}

class Http2SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    nginx_ = NginxUpstream::Start(absl::StrCat(tmp ? tmp : "/tmp", "/nginx-h2-", getpid()));
  }
  static void TearDownTestSuite() { nginx_.reset(); }

  void SetUp() override { client_ = Connect(nginx_->http2_port()); }

  void TearDown() override {
    if (!client_ || !client_->session()) return;
    // Every stream has given its place back, and nothing is left buffered.
    testing::WaitFor([&] { return client_->session()->open_streams() == 0; });
    EXPECT_EQ(client_->session()->open_streams(), 0u);
    EXPECT_EQ(client_->session()->stats().buffered_body_bytes, 0u);
  }

  std::unique_ptr<Http2Client> Connect(int port) {
    Http2Client::Options options;
    options.tls = true;
    options.ca_file = nginx_->ca_file();
    options.limits.stream_window_bytes = kWindow;
    // Every stream's window whole from its start (these tests are about what one window
    // holds; a window that grows as its caller reads is http2_fetch_test's).
    options.limits.initial_stream_window_bytes = kWindow;
    auto client = Http2Client::Connect(port, options, observer_);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The distinct nginx connections that carried `expected` requests for `uri`.
  std::set<uint64_t> ConnectionsFor(const std::string& uri, size_t expected) {
    std::set<uint64_t> connections;
    const auto entries = nginx_->Http2Requests(uri, expected);
    EXPECT_EQ(entries.size(), expected);
    for (const auto& entry : entries) {
      EXPECT_EQ(entry.protocol, "HTTP/2.0");
      connections.insert(entry.connection);
    }
    return connections;
  }

  static std::unique_ptr<NginxUpstream> nginx_;
  CountingObserver observer_;
  std::unique_ptr<Http2Client> client_;
};

std::unique_ptr<NginxUpstream> Http2SessionTest::nginx_;

TEST_F(Http2SessionTest, AlpnChoosesH2AndNginxSeesHttp2) {
  ASSERT_NE(client_, nullptr);
  EXPECT_EQ(client_->alpn(), "h2");
  ASSERT_NE(client_->session(), nullptr);
  auto body = client_->Get("/echo?alpn");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "ok\n");
  EXPECT_EQ(ConnectionsFor("/echo?alpn", 1).size(), 1u);
}

TEST_F(Http2SessionTest, ServerWithoutHttp2FallsBackToHttp11ThroughAlpn) {
  auto client = Connect(nginx_->https_port());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->alpn(), "http/1.1");
  EXPECT_EQ(client->session(), nullptr);
}

TEST_F(Http2SessionTest, ConcurrentRequestsShareOneConnection) {
  constexpr int kStreams = 20;
  const absl::Time start = absl::Now();
  std::vector<Http2Client::Exchange> exchanges;
  for (int i = 0; i < kStreams; ++i) {
    exchanges.push_back(client_->Open("GET", "/stall?shared", "", absl::Now() + absl::Seconds(20)));
  }
  EXPECT_EQ(client_->session()->open_streams(), static_cast<uint32_t>(kStreams));
  for (auto& exchange : exchanges) {
    auto head = exchange.head.get();
    ASSERT_TRUE(head.ok()) << head.status();
    EXPECT_EQ(head->status_code, 200);
    auto body = client_->ReadAll(*exchange.stream);
    ASSERT_TRUE(body.ok()) << body.status();
    EXPECT_EQ(*body, std::string(1024, 'a') + std::string(1024, 'b'));
    EXPECT_TRUE(exchange.stream->BodyEnded());
  }
  // Twenty 80 ms stalls, side by side rather than one after the other (1.6 s).
  EXPECT_LT(absl::Now() - start, Scaled(absl::Milliseconds(800)));
  EXPECT_EQ(client_->session()->streams_opened(), static_cast<uint64_t>(kStreams));
  EXPECT_EQ(ConnectionsFor("/stall?shared", kStreams).size(), 1u);
}

TEST_F(Http2SessionTest, BodiesOfEverySizeArriveWhole) {
  for (const std::string name : {"1k", "100k", "262145", "6m"}) {
    auto body = client_->Get("/cl/" + name);
    ASSERT_TRUE(body.ok()) << name << ": " << body.status();
    EXPECT_EQ(*body, NginxUpstream::FileContent(name)) << name;
  }
  auto chunked = client_->Get("/chunked/300k");
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_EQ(*chunked, std::string(307200, 'c'));
  auto mixed = client_->Get("/chunked/mixed");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(*mixed, std::string(3, 'x') + std::string(1021, 'y') + std::string(70001, 'z'));
  auto stall = client_->Get("/stall");
  ASSERT_TRUE(stall.ok()) << stall.status();
  EXPECT_EQ(*stall, std::string(1024, 'a') + std::string(1024, 'b'));
}

TEST_F(Http2SessionTest, HeadResponseEndsWithItsHead) {
  auto exchange = client_->Open("HEAD", "/cl/1k");
  auto head = exchange.head.get();
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status_code, 200);
  EXPECT_THAT(head->headers, ::testing::Contains(std::pair<std::string, std::string>(
                                 "content-length", "1024")));
  auto body = client_->ReadAll(*exchange.stream);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "");
}

TEST_F(Http2SessionTest, RequestBodiesOfEverySizeArrive) {
  for (size_t size : {size_t{1}, size_t{1024}, size_t{300 * 1024}, size_t{3 << 20}}) {
    auto exchange = client_->Open("POST", "/upload", std::string(size, 'u'),
                                  absl::Now() + absl::Seconds(20));
    auto head = exchange.head.get();
    ASSERT_TRUE(head.ok()) << size << ": " << head.status();
    EXPECT_EQ(head->status_code, 200);
    auto body = client_->ReadAll(*exchange.stream);
    ASSERT_TRUE(body.ok()) << body.status();
    EXPECT_EQ(*body, absl::StrCat(size, "\n"));
  }
  EXPECT_EQ(ConnectionsFor("/upload", 4).size(), 1u);
}

TEST_F(Http2SessionTest, ResetStreamLeavesTheConnectionUsable) {
  auto exchange = client_->Open("GET", "/cl/6m?reset");
  ASSERT_TRUE(exchange.head.get().ok());
  auto first = client_->Read(*exchange.stream, 16 * 1024);
  ASSERT_TRUE(first.ok()) << first.status();
  exchange.stream->Reset();
  auto after = client_->Read(*exchange.stream, 16 * 1024);
  EXPECT_TRUE(absl::IsCancelled(after.status())) << after.status();

  auto next = client_->Get("/cl/1k?after-reset");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, NginxUpstream::FileContent("1k"));
  const auto reset = ConnectionsFor("/cl/6m?reset", 1);
  const auto later = ConnectionsFor("/cl/1k?after-reset", 1);
  EXPECT_EQ(reset, later);
  EXPECT_EQ(client_->unusable_events(), 0);
}

TEST_F(Http2SessionTest, ResetStreamsGiveTheirBufferedBytesBackToTheConnectionWindow) {
  // 24 streams each left with a full window unread: 6 MiB, more than the connection's
  // 4 MiB window. Were the dropped bytes not counted as consumed, the connection window
  // would stay shut and the last body would stall.
  for (int i = 0; i < 24; ++i) {
    auto exchange = client_->Open("GET", "/cl/6m?window");
    ASSERT_TRUE(exchange.head.get().ok());
    testing::WaitFor([&] { return exchange.stream->buffered_bytes() >= kWindow; });
    ASSERT_EQ(exchange.stream->buffered_bytes(), kWindow) << "stream " << i;
    exchange.stream->Reset();
  }
  auto body = client_->Get("/cl/6m?after-resets", absl::Now() + Scaled(absl::Seconds(10)));
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, NginxUpstream::FileContent("6m"));
}

TEST_F(Http2SessionTest, SlowReaderMakesEgressBufferAtMostOneStreamWindow) {
  auto exchange = client_->Open("GET", "/cl/6m?slow");
  ASSERT_TRUE(exchange.head.get().ok());
  absl::SleepFor(absl::Milliseconds(300));  // reading nothing: nginx fills the window
  const uint64_t unread = exchange.stream->buffered_bytes();
  EXPECT_EQ(unread, kWindow);
  // Then slowly, in 4 KiB pieces.
  std::string body;
  for (;;) {
    auto piece = client_->Read(*exchange.stream, 4096);
    ASSERT_TRUE(piece.ok()) << piece.status();
    if (piece->empty()) break;
    body += *piece;
    if (body.size() % (256 * 1024) == 0) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(body, NginxUpstream::FileContent("6m"));
  const SessionStats stats = client_->session()->stats();
  EXPECT_LE(stats.peak_buffered_body_bytes, kWindow);
  std::cout << "slow reader of 6 MiB: " << unread << " bytes buffered unread, at most "
            << stats.peak_buffered_body_bytes << " (stream window " << kWindow << ")\n";
}

TEST_F(Http2SessionTest, SlowReadersTogetherBufferAtMostAWindowEach) {
  std::vector<Http2Client::Exchange> exchanges;
  for (int i = 0; i < 4; ++i) exchanges.push_back(client_->Open("GET", "/cl/6m?four"));
  for (auto& exchange : exchanges) ASSERT_TRUE(exchange.head.get().ok());
  absl::SleepFor(absl::Milliseconds(300));
  for (auto& exchange : exchanges) {
    auto body = client_->ReadAll(*exchange.stream, 8192);
    ASSERT_TRUE(body.ok()) << body.status();
    EXPECT_EQ(body->size(), 6u << 20);
  }
  const SessionStats stats = client_->session()->stats();
  EXPECT_LE(stats.peak_buffered_body_bytes, 4 * kWindow);
  std::cout << "4 slow readers of 6 MiB: at most " << stats.peak_buffered_body_bytes
            << " bytes buffered (4 stream windows: " << 4 * kWindow << ")\n";
}

TEST_F(Http2SessionTest, DeadlineWaitingForTheHeadResetsTheStreamAndTheConnectionCarriesOn) {
  const absl::Time start = absl::Now();
  auto exchange = client_->Open("GET", "/slow-head", "", absl::Now() + absl::Milliseconds(200));
  auto head = exchange.head.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(head.status())) << head.status();
  EXPECT_EQ(ReasonName(head.status()), "DEADLINE_EXCEEDED");
  EXPECT_THAT(head.status().message(), HasSubstr("waiting for the response from"));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(1)));  // not nginx's 3 s

  auto next = client_->Get("/echo?after-deadline");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, "ok\n");
  EXPECT_EQ(client_->unusable_events(), 0);
}

TEST_F(Http2SessionTest, DeadlineReadingTheBodyFailsTheRead) {
  auto exchange = client_->Open("GET", "/stall?deadline");
  ASSERT_TRUE(exchange.head.get().ok());
  // The body's second half comes 80 ms after its first.
  auto body = client_->ReadAll(*exchange.stream, 64 * 1024, absl::Now() + absl::Milliseconds(30));
  EXPECT_TRUE(absl::IsDeadlineExceeded(body.status())) << body.status();
  EXPECT_THAT(body.status().message(), HasSubstr("reading the response body"));
}

TEST_F(Http2SessionTest, PingIsAnswered) {
  EXPECT_TRUE(client_->Ping(absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace egress::transport::http2

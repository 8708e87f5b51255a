// HTTP/2 through the transport (issue 19) against real nginx: ALPN picks h2, concurrent
// fetches share one connection (counted at nginx), an unread body is reset instead of
// drained, GOAWAY under load loses nothing, and HTTP/1.1-only origins still work.

#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "service/transport/transport.h"
#include "tests/support/transport_fixture.h"

namespace egress::transport {
namespace {

using testing::NginxUpstream;

class Http2TransportTest : public testing::TransportTest {
 protected:
  // The distinct nginx connections that served `uri`, once `expected` requests came.
  static std::set<uint64_t> ConnectionsServing(const std::string& uri, size_t expected) {
    std::set<uint64_t> connections;
    for (const auto& entry : nginx().Http2Requests(uri, expected)) {
      EXPECT_EQ(entry.protocol, "HTTP/2.0");
      connections.insert(entry.connection);
    }
    return connections;
  }
};

TEST_F(Http2TransportTest, AlpnPicksHttp2AndTheBodyArrivesWhole) {
  auto response = Get(nginx().Http2Url("/cl/262144?t=alpn"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->head.status_code, 200);
  EXPECT_EQ(response->connection.protocol, "h2");
  auto body = ReadAll(*response->body);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, NginxUpstream::FileContent("262144"));
  EXPECT_EQ(observer_.streams_opened, 1);
}

TEST_F(Http2TransportTest, ConcurrentFetchesShareOneConnection) {
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=share")).ok());  // the origin speaks h2
  constexpr int kFetches = 32;
  std::vector<std::future<absl::StatusOr<std::string>>> fetches;
  for (int i = 0; i < kFetches; ++i) {
    fetches.push_back(std::async(std::launch::async, [&] {
      return GetBody(nginx().Http2Url("/stall?t=share"));  // 80 ms each: they overlap
    }));
  }
  for (auto& fetch : fetches) {
    auto body = fetch.get();
    ASSERT_TRUE(body.ok()) << body.status();
    EXPECT_EQ(body->size(), 2048u);
  }
  EXPECT_EQ(ConnectionsServing("/stall?t=share", kFetches).size(), 1u);
  EXPECT_EQ(observer_.opened, 1);
  EXPECT_EQ(observer_.requests_reused, kFetches);
}

TEST_F(Http2TransportTest, AClosedConnectionReportsTheStreamsItCarried) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=carried")).ok());
  EXPECT_TRUE(observer_.StreamsPerClosedConnection().empty());
  StartTransport();  // the old transport closes its connection as it goes
  EXPECT_EQ(observer_.StreamsPerClosedConnection(), std::vector<uint64_t>{5});
}

TEST_F(Http2TransportTest, ConcurrentFetchesToAnOriginNeverDialedOpenOneConnection) {
  // Nothing is known of the origin: the first fetch dials, the others wait for what its
  // ALPN says, and h2 carries them all.
  constexpr int kFetches = 16;
  std::vector<std::future<absl::StatusOr<std::string>>> fetches;
  for (int i = 0; i < kFetches; ++i) {
    fetches.push_back(std::async(std::launch::async,
                                 [&] { return GetBody(nginx().Http2Url("/cl/4k?t=never")); }));
  }
  for (auto& fetch : fetches) ASSERT_TRUE(fetch.get().ok());
  EXPECT_EQ(observer_.opened, 1);
  EXPECT_EQ(ConnectionsServing("/cl/4k?t=never", kFetches).size(), 1u);
}

TEST_F(Http2TransportTest, FetchesFindingNoConnectionWaitForTheOneBeingDialed) {
  // The origin has spoken h2, and its connection idled out: of fetches that come
  // together, the first dials and the others wait for its connection, not dial their own.
  StartTransport([](TransportSettings& s) { s.idle_timeout = absl::Milliseconds(100); });
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=cold")).ok());
  testing::WaitFor([&] { return observer_.Closed(CloseReason::kIdleTimeout) >= 1; });
  ASSERT_EQ(observer_.Closed(CloseReason::kIdleTimeout), 1);
  constexpr int kFetches = 16;
  std::vector<std::future<absl::StatusOr<std::string>>> fetches;
  for (int i = 0; i < kFetches; ++i) {
    fetches.push_back(std::async(std::launch::async,
                                 [&] { return GetBody(nginx().Http2Url("/cl/4k?t=cold")); }));
  }
  for (auto& fetch : fetches) ASSERT_TRUE(fetch.get().ok());
  EXPECT_EQ(observer_.opened, 2);
}

TEST_F(Http2TransportTest, AnUnreadBodyIsResetAndTheConnectionCarriesOn) {
  {
    auto response = Get(nginx().Http2Url("/cl/6m?t=reset"));
    ASSERT_TRUE(response.ok()) << response.status();
  }  // the body goes out of scope unread: RST_STREAM, no drain
  EXPECT_EQ(observer_.streams_reset, 1);
  EXPECT_EQ(observer_.drains_started, 0);
  auto next = Get(nginx().Http2Url("/cl/1k?t=reset"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->connection.reused);
  auto body = ReadAll(*next->body);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->size(), 1024u);
  EXPECT_EQ(observer_.opened, 1);
  EXPECT_EQ(observer_.AllClosed(), 0);
}

TEST_F(Http2TransportTest, ABodyAllHereButUnreadIsDroppedWithoutAReset) {
  auto response = Get(nginx().Http2Url("/cl/1k?t=all-here"));
  ASSERT_TRUE(response.ok()) << response.status();
  std::promise<absl::StatusOr<std::string>> first;
  response->body->Read(1, [&](absl::StatusOr<std::string> b) { first.set_value(b); });
  // 1 KiB comes in one DATA frame, with END_STREAM.
  ASSERT_EQ(first.get_future().get().value_or(""), NginxUpstream::FileContent("1k").substr(0, 1));
  response->body.reset();  // the server has ended the stream: nothing to reset
  EXPECT_EQ(observer_.streams_reset, 0);
  EXPECT_EQ(observer_.streams_opened, observer_.streams_closed);
}

TEST_F(Http2TransportTest, AReadCutShortByCloseIsCancelledAndOnlyItsStreamIsReset) {
  auto response = Get(nginx().Http2Url("/stall?t=close-read"));  // 1 KiB, 80 ms, 1 KiB
  ASSERT_TRUE(response.ok()) << response.status();
  for (size_t read = 0; read < 1024;) {  // the bytes before the silence
    std::promise<absl::StatusOr<std::string>> bytes;
    response->body->Read(1024 - read, [&](absl::StatusOr<std::string> b) { bytes.set_value(b); });
    auto got = bytes.get_future().get();
    ASSERT_TRUE(got.ok() && !got->empty()) << got.status();
    read += got->size();
  }
  std::promise<absl::StatusOr<std::string>> read;
  // Closed at once, well within the 80 ms before the next bytes: the Read is still waiting.
  response->body->Read(1024, [&](absl::StatusOr<std::string> b) { read.set_value(b); });
  response->body->Close();
  const auto result = read.get_future().get();
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
  EXPECT_EQ(observer_.streams_reset, 1);
  auto next = GetBody(nginx().Http2Url("/cl/1k?t=close-read"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(observer_.opened, 1);
}

TEST_F(Http2TransportTest, CancelBeforeTheHeadResetsItsStreamAlone) {
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=cancel")).ok());
  std::promise<absl::StatusOr<Response>> slow, other;
  auto pending = Begin(nginx().Http2Url("/slow-head?t=cancel"), slow);  // 3 s
  Begin(nginx().Http2Url("/slow-300ms?t=cancel"), other);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pending->Cancel();
  const auto cancelled = slow.get_future().get();
  EXPECT_TRUE(absl::IsCancelled(cancelled.status())) << cancelled.status();
  auto response = other.get_future().get();  // on the same connection, unharmed
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(*ReadAll(*response->body), "late\n");
  EXPECT_EQ(observer_.opened, 1);
}

TEST_F(Http2TransportTest, ADeadlineEndsItsStreamAloneWithDeadlineExceeded) {
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=deadline")).ok());
  auto request = MakeRequest("GET", nginx().Http2Url("/slow-head?t=deadline"), {}, "");
  ASSERT_TRUE(request.ok());
  std::promise<absl::StatusOr<Response>> promise;
  transport_->Fetch(*std::move(request), absl::Now() + absl::Milliseconds(200),
                    [&](absl::StatusOr<Response> r) { promise.set_value(std::move(r)); });
  const auto late = promise.get_future().get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  auto next = Get(nginx().Http2Url("/cl/1k?t=deadline"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->connection.reused);
  EXPECT_EQ(ReadAll(*next->body)->size(), 1024u);
  EXPECT_EQ(observer_.opened, 1);
}

TEST_F(Http2TransportTest, ARequestBodyGoesUp) {
  const std::string upload(300 * 1024, 'u');
  std::promise<absl::StatusOr<Response>> promise;
  Begin(nginx().Http2Url("/upload?t=post"), promise, absl::Seconds(10), "POST", upload);
  auto response = promise.get_future().get();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->connection.protocol, "h2");
  EXPECT_EQ(*ReadAll(*response->body), absl::StrCat(upload.size(), "\n"));
}

TEST_F(Http2TransportTest, GoawayUnderLoadLosesNoFetch) {
  // nginx ends each connection with GOAWAY after 10 requests: 200 fetches, 8 at a time,
  // cross many GOAWAYs; streams it did not take are sent again on a new connection.
  constexpr int kThreads = 8, kPerThread = 25;
  std::vector<std::future<int>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&] {
      int ok = 0;
      for (int i = 0; i < kPerThread; ++i) {
        auto body = GetBody(nginx().Http2GoawayUrl("/cl/4k?t=goaway"));
        EXPECT_TRUE(body.ok()) << body.status();
        if (body.ok() && body->size() == 4096) ++ok;
      }
      return ok;
    }));
  }
  int ok = 0;
  for (auto& worker : workers) ok += worker.get();
  EXPECT_EQ(ok, kThreads * kPerThread);
  EXPECT_GE(observer_.opened, kThreads * kPerThread / 10);
  EXPECT_GE(observer_.Closed(CloseReason::kGoaway), 1);
  // Every request nginx served was one of ours: nothing was sent twice.
  EXPECT_EQ(nginx().Http2Requests("/cl/4k?t=goaway", kThreads * kPerThread).size(),
            static_cast<size_t>(kThreads * kPerThread));
  // Each connection carried the 10 streams nginx serves on it and at most the others in
  // flight when its GOAWAY came. All together: every request served, and no more than
  // the streams requests were given (some found their connection going away first).
  StartTransport();
  uint64_t carried = 0;
  for (uint64_t streams : observer_.StreamsPerClosedConnection()) {
    EXPECT_LE(streams, static_cast<uint64_t>(10 + kThreads));
    carried += streams;
  }
  EXPECT_GE(carried, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_LE(carried, static_cast<uint64_t>(observer_.streams_opened.load()));
}

TEST_F(Http2TransportTest, AnHttp1OnlyOriginStillWorks) {
  auto body = GetBody(nginx().HttpsUrl("/cl/1k?t=h1"));
  ASSERT_TRUE(body.ok()) << body.status();
  auto response = Get(nginx().HttpsUrl("/cl/1k?t=h1"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->connection.protocol, "http/1.1");
  EXPECT_TRUE(response->connection.reused);
  EXPECT_EQ(observer_.streams_opened, 0);
}

TEST_F(Http2TransportTest, ModeOffStaysOnHttp1) {
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kOff; });
  auto response = Get(nginx().Http2Url("/cl/1k?t=off"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->connection.protocol, "http/1.1");
  EXPECT_EQ(*ReadAll(*response->body), NginxUpstream::FileContent("1k"));
}

TEST_F(Http2TransportTest, ModeRequiredFailsAnOriginThatDoesNotChooseH2) {
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kRequired; });
  auto response = Get(nginx().HttpsUrl("/cl/1k?t=required"));
  ASSERT_FALSE(response.ok());
  EXPECT_TRUE(absl::IsUnavailable(response.status())) << response.status();
  EXPECT_EQ(ReasonOf(response.status())->reason, "HTTP2_NOT_NEGOTIATED");
  auto h2 = Get(nginx().Http2Url("/cl/1k?t=required"));
  ASSERT_TRUE(h2.ok()) << h2.status();
  EXPECT_EQ(h2->connection.protocol, "h2");
}

TEST_F(Http2TransportTest, PriorKnowledgeSpeaksH2cToACleartextOrigin) {
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kPriorKnowledge; });
  auto response = Get(nginx().H2cUrl("/cl/4k?t=h2c"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->connection.protocol, "h2");
  EXPECT_EQ(ReadAll(*response->body)->size(), 4096u);
  EXPECT_EQ(ConnectionsServing("/cl/4k?t=h2c", 1).size(), 1u);
}

TEST_F(Http2TransportTest, ACleartextOriginSpeaksHttp1ByDefault) {
  auto response = Get(nginx().HttpUrl("/cl/1k?t=plain"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->connection.protocol, "http/1.1");
  EXPECT_EQ(ReadAll(*response->body)->size(), 1024u);
}

TEST_F(Http2TransportTest, MoreStreamsThanTheLimitOpenAnotherConnection) {
  StartTransport([](TransportSettings& s) { s.http2.max_concurrent_streams = 4; });
  ASSERT_TRUE(GetBody(nginx().Http2Url("/cl/1k?t=limit")).ok());
  std::vector<std::future<absl::StatusOr<std::string>>> fetches;
  for (int i = 0; i < 8; ++i) {
    fetches.push_back(std::async(std::launch::async,
                                 [&] { return GetBody(nginx().Http2Url("/slow-300ms?t=limit")); }));
  }
  for (auto& fetch : fetches) ASSERT_TRUE(fetch.get().ok());
  const size_t connections = ConnectionsServing("/slow-300ms?t=limit", 8).size();
  EXPECT_GE(connections, 2u);  // 4 streams each at most
  EXPECT_LE(connections, 3u);
}

}  // namespace
}  // namespace egress::transport

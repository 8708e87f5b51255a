// HTTP/2 streams around GOAWAY and REFUSED_STREAM through the transport (issue 38): a
// stream whose response head has come was processed, so its GOAWAY or REFUSED_STREAM is a
// reset and the request is not sent again; a stream the server did not process is sent
// again, with backoff, until the fetch's deadline (nginx ending each connection after 10
// requests under 32 concurrent POSTs loses none, and serves each once).
#include <algorithm>
#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "service/transport/http2/session.h"
#include "service/transport/transport.h"
#include "tests/support/scripted_h2_server.h"
#include "tests/support/transport_fixture.h"

namespace egress::transport {
namespace {

using ::testing::HasSubstr;
using testing::H2Peer;
using testing::ScriptedH2Server;
namespace h2 = testing::h2;

std::string ReasonName(const absl::Status& status) {
  const auto reason = ReasonOf(status);
  return reason ? reason->reason : "";
}


class Http2GoawayTest : public testing::TransportTest {
 protected:
  std::string Url(const ScriptedH2Server& server) const {
    return absl::StrCat("http://127.0.0.1:", server.port(), "/order");
  }

  // A POST with a body to `server` (h2c, prior knowledge), whose head must come and
  // whose body read then fails: the failure.
  absl::Status PostWhoseBodyFails(const ScriptedH2Server& server) {
    StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kPriorKnowledge; });
    std::promise<absl::StatusOr<Response>> promise;
    Begin(Url(server), promise, absl::Seconds(10), "POST", "an order");
    auto response = promise.get_future().get();
    if (!response.ok()) return response.status();
    EXPECT_EQ(response->head.status_code, 200);
    auto body = ReadAll(*response->body);
    EXPECT_FALSE(body.ok());
    return body.status();
  }

  // A last GET, answered "ok": whatever the transport was to send before it has reached
  // the server by the time it is answered.
  void ExpectALastGetIsAnswered(const ScriptedH2Server& server) {
    auto last = GetBody(Url(server));
    ASSERT_TRUE(last.ok()) << last.status();
    EXPECT_EQ(*last, "ok");
  }
};

// The script's end: every further request gets "ok", each counted in `requests`.
void AnswerEveryRequest(H2Peer& peer, std::atomic<int>& requests) {
  while (auto request = peer.ReadRequest()) {
    ++requests;
    if (!request->end_stream && !peer.ReadBody(request->stream_id)) return;
    peer.Respond(request->stream_id, 200, "ok");
  }
}

// A script that refuses every stream (REFUSED_STREAM), each counted in `requests`.
ScriptedH2Server::Script RefuseEveryStream(std::atomic<int>& requests) {
  return [&requests](H2Peer& peer) {
    if (!peer.Handshake()) return;
    while (auto request = peer.ReadRequest()) {
      ++requests;
      peer.WriteFrame(h2::kRstStream, 0, request->stream_id, H2Peer::Uint32(h2::kRefusedStream));
    }
  };
}

// The server answered: the GOAWAY that then says it stopped below this stream cannot
// undo that. The caller hears of a reset, not of a request it may send again, and the
// request is not sent again.
TEST_F(Http2GoawayTest, AGoawayBelowAStreamWhoseHeadCameIsAResetAndNothingIsSentAgain) {
  std::atomic<int> requests{0}, connections{0};
  ScriptedH2Server server([&](H2Peer& peer) {
    if (!peer.Handshake()) return;
    if (++connections > 1) return AnswerEveryRequest(peer, requests);
    auto request = peer.ReadRequest();
    if (!request) return;
    ++requests;
    peer.WriteHead(request->stream_id, "200");
    peer.Goaway(std::max(0, request->stream_id - 2), h2::kNoError, "restarting");
    peer.ReadUntilClosed();
  });
  const absl::Status failure = PostWhoseBodyFails(server);
  EXPECT_TRUE(absl::IsUnavailable(failure)) << failure;
  EXPECT_EQ(ReasonName(failure), "UPSTREAM_STREAM_RESET") << failure;
  EXPECT_FALSE(http2::WasNotProcessed(failure)) << failure;
  EXPECT_THAT(failure.message(), HasSubstr("GOAWAY"));
  ExpectALastGetIsAnswered(server);
  EXPECT_EQ(requests, 2);  // the POST once, and the GET
  EXPECT_EQ(observer_.retries, 0);
}

// The same for RST_STREAM(REFUSED_STREAM) after the head: a reset like any other.
TEST_F(Http2GoawayTest, ARefusedStreamAfterItsHeadIsAResetAndNothingIsSentAgain) {
  std::atomic<int> requests{0};
  ScriptedH2Server server([&](H2Peer& peer) {
    if (!peer.Handshake()) return;
    auto request = peer.ReadRequest();
    if (!request) return;
    ++requests;
    peer.WriteHead(request->stream_id, "200");
    peer.WriteFrame(h2::kRstStream, 0, request->stream_id, H2Peer::Uint32(h2::kRefusedStream));
    AnswerEveryRequest(peer, requests);
  });
  const absl::Status failure = PostWhoseBodyFails(server);
  EXPECT_TRUE(absl::IsUnavailable(failure)) << failure;
  EXPECT_EQ(ReasonName(failure), "UPSTREAM_STREAM_RESET") << failure;
  EXPECT_FALSE(http2::WasNotProcessed(failure)) << failure;
  EXPECT_THAT(failure.message(), HasSubstr("REFUSED_STREAM"));
  ExpectALastGetIsAnswered(server);
  EXPECT_EQ(requests, 2);  // the POST once, and the GET
  EXPECT_EQ(observer_.retries, 0);
}

// A server that refuses a stream more times than any fixed count (5 here) before it takes
// one: the request goes again each time, on the same connection (REFUSED_STREAM leaves
// it usable), until it is processed.
TEST_F(Http2GoawayTest, AStreamRefusedManyTimesIsSentAgainUntilTheServerTakesIt) {
  constexpr int kRefusals = 5;
  std::atomic<int> requests{0};
  ScriptedH2Server server([&](H2Peer& peer) {
    if (!peer.Handshake()) return;
    while (auto request = peer.ReadRequest()) {
      if (++requests <= kRefusals) {
        peer.WriteFrame(h2::kRstStream, 0, request->stream_id,
                        H2Peer::Uint32(h2::kRefusedStream));
        continue;
      }
      if (!request->end_stream) peer.ReadBody(request->stream_id);
      peer.Respond(request->stream_id, 200, "taken");
    }
  });
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kPriorKnowledge; });
  std::promise<absl::StatusOr<Response>> promise;
  Begin(Url(server), promise, absl::Seconds(10), "POST", "an order");
  auto response = promise.get_future().get();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(ReadAll(*response->body).value_or("?"), "taken");
  EXPECT_TRUE(response->connection.retried);
  EXPECT_EQ(requests, kRefusals + 1);
  EXPECT_EQ(observer_.retries_by_reason[static_cast<size_t>(RetryReason::kRefusedStream)],
            kRefusals);
}

// A server that refuses every stream: the re-sends stop at the fetch's deadline, which
// the caller is told of.
TEST_F(Http2GoawayTest, AStreamRefusedUntilTheDeadlineFailsWithDeadlineExceeded) {
  std::atomic<int> requests{0};
  ScriptedH2Server server(RefuseEveryStream(requests));
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kPriorKnowledge; });
  std::promise<absl::StatusOr<Response>> promise;
  Begin(Url(server), promise, absl::Seconds(1), "POST", "an order");
  const absl::Status failure = promise.get_future().get().status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(failure)) << failure;
  EXPECT_EQ(ReasonName(failure), "DEADLINE_EXCEEDED") << failure;
  EXPECT_GT(requests, 4);  // more than a fixed count of 3 re-sends
  EXPECT_GE(observer_.retries_by_reason[static_cast<size_t>(RetryReason::kRefusedStream)],
            requests - 1);
}

// A caller that cancels while its refused request is sent again and again (waiting for
// its backoff, or on a stream): the fetch ends CANCELLED, long before its deadline.
TEST_F(Http2GoawayTest, ACancelWhileARefusedRequestWaitsToGoAgainEndsTheFetch) {
  std::atomic<int> requests{0};
  ScriptedH2Server server(RefuseEveryStream(requests));
  StartTransport([](TransportSettings& s) { s.http2.mode = Http2Mode::kPriorKnowledge; });
  std::promise<absl::StatusOr<Response>> promise;
  auto fetch = Begin(Url(server), promise, absl::Seconds(60), "POST", "an order");
  testing::WaitFor([&] { return requests >= 3; }, absl::Seconds(10));
  fetch->Cancel();
  const absl::Status status = promise.get_future().get().status();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

// nginx ends each connection with GOAWAY after 10 requests: 400 POSTs, 32 at a time,
// cross some 40 GOAWAYs, each refusing the streams above its last one, some of them
// again and again. Every POST succeeds, and nginx served each exactly once.
TEST_F(Http2GoawayTest, GoawayChurnUnder32ConcurrentPostsLosesNoneAndServesEachOnce) {
  constexpr int kPosts = 400, kConcurrency = 32;
  const std::string uri = "/upload?t=goaway-churn";
  const std::string body(1024, 'p');
  std::atomic<int> next{0};
  std::vector<std::future<std::vector<std::string>>> workers;
  for (int t = 0; t < kConcurrency; ++t) {
    workers.push_back(std::async(std::launch::async, [&] {
      std::vector<std::string> failures;
      while (next++ < kPosts) {
        std::promise<absl::StatusOr<Response>> promise;
        Begin(nginx().Http2GoawayUrl(uri), promise, absl::Seconds(20), "POST", body);
        auto response = promise.get_future().get();
        absl::StatusOr<std::string> answer =
            response.ok() ? ReadAll(*response->body) : response.status();
        if (!answer.ok()) {
          failures.push_back(answer.status().ToString());
        } else if (*answer != "1024\n") {
          failures.push_back(absl::StrCat("answer \"", *answer, "\""));
        }
      }
      return failures;
    }));
  }
  std::vector<std::string> failures;
  for (auto& worker : workers) {
    for (std::string& failure : worker.get()) failures.push_back(std::move(failure));
  }
  EXPECT_THAT(failures, ::testing::IsEmpty());
  EXPECT_EQ(nginx().Http2Requests(uri, kPosts).size(), static_cast<size_t>(kPosts));
  EXPECT_GE(observer_.Closed(CloseReason::kGoaway), 1);
}

}  // namespace
}  // namespace egress::transport

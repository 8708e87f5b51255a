// HTTP/2 streams around GOAWAY and REFUSED_STREAM through the transport (issue 38): a
// stream whose response head has come was processed, so its GOAWAY or REFUSED_STREAM is a
// reset and the request is not sent again.
#include <algorithm>
#include <atomic>
#include <future>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/transport/error_reason.h"
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

// Reads until the client closes the connection (or 10 s pass).
void UntilClosed(H2Peer& peer) {
  while (peer.ReadFrame()) {
  }
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
    UntilClosed(peer);
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

}  // namespace
}  // namespace egress::transport

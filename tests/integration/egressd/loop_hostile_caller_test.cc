// egressd's own gRPC server on the loops (--data_plane=loops) against hostile callers
// (issue 37): each limit ends in a bounded refusal (a GOAWAY's code, a stream's status,
// the connection closed), counted under its own reason, and another caller is still
// served afterwards. The hostile callers write HTTP/2 frames by hand on a socket.
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/dataplane/grpc_framing.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/h2_frame_connection.h"
#include "tests/support/raw_grpc_call.h"

namespace egress::testing {
namespace {

// `count` Fetch requests on streams 1, 3, 5...: their headers alone (the message never
// comes, so each stays open), each reset at once when `reset`.
std::string Requests(H2FrameConnection& caller, int count, bool reset) {
  std::string frames;
  for (int32_t id = 1; id <= 2 * count - 1; id += 2) {
    frames += H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, id, caller.RequestBlock());
    if (reset) frames += RstStreamFrame(id);
  }
  return frames;
}

class LoopHostileCallerTest : public EgressFaultsTest {
 protected:
  void StartLoops(const std::function<void(egress::v1::Config&)>& configure = {}) {
    StartEgress(configure, DataPlane::kLoops);
  }

  std::string Framed(const std::string& url) const {
    std::string message;
    Request(url).SerializeToString(&message);
    return dataplane::FrameMessage(message);
  }

  absl::StatusOr<RawGrpcAnswer> RawFetch(const RawHeaders& headers = {}) {
    return RawGrpcCall(server_->grpc_port(), "/egress.v1.Egress/Fetch",
                       Framed(nginx().HttpUrl("/cl/1k")), headers, absl::Seconds(10));
  }

  // A well-behaved caller on a connection of its own gets its fetch answered.
  void ExpectAnotherCallerServed() {
    const auto answer = RawFetch();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->Field("grpc-status"), "0") << answer->Field("grpc-message");
  }

  // A caller that sends `frame` over and over (up to about 170 MB) and reads nothing is
  // closed, counted as `reason`.
  void ExpectFloodClosed(const std::string& frame, CallRefusal reason) {
    H2FrameConnection caller(server_->grpc_port(), /*receive_buffer=*/4096);
    ASSERT_TRUE(caller.connected());
    ASSERT_TRUE(caller.Greet());
    std::string frames;
    for (int i = 0; i < 1000; ++i) frames += frame;
    bool open = true;
    for (int i = 0; open && i < 170000000 / static_cast<int>(frames.size()); ++i) {
      open = caller.Send(frames);
    }
    EXPECT_FALSE(open);
    EXPECT_TRUE(WaitFor([&] { return observer_.Refused(reason) == 1; }));
    EXPECT_EQ(observer_.Refused(CallRefusal::kProtocolError), 0);
  }

  // The connection ends with a GOAWAY of `code` (and nothing is left to read).
  void ExpectGoaway(H2FrameConnection& caller, uint32_t code) {
    const auto frames = caller.Read(absl::Seconds(10));
    EXPECT_TRUE(caller.closed());
    const ReadFrame* goaway = FirstGoaway(frames);
    ASSERT_NE(goaway, nullptr) << frames.size() << " frames, none a GOAWAY";
    EXPECT_EQ(goaway->ErrorCode(), code);
  }
};

// SETTINGS_MAX_CONCURRENT_STREAMS is 100: a caller that has acknowledged it and opens a
// 101st stream broke HTTP/2 (RFC 9113 5.1.2), and its connection ends.
TEST_F(LoopHostileCallerTest, AStreamPastTheAcknowledgedConcurrentStreamLimitEndsTheConnection) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  ASSERT_TRUE(caller.Greet());
  ASSERT_TRUE(caller.Send(Requests(caller, 101, /*reset=*/false)));
  ExpectGoaway(caller, NGHTTP2_PROTOCOL_ERROR);
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyStreams), 1);
  EXPECT_EQ(observer_.Refused(CallRefusal::kProtocolError), 0);
  ExpectAnotherCallerServed();
}

// CVE-2023-44487: each stream opened and reset at once costs the server a call and the
// caller two frames. Past the reset budget (here a burst of 50, 1 a second) the
// connection gets GOAWAY ENHANCE_YOUR_CALM.
TEST_F(LoopHostileCallerTest, StreamsResetFasterThanTheResetBudgetGetEnhanceYourCalm) {
  caller_limits_.reset_burst = 50;
  caller_limits_.resets_per_second = 1;
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  ASSERT_TRUE(caller.Greet());
  caller.Send(Requests(caller, 200, /*reset=*/true));  // the server may close before it has read them all
  ExpectGoaway(caller, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(observer_.Refused(CallRefusal::kRapidReset), 1);
  ExpectAnotherCallerServed();
}

// A caller that resets within the budget is served as before.
TEST_F(LoopHostileCallerTest, StreamsResetWithinTheResetBudgetLeaveTheConnectionServing) {
  caller_limits_.reset_burst = 50;
  caller_limits_.resets_per_second = 1;
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  std::string resets = Requests(caller, 40, /*reset=*/true);
  // Then one call whose request is whole: it is answered on the same connection.
  resets += H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 81,
                    caller.RequestBlock({{"grpc-timeout", "60S"}}));
  resets += H2Frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 81, Framed(nginx().HttpUrl("/cl/1k")));
  ASSERT_TRUE(caller.Greet());
  ASSERT_TRUE(caller.Send(resets));
  // Its answer ends with the trailers (HEADERS with END_STREAM).
  const auto frames = caller.Read(absl::Seconds(10), [](const ReadFrame& frame) {
    return frame.stream_id == 81 && (frame.flags & NGHTTP2_FLAG_END_STREAM);
  });
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().stream_id, 81);
  EXPECT_EQ(FirstGoaway(frames), nullptr);
  RawHeaders answer;  // its headers and trailers, the only header blocks the server sent
  for (const auto& frame : frames) {
    if (frame.type != NGHTTP2_HEADERS) continue;
    for (auto& field : caller.Decode(frame.payload)) answer.push_back(std::move(field));
  }
  RawGrpcAnswer fields;
  fields.headers = answer;
  EXPECT_EQ(fields.Field("grpc-status"), "0") << fields.Field("grpc-message");
  EXPECT_FALSE(caller.closed());
  EXPECT_EQ(observer_.Refused(CallRefusal::kRapidReset), 0);
  EXPECT_TRUE(WaitFor([&] { return observer_.Fetches(grpc::StatusCode::OK) == 1; }));
}

// A header block that never ends holds the connection's decoder: past 8 CONTINUATION
// frames the connection is closed.
TEST_F(LoopHostileCallerTest, AHeaderBlockOfEndlessContinuationFramesIsClosedAndCounted) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  // A literal field without indexing, "x-pad: v": each frame's bytes stand on their own.
  const std::string field = std::string("\x00\x05x-pad\x01v", 9);
  std::string block = H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_NONE, 1, caller.RequestBlock());
  for (int i = 0; i < 100; ++i) block += H2Frame(NGHTTP2_CONTINUATION, NGHTTP2_FLAG_NONE, 1, field);
  ASSERT_TRUE(caller.Greet());
  caller.Send(block);  // the server may close before it has read them all
  caller.Read(absl::Seconds(10));
  EXPECT_TRUE(caller.closed());
  EXPECT_EQ(observer_.Refused(CallRefusal::kContinuationFlood), 1);
  ExpectAnotherCallerServed();
}

// Metadata that HPACK makes small on the wire and large once decoded (one 3,000-byte
// field in the dynamic table, then 1,000 one-byte references to it: 3 MB) is refused at
// the header list limit like any other: nothing of it is held past 16 KiB.
TEST_F(LoopHostileCallerTest, AnHpackBombIsRefusedAtTheHeaderListLimitAndCounted) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  // nghttp2's client would refuse to send it (it bounds a block by its decoded size).
  const std::string block =
      caller.RequestBlock(RawHeaders(1000, {"x-bomb", std::string(3000, 'b')}));
  ASSERT_LT(block.size(), 16384u);  // one frame of the default size
  ASSERT_TRUE(caller.Greet());
  ASSERT_TRUE(caller.Send(
      H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, block)));
  const auto frames = caller.Read(absl::Seconds(10), [](const ReadFrame& frame) {
    return frame.stream_id == 1 && frame.type == NGHTTP2_HEADERS;
  });
  ASSERT_FALSE(frames.empty());
  ASSERT_EQ(frames.back().type, NGHTTP2_HEADERS);
  const RawHeaders answer = caller.Decode(frames.back().payload);
  EXPECT_NE(std::find(answer.begin(), answer.end(),
                      std::pair<std::string, std::string>("grpc-status", "8")),  // RESOURCE_EXHAUSTED
            answer.end());
  EXPECT_EQ(observer_.Refused(CallRefusal::kMetadataTooLarge), 1);
  ExpectAnotherCallerServed();
}

// A caller whose TCP window shuts (it reads nothing, from a small receive buffer) with a
// FetchStream of an endless body under way: the stream's reset at its deadline can never
// reach it, since the server's write waits for the caller, so ten seconds later the
// connection is closed and counted, and the fetch lets go of its upstream connection.
TEST_F(LoopHostileCallerTest, ACallerThatTakesNoBytesPastItsStreamsDeadlineIsClosed) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(caller.connected());
  // Windows as large as HTTP/2 allows: only TCP holds the server back.
  const std::string large_window = std::string("\x00\x04", 2) + BigEndian32Bytes(0x7fffffff);
  const std::string message = Framed(faults().Url("/endless-body"));
  ASSERT_TRUE(caller.Send(
      std::string(kClientPreface) + H2Frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_NONE, 0, large_window) +
      SettingsAckFrame() +
      H2Frame(NGHTTP2_WINDOW_UPDATE, NGHTTP2_FLAG_NONE, 0, BigEndian32Bytes(0x7fffffff - 65535)) +
      H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1,
              caller.RequestBlock({{"grpc-timeout", "2S"}}, "/egress.v1.Egress/FetchStream")) +
      H2Frame(NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, message)));
  ASSERT_TRUE(WaitFor([&] { return faults().open_connections() == 1; }));
  EXPECT_TRUE(WaitFor([&] { return observer_.Refused(CallRefusal::kStalledCaller) == 1; },
                      absl::Seconds(40)));
  EXPECT_TRUE(WaitFor([&] { return faults().open_connections() == 0; }))
      << "the upstream connection is still held";
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
  ExpectAnotherCallerServed();
}

// A caller that keeps sending and reads nothing makes the server queue frames for it,
// here a REFUSED_STREAM for each stream past the 100 it may open (it never acknowledges
// that limit, so each is refused rather than its connection ended): once its writes wait
// for the caller with more than 1,000 frames queued, the server stops reading, and TCP
// holds the caller back instead of the queue growing without bound.
TEST_F(LoopHostileCallerTest, ACallerThatSendsWithoutReadingIsHeldBackAndItsQueueBounded) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(caller.connected());
  std::string opening = std::string(kClientPreface) + SettingsFrame();
  int32_t id = 1;
  for (; id <= 199; id += 2) {
    opening += H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, id, caller.RequestBlock());
  }
  ASSERT_TRUE(caller.Send(opening));
  // Without the bound the server reads on (and queues a refusal for each): 100 MB go.
  size_t sent = 0;
  bool held_back = false;
  while (!held_back && sent < (100u << 20)) {
    std::string batch;
    for (int i = 0; i < 1000; ++i, id += 2) {
      batch += H2Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, id, caller.RequestBlock());
    }
    held_back = !caller.SendUnlessStalled(batch, absl::Seconds(2), &sent);
  }
  EXPECT_TRUE(held_back) << "the server read " << sent << " bytes from a caller that reads none";
  EXPECT_LT(observer_.Refused(CallRefusal::kTooManyStreams), 1'000'000);
  ExpectAnotherCallerServed();
}

// A caller that sends PINGs and never reads their acknowledgements PINGs too often:
// keepalive enforcement ends it at its third (GOAWAY ENHANCE_YOUR_CALM too_many_pings),
// long before the server's bound of 1,000 unsent acknowledgements (ping_flood), and the
// connection is counted once, under the first reason.
TEST_F(LoopHostileCallerTest, APingFloodFromACallerThatDoesNotReadIsClosedAndCounted) {
  StartLoops();
  ExpectFloodClosed(PingFrame(), CallRefusal::kTooManyPings);
  ExpectAnotherCallerServed();
}

TEST_F(LoopHostileCallerTest, ASettingsFloodFromACallerThatDoesNotReadIsClosedAndCounted) {
  StartLoops();
  ExpectFloodClosed(SettingsFrame(), CallRefusal::kSettingsFlood);
  ExpectAnotherCallerServed();
}

// A SETTINGS frame of more than 32 entries is refused at once: GOAWAY ENHANCE_YOUR_CALM.
TEST_F(LoopHostileCallerTest, ASettingsFrameOfTooManyEntriesGetsEnhanceYourCalm) {
  StartLoops();
  H2FrameConnection caller(server_->grpc_port());
  ASSERT_TRUE(caller.connected());
  std::string entries;
  for (int i = 0; i < 33; ++i) {
    entries += std::string("\x00\x03\x00\x00\x00\x64", 6);  // MAX_CONCURRENT_STREAMS 100
  }
  ASSERT_TRUE(caller.Send(std::string(kClientPreface) + SettingsFrame() +
                          H2Frame(NGHTTP2_SETTINGS, NGHTTP2_FLAG_NONE, 0, entries)));
  ExpectGoaway(caller, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(observer_.Refused(CallRefusal::kSettingsFlood), 1);
  EXPECT_EQ(observer_.Refused(CallRefusal::kProtocolError), 0);
  ExpectAnotherCallerServed();
}

// Past --grpc_max_connections (here 2) a new connection is closed as it is accepted,
// before a byte of HTTP/2; once a connection closes, its slot serves the next caller.
TEST_F(LoopHostileCallerTest, AConnectionPastTheConnectionLimitIsClosedAtOnceAndCounted) {
  caller_limits_.max_connections = 2;
  caller_limits_.idle_eviction_age = absl::InfiniteDuration();  // the two greeted stay
  StartLoops();
  const int port = server_->grpc_port();
  auto first = std::make_unique<H2FrameConnection>(port);
  H2FrameConnection second(port);
  for (H2FrameConnection* caller : {first.get(), &second}) {
    ASSERT_TRUE(caller->Greet());
    // The server acknowledged the caller's SETTINGS: it is served, its preface is in.
    ASSERT_FALSE(caller->Read(absl::Seconds(10), IsSettingsAck).empty());
  }
  H2FrameConnection third(port);
  ASSERT_TRUE(third.connected());
  third.Greet();  // may find the connection closed already
  const auto frames = third.Read(absl::Seconds(10));
  EXPECT_TRUE(third.closed());
  EXPECT_TRUE(frames.empty());
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyConnections), 1);
  first.reset();
  EXPECT_TRUE(WaitFor([&] {
    const auto answer = RawFetch();
    return answer.ok() && answer->Field("grpc-status") == "0";
  }));
}

// When every slot (here 2) is taken, a new connection takes the slot of the oldest one that
// has not sent its client preface yet (here at once; 1 s after its accept by default),
// which is closed and counted: connections that say nothing cannot lock out callers that
// speak at once. One that sent it stays.
TEST_F(LoopHostileCallerTest, ASilentConnectionGivesItsSlotToTheNextCallerWhenAllAreTaken) {
  caller_limits_.max_connections = 2;
  caller_limits_.eviction_age = absl::ZeroDuration();  // 1 s by default
  StartLoops();
  const int port = server_->grpc_port();
  H2FrameConnection greeted(port);
  ASSERT_TRUE(greeted.Greet());
  ASSERT_FALSE(greeted.Read(absl::Seconds(10), IsSettingsAck).empty());
  H2FrameConnection silent(port);
  // The server's SETTINGS: it is accepted and holds the other slot.
  ASSERT_FALSE(silent.Read(absl::Seconds(10), [](const ReadFrame& frame) {
    return frame.type == NGHTTP2_SETTINGS;
  }).empty());
  ExpectAnotherCallerServed();
  silent.Read(absl::Seconds(10));
  EXPECT_TRUE(silent.closed());
  EXPECT_EQ(observer_.Refused(CallRefusal::kPrefaceEvicted), 1);
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyConnections), 0);
  EXPECT_EQ(observer_.Refused(CallRefusal::kPrefaceTimeout), 0);
  ASSERT_TRUE(greeted.Send(PingFrame()));
  ASSERT_FALSE(greeted.Read(absl::Seconds(10), [](const ReadFrame& frame) {
    return frame.type == NGHTTP2_PING;
  }).empty());
  EXPECT_FALSE(greeted.closed());
}

// When every slot (here 3) is taken and each connection sent its preface, a new one takes
// the slot of the connection that has had no call open for longest (here at once; 10 s
// by default), which is sent GOAWAY and closed, and counted: a caller that greets and
// then holds its connections idle cannot lock out callers that make calls. A request
// whose headers came and whose message never does is no call; a health Watch is, and
// its connection, the oldest, is not evicted.
TEST_F(LoopHostileCallerTest, AnIdleConnectionGivesItsSlotToTheNextCallerWhenAllAreTaken) {
  caller_limits_.max_connections = 3;
  caller_limits_.idle_eviction_age = absl::ZeroDuration();
  StartLoops();
  const int port = server_->grpc_port();
  auto watching = RawGrpcConnection::Open(port);
  ASSERT_TRUE(watching.ok()) << watching.status();
  const int32_t watch = (*watching)->Start("/grpc.health.v1.Health/Watch",
                                           dataplane::FrameMessage(""), {});
  ASSERT_TRUE((*watching)->Pump([&] { return (*watching)->head_seen(watch); },
                                absl::Seconds(10)));
  auto half = RawGrpcConnection::Open(port);
  ASSERT_TRUE(half.ok()) << half.status();
  (*half)->Start("/egress.v1.Egress/Fetch", "", {}, /*end_request=*/false);
  (*half)->Pump([] { return false; }, absl::Milliseconds(100));
  auto checked = RawGrpcConnection::Open(port);
  ASSERT_TRUE(checked.ok()) << checked.status();
  const int32_t check = (*checked)->Start("/grpc.health.v1.Health/Check",
                                          dataplane::FrameMessage(""), {});
  ASSERT_TRUE((*checked)->Wait(check, absl::Seconds(10)).ok());  // a call, over: idle since
  ExpectAnotherCallerServed();
  EXPECT_TRUE((*half)->Pump([&] { return (*half)->ended(); }, absl::Seconds(10)))
      << "the connection idle for longest was not closed";
  EXPECT_GE((*half)->goaways(), 1) << "closed without a GOAWAY";
  EXPECT_EQ(observer_.Refused(CallRefusal::kIdleEvicted), 1);
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyConnections), 0);
  (*watching)->Pump([] { return false; }, absl::Milliseconds(200));
  EXPECT_FALSE((*watching)->ended());
  EXPECT_FALSE((*watching)->closed(watch));
  (*checked)->Pump([] { return false; }, absl::Milliseconds(200));
  EXPECT_FALSE((*checked)->ended());
}

// One source's connections take at most --grpc_max_connections_per_source (here 2) of the
// slots: a host holding idle connections cannot lock the others out.
TEST_F(LoopHostileCallerTest, OneSourcePastItsShareOfConnectionsIsClosedAndAnotherServed) {
  caller_limits_.max_connections_per_source = 2;
  StartLoops();
  const int port = server_->grpc_port();
  constexpr uint32_t kOtherHost = 0x7f000002;  // 127.0.0.2
  const auto served = [](H2FrameConnection& caller) {
    return caller.Greet() && !caller.Read(absl::Seconds(10), [](const ReadFrame& frame) {
                                     return frame.type == NGHTTP2_SETTINGS;
                                   }).empty();
  };
  H2FrameConnection first(port), second(port);
  ASSERT_TRUE(served(first));
  ASSERT_TRUE(served(second));
  H2FrameConnection third(port);
  third.Greet();  // may find the connection closed already
  EXPECT_TRUE(third.Read(absl::Seconds(10)).empty());
  EXPECT_TRUE(third.closed());
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyConnections), 1);
  H2FrameConnection other_host(port, 0, kOtherHost);
  EXPECT_TRUE(served(other_host)) << "a caller from another host was refused too";
  EXPECT_EQ(observer_.Refused(CallRefusal::kTooManyConnections), 1);
}

// A caller that sends part of the preface and then nothing (a slowloris) holds its socket
// only until the handshake timeout (here 1 s; 120 s by default, gRPC's library server's);
// a caller that sent its preface before is not touched by it.
TEST_F(LoopHostileCallerTest, AConnectionThatNeverFinishesItsPrefaceIsClosedAtTheTimeout) {
  caller_limits_.preface_timeout = absl::Seconds(1);
  StartLoops();
  H2FrameConnection greeted(server_->grpc_port());
  ASSERT_TRUE(greeted.Greet());
  ASSERT_FALSE(greeted.Read(absl::Seconds(10), [](const ReadFrame& frame) {
    return frame.type == NGHTTP2_SETTINGS;
  }).empty());
  H2FrameConnection slow(server_->grpc_port());
  ASSERT_TRUE(slow.Send(std::string(kClientPreface).substr(0, 10)));
  slow.Read(absl::Seconds(20));
  EXPECT_TRUE(slow.closed());
  EXPECT_EQ(observer_.Refused(CallRefusal::kPrefaceTimeout), 1);
  EXPECT_EQ(observer_.Refused(CallRefusal::kProtocolError), 0);
  // `greeted` connected first: its timeout, had it been left running, passed before
  // `slow`'s did. It still answers a PING.
  ASSERT_TRUE(greeted.Send(PingFrame()));
  const auto frames = greeted.Read(absl::Seconds(10), [](const ReadFrame& frame) {
    return frame.type == NGHTTP2_PING;
  });
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().type, NGHTTP2_PING);
  EXPECT_FALSE(greeted.closed());
  ExpectAnotherCallerServed();
}

// A caller whose flow-control window never opens holds its answer in egressd only until
// the call's deadline (here limits.max_timeout, 1 s, as no grpc-timeout is sent): the
// stream is reset, and the fetch gives back its slot (limits.max_concurrent_fetches, here
// 1, serves the next caller) and its buffered body bytes.
TEST_F(LoopHostileCallerTest, AWindowThatNeverOpensIsResetAtTheDeadlineAndTheFetchsSlotComesBack) {
  StartLoops([](egress::v1::Config& c) {
    c.mutable_limits()->mutable_max_timeout()->set_seconds(1);
    c.mutable_limits()->mutable_default_timeout()->set_seconds(1);
    c.mutable_limits()->set_max_concurrent_fetches(1);
  });
  auto connection = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(connection.ok()) << connection.status();
  const int32_t id = (*connection)->Start("/egress.v1.Egress/FetchStream",
                                          Framed(nginx().HttpUrl("/chunked/300k")), {});
  const auto answer = (*connection)->Wait(id, absl::Seconds(20));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->error_code, uint32_t{NGHTTP2_CANCEL});
  EXPECT_TRUE(answer->data.empty());
  EXPECT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes.load() == 0; }));
  ExpectAnotherCallerServed();
}

}  // namespace
}  // namespace egress::testing

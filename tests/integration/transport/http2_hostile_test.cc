// The HTTP/2 session against servers that do what nginx will not: GOAWAY mid-load,
// refused and reset streams, floods of SETTINGS, PING and CONTINUATION frames, header
// blocks past the limits, a window that never opens, a server that never reads. Each
// ends in a named, bounded failure; what is not the connection's fault leaves it usable.
// The servers are scripts over raw frames (tests/support/scripted_h2_server.h), h2c.
#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/error_reason.h"
#include "service/transport/http2/session.h"
#include "service/transport/http/request.h"
#include "tests/support/counting_observer.h"
#include "tests/support/http2_client.h"
#include "tests/support/scripted_h2_server.h"
#include "tests/support/wait_for.h"

namespace egress::transport::http2 {
namespace {

using ::testing::HasSubstr;
using testing::CountingObserver;
using testing::H2Peer;
using testing::H2Request;
using testing::Http2Client;
using testing::Scaled;
using testing::ScriptedH2Server;
namespace h2 = testing::h2;

std::string ReasonName(const absl::Status& status) {
  const auto reason = ReasonOf(status);
  return reason ? reason->reason : "";
}


// The handshake and the client's first request; none if either failed.
std::optional<H2Request> FirstRequest(H2Peer& peer) {
  if (!peer.Handshake()) return std::nullopt;
  return peer.ReadRequest();
}

// Answers the client's first PING: after it, the client has the server's SETTINGS.
void AnswerPing(H2Peer& peer) {
  for (auto frame = peer.ReadFrame(); frame; frame = peer.ReadFrame()) {
    if (frame->type != h2::kPing) continue;
    peer.WriteFrame(h2::kPing, h2::kAck, 0, frame->payload);
    return;
  }
}

// The script's end when the connection is to carry on: the next request gets "ok".
void AnswerTheNextRequest(H2Peer& peer) {
  if (auto next = peer.ReadRequest()) peer.Respond(next->stream_id, 200, "ok");
  peer.ReadUntilClosed();
}

// What a write batch may hold: 64 KiB gathered, and a frame begun past it.
constexpr uint64_t kMaxWriteBuffer = 2 * (64 * 1024 + 16 * 1024 + 9);

class Http2HostileTest : public ::testing::Test {
 protected:
  std::unique_ptr<Http2Client> Connect(const ScriptedH2Server& server,
                                       SessionLimits limits = {}) {
    Http2Client::Options options;
    options.host = "127.0.0.1";
    options.limits = limits;
    auto client = Http2Client::Connect(server.port(), options, observer_);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The session is still usable: a request gets the script's "ok" (AnswerTheNextRequest).
  void ExpectTheConnectionCarriesOn(Http2Client& client) {
    auto next = client.Get("/next");
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(*next, "ok");
    EXPECT_EQ(client.unusable_events(), 0);
  }

  // Waits until the session is unusable, then returns why.
  absl::Status UnusableStatus(const Http2Client& client) {
    testing::WaitFor([&] { return client.unusable_events() != 0; }, absl::Seconds(10));
    EXPECT_EQ(client.unusable_events(), 1);
    return client.unusable_status();
  }

  CountingObserver observer_;
};

TEST_F(Http2HostileTest, GoawayFinishesTheStreamsItCoversAndReportsTheOthersNotProcessed) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (!peer.Handshake()) return;
    std::vector<int32_t> ids;
    for (int i = 0; i < 4; ++i) {
      if (auto request = peer.ReadRequest()) ids.push_back(request->stream_id);
    }
    if (ids.size() != 4) return;
    peer.Goaway(ids[1], h2::kNoError, "restarting");
    peer.Respond(ids[0], 200, "one");
    // Within the initial stream window (16 KiB): this server ignores flow control.
    peer.Respond(ids[1], 200, std::string(16000, '2'));
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  std::vector<Http2Client::Exchange> exchanges;
  for (int i = 0; i < 4; ++i) exchanges.push_back(client->Open("GET", absl::StrCat("/", i)));

  auto first = exchanges[0].head.get();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(client->ReadAll(*exchanges[0].stream).value_or("?"), "one");
  auto second = exchanges[1].head.get();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(client->ReadAll(*exchanges[1].stream).value_or("?"), std::string(16000, '2'));
  for (int i : {2, 3}) {
    auto head = exchanges[i].head.get();
    EXPECT_TRUE(absl::IsUnavailable(head.status())) << head.status();
    EXPECT_TRUE(WasNotProcessed(head.status())) << head.status();
    EXPECT_THAT(head.status().message(), HasSubstr("GOAWAY"));
  }
  const absl::Status why = UnusableStatus(*client);
  EXPECT_THAT(why.message(), HasSubstr("GOAWAY (NO_ERROR, last stream 3, \"restarting\")"));
  EXPECT_FALSE(client->session()->CanOpenStream());
  auto late = client->Open("GET", "/late");
  EXPECT_TRUE(WasNotProcessed(late.head.get().status()));
  // Its last stream done, the session ends and closes the connection.
  EXPECT_TRUE(server.WaitForScripts());
}

TEST_F(Http2HostileTest, RefusedStreamIsNotProcessedAndTheConnectionCarriesOn) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (!peer.Handshake()) return;
    auto refused = peer.ReadRequest();
    if (!refused) return;
    peer.WriteFrame(h2::kRstStream, 0, refused->stream_id, H2Peer::Uint32(h2::kRefusedStream));
    AnswerTheNextRequest(peer);
  });
  auto client = Connect(server);
  auto refused = client->Open("POST", "/refused", "body").head.get();
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_TRUE(WasNotProcessed(refused.status()));
  EXPECT_THAT(refused.status().message(), HasSubstr("refused the stream"));
  ExpectTheConnectionCarriesOn(*client);
}

TEST_F(Http2HostileTest, StreamResetAfterItsHeadIsUnavailableAndMayHaveBeenProcessed) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    peer.WriteHead(request->stream_id, "200");
    peer.WriteFrame(h2::kData, 0, request->stream_id, "partial");
    peer.WriteFrame(h2::kRstStream, 0, request->stream_id, H2Peer::Uint32(0x2));
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  auto exchange = client->Open("GET", "/reset");
  auto head = exchange.head.get();  // it came whole before the reset
  ASSERT_TRUE(head.ok()) << head.status();
  auto body = client->ReadAll(*exchange.stream);
  EXPECT_TRUE(absl::IsUnavailable(body.status())) << body.status();
  EXPECT_EQ(ReasonName(body.status()), "UPSTREAM_STREAM_RESET");
  EXPECT_FALSE(WasNotProcessed(body.status()));
  EXPECT_THAT(body.status().message(), HasSubstr("INTERNAL_ERROR"));
}

TEST_F(Http2HostileTest, ServerClosingMidBodyFailsTheRead) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    peer.WriteHead(request->stream_id, "200");
    peer.WriteFrame(h2::kData, 0, request->stream_id, "partial");
  });  // the script ends: the connection closes
  auto client = Connect(server);
  auto exchange = client->Open("GET", "/cut");
  ASSERT_TRUE(exchange.head.get().ok());
  auto body = client->ReadAll(*exchange.stream);
  EXPECT_TRUE(absl::IsUnavailable(body.status())) << body.status();
  EXPECT_EQ(ReasonName(body.status()), "UPSTREAM_CLOSED");
}

TEST_F(Http2HostileTest, SettingsFloodEndsTheSessionNamingTheLimit) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (!FirstRequest(peer)) return;
    std::string flood;
    for (int i = 0; i < 5000; ++i) flood += H2Peer::Settings({});
    peer.Write(flood);
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  auto head = client->Open("GET", "/flood").head.get();
  EXPECT_TRUE(absl::IsUnavailable(head.status())) << head.status();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_LIMIT_EXCEEDED");
  EXPECT_THAT(head.status().message(), HasSubstr("flood"));
  EXPECT_EQ(ReasonName(UnusableStatus(*client)), "UPSTREAM_LIMIT_EXCEEDED");
  EXPECT_LE(client->session()->stats().peak_write_buffer_bytes, kMaxWriteBuffer);
  EXPECT_TRUE(server.WaitForScripts());
}

TEST_F(Http2HostileTest, SettingsFrameWithTooManyEntriesEndsTheSession) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (!FirstRequest(peer)) return;
    std::vector<std::pair<uint16_t, uint32_t>> entries(100, {0x99, 1});  // unknown ids
    peer.Write(H2Peer::Settings(entries));
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  auto head = client->Open("GET", "/settings").head.get();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_LIMIT_EXCEEDED") << head.status();
  EXPECT_THAT(head.status().message(), HasSubstr("too many setting entries"));
}

TEST_F(Http2HostileTest, PingFloodFromAServerThatReadsNothingEndsTheSession) {
  ScriptedH2Server server(
      [](H2Peer& peer) {
        if (!FirstRequest(peer)) return;
        std::string flood;
        for (int i = 0; i < 20000; ++i) flood += H2Peer::Frame(h2::kPing, 0, 0, "pingping");
        // Reading none of the answers, until the client gives up: once the socket's
        // buffers are full, unsent acknowledgements pile up in the client.
        for (int i = 0; i < 1000 && peer.Write(flood); ++i) {
        }
      },
      /*receive_buffer_bytes=*/4096);
  auto client = Connect(server);
  const absl::Time start = absl::Now();
  auto head = client->Open("GET", "/pings").head.get();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_LIMIT_EXCEEDED") << head.status();
  EXPECT_THAT(head.status().message(), HasSubstr("flood"));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(2)));
  EXPECT_LE(client->session()->stats().peak_write_buffer_bytes, kMaxWriteBuffer);
}

TEST_F(Http2HostileTest, PingsFromAServerThatReadsAreAnswered) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    int answered = 0;
    for (int i = 0; i < 200; ++i) {
      peer.WriteFrame(h2::kPing, 0, 0, "pingping");
      for (auto frame = peer.ReadFrame(); frame; frame = peer.ReadFrame()) {
        if (frame->type == h2::kPing && (frame->flags & h2::kAck)) break;
      }
      ++answered;
    }
    peer.Respond(request->stream_id, 200, std::to_string(answered));
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  auto exchange = client->Open("GET", "/pings");
  ASSERT_TRUE(exchange.head.get().ok());
  EXPECT_EQ(client->ReadAll(*exchange.stream).value_or("?"), "200");
}

TEST_F(Http2HostileTest, EndlessContinuationFramesEndTheSession) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    peer.WriteFrame(h2::kHeaders, 0, request->stream_id, H2Peer::HeaderBlock({{":status", "200"}}));
    const std::string empty = H2Peer::Frame(h2::kContinuation, 0, request->stream_id, "");
    std::string flood;
    for (int i = 0; i < 1000; ++i) flood += empty;
    for (int i = 0; i < 100 && peer.Write(flood); ++i) {
    }
  });
  auto client = Connect(server);
  auto head = client->Open("GET", "/continuations").head.get();
  EXPECT_TRUE(absl::IsUnavailable(head.status())) << head.status();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_LIMIT_EXCEEDED");
  EXPECT_THAT(head.status().message(), HasSubstr("too many CONTINUATION frames"));
}

TEST_F(Http2HostileTest, HugeHeaderBlockFailsItsStreamThenEndsTheSession) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    // Frames of 16,000 bytes of fields without end: past 64 KiB decoded in the fifth.
    peer.WriteFrame(h2::kHeaders, 0, request->stream_id, H2Peer::HeaderBlock({{":status", "200"}}));
    for (int i = 0; i < 20; ++i) {
      peer.WriteFrame(h2::kContinuation, 0, request->stream_id,
                      H2Peer::HeaderBlock({{absl::StrCat("x-big-", i), std::string(15980, 'h')}}));
    }
    peer.ReadUntilClosed();
  });
  SessionLimits limits;
  auto client = Connect(server, limits);
  auto head = client->Open("GET", "/big-block").head.get();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_LIMIT_EXCEEDED") << head.status();
  // The stream went past the decoded limit first, then the block past 8 CONTINUATIONs.
  EXPECT_THAT(head.status().message(), HasSubstr("response headers over the limit of 65536"));
  const absl::Status why = UnusableStatus(*client);
  EXPECT_EQ(ReasonName(why), "UPSTREAM_LIMIT_EXCEEDED") << why;
  EXPECT_THAT(why.message(), HasSubstr("too many CONTINUATION frames"));
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kResponseHead), 1);
}

TEST_F(Http2HostileTest, DecodedHeadersPastTheLimitFailTheStreamOnly) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    // One field of 4,000 bytes into HPACK's dynamic table, then named again by its index
    // 20 times: 4 KB on the wire, 80 KB decoded.
    std::string block = H2Peer::HeaderBlock({{":status", "200"}});
    block += std::string("\x40\x05x-big\x7f", 8);  // literal, incremental indexing
    std::string length;  // 4000 - 127 as an HPACK integer's continuation bytes
    for (size_t rest = 4000 - 127; ; rest >>= 7) {
      if (rest < 128) {
        length.push_back(static_cast<char>(rest));
        break;
      }
      length.push_back(static_cast<char>(0x80 | (rest & 0x7f)));
    }
    block += length + std::string(4000, 'v');
    for (int i = 0; i < 20; ++i) block.push_back(static_cast<char>(0xbe));  // index 62
    peer.WriteFrame(h2::kHeaders, h2::kEndHeaders | h2::kEndStream, request->stream_id, block);
    AnswerTheNextRequest(peer);
  });
  auto client = Connect(server);
  auto head = client->Open("GET", "/bomb").head.get();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_LIMIT_EXCEEDED") << head.status();
  EXPECT_THAT(head.status().message(), HasSubstr("response headers over the limit"));
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kResponseHead), 1);
  ExpectTheConnectionCarriesOn(*client);
}

TEST_F(Http2HostileTest, InterimResponsesAreSkippedUpToTheLimit) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    for (int i = 0; i < 2; ++i) peer.WriteHead(request->stream_id, "103", 0, {{"link", "</a>"}});
    peer.Respond(request->stream_id, 200, "final");
    auto endless = peer.ReadRequest();
    if (!endless) return;
    for (int i = 0; i < 6; ++i) peer.WriteHead(endless->stream_id, "103", 0, {{"link", "</a>"}});
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  auto exchange = client->Open("GET", "/interim");
  auto head = exchange.head.get();
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status_code, 200);
  EXPECT_EQ(client->ReadAll(*exchange.stream).value_or("?"), "final");

  auto endless = client->Open("GET", "/endless-interim").head.get();
  EXPECT_EQ(ReasonName(endless.status()), "UPSTREAM_LIMIT_EXCEEDED") << endless.status();
  EXPECT_THAT(endless.status().message(), HasSubstr("more than 5 interim (1xx) responses"));
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kInterimResponses), 1);
}

TEST_F(Http2HostileTest, InvalidResponseHeadFailsTheStreamOnly) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    // Upper-case field names are malformed in HTTP/2 (RFC 9113 8.2.1).
    peer.WriteHead(request->stream_id, "200", h2::kEndStream, {{"X-Upper", "1"}});
    AnswerTheNextRequest(peer);
  });
  auto client = Connect(server);
  auto head = client->Open("GET", "/invalid").head.get();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_INVALID_RESPONSE") << head.status();
  ExpectTheConnectionCarriesOn(*client);
}

TEST_F(Http2HostileTest, StatusCodeBelow100IsAnInvalidResponse) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    // nghttp2 takes any three digits (found by fuzz/http2_response_fuzzer.cc).
    peer.WriteHead(request->stream_id, "050", h2::kEndStream);
    AnswerTheNextRequest(peer);
  });
  auto client = Connect(server);
  auto head = client->Open("GET", "/050").head.get();
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_INVALID_RESPONSE") << head.status();
  EXPECT_THAT(head.status().message(), HasSubstr("status code 50 is below 100"));
  ExpectTheConnectionCarriesOn(*client);
}

TEST_F(Http2HostileTest, DataPastTheStreamWindowFailsTheStreamHavingBufferedOneWindow) {
  ScriptedH2Server server([](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    peer.WriteHead(request->stream_id, "200");
    const std::string piece(16384, 'd');
    for (int i = 0; i < 40; ++i) peer.WriteFrame(h2::kData, 0, request->stream_id, piece);
    AnswerTheNextRequest(peer);
  });
  SessionLimits limits;
  limits.stream_window_bytes = 64 * 1024;
  auto client = Connect(server, limits);
  auto exchange = client->Open("GET", "/overflow");
  ASSERT_TRUE(exchange.head.get().ok());
  absl::SleepFor(absl::Milliseconds(100));  // unread, while 640 KB come
  auto body = client->ReadAll(*exchange.stream);
  EXPECT_EQ(ReasonName(body.status()), "UPSTREAM_INVALID_RESPONSE") << body.status();
  // Unread, the stream's window is still its first (SETTINGS_INITIAL_WINDOW_SIZE).
  EXPECT_THAT(body.status().message(), HasSubstr("flow-control window of 16384 bytes"));
  EXPECT_LE(client->session()->stats().peak_buffered_body_bytes,
            limits.initial_stream_window_bytes);
  // The rest of the stream's DATA was dropped, and its windows given back.
  ExpectTheConnectionCarriesOn(*client);
}

TEST_F(Http2HostileTest, WindowThatNeverOpensEndsTheUploadAtItsDeadline) {
  std::atomic<bool> reset_seen{false};
  ScriptedH2Server server([&](H2Peer& peer) {
    if (!peer.Handshake({{h2::kSettingsInitialWindowSize, 16384}})) return;
    AnswerPing(peer);
    auto upload = peer.ReadRequest();
    if (!upload) return;
    // No WINDOW_UPDATE, ever: wait for the client to give up on the stream.
    for (auto frame = peer.ReadFrame(); frame; frame = peer.ReadFrame()) {
      if (frame->type == h2::kRstStream && frame->stream_id == upload->stream_id) break;
    }
    reset_seen = true;
    AnswerTheNextRequest(peer);
  });
  auto client = Connect(server);
  ASSERT_TRUE(client->Ping(absl::Seconds(5)).ok());  // the server's SETTINGS came before
  const absl::Time start = absl::Now();
  auto head = client->Open("POST", "/upload", std::string(100 * 1024, 'u'),
                           absl::Now() + absl::Milliseconds(300))
                  .head.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(head.status())) << head.status();
  EXPECT_THAT(head.status().message(),
              HasSubstr("sending the request body to http://127.0.0.1:"));
  EXPECT_THAT(head.status().message(),
              HasSubstr("16384 of 102400 bytes sent; the server's flow-control window stayed "
                        "closed"));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(2)));
  ExpectTheConnectionCarriesOn(*client);
  EXPECT_TRUE(reset_seen);
}

TEST_F(Http2HostileTest, ServerThatNeverReadsEndsTheSessionAfterTheWriteTimeout) {
  std::atomic<bool> done{false};
  ScriptedH2Server server(
      [&](H2Peer& peer) {
        // Windows as large as HTTP/2 allows: nothing but the socket holds the body back.
        if (!peer.Handshake({{h2::kSettingsInitialWindowSize, 0x7fffffff}})) return;
        peer.WriteFrame(h2::kWindowUpdate, 0, 0, H2Peer::Uint32(0x7fffffff - 65535));
        while (!done) absl::SleepFor(absl::Milliseconds(10));  // reads nothing more
      },
      /*receive_buffer_bytes=*/4096);
  SessionLimits limits;
  limits.write_timeout = absl::Milliseconds(500);
  auto client = Connect(server, limits);
  const absl::Time start = absl::Now();
  auto head = client->Open("POST", "/upload", std::string(64 << 20, 'u'),
                           absl::Now() + absl::Seconds(30))
                  .head.get();
  done = true;
  EXPECT_EQ(ReasonName(head.status()), "UPSTREAM_TIMEOUT") << head.status();
  EXPECT_THAT(head.status().message(), HasSubstr("has not read what egress wrote to it for 500ms"));
  EXPECT_LT(absl::Now() - start, Scaled(absl::Seconds(5)));
  const SessionStats stats = client->session()->stats();
  EXPECT_LE(stats.peak_write_buffer_bytes, kMaxWriteBuffer);
  std::cout << "server that never reads a 64 MiB upload: at most " << stats.peak_write_buffer_bytes
            << " bytes waiting to be written\n";
}

TEST_F(Http2HostileTest, ServersConcurrencyLimitBoundsOpenStreams) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (!peer.Handshake({{h2::kSettingsMaxConcurrentStreams, 2}})) return;
    AnswerPing(peer);
    auto first = peer.ReadRequest();
    auto second = peer.ReadRequest();
    if (!first || !second) return;
    peer.Respond(first->stream_id, 200, "first");
    peer.Respond(second->stream_id, 200, "second");
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  ASSERT_TRUE(client->Ping(absl::Seconds(5)).ok());  // the server's SETTINGS came before
  EXPECT_TRUE(client->session()->CanOpenStream());
  auto first = client->Open("GET", "/1");
  auto second = client->Open("GET", "/2");
  EXPECT_FALSE(client->session()->CanOpenStream());
  auto third = client->Open("GET", "/3").head.get();
  EXPECT_TRUE(WasNotProcessed(third.status())) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("no HTTP/2 stream was free"));

  ASSERT_TRUE(first.head.get().ok());
  EXPECT_EQ(client->ReadAll(*first.stream).value_or("?"), "first");
  ASSERT_TRUE(second.head.get().ok());
  EXPECT_EQ(client->ReadAll(*second.stream).value_or("?"), "second");
  testing::WaitFor([&] { return client->stream_closed_events() >= 2; });
  EXPECT_EQ(client->stream_closed_events(), 2);  // the third never had a place
  EXPECT_TRUE(client->session()->CanOpenStream());
}

TEST_F(Http2HostileTest, PingWithoutAnswerTimesOutAndTheSessionStays) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (peer.Handshake()) peer.ReadUntilClosed();  // reads, never answers
  });
  auto client = Connect(server);
  const absl::Status ping = client->Ping(absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(ping)) << ping;
  EXPECT_EQ(ReasonName(ping), "UPSTREAM_TIMEOUT");
  EXPECT_TRUE(client->session()->CanOpenStream());
}

TEST_F(Http2HostileTest, AbandonedSessionLetsGoOfTheCallbacksItHolds) {
  ScriptedH2Server server([](H2Peer& peer) {
    if (peer.Handshake()) peer.ReadUntilClosed();  // never answers
  });
  auto client = Connect(server);
  auto request = MakeRequest("GET", absl::StrCat("http://127.0.0.1:", server.port(), "/never"),
                             {}, "");
  ASSERT_TRUE(request.ok());
  auto token = std::make_shared<int>(0);  // what a caller's callback owns
  auto stream = client->session()->Open(*request, absl::InfiniteFuture(),
                                        [token](absl::StatusOr<ResponseHead>) {});
  client->OnLoop([] {});  // the stream is submitted
  client->StopLoop();     // the transport shuts down under the pending head
  stream.reset();
  EXPECT_EQ(token.use_count(), 2);  // the session's open stream holds the callback
  client->session()->Abandon();
  EXPECT_EQ(token.use_count(), 1);
}

TEST_F(Http2HostileTest, RequestGoesOutAsHttp2Headers) {
  std::promise<H2Request> seen;
  ScriptedH2Server server([&](H2Peer& peer) {
    auto request = FirstRequest(peer);
    if (!request) return;
    auto body = peer.ReadBody(request->stream_id);
    peer.Respond(request->stream_id, 200, body.value_or("?"));
    seen.set_value(*request);
    peer.ReadUntilClosed();
  });
  auto client = Connect(server);
  auto exchange = client->Open("PUT", "/put?x=1", "payload", absl::InfiniteFuture(),
                               {{"X-Custom", " value "}, {"Connection", "keep-alive, x-hop"},
                                {"X-Hop", "1"}, {"TE", "gzip"}, {"Keep-Alive", "timeout=5"}});
  ASSERT_TRUE(exchange.head.get().ok());
  EXPECT_EQ(client->ReadAll(*exchange.stream).value_or("?"), "payload");
  const H2Request request = seen.get_future().get();
  EXPECT_THAT(request.fields,
              ::testing::ElementsAre(
                  std::pair<std::string, std::string>(":method", "PUT"),
                  std::pair<std::string, std::string>(":scheme", "http"),
                  std::pair<std::string, std::string>(":authority",
                                                      absl::StrCat("127.0.0.1:", server.port())),
                  std::pair<std::string, std::string>(":path", "/put?x=1"),
                  std::pair<std::string, std::string>("x-custom", "value"),
                  std::pair<std::string, std::string>("content-length", "7")));
}

}  // namespace
}  // namespace egress::transport::http2

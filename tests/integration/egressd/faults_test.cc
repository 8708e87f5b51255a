// Upstreams that misbehave: each fault gives a precise gRPC code and message; afterwards
// the pool holds no connection to the faulty origin that could be reused in an unknown
// state, the process's open file descriptors are back to their baseline, and a normal
// fetch succeeds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;

class FaultsTest : public EgressFaultsTest {
 protected:
  void SetUp() override {
    StartEgress([](egress::v1::Config& c) {
      c.mutable_transport()->mutable_response_header_timeout()->set_nanos(500'000'000);
      c.mutable_transport()->mutable_connect_timeout()->set_nanos(300'000'000);
      c.mutable_transport()->mutable_tls_handshake_timeout()->set_nanos(300'000'000);
    });
    ExpectHealthy();  // gRPC's own descriptors are open from here on
    RecordBaseline();
  }

  // With a `reason`, the ErrorInfo must name it.
  void ExpectFault(const FetchRequest& request, grpc::StatusCode code, const std::string& words,
                   const std::string& reason = "") {
    FetchResponse response;
    const grpc::Status status = Fetch(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(words));
    if (!reason.empty()) {
      EXPECT_EQ(ErrorInfoOf(status).value_or(google::rpc::ErrorInfo()).reason(), reason);
    }
    EXPECT_EQ(IdleToFaultServer(), 0) << "a connection in an unknown state went back to the pool";
    ExpectRecovered();
  }
};

TEST_F(FaultsTest, ResetDuringTheHeadersIsUnavailable) {
  ExpectFault(Request(faults().Url("/reset-headers")), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("waiting for the response from ", FaultKey(),
                           " failed: Connection reset by peer"));
}

TEST_F(FaultsTest, ResetDuringTheBodyIsUnavailable) {
  ExpectFault(Request(faults().Url("/reset-body")), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("reading the response body from ", FaultKey(),
                           " failed: Connection reset by peer"));
}

TEST_F(FaultsTest, MalformedStatusLineIsUnavailable) {
  ExpectFault(Request(faults().Url("/bad-status")), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("invalid HTTP response from ", FaultKey(), ": bad version"));
}

TEST_F(FaultsTest, StatusCodeBelow100IsUnavailable) {
  ExpectFault(Request(faults().Url("/low-status")), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("invalid HTTP response from ", FaultKey(),
                           ": status code 50 is below 100"),
              "UPSTREAM_INVALID_RESPONSE");
}

TEST_F(FaultsTest, MalformedHeaderIsUnavailable) {
  ExpectFault(Request(faults().Url("/bad-header")), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("invalid HTTP response from ", FaultKey(), ": bad field"));
}

// An upstream past a bound of what egressd reads from it is a broken upstream, like one
// whose chunk lines or trailers never end: UNAVAILABLE, naming the limit.
TEST_F(FaultsTest, HeadersOverTheLimitAreUnavailable) {
  ExpectFault(Request(faults().Url("/huge-headers")), grpc::StatusCode::UNAVAILABLE,
              "exceed the limit of 65536 bytes (transport.max_response_header_bytes)");
  EXPECT_EQ(observer_.LimitHit(transport::UpstreamLimit::kResponseHead), 1);
}

TEST_F(FaultsTest, ContentLengthLongerThanTheBodyIsUnavailable) {
  ExpectFault(Request(faults().Url("/short-body")), grpc::StatusCode::UNAVAILABLE,
              "the server closed the connection before the message ended");
}

// Not a fault: without Content-Length or chunking, the body ends with the connection
// (RFC 9112, 6.3). It used to fail as "stale parser": the parser, done at the end of the
// stream, was given the (empty) rest.
TEST_F(FaultsTest, BodyThatEndsWithTheConnectionIsReadWhole) {
  FetchResponse response;
  const grpc::Status status = Fetch(Request(faults().Url("/close-delimited")), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(response.body(), std::string(100000, 'c'));
  EXPECT_EQ(IdleToFaultServer(), 0);
  ExpectRecovered();
}

TEST_F(FaultsTest, BadChunkSizeIsUnavailable) {
  ExpectFault(Request(faults().Url("/bad-chunk")), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("invalid HTTP response from ", FaultKey(), ": bad chunk"));
}

TEST_F(FaultsTest, ServerThatNeverAnswersHitsTheHeaderTimeout) {
  ExpectFault(Request(faults().Url("/never")), grpc::StatusCode::DEADLINE_EXCEEDED,
              absl::StrCat("waiting for the response from ", FaultKey(),
                           " timed out after 500ms"));
}

TEST_F(FaultsTest, HeadTricklingAByteASecondHitsTheHeaderTimeout) {
  ExpectFault(Request(faults().Url("/slow-head")), grpc::StatusCode::DEADLINE_EXCEEDED,
              "timed out after 500ms");
}

TEST_F(FaultsTest, BodyTricklingAByteASecondHitsTheDeadline) {
  FetchRequest request = Request(faults().Url("/slow-body"));
  request.mutable_timeout()->set_seconds(2);
  ExpectFault(request, grpc::StatusCode::DEADLINE_EXCEEDED,
              "deadline expired while reading the response body");
}

TEST_F(FaultsTest, TlsHandshakeThatFailsIsUnavailable) {
  const std::string origin = absl::StrCat("https://127.0.0.1:", faults().garbage_port());
  ExpectFault(Request(origin + "/"), grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("TLS handshake with ", origin, " failed"));
}

TEST_F(FaultsTest, TlsHandshakeThatStallsHitsTheHandshakeTimeout) {
  const std::string origin = absl::StrCat("https://127.0.0.1:", faults().silent_port());
  ExpectFault(Request(origin + "/"), grpc::StatusCode::DEADLINE_EXCEEDED,
              absl::StrCat("TLS handshake with ", origin, " timed out after 300ms"));
}

// run_in_netns.sh points /etc/resolv.conf at 127.0.0.53, where nothing listens.
TEST_F(FaultsTest, DnsThatFailsIsUnavailable) {
  ExpectFault(Request("http://nowhere.test/"), grpc::StatusCode::UNAVAILABLE,
              "resolving host \"nowhere.test\" for http://nowhere.test:80 failed");
}

TEST_F(FaultsTest, DnsThatNeverAnswersHitsTheConnectTimeout) {
  // A DNS server that takes every query and answers none.
  const int dns = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(53);
  address.sin_addr.s_addr = inet_addr("127.0.0.53");
  ASSERT_EQ(::bind(dns, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ++baseline_fds_;
  FetchResponse response;
  const grpc::Status status = Fetch(Request("http://silent-dns.test/"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("resolving host \"silent-dns.test\" for http://silent-dns.test:80 "
                        "timed out after 300ms"));
  ExpectRecovered();  // the lookup itself gives up after resolv.conf's 1 s
  ::close(dns);
}

// Bytes after the end of a response make the connection's state unknown: the response
// is delivered, the connection is closed.
TEST_F(FaultsTest, BodyLongerThanItsContentLengthClosesTheConnection) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(faults().Url("/long-body")), &response).ok());
  EXPECT_EQ(response.body(), "hello");
  ASSERT_TRUE(Fetch(Request(faults().Url("/ok")), &response).ok());
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kError), 1);
  ExpectRecovered();
}

// A pooled connection the server closed while it idled is found out before the request
// is written to it, so even a POST goes through, once, on a fresh connection.
TEST_F(FaultsTest, ConnectionClosedWhileIdleIsReplacedBeforeSending) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(faults().Url("/close-idle")), &response).ok());
  std::this_thread::sleep_for(Gap(300));
  FetchRequest post = Request(faults().Url("/ok"));
  post.set_method("POST");
  post.set_body("payload");
  ASSERT_TRUE(Fetch(post, &response).ok());
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kStale), 1);
  EXPECT_EQ(observer_.retries, 0);
  EXPECT_EQ(faults().accepted() - accepted_before_, 2);
  ExpectRecovered();
}

// Every pooled connection closed while idle (a server that restarted): the next fetch
// finds each of them out and retires it, asking the pool again from a loop each time
// (not one stack frame deeper per dead connection), then goes through on a fresh one.
TEST_F(FaultsTest, ManyConnectionsClosedWhileIdleAreAllReplacedByTheNextFetch) {
  {
    std::vector<std::unique_ptr<BackgroundFetch>> fetches;
    for (int i = 0; i < 40; ++i) {
      fetches.push_back(
          std::make_unique<BackgroundFetch>(*stub_, Request(faults().Url("/close-idle"))));
    }
    for (auto& fetch : fetches) ASSERT_TRUE(fetch->Wait().ok()) << fetch->Wait().error_message();
  }
  std::this_thread::sleep_for(Gap(300));
  const int stale = FaultOrigin().idle;  // pooled, and every one closed by the server
  ASSERT_GE(stale, 2);
  // Some of the 40 may have found another's connection closed already.
  const int retired_before = observer_.Closed(transport::CloseReason::kStale);
  FetchRequest post = Request(faults().Url("/ok"));
  post.set_method("POST");
  FetchResponse response;
  ASSERT_TRUE(Fetch(post, &response).ok());
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kStale) - retired_before, stale);
  EXPECT_EQ(FaultOrigin().idle, 1);
  ExpectRecovered();
}

// The server closes a kept-alive connection just as the next request arrives: a GET is
// sent again, once, on a fresh connection; a POST is not.
TEST_F(FaultsTest, ConnectionClosedAsARequestArrivesRetriesOnlyIdempotentRequests) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(faults().Url("/close-on-reuse")), &response).ok());
  ASSERT_TRUE(Fetch(Request(faults().Url("/close-on-reuse")), &response).ok());
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(observer_.retries, 1);

  FetchRequest post = Request(faults().Url("/close-on-reuse"));
  post.set_method("POST");
  post.set_body("payload");
  const grpc::Status status = Fetch(post, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("is not idempotent, so it was not sent again"));
  EXPECT_EQ(observer_.retries, 1);
  ExpectRecovered();
}

}  // namespace
}  // namespace egress::testing

// Upstreams that send what never ends, and requests that cannot be framed: each gives
// a precise gRPC code and message at once, memory stays bounded, the connection is
// closed and counted, and egress goes on serving (descriptors back at their baseline).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/transport/http/request.h"
#include "service/transport/transport.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/resident_memory.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using transport::CloseReason;
using transport::UpstreamLimit;
using ::testing::HasSubstr;

constexpr int64_t kMemoryBound = 64 << 20;

class HostileUpstreamTest : public EgressFaultsTest {
 protected:
  void SetUp() override {
    StartEgress([](egress::v1::Config& c) {
      c.mutable_transport()->mutable_response_header_timeout()->set_seconds(3);
    });
    ExpectHealthy();  // gRPC's own descriptors are open from here on
    RecordBaseline();
  }

  // The fetch fails at once with `code` and `words`, memory bounded; the connection is
  // not pooled and egress recovers.
  // With a `reason`, the ErrorInfo must name it.
  void ExpectRefused(FetchRequest request, grpc::StatusCode code, const std::string& words,
                     const std::string& reason = "") {
    request.mutable_timeout()->set_seconds(3);  // without the bounds, it would run on
    FetchResponse response;
    RssGrowth growth;
    const grpc::Status status = Fetch(request, &response);
    EXPECT_LT(growth.Stop(), kMemoryBound);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(words));
    if (!reason.empty()) {
      EXPECT_EQ(ErrorInfoOf(status).value_or(google::rpc::ErrorInfo()).reason(), reason);
    }
    EXPECT_EQ(IdleToFaultServer(), 0) << "a connection in an unknown state went back to the pool";
    ExpectRecovered();
  }

  // Fetches through the transport directly, bypassing the gRPC service.
  absl::StatusOr<transport::Response> TransportFetch(transport::HttpRequest request) {
    std::promise<absl::StatusOr<transport::Response>> promise;
    server_->transport().Fetch(std::move(request), absl::Now() + absl::Seconds(5),
                               [&](absl::StatusOr<transport::Response> r) {
                                 promise.set_value(std::move(r));
                               });
    return promise.get_future().get();
  }
};

TEST_F(HostileUpstreamTest, ChunkExtensionWithoutEndIsUnavailableNamingTheLimit) {
  ExpectRefused(Request(faults().Url("/endless-chunk-ext")), grpc::StatusCode::UNAVAILABLE,
                absl::StrCat("response from ", FaultKey(),
                             " has a chunk line over the limit of 4096 bytes "
                             "(transport.max_chunk_line_bytes)"));
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kChunkLine), 1);
}

TEST_F(HostileUpstreamTest, TrailerLineWithoutEndIsUnavailableNamingTheLimit) {
  ExpectRefused(Request(faults().Url("/endless-trailer-line")), grpc::StatusCode::UNAVAILABLE,
                absl::StrCat("response from ", FaultKey(),
                             " has trailers over the limit of 65536 bytes "
                             "(transport.max_response_header_bytes)"));
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kTrailers), 1);
}

TEST_F(HostileUpstreamTest, ShortTrailerLinesWithoutEndAreUnavailableNamingTheLimit) {
  ExpectRefused(Request(faults().Url("/endless-trailer-lines")), grpc::StatusCode::UNAVAILABLE,
                "has trailers over the limit of 65536 bytes (transport.max_response_header_bytes)");
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kTrailers), 1);
}

// A body the caller does not read is drained: the drain stops at the bound too.
TEST_F(HostileUpstreamTest, ChunkExtensionWithoutEndStopsTheDrain) {
  FetchResponse response;
  RssGrowth growth;
  ASSERT_TRUE(
      Fetch(Request(faults().Url("/endless-chunk-ext"), egress::v1::BODY_MODE_NONE), &response)
          .ok());
  WaitForQuietPool();
  EXPECT_LT(growth.Stop(), kMemoryBound);
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kChunkLine), 1);
  EXPECT_EQ(observer_.Abandoned(transport::DrainAbandonReason::kError), 1);
  ExpectRecovered();
}

TEST_F(HostileUpstreamTest, InterimResponsesWithoutEndAreUnavailableNamingTheLimit) {
  ExpectRefused(Request(faults().Url("/endless-interim")), grpc::StatusCode::UNAVAILABLE,
                absl::StrCat("response from ", FaultKey(),
                             " has more than 5 interim (1xx) responses before its final one "
                             "(transport.max_interim_responses)"),
                "UPSTREAM_LIMIT_EXCEEDED");
  EXPECT_EQ(observer_.LimitHit(UpstreamLimit::kInterimResponses), 1);
}

TEST_F(HostileUpstreamTest, ChunkLineLimitIsConfigurable) {
  server_.reset();
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->set_max_chunk_line_bytes(100'000);
  });
  ExpectHealthy();
  RecordBaseline();
  ExpectRefused(Request(faults().Url("/endless-chunk-ext")), grpc::StatusCode::UNAVAILABLE,
                "has a chunk line over the limit of 100000 bytes (transport.max_chunk_line_bytes)");
}

// Beast throws while writing a TRACE with a body: refused before anything is sent, on a
// pooled connection twice in a row (the second once took egressd down).
TEST_F(HostileUpstreamTest, TraceWithABodyIsInvalidArgumentTwiceOnAPooledConnection) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(faults().Url("/ok")), &response).ok());
  ASSERT_EQ(IdleToFaultServer(), 1);
  FetchRequest trace = Request(faults().Url("/ok"));
  trace.set_method("TRACE");
  trace.set_body("x");
  for (int i = 0; i < 2; ++i) {
    const grpc::Status status = Fetch(trace, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("method TRACE must not have a body"));
  }
  ASSERT_TRUE(Fetch(Request(faults().Url("/ok")), &response).ok());
  EXPECT_TRUE(response.connection().reused());
  EXPECT_EQ(faults().accepted() - accepted_before_, 1);
  ExpectRecovered();
}

TEST_F(HostileUpstreamTest, ConnectIsInvalidArgumentTwiceOnAPooledConnection) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(faults().Url("/ok")), &response).ok());
  FetchRequest connect = Request(faults().Url("/ok"));
  connect.set_method("CONNECT");
  for (int i = 0; i < 2; ++i) {
    const grpc::Status status = Fetch(connect, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("method CONNECT asks for a tunnel"));
  }
  ASSERT_TRUE(Fetch(Request(faults().Url("/ok")), &response).ok());
  EXPECT_TRUE(response.connection().reused());
  ExpectRecovered();
}

// The defence behind MakeRequest: a request that reaches the transport some other way
// and cannot be written fails with INTERNAL, and its connection is closed.
TEST_F(HostileUpstreamTest, RequestTheTransportCannotWriteIsInternal) {
  auto request = transport::MakeRequest("GET", faults().Url("/ok"), {}, "");
  ASSERT_TRUE(request.ok());
  request->method = "TRACE";
  request->body = "x";
  const auto response = TransportFetch(*request);
  ASSERT_FALSE(response.ok());
  EXPECT_TRUE(absl::IsInternal(response.status())) << response.status();
  EXPECT_THAT(std::string(response.status().message()),
              HasSubstr(absl::StrCat("egress could not write the TRACE request for ", FaultKey())));
  EXPECT_EQ(observer_.exceptions, 1);
  EXPECT_EQ(observer_.Closed(CloseReason::kError), 1);
  ExpectRecovered();
}

// An exception from code an I/O handler runs (here the caller's callback) is caught at
// the connection: counted, the connection closed, the I/O thread still running.
TEST_F(HostileUpstreamTest, ExceptionFromACallbackOnAnIoThreadClosesTheConnectionOnly) {
  for (int i = 0; i < 2; ++i) {  // as many as there may be I/O threads, and more
    auto request = transport::MakeRequest("GET", faults().Url("/ok"), {}, "");
    ASSERT_TRUE(request.ok());
    std::promise<void> called;
    server_->transport().Fetch(*std::move(request), absl::Now() + absl::Seconds(5),
                               [&](absl::StatusOr<transport::Response>) {
                                 called.set_value();
                                 throw std::runtime_error("thrown by the test");
                               });
    called.get_future().wait();
  }
  WaitFor([&] { return observer_.exceptions >= 2; });
  EXPECT_EQ(observer_.exceptions, 2);
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(faults().Url("/ok")), &response).ok());
  EXPECT_FALSE(response.connection().reused()) << "a connection closed by the catch was reused";
  ExpectRecovered();
}

// Cancelling a fetch that waits for a connection must not run its callback inside the
// caller's Cancel (the service's reactor holds its own lock there).
TEST_F(HostileUpstreamTest, CancellingAFetchThatWaitsForAConnectionEndsItCancelled) {
  server_.reset();
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->set_max_conns_per_origin(1);
    c.mutable_transport()->mutable_response_header_timeout()->set_seconds(2);
  });
  ExpectHealthy();
  RecordBaseline();
  std::thread holder([&] {  // holds the one connection until the header timeout
    FetchResponse response;
    Fetch(Request(faults().Url("/never")), &response);
  });
  WaitFor([&] { return FaultOrigin().active != 0; });
  grpc::ClientContext context;
  const FetchRequest request = Request(faults().Url("/ok"));
  FetchResponse response;
  std::promise<grpc::Status> waited;
  stub_->async()->Fetch(&context, &request, &response,
                        [&](grpc::Status status) { waited.set_value(status); });
  WaitFor([&] { return FaultOrigin().waiting != 0; });
  EXPECT_EQ(FaultOrigin().waiting, 1);
  context.TryCancel();
  EXPECT_EQ(waited.get_future().get().error_code(), grpc::StatusCode::CANCELLED);
  // The service finished it too (a deadlock in Cancel never gets here).
  WaitFor([&] { return observer_.Fetches(grpc::StatusCode::CANCELLED) != 0; });
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::CANCELLED), 1);
  EXPECT_EQ(FaultOrigin().waiting, 0);
  holder.join();
  ExpectRecovered();
}

// Bytes a TLS upstream sends after a response (here a body on a 204) must not become the
// next caller's response: the pooled connection is closed as stale and the next fetch
// dials. A moment later they sit on the socket, where poll saw them but took them for a
// session ticket.
TEST_F(HostileUpstreamTest, BytesAfterA204OnAPooledTlsConnectionAreNotTheNextResponse) {
  FaultServer tls(nginx().server_cert_file(), nginx().server_key_file());
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(tls.Url("/204-then-extra")), &response).ok());
  EXPECT_EQ(response.status_code(), 204);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the extra bytes arrive
  const grpc::Status status = Fetch(Request(tls.Url("/ok")), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), "ok");
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(tls.accepted(), 2);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 1);
}

// The same bytes arriving with the 204 are read from the socket with it, and wait inside
// OpenSSL, seen by neither poll nor the connection's buffer.
TEST_F(HostileUpstreamTest, BytesWithA204InsideTheTlsLayerAreNotTheNextResponse) {
  FaultServer tls(nginx().server_cert_file(), nginx().server_key_file());
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(tls.Url("/204-with-extra")), &response).ok());
  EXPECT_EQ(response.status_code(), 204);
  const grpc::Status status = Fetch(Request(tls.Url("/ok")), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), "ok");
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(tls.accepted(), 2);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 1);
}

// TLS housekeeping after a response (a session ticket) is no reason to close.
TEST_F(HostileUpstreamTest, SessionTicketAfterAResponseOnAPooledTlsConnectionIsReused) {
  FaultServer tls(nginx().server_cert_file(), nginx().server_key_file());
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(tls.Url("/ok-then-ticket")), &response).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the ticket arrives
  ASSERT_TRUE(Fetch(Request(tls.Url("/ok")), &response).ok());
  EXPECT_EQ(response.body(), "ok");
  EXPECT_TRUE(response.connection().reused());
  EXPECT_EQ(tls.accepted(), 1);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 0);
}

// 200 session tickets (some 50 KiB) while idle are not housekeeping: the reuse check
// stops taking them in after 16 KiB and the connection is closed, not reused. Without
// the bound a server that keeps sending them keeps the check, and its thread, reading.
TEST_F(HostileUpstreamTest, ManySessionTicketsOnAPooledTlsConnectionAreNotTakenInForever) {
  FaultServer tls(nginx().server_cert_file(), nginx().server_key_file());
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(tls.Url("/ok-then-many-tickets")), &response).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the tickets arrive
  ASSERT_TRUE(Fetch(Request(tls.Url("/ok")), &response).ok());
  EXPECT_EQ(response.body(), "ok");
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(tls.accepted(), 2);
  EXPECT_EQ(observer_.Closed(CloseReason::kStale), 1);
}

}  // namespace
}  // namespace egress::testing

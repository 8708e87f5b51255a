// Limits answer RESOURCE_EXHAUSTED at once instead of queueing without bound; deadlines
// bound every phase; a caller that cancels aborts its upstream exchange; one slow origin
// does not hold up the others.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchChunk;
using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;

class LimitsTest : public EgressFaultsTest {
 protected:
  grpc::Status FetchNginx() {
    FetchResponse response;
    return Fetch(Request(nginx().HttpsUrl("/cl/1k")), &response);
  }
  // A FetchStream under a 30 s deadline set on `context`.
  std::unique_ptr<grpc::ClientReader<FetchChunk>> OpenStream(grpc::ClientContext& context,
                                                             const FetchRequest& request) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->FetchStream(&context, request);
  }
  // Reads what is left of a stream, then its status.
  static grpc::Status ReadToEnd(grpc::ClientReader<FetchChunk>& reader) {
    FetchChunk chunk;
    while (reader.Read(&chunk)) {
    }
    return reader.Finish();
  }
};

TEST_F(LimitsTest, FetchesOverTheConcurrencyLimitAreTurnedAwayAtOnce) {
  StartEgress([](egress::v1::Config& c) { c.mutable_limits()->set_max_concurrent_fetches(2); });
  const int accepted = faults().accepted();
  BackgroundFetch first(*stub_, Request(faults().Url("/never")));
  BackgroundFetch second(*stub_, Request(faults().Url("/never")));
  ASSERT_TRUE(WaitFor([&] { return faults().accepted() == accepted + 2; }));

  const grpc::Status third = FetchNginx();
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(third.error_message(),
              HasSubstr("its limit of 2 concurrent fetches (limits.max_concurrent_fetches)"));

  first.Cancel();
  second.Cancel();
  EXPECT_EQ(first.Wait().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(second.Wait().error_code(), grpc::StatusCode::CANCELLED);
  // Their places free up once gRPC is done with them.
  EXPECT_TRUE(WaitFor([&] { return FetchNginx().ok(); }));
}

// One origin whose connections are all busy: one more request queues (bounded by its
// deadline), one past max_waiting_per_origin fails at once, other origins are served.
TEST_F(LimitsTest, BusyOriginQueuesUpToItsLimitAndLeavesOtherOriginsAlone) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->set_max_conns_per_origin(1);
    c.mutable_transport()->set_max_waiting_per_origin(1);
  });
  BackgroundFetch holder(*stub_, Request(faults().Url("/never")));
  ASSERT_TRUE(WaitFor([&] { return FaultOrigin().active == 1; }));
  BackgroundFetch queued(*stub_, Request(faults().Url("/ok")));
  ASSERT_TRUE(WaitFor([&] { return FaultOrigin().waiting == 1; }));

  FetchResponse response;
  const grpc::Status turned_away = Fetch(Request(faults().Url("/ok")), &response);
  EXPECT_EQ(turned_away.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(turned_away.error_message(),
              HasSubstr("1 requests already wait for one (transport.max_conns_per_origin, "
                        "transport.max_waiting_per_origin)"));
  EXPECT_TRUE(FetchNginx().ok());

  holder.Cancel();  // frees the connection for the queued request
  EXPECT_EQ(holder.Wait().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(queued.Wait().ok()) << queued.Wait().error_message();
}

TEST_F(LimitsTest, DeadlineBoundsTheWaitForAPooledConnection) {
  StartEgress([](egress::v1::Config& c) { c.mutable_transport()->set_max_conns_per_origin(1); });
  BackgroundFetch holder(*stub_, Request(faults().Url("/never")));
  ASSERT_TRUE(WaitFor([&] { return FaultOrigin().active == 1; }));
  FetchRequest request = Request(faults().Url("/ok"));
  request.mutable_timeout()->set_nanos(300'000'000);
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("deadline expired while waiting for a connection to ",
                                     "http://127.0.0.1:", faults().port())));
  EXPECT_EQ(FaultOrigin().waiting, 0);
  holder.Cancel();
}

TEST_F(LimitsTest, OversizedRequestHeadersAreResourceExhaustedAndNothingIsSent) {
  StartEgress([](egress::v1::Config& c) { c.mutable_limits()->set_max_request_header_bytes(4096); });
  const int accepted = faults().accepted();
  FetchRequest request = Request(faults().Url("/ok"));
  auto* header = request.add_headers();
  header->set_name("x-big");
  header->set_value(std::string(4096, 'v'));
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("request headers of 4105 bytes exceed the limit of 4096 bytes "
                        "(limits.max_request_header_bytes)"));
  EXPECT_EQ(faults().accepted(), accepted);
}

// Upstream I/O never holds a thread: with one I/O thread and many requests stuck on a
// slow origin, another origin is served as usual.
TEST_F(LimitsTest, SlowOriginDoesNotHoldUpOthers) {
  StartEgress([](egress::v1::Config& c) { c.mutable_transport()->set_io_threads(1); });
  std::vector<std::unique_ptr<BackgroundFetch>> stuck;
  for (int i = 0; i < 32; ++i) {
    stuck.push_back(std::make_unique<BackgroundFetch>(
        *stub_, Request(faults().Url(i % 2 ? "/never" : "/slow-body"))));
  }
  ASSERT_TRUE(WaitFor([&] { return FaultOrigin().active == 32; }));
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(FetchNginx().ok());
  for (auto& fetch : stuck) fetch->Cancel();
  for (auto& fetch : stuck) EXPECT_EQ(fetch->Wait().error_code(), grpc::StatusCode::CANCELLED);
}

// A Fetch cancelled while its body is being read gives the read the drain's time cap
// (50 ms) and then closes the upstream connection, instead of reading on (here the body
// trickles for 100 s) on nobody's behalf. The body trickles a byte a second, so the
// cancel nearly always lands during a read (kCancelled); on a slow build it can land
// between two reads, and then the drain gives up at the same cap (kDrainAbandoned).
// Either way exactly one connection closes and none goes back to the pool.
TEST_F(LimitsTest, CancelledFetchAbortsItsBodyRead) {
  StartEgress();
  BackgroundFetch fetch(*stub_, Request(faults().Url("/slow-body")));
  ASSERT_TRUE(WaitFor([&] { return faults().open_connections() == 1; }));
  std::this_thread::sleep_for(Gap(100));  // the head is in, a body read is under way
  fetch.Cancel();
  EXPECT_EQ(fetch.Wait().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return faults().open_connections() == 0; }));
  // The cut-off closes the socket first; the pool retires the connection when the
  // aborted read returns, on the connection's loop.
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kCancelled) +
                observer_.Closed(transport::CloseReason::kDrainAbandoned),
            1);
  EXPECT_EQ(FaultOrigin().idle, 0);
}

// The golang/go#81404 shape over gRPC: a FetchStream cancelled while egress has a body
// read in flight, many times (also run under TSan by tools/test.sh).
TEST_F(LimitsTest, FetchStreamCancelledDuringABodyReadManyTimes) {
  StartEgress();
  constexpr int kRounds = 50;
  for (int i = 0; i < kRounds; ++i) {
    grpc::ClientContext context;
    auto reader = OpenStream(context, Request(faults().Url("/slow-body")));
    FetchChunk chunk;
    ASSERT_TRUE(reader->Read(&chunk));
    EXPECT_EQ(chunk.head().status_code(), 200);
    if (i % 2) std::this_thread::sleep_for(std::chrono::microseconds(200 * i));
    context.TryCancel();
    EXPECT_EQ(ReadToEnd(*reader).error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(WaitFor([&] {
    return faults().open_connections() == 0 &&
           observer_.Fetches(grpc::StatusCode::CANCELLED) == kRounds;
  }));
  WaitForQuietPool();  // each connection retired, after its socket closed
  // Cancelled during a read: the read gets the drain's 50 ms to finish, and the
  // connection closes under it (the body trickles a byte a second). Cancelled between
  // reads: the drain gives up at its 50 ms cap.
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kCancelled) +
                observer_.Closed(transport::CloseReason::kDrainAbandoned),
            kRounds);
  EXPECT_GT(observer_.Closed(transport::CloseReason::kCancelled), 0);
  EXPECT_EQ(FaultOrigin().idle, 0);
}

// A FetchStream cancelled while its request waits for a head that never comes: nothing
// has been written to the caller yet, so the cancel reaches the reactor before any write.
// Each ends CANCELLED at once and closes its upstream connection (also under TSan).
TEST_F(LimitsTest, FetchStreamCancelledBeforeItsHeadManyTimes) {
  StartEgress();
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) {
    grpc::ClientContext context;
    auto reader = OpenStream(context, Request(faults().Url("/never")));
    // The request is on its way upstream (the pool's gauges may still count the last
    // round's connection).
    ASSERT_TRUE(WaitFor([&] { return observer_.requests_new == i + 1; }));
    context.TryCancel();
    FetchChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
    ASSERT_TRUE(WaitFor([&] { return faults().open_connections() == 0; }));
  }
  EXPECT_TRUE(WaitFor([&] { return observer_.Fetches(grpc::StatusCode::CANCELLED) == kRounds; }));
  WaitForQuietPool();
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kCancelled), kRounds);
  EXPECT_EQ(FaultOrigin().idle, 0);
}

// A FetchStream whose own timeout (800 ms) passes while its body trickles (a byte a
// second for 100 s): the caller has the head, then DEADLINE_EXCEEDED, not a stream
// that hangs on; the connection it was reading from closes and is not pooled.
TEST_F(LimitsTest, FetchStreamTimeoutEndsTheStreamDuringTheBody) {
  StartEgress();
  FetchRequest request = Request(faults().Url("/slow-body"));
  request.mutable_timeout()->set_nanos(800'000'000);
  grpc::ClientContext context;
  auto reader = OpenStream(context, request);
  FetchChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_EQ(chunk.head().status_code(), 200);
  const grpc::Status status = ReadToEnd(*reader);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(), HasSubstr("deadline expired while reading the response body"));
  EXPECT_TRUE(WaitFor([&] { return faults().open_connections() == 0; }));
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::DEADLINE_EXCEEDED), 1);
  EXPECT_EQ(FaultOrigin().idle, 0);
}

// A FetchStream whose caller takes the head and then reads nothing more, from a body
// that never ends: once gRPC's windows fill, egress's write waits for the caller. A
// second past the fetch's timeout (1 s; the caller's own deadline is 30 s) egress cancels
// the stream: its upstream connection closes and the chunk it held goes back to the body
// budget, instead of both staying held until gRPC gives up on the caller.
TEST_F(LimitsTest, FetchStreamWhoseCallerStopsReadingEndsAtTheFetchDeadline) {
  StartEgress();
  FetchRequest request = Request(faults().Url("/endless-body"));
  request.mutable_timeout()->set_seconds(1);
  grpc::ClientContext context;
  auto reader = OpenStream(context, request);
  FetchChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_EQ(chunk.head().status_code(), 200);
  ASSERT_TRUE(WaitFor([&] { return faults().open_connections() == 1; }));

  WaitFor([&] { return faults().open_connections() == 0; }, absl::Seconds(10));
  EXPECT_EQ(faults().open_connections(), 0) << "the upstream connection is still held";
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
  EXPECT_TRUE(WaitFor([&] {
    return observer_.Fetches(grpc::StatusCode::DEADLINE_EXCEEDED) == 1;
  }));
  EXPECT_EQ(ReadToEnd(*reader).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(FaultOrigin().idle, 0);
}

// The same endless body read by a caller that keeps reading, slowly (a message every
// 5 ms): its writes wait for it often, but never long, so the stream ends on the fetch's
// own deadline, with the transport's reason, not cancelled as a stalled caller's is.
TEST_F(LimitsTest, FetchStreamReadSlowlyEndsOnItsDeadlineNotCancelled) {
  StartEgress();
  FetchRequest request = Request(faults().Url("/endless-body"));
  request.mutable_timeout()->set_nanos(500'000'000);
  grpc::ClientContext context;
  auto reader = OpenStream(context, request);
  FetchChunk chunk;
  int messages = 0;
  while (reader->Read(&chunk)) {
    ++messages;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const grpc::Status status = reader->Finish();
  EXPECT_GT(messages, 2);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("deadline expired while reading the response body"));
  EXPECT_TRUE(WaitFor([&] { return faults().open_connections() == 0; }));
}

}  // namespace
}  // namespace egress::testing

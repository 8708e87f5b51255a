// egressd's own gRPC server on the transport's loops (--data_plane=loops, issue 37's first
// slice) against real gRPC clients: what it answers must be what gRPC's library server
// answers for the same call.
#include <nghttp2/nghttp2.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "service/dataplane/grpc_framing.h"
#include "tests/support/child_process.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/raw_grpc_call.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;

class LoopDataPlaneTest : public EgressFaultsTest {
 protected:
  void StartLoops() { StartEgress({}, DataPlane::kLoops); }
  // The reference the loops are held to, whatever EGRESS_TEST_DATA_PLANE says.
  void StartLibrary() { StartEgress({}, DataPlane::kGrpcLibrary); }

  // Request(url) as a raw call sends it: serialized and length-prefixed.
  std::string Framed(const std::string& url) const {
    std::string message;
    Request(url).SerializeToString(&message);
    return dataplane::FrameMessage(message);
  }

  // A Fetch of `url` over a raw HTTP/2 connection with `headers` added, on the server
  // running now.
  absl::StatusOr<RawGrpcAnswer> RawFetch(const std::string& url, const RawHeaders& headers) {
    return RawGrpcCall(server_->grpc_port(), "/egress.v1.Egress/Fetch", Framed(url), headers,
                       absl::Seconds(10));
  }

  // A unary call by method name, through the generic stub; the answer's bytes.
  grpc::Status GenericCall(const std::string& method, const std::string& request,
                           std::string* answer) {
    grpc::GenericStub generic(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
    grpc::Slice slice(request);
    grpc::ByteBuffer request_bytes(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, method, grpc::StubOptions(), &request_bytes, &response,
                      [&](grpc::Status status) { done.set_value(status); });
    const grpc::Status status = done.get_future().get();
    std::vector<grpc::Slice> slices;
    if (status.ok() && response.Dump(&slices).ok()) {
      for (const auto& s : slices) {
        answer->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    return status;
  }
};

// A fetch answered by both servers, with what may differ between two fetches left out:
// the Date header, the connection, the timing and the trace.
std::string Comparable(FetchResponse response) {
  response.clear_connection();
  response.clear_timing();
  response.clear_trace_id();  // each fetch's own
  response.clear_span_id();
  auto* headers = response.mutable_headers();
  for (int i = headers->size() - 1; i >= 0; --i) {
    if (headers->Get(i).name() == "date" || headers->Get(i).name() == "Date") {
      headers->DeleteSubrange(i, 1);
    }
  }
  return response.DebugString();
}

TEST_F(LoopDataPlaneTest, AFetchOfALoopbackUpstreamAnswersWhatTheLibraryServerAnswers) {
  StartLibrary();
  FetchResponse library;
  ASSERT_TRUE(Fetch(Request(nginx().HttpUrl("/cl/1k")), &library).ok());
  WaitForQuietPool();
  StartLoops();
  FetchResponse loops;
  const grpc::Status status = Fetch(Request(nginx().HttpUrl("/cl/1k")), &loops);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(loops.status_code(), 200);
  EXPECT_EQ(loops.body(), NginxUpstream::FileContent("1k"));
  EXPECT_EQ(Comparable(loops), Comparable(library));
}

// A FetchStream's head and its body's bytes, read to the end.
grpc::Status ReadStream(egress::v1::Egress::Stub& stub, const FetchRequest& request,
                        FetchResponse* head, std::string* body) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = stub.FetchStream(&context, request);
  egress::v1::FetchChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.has_head()) *head = chunk.head();
    body->append(chunk.body());
  }
  return reader->Finish();
}

// 300 KiB is more than the caller's first flow-control windows: the body goes out as the
// caller opens them.
TEST_F(LoopDataPlaneTest, AFetchStreamAnswersTheHeadAndBodyTheLibraryServerAnswers) {
  StartLibrary();
  FetchResponse library_head;
  std::string library_body;
  ASSERT_TRUE(ReadStream(*stub_, Request(nginx().HttpUrl("/chunked/300k")), &library_head,
                         &library_body).ok());
  WaitForQuietPool();
  StartLoops();
  FetchResponse head;
  std::string body;
  const grpc::Status status =
      ReadStream(*stub_, Request(nginx().HttpUrl("/chunked/300k")), &head, &body);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(head.status_code(), 200);
  EXPECT_EQ(body, std::string(307200, 'c'));
  EXPECT_EQ(Comparable(head), Comparable(library_head));
}

TEST_F(LoopDataPlaneTest, AFetchStreamCancelledAfterItsHeadLeavesNoUpstreamConnectionBehind) {
  StartLoops();
  {
    grpc::ClientContext context;
    auto reader = stub_->FetchStream(&context, Request(faults().Url("/stall-body")));
    egress::v1::FetchChunk chunk;
    ASSERT_TRUE(reader->Read(&chunk));
    EXPECT_EQ(chunk.head().status_code(), 200);
    context.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(WaitFor([&] { return FaultOrigin().active == 0 && FaultOrigin().draining == 0; }));
  EXPECT_TRUE(WaitFor([&] { return observer_.Fetches(grpc::StatusCode::CANCELLED) == 1; }));
}

TEST_F(LoopDataPlaneTest, AFetchOfAClosedPortIsUnavailableWithTheLibraryServersReason) {
  const ClosedPort closed;
  const FetchRequest request = Request("http://127.0.0.1:" + std::to_string(closed.port()) + "/");
  StartLibrary();
  FetchResponse response;
  const grpc::Status library = Fetch(request, &response);
  StartLoops();
  const grpc::Status loops = Fetch(request, &response);
  EXPECT_EQ(loops.error_code(), grpc::StatusCode::UNAVAILABLE) << loops.error_message();
  EXPECT_EQ(loops.error_code(), library.error_code());
  const auto loops_info = ErrorInfoOf(loops);
  const auto library_info = ErrorInfoOf(library);
  ASSERT_TRUE(loops_info.has_value()) << loops.error_message();
  ASSERT_TRUE(library_info.has_value());
  EXPECT_EQ(loops_info->reason(), "CONNECT_FAILED");
  EXPECT_EQ(loops_info->reason(), library_info->reason());
  EXPECT_EQ(loops.error_message(), library.error_message());
}

// A raw HTTP/2 client, so that no client-side deadline or RST_STREAM ends the call first:
// only the grpc-timeout header can give the server the deadline it answers with.
TEST_F(LoopDataPlaneTest, AnUpstreamThatOverrunsTheGrpcTimeoutIsDeadlineExceeded) {
  StartLoops();
  const auto answer = RawFetch(faults().Url("/never"), {{"grpc-timeout", "300m"}});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->Field("grpc-status"), "4");  // DEADLINE_EXCEEDED
  EXPECT_TRUE(answer->data.empty());             // Trailers-Only
  EXPECT_TRUE(answer->trailers.empty());
  google::rpc::Status details;
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(answer->Field("grpc-status-details-bin"), &bytes));
  ASSERT_TRUE(details.ParseFromString(bytes));
  EXPECT_EQ(details.code(), 4);
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::DEADLINE_EXCEEDED), 1);
  EXPECT_TRUE(WaitFor([&] { return FaultOrigin().active == 0; }));
}

TEST_F(LoopDataPlaneTest, AnUnreadableGrpcTimeoutIsRefusedAndCounted) {
  StartLoops();
  const auto answer = RawFetch(nginx().HttpUrl("/cl/1k"), {{"grpc-timeout", "5 s"}});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->Field("grpc-status"), "3");  // INVALID_ARGUMENT
  EXPECT_EQ(answer->Field("grpc-message"),
            "grpc-timeout \"5 s\" is not 1 to 8 digits followed by a unit of H, M, S, m, u or n");
  EXPECT_EQ(observer_.Refused(CallRefusal::kBadTimeout), 1);
}

TEST_F(LoopDataPlaneTest, MetadataOverTheHeaderListLimitIsResourceExhaustedAndCounted) {
  StartLoops();
  const std::string url = nginx().HttpUrl("/cl/1k");
  // 16 KiB as HTTP/2 counts a header list (name + value + 32 per field) is the limit.
  const auto within = RawFetch(url, {{"x-big", std::string(15 * 1024, 'a')}});
  ASSERT_TRUE(within.ok()) << within.status();
  EXPECT_EQ(within->Field("grpc-status"), "0");
  const auto over = RawFetch(url, {{"x-big", std::string(17 * 1024, 'a')}});
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_EQ(over->Field("grpc-status"), "8");  // RESOURCE_EXHAUSTED
  EXPECT_EQ(over->Field("grpc-message"),
            "the call's metadata is larger than egressd accepts (16384 bytes, as HTTP/2 counts "
            "a header list)");
  EXPECT_EQ(observer_.Refused(CallRefusal::kMetadataTooLarge), 1);
}

TEST_F(LoopDataPlaneTest, HealthCheckIsServing) {
  StartLoops();
  std::string answer;
  const grpc::Status status = GenericCall("/grpc.health.v1.Health/Check", "", &answer);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answer, std::string("\x08\x01", 2));  // status: SERVING
}

// Shutdown turns health NOT_SERVING and refuses new fetches at once, lets the one in
// flight finish within the grace, and then accepts no more connections.
TEST_F(LoopDataPlaneTest, ShutdownSaysNotServingRefusesNewFetchesAndThenStopsAccepting) {
  StartLoops();
  const int port = server_->grpc_port();
  const int never_before = faults().never_requests();
  BackgroundFetch holder(*stub_, Request(faults().Url("/never")));
  ASSERT_TRUE(WaitFor([&] { return faults().never_requests() == never_before + 1; }));
  std::thread shutdown([&] { server_->Shutdown(absl::Seconds(20)); });
  std::string answer;
  EXPECT_TRUE(WaitFor([&] {
    answer.clear();
    return GenericCall("/grpc.health.v1.Health/Check", "", &answer).ok() &&
           answer == std::string("\x08\x02", 2);  // status: NOT_SERVING
  }));
  FetchResponse response;
  const grpc::Status refused = Fetch(Request(nginx().HttpUrl("/cl/1k")), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  holder.Cancel();
  EXPECT_EQ(holder.Wait().error_code(), grpc::StatusCode::CANCELLED);
  shutdown.join();
  EXPECT_EQ(server_->fetches_in_flight(), 0u);
  EXPECT_FALSE(RawGrpcCall(port, "/grpc.health.v1.Health/Check", dataplane::FrameMessage(""), {},
                           absl::Seconds(2))
                   .ok());
}

TEST_F(LoopDataPlaneTest, AnUnknownMethodIsUnimplementedAndCounted) {
  StartLoops();
  std::string answer;
  const grpc::Status status = GenericCall("/egress.v1.Egress/NoSuchMethod", "", &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(status.error_message(), "egressd serves no method /egress.v1.Egress/NoSuchMethod");
  EXPECT_EQ(observer_.Refused(CallRefusal::kUnimplemented), 1);
}

// A 15 KB :path of bytes that are not UTF-8, quoted whole and escaped, would make trailers
// of some 150 KB, past what nghttp2 sends: the connection, and every call on it, would end.
TEST_F(LoopDataPlaneTest, AnUnknownMethodWithAHugePathIsAnsweredAndItsConnectionServesOn) {
  StartLoops();
  auto connection = RawGrpcConnection::Open(server_->grpc_port());
  ASSERT_TRUE(connection.ok()) << connection.status();
  const int32_t unknown = (*connection)->Start("/" + std::string(15000, '\xff'), "", {});
  auto refused = (*connection)->Wait(unknown, absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->Field("grpc-status"), "12");
  EXPECT_LT(refused->Field("grpc-message").size(), 2000u);
  const int32_t health = (*connection)->Start("/grpc.health.v1.Health/Check",
                                              dataplane::FrameMessage(""), {});
  auto served = (*connection)->Wait(health, absl::Seconds(10));
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->Field("grpc-status"), "0");
  EXPECT_FALSE((*connection)->ended());
}

TEST_F(LoopDataPlaneTest, ARequestMessageOverTheLimitIsResourceExhaustedBeforeItArrives) {
  StartEgress([](egress::v1::Config& c) { c.mutable_limits()->set_max_request_body_bytes(1000); },
              DataPlane::kLoops);
  FetchRequest request = Request(nginx().HttpUrl("/upload"));
  request.set_method("POST");
  request.set_body(std::string(2 << 20, 'x'));  // past the body limit and the envelope
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  const auto info = ErrorInfoOf(status);
  ASSERT_TRUE(info.has_value()) << status.error_message();
  EXPECT_EQ(info->reason(), "REQUEST_MESSAGE_TOO_LARGE");
  EXPECT_EQ(observer_.Refused(CallRefusal::kBadRequestMessage), 1);
  ExpectHealthy();
}

TEST_F(LoopDataPlaneTest, ACallerThatCancelsMidFetchLeavesNoUpstreamConnectionBehind) {
  StartLoops();
  const int never_before = faults().never_requests();  // the suite shares the fault server
  BackgroundFetch fetch(*stub_, Request(faults().Url("/never")));
  ASSERT_TRUE(WaitFor([&] { return faults().never_requests() == never_before + 1; }));
  EXPECT_EQ(FaultOrigin().active, 1);
  fetch.Cancel();
  EXPECT_EQ(fetch.Wait().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return FaultOrigin().active == 0; }));
  EXPECT_TRUE(WaitFor([&] {
    return observer_.Fetches(grpc::StatusCode::CANCELLED) == 1;
  }));
}

// A raw caller that announces a window of 0 gets the answer's HEADERS but none of its
// DATA: the answer stays in egressd, and so the fetch stays in flight (under
// limits.max_concurrent_fetches, its body under the budget) until the caller takes it,
// as gRPC's library server counts a call until OnDone, after the send.
TEST_F(LoopDataPlaneTest, AFetchStaysInFlightUntilTheCallerTakesItsAnswer) {
  StartLoops();
  auto connection = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(connection.ok()) << connection.status();
  RawGrpcConnection& caller = **connection;
  const int32_t id = caller.Start("/egress.v1.Egress/Fetch", Framed(nginx().HttpUrl("/cl/1k")), {});
  ASSERT_TRUE(caller.Pump([&] { return caller.head_seen(id); }, absl::Seconds(10)));
  // A call the session answers with HEADERS alone, on the same loop after the fetch's
  // answer: what the loop did for the fetch is done by the time this comes back.
  const int32_t later = caller.Start("/egress.v1.Egress/NoSuchMethod", "", {});
  ASSERT_TRUE(caller.Pump([&] { return caller.closed(later); }, absl::Seconds(10)));
  EXPECT_EQ(server_->fetches_in_flight(), 1u);
  caller.OpenWindow();
  const auto answer = caller.Wait(id, absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->Field("grpc-status"), "0");
  EXPECT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 0; }));
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::OK), 1);
}

// The caller's deadline ends a FetchStream whose caller takes nothing (window 0): the
// stream is reset (its HEADERS went), the upstream connection let go, the fetch counted.
TEST_F(LoopDataPlaneTest, AFetchStreamWhoseCallerTakesNothingEndsAtItsGrpcTimeout) {
  StartLoops();
  auto connection = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(connection.ok()) << connection.status();
  const int32_t id = (*connection)->Start("/egress.v1.Egress/FetchStream",
                                          Framed(faults().Url("/stall-body")),
                                          {{"grpc-timeout", "500m"}});
  const auto answer = (*connection)->Wait(id, absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->error_code, uint32_t{NGHTTP2_CANCEL});
  EXPECT_TRUE(answer->data.empty());
  EXPECT_TRUE(WaitFor([&] { return FaultOrigin().active == 0 && FaultOrigin().draining == 0; }));
  EXPECT_TRUE(WaitFor([&] { return observer_.Fetches(grpc::StatusCode::DEADLINE_EXCEEDED) == 1; }));
  EXPECT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 0; }));
}


// A unary answer the caller has not taken by the deadline is reset then, and the fetch
// leaves the in-flight count: it was answered, and counted OK.
TEST_F(LoopDataPlaneTest, AFetchAnswerTheCallerHasNotTakenByItsGrpcTimeoutIsReset) {
  StartLoops();
  auto connection = RawGrpcConnection::Open(server_->grpc_port(), /*initial_window=*/0);
  ASSERT_TRUE(connection.ok()) << connection.status();
  const int32_t id = (*connection)->Start("/egress.v1.Egress/Fetch",
                                          Framed(nginx().HttpUrl("/cl/1k")),
                                          {{"grpc-timeout", "500m"}});
  const auto answer = (*connection)->Wait(id, absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->error_code, uint32_t{NGHTTP2_CANCEL});
  EXPECT_TRUE(answer->data.empty());
  EXPECT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 0; }));
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::OK), 1);
}

// A request whose message is still incomplete at its deadline is answered then.
TEST_F(LoopDataPlaneTest, ARequestMessageIncompleteAtTheGrpcTimeoutIsDeadlineExceeded) {
  StartLoops();
  const std::string framed = Framed(nginx().HttpUrl("/cl/1k"));
  auto connection = RawGrpcConnection::Open(server_->grpc_port());
  ASSERT_TRUE(connection.ok()) << connection.status();
  const int32_t id = (*connection)->Start("/egress.v1.Egress/Fetch",
                                          framed.substr(0, framed.size() / 2),
                                          {{"grpc-timeout", "300m"}}, /*end_request=*/false);
  RawGrpcConnection& caller = **connection;
  // The stream stays open on the caller's side: the answer is what ends the wait.
  ASSERT_TRUE(caller.Pump([&] { return !caller.answer(id).Field("grpc-status").empty(); },
                          absl::Seconds(10)));
  EXPECT_EQ(caller.answer(id).Field("grpc-status"), "4");  // DEADLINE_EXCEEDED
  EXPECT_TRUE(caller.answer(id).data.empty());             // Trailers-Only
  EXPECT_EQ(observer_.Refused(CallRefusal::kDeadlineBeforeRequest), 1);
}

// The bytes of request messages still arriving are bounded per connection, at twice the
// largest message (here 2 x 1.375 MiB), by flow control: a message that would pass the
// bound gets no window past its stream's first (64 KiB) until the messages before it are
// whole or gone; then it comes in and is served. Nothing is refused: a caller sending
// many large requests at once sees them served in turn, as gRPC's library serves them.
TEST_F(LoopDataPlaneTest, ALargeRequestPastItsConnectionsBoundWaitsForWindowAndIsServed) {
  StartEgress(
      [](egress::v1::Config& c) { c.mutable_limits()->set_max_request_body_bytes(256 << 10); },
      DataPlane::kLoops);
  // Two messages of 1300 KiB declared, 1200 KiB of each sent: both admitted, and stuck.
  const std::string part =
      dataplane::FrameMessage(std::string(1300 << 10, 'x')).substr(0, 5 + (1200 << 10));
  FetchRequest put = Request(nginx().HttpUrl("/cl/1k"));
  put.set_method("PUT");
  put.set_body(std::string(256 << 10, 'b'));
  std::string message;
  put.SerializeToString(&message);
  const std::string third = dataplane::FrameMessage(message);
  auto connection = RawGrpcConnection::Open(server_->grpc_port());
  ASSERT_TRUE(connection.ok()) << connection.status();
  RawGrpcConnection& caller = **connection;
  const int32_t first = caller.Start("/egress.v1.Egress/Fetch", part,
                                     {{"grpc-timeout", absl::StrCat(Gap(3000).count(), "m")}},
                                     /*end_request=*/false);
  const int32_t second = caller.Start("/egress.v1.Egress/Fetch", part, {}, false);
  ASSERT_TRUE(caller.Pump([&] { return caller.request_sent(first) && caller.request_sent(second); },
                          absl::Seconds(10)))
      << "left to send: " << caller.request_left(first) << ", " << caller.request_left(second);
  const int32_t waiting = caller.Start("/egress.v1.Egress/Fetch", third, {});
  EXPECT_FALSE(caller.Pump([&] { return caller.request_left(waiting) < third.size() - 65535; },
                           absl::Milliseconds(300)))
      << "the third message got window past its first while the bound was full";
  // The first's deadline ends it: its place goes to the third, which is served.
  ASSERT_TRUE(caller.Pump([&] { return !caller.answer(waiting).Field("grpc-status").empty(); },
                          absl::Seconds(20)));
  EXPECT_EQ(caller.answer(first).Field("grpc-status"), "4");  // DEADLINE_EXCEEDED
  EXPECT_EQ(caller.answer(waiting).Field("grpc-status"), "0")
      << caller.answer(waiting).Field("grpc-message");
  EXPECT_EQ(caller.request_left(waiting), 0u);
  EXPECT_FALSE(caller.head_seen(second));
  EXPECT_EQ(observer_.Refused(CallRefusal::kDeadlineBeforeRequest), 1);
}

// A -bin metadata value that is not base64 is refused with the code gRPC's library server
// gives it, not passed on empty.
TEST_F(LoopDataPlaneTest, MalformedBinaryMetadataIsRefusedAsTheLibraryServerRefusesIt) {
  const std::string url = nginx().HttpUrl("/cl/1k");
  const RawHeaders malformed = {{"x-egress-test-bin", "not base64!"}};
  StartLibrary();
  const auto library = RawFetch(url, malformed);
  StartLoops();
  const auto loops = RawFetch(url, malformed);
  ASSERT_TRUE(library.ok()) << library.status();
  ASSERT_TRUE(loops.ok()) << loops.status();
  EXPECT_NE(library->Field("grpc-status"), "0") << library->error_code;
  EXPECT_EQ(loops->Field("grpc-status"), library->Field("grpc-status"))
      << loops->Field("grpc-message") << " / " << library->Field("grpc-message");
  EXPECT_EQ(observer_.Refused(CallRefusal::kBadMetadata), 1);
}

}  // namespace
}  // namespace egress::testing

// FULL, PREFIX and FetchStream return exactly the upstream's bytes.
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchChunk;
using egress::v1::FetchRequest;
using egress::v1::FetchResponse;

const std::string& MixedChunkedBody() {
  static const std::string body =
      std::string(3, 'x') + std::string(1021, 'y') + std::string(70001, 'z');
  return body;
}

class BodyTest : public EgressTest {
 protected:
  void SetUp() override { StartEgress(); }

  // Fetches `url` through a channel with gRPC's default receive limit (4 MiB a message)
  // and max_body_bytes 0: the caller is told egressd's own RESOURCE_EXHAUSTED
  // RESPONSE_TOO_LARGE, and egressd counts just that.
  void ExpectRefusedAsCountedToADefaultGrpcClient(const std::string& url) {
    auto caller = egress::v1::Egress::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->grpc_port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    FetchResponse response;
    const grpc::Status status = caller->Fetch(&context, Request(url), &response);

    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    const auto info = ErrorInfoOf(status);
    EXPECT_EQ(info ? info->reason() : "no ErrorInfo: " + status.error_message(),
              "RESPONSE_TOO_LARGE");
    EXPECT_EQ(observer_.Fetches(grpc::StatusCode::RESOURCE_EXHAUSTED), 1);
    EXPECT_EQ(observer_.Fetches(grpc::StatusCode::OK), 0);
  }

  // Reads a whole FetchStream; returns the status and fills head and body.
  grpc::Status Stream(const FetchRequest& request, FetchResponse* head, std::string* body) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto reader = stub_->FetchStream(&context, request);
    FetchChunk chunk;
    int heads = 0;
    while (reader->Read(&chunk)) {
      if (chunk.has_head()) {
        ++heads;
        *head = chunk.head();
      } else {
        EXPECT_EQ(heads, 1) << "body before head";
        body->append(chunk.body());
      }
    }
    EXPECT_EQ(heads, 1);
    return reader->Finish();
  }
};

TEST_F(BodyTest, FullReturnsAContentLengthBodyExactly) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/100k")), &response).ok());
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("100k"));
  EXPECT_FALSE(response.body_truncated());
}

TEST_F(BodyTest, FullReturnsAChunkedBodySplitAtOddSizesExactly) {
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/chunked/mixed")), &response).ok());
  EXPECT_EQ(response.body(), MixedChunkedBody());
}

TEST_F(BodyTest, FullOverMaxBodyBytesIsResourceExhaustedAndServiceKeepsServing) {
  FetchRequest request = Request(nginx().HttpsUrl("/cl/100k"));
  request.set_max_body_bytes(1000);
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("max_body_bytes"), std::string::npos)
      << status.error_message();
  request.set_max_body_bytes(102400);
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("100k"));
}

// A caller on a gRPC channel with the default receive limit (4 MiB a message: grpcurl, a
// stub made by hand) who leaves max_body_bytes at 0 is told what egressd counted: the
// server default fits that limit, so a 6 MiB body is egressd's RESOURCE_EXHAUSTED
// RESPONSE_TOO_LARGE, not an answer counted OK that the caller's gRPC then refuses.
TEST_F(BodyTest, FullBodyTooLargeForADefaultGrpcClientIsRefusedAsEgressdCountsIt) {
  ExpectRefusedAsCountedToADefaultGrpcClient(nginx().HttpUrl("/cl/6m"));
}

// The body is within default_max_body_bytes, but 200 KB of headers that are not UTF-8
// (allowed by a raised max_response_header_bytes) take the answer past 4 MiB.
TEST_F(BodyTest, AnswerPushedPastADefaultGrpcClientsLimitByItsHeadersIsRefusedAsEgressdCountsIt) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->set_max_response_header_bytes(1 << 20);
  });
  FaultServer upstream;
  ExpectRefusedAsCountedToADefaultGrpcClient(upstream.Url("/wide-answer"));
}

TEST_F(BodyTest, PrefixReturnsTheFirstBytesAndSaysTheBodyWasTruncated) {
  FetchRequest request = Request(nginx().HttpsUrl("/cl/100k"), egress::v1::BODY_MODE_PREFIX);
  request.set_max_body_bytes(1000);
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("100k").substr(0, 1000));
  EXPECT_TRUE(response.body_truncated());
}

TEST_F(BodyTest, PrefixAsLongAsTheBodyIsNotTruncated) {
  FetchRequest request = Request(nginx().HttpsUrl("/cl/1k"), egress::v1::BODY_MODE_PREFIX);
  request.set_max_body_bytes(1024);
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
  EXPECT_FALSE(response.body_truncated());
}

TEST_F(BodyTest, PrefixOfAChunkedBodyCutsAcrossChunks) {
  FetchRequest request = Request(nginx().HttpsUrl("/chunked/mixed"), egress::v1::BODY_MODE_PREFIX);
  request.set_max_body_bytes(1030);
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.body(), MixedChunkedBody().substr(0, 1030));
  EXPECT_TRUE(response.body_truncated());
}

TEST_F(BodyTest, FetchStreamReturnsHeadThenTheWholeBody) {
  for (const auto& [path, expected] :
       {std::pair<std::string, std::string>{"/chunked/mixed", MixedChunkedBody()},
        {"/cl/262145", NginxUpstream::FileContent("262145")}}) {
    FetchResponse head;
    std::string body;
    const grpc::Status status = Stream(Request(nginx().HttpsUrl(path)), &head, &body);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(head.status_code(), 200);
    EXPECT_EQ(body, expected) << path;
  }
}

TEST_F(BodyTest, CancelledFetchStreamLeavesItsConnectionToDrainAndBeReused) {
  {
    // A caller whose windows take 64 KiB ahead of its reads, no more (gRPC's client grows
    // them as it measures the link): the body cannot all be sent before the cancel.
    grpc::ChannelArguments small_windows;
    small_windows.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    small_windows.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 * 1024);
    auto stub = egress::v1::Egress::NewStub(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                  grpc::InsecureChannelCredentials(), small_windows));
    grpc::ClientContext context;
    auto reader = stub->FetchStream(&context, Request(nginx().HttpsUrl("/cl/262144")));
    FetchChunk chunk;
    ASSERT_TRUE(reader->Read(&chunk));
    ASSERT_TRUE(chunk.has_head());
    ASSERT_TRUE(reader->Read(&chunk));
    ASSERT_FALSE(chunk.has_head());
    ASSERT_LT(chunk.body().size(), 262144u);
    context.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  WaitForQuietPool();
  EXPECT_EQ(observer_.drains_started, 1);
  EXPECT_EQ(observer_.drains_completed, 1);
  ASSERT_EQ(IdleConnections(), 1);

  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/1k")), &response).ok());
  EXPECT_TRUE(response.connection().reused());
  EXPECT_TRUE(response.connection().was_idle());
  EXPECT_EQ(observer_.opened, 1);
}

TEST_F(BodyTest, ConnectionInfoShowsReuseAndTiming) {
  FetchResponse first, second;
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/1k")), &first).ok());
  ASSERT_TRUE(Fetch(Request(nginx().HttpsUrl("/cl/1k")), &second).ok());
  EXPECT_FALSE(first.connection().reused());
  EXPECT_TRUE(second.connection().reused());
  EXPECT_EQ(first.connection().connection_id(), second.connection().connection_id());
  EXPECT_EQ(first.connection().remote_address(), "127.0.0.1:" + std::to_string(nginx().https_port()));
  EXPECT_GT(first.timing().tls_handshake().nanos() + first.timing().tls_handshake().seconds(), 0);
  EXPECT_EQ(second.timing().tls_handshake().nanos(), 0);
  EXPECT_GT(second.timing().total().nanos(), 0);
}

}  // namespace
}  // namespace egress::testing

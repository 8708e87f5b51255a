// Bad input and failing upstreams get a precise gRPC code and an actionable message;
// a normal fetch succeeds right after each.
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/config/config_store.h"
#include "tests/support/child_process.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;

class ErrorsTest : public EgressTest {
 protected:
  // Fetches, expects the code and a message containing `words`, then a healthy fetch.
  // Fetches, expects the code, a message containing `words` and google.rpc.ErrorInfo
  // with `reason`, then a healthy fetch.
  void ExpectFailure(const FetchRequest& request, grpc::StatusCode code,
                     const std::string& words, const std::string& reason) {
    FetchResponse response;
    const grpc::Status status = Fetch(request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(words));
    const auto info = ErrorInfoOf(status);
    ASSERT_TRUE(info.has_value()) << "no ErrorInfo in " << status.error_message();
    EXPECT_EQ(info->domain(), "egress.v1");
    EXPECT_EQ(info->reason(), reason) << status.error_message();
    ExpectHealthy();
  }

  void ExpectHealthy() {
    FetchResponse response;
    const grpc::Status status = Fetch(Request(nginx().HttpsUrl("/cl/1k")), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
  }

  FetchRequest WithUrl(const std::string& url) {
    FetchRequest request;
    request.set_url(url);
    return request;
  }
};

TEST_F(ErrorsTest, MalformedUrlIsInvalidArgument) {
  StartEgress();
  ExpectFailure(WithUrl("not a url"), grpc::StatusCode::INVALID_ARGUMENT, "not a valid absolute URL",
                "INVALID_URL");
  ExpectFailure(WithUrl("/relative/path"), grpc::StatusCode::INVALID_ARGUMENT, "URL", "INVALID_URL");
  ExpectFailure(WithUrl("http:///no-host"), grpc::StatusCode::INVALID_ARGUMENT, "has no host",
                "INVALID_URL");
  // No DNS name is longer than 253 characters: neither the pool nor the logs hold more.
  ExpectFailure(WithUrl("http://" + std::string(254, 'a') + "/"),
                grpc::StatusCode::INVALID_ARGUMENT, "a host name has at most 253", "INVALID_URL");
}

TEST_F(ErrorsTest, SchemeOtherThanHttpIsInvalidArgument) {
  StartEgress();
  ExpectFailure(WithUrl("ftp://localhost/file"), grpc::StatusCode::INVALID_ARGUMENT,
                "only http and https", "INVALID_URL");
}

TEST_F(ErrorsTest, HeaderValueWithCrLfIsInvalidArgumentAndNothingIsSent) {
  StartEgress();
  FetchRequest request = Request(nginx().HttpsUrl("/echo"));
  auto* header = request.add_headers();
  header->set_name("X-Note");
  header->set_value("a\r\nX-Injected: 1");
  ExpectFailure(request, grpc::StatusCode::INVALID_ARGUMENT, "forbidden character (CR)",
                "INVALID_HEADER");
  EXPECT_EQ(observer_.requests_new + observer_.requests_reused, 1);  // ExpectHealthy's only
}

TEST_F(ErrorsTest, HeaderNameThatIsNotATokenIsInvalidArgument) {
  StartEgress();
  FetchRequest request = Request(nginx().HttpsUrl("/echo"));
  auto* header = request.add_headers();
  header->set_name("Bad Name");
  header->set_value("x");
  ExpectFailure(request, grpc::StatusCode::INVALID_ARGUMENT, "not a valid HTTP token",
                "INVALID_HEADER");
}

TEST_F(ErrorsTest, MethodThatIsNotATokenIsInvalidArgument) {
  StartEgress();
  FetchRequest request = Request(nginx().HttpsUrl("/echo"));
  request.set_method("GE T");
  ExpectFailure(request, grpc::StatusCode::INVALID_ARGUMENT, "method", "INVALID_METHOD");
}

TEST_F(ErrorsTest, OversizedRequestBodyIsResourceExhausted) {
  StartEgress([](egress::v1::Config& c) { c.mutable_limits()->set_max_request_body_bytes(10); });
  FetchRequest request = Request(nginx().HttpsUrl("/echo"));
  request.set_method("POST");
  request.set_body(std::string(11, 'b'));
  ExpectFailure(request, grpc::StatusCode::RESOURCE_EXHAUSTED, "max_request_body_bytes",
                "REQUEST_TOO_LARGE");
}

// gRPC's own message limit (4 MiB by default) must not come before
// limits.max_request_body_bytes (8 MiB by default): a body within the limit goes through,
// and one byte more is refused with the limit's name, not gRPC's.
TEST_F(ErrorsTest, RequestBodiesUpToTheLimitGoThroughAndOneByteMoreNamesTheLimit) {
  StartEgress();
  const uint64_t limit = server_->config().Get()->limits.max_request_body_bytes;
  ASSERT_GT(limit, 4u << 20);
  FetchRequest request = Request(nginx().HttpUrl("/upload"));
  request.set_method("POST");
  request.set_body(std::string(limit, 'b'));
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_EQ(response.body(), absl::StrCat(limit, "\n"));  // nginx read all of it

  request.set_body(std::string(limit + 1, 'b'));
  ExpectFailure(request, grpc::StatusCode::RESOURCE_EXHAUSTED, "limits.max_request_body_bytes",
                "REQUEST_TOO_LARGE");
}

// The gRPC message limit is fixed when egressd starts: a config that needs a larger one
// is refused with what to do, a smaller one is taken.
TEST_F(ErrorsTest, RaisingTheRequestLimitsPastTheStartOnesTakesARestart) {
  StartEgress();
  egress::v1::Config larger = server_->config().Get()->proto;
  larger.mutable_limits()->set_max_request_body_bytes(larger.limits().max_request_body_bytes() + 1);
  const auto refused = server_->ApplyConfig(larger);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("restart"));

  egress::v1::Config smaller = server_->config().Get()->proto;
  smaller.mutable_limits()->set_max_request_body_bytes(1 << 20);
  ASSERT_TRUE(server_->ApplyConfig(smaller).ok());
  FetchRequest request = Request(nginx().HttpUrl("/upload"));
  request.set_method("POST");
  request.set_body(std::string((1 << 20) + 1, 'b'));
  ExpectFailure(request, grpc::StatusCode::RESOURCE_EXHAUSTED, "limits.max_request_body_bytes",
                "REQUEST_TOO_LARGE");
}

TEST_F(ErrorsTest, UnknownHostIsUnavailable) {
  StartEgress();
  // Runs in a network namespace with only loopback: the lookup cannot leave the machine.
  ExpectFailure(WithUrl("https://nonexistent.invalid/"), grpc::StatusCode::UNAVAILABLE,
                "resolving host \"nonexistent.invalid\"", "DNS_FAILED");
}

TEST_F(ErrorsTest, RefusedConnectionIsUnavailable) {
  StartEgress();
  const ClosedPort closed;
  ExpectFailure(WithUrl("http://127.0.0.1:" + std::to_string(closed.port()) + "/"),
                grpc::StatusCode::UNAVAILABLE, "refused", "CONNECT_FAILED");
}

TEST_F(ErrorsTest, UntrustedCertificateIsUnavailable) {
  StartEgress();
  // A second egress that does not trust the test CA.
  CountingObserver observer;
  egress::v1::Config proto;
  proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
  auto config = BuildConfig(proto);
  ASSERT_TRUE(config.ok());
  auto untrusting = EgressServer::Start(*config, "127.0.0.1:0", observer, observer);
  ASSERT_TRUE(untrusting.ok());
  auto stub = egress::v1::Egress::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*untrusting)->grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  FetchResponse response;
  const grpc::Status status = stub->Fetch(&context, Request(nginx().HttpsUrl("/cl/1k")), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("certificate verification failed"));
  const auto info = ErrorInfoOf(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "TLS_CERTIFICATE_INVALID");
  EXPECT_EQ(info->metadata().at("origin"), "https://localhost:" + std::to_string(nginx().https_port()));
  EXPECT_EQ(observer.opened, 0);
  ExpectHealthy();
}

TEST_F(ErrorsTest, RequestTimeoutIsDeadlineExceeded) {
  StartEgress();
  FetchRequest request = Request(nginx().HttpsUrl("/slow-head"));
  request.mutable_timeout()->set_nanos(300'000'000);
  ExpectFailure(request, grpc::StatusCode::DEADLINE_EXCEEDED, "deadline expired while waiting",
                "DEADLINE_EXCEEDED");
}

TEST_F(ErrorsTest, ResponseHeaderTimeoutIsDeadlineExceeded) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_transport()->mutable_response_header_timeout()->set_nanos(200'000'000);
  });
  ExpectFailure(Request(nginx().HttpsUrl("/slow-head")), grpc::StatusCode::DEADLINE_EXCEEDED,
                "timed out after 200ms", "UPSTREAM_TIMEOUT");
}

// nginx on idle_close_port closes connections idle for 1 s; egress finds that out before
// it writes the next request (tests/integration/egressd/faults_test.cc has the other cases).
TEST_F(ErrorsTest, ConnectionClosedWhileIdleIsReplacedBeforeSending) {
  StartEgress();
  const std::string url = "https://localhost:" + std::to_string(nginx().idle_close_port()) + "/cl/1k";
  FetchResponse response;
  ASSERT_TRUE(Fetch(Request(url), &response).ok());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const grpc::Status status = Fetch(Request(url), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
  EXPECT_FALSE(response.connection().reused());
  EXPECT_EQ(observer_.retries, 0);
  EXPECT_EQ(observer_.Closed(transport::CloseReason::kStale), 1);
  EXPECT_EQ(nginx().NewConnections(LoggedUri("/cl/1k"), 2), 2);
}

// A caller can tell which rule refused it and for what, without parsing the message.
TEST_F(ErrorsTest, PolicyDenialNamesTheRuleTheHostAndTheAddress) {
  StartEgress([](egress::v1::Config& c) { c.mutable_policy()->add_deny_cidrs("127.0.0.2/32"); });
  FetchResponse response;
  const grpc::Status status =
      Fetch(WithUrl("http://127.0.0.2:" + std::to_string(nginx().http_port()) + "/"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  const auto info = ErrorInfoOf(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason(), "POLICY_DENIED");
  EXPECT_EQ(info->metadata().at("rule"), "deny_cidrs:127.0.0.2/32");
  EXPECT_EQ(info->metadata().at("host"), "127.0.0.2");
  EXPECT_EQ(info->metadata().at("address"), "127.0.0.2");
  EXPECT_FALSE(RetryDelayOf(status).has_value());  // the same request fails the same way

  // A built-in denial names its range.
  const grpc::Status builtin = Fetch(WithUrl("http://10.0.0.1/"), &response);
  EXPECT_EQ(builtin.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(ErrorInfoOf(builtin).has_value());
  EXPECT_EQ(ErrorInfoOf(builtin)->metadata().at("rule"), "builtin:private");
  ExpectHealthy();
}

// A refusal for load says that a retry may help, and when.
TEST_F(ErrorsTest, ConcurrencyLimitSaysWhenToRetry) {
  StartEgress([](egress::v1::Config& c) { c.mutable_limits()->set_max_concurrent_fetches(1); });
  BackgroundFetch hanging(*stub_, Request(nginx().HttpsUrl("/slow-head")));
  ASSERT_TRUE(WaitFor([&] { return server_->fetches_in_flight() == 1; }));
  FetchResponse response;
  const grpc::Status status = Fetch(Request(nginx().HttpsUrl("/cl/1k")), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(ErrorInfoOf(status).has_value());
  EXPECT_EQ(ErrorInfoOf(status)->reason(), "CONCURRENCY_LIMIT");
  EXPECT_EQ(ErrorInfoOf(status)->metadata().at("limit"), "limits.max_concurrent_fetches");
  ASSERT_TRUE(RetryDelayOf(status).has_value());
  EXPECT_GT(*RetryDelayOf(status), absl::ZeroDuration());
  hanging.Cancel();
  hanging.Wait();
}

}  // namespace
}  // namespace egress::testing

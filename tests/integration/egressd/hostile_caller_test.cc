// What one caller can make egressd hold is bounded (body bytes per request and for all
// fetches together, time, concurrent fetches), credentials do not follow a redirect to
// another origin, and every byte of a header value reaches the caller while every
// string egressd writes stays valid UTF-8.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "service/fetch/utf8_text.h"
#include "tests/support/egress_fixture.h"
#include "tests/support/resident_memory.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;
using ::testing::Not;

class HostileCallerTest : public EgressFaultsTest {
 protected:
  // egressd started, one fetch made (gRPC's own descriptors open from here on) and the
  // descriptors counted, so that TearDown can check none is left behind.
  void Start(const std::function<void(egress::v1::Config&)>& configure = {}) {
    StartEgress(configure);
    ExpectHealthy();
    RecordBaseline();
  }
  void TearDown() override {
    if (server_) ExpectRecovered();
    EgressFaultsTest::TearDown();
  }

  grpc::Status FetchAs(const std::string& caller, const FetchRequest& request,
                       FetchResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    context.AddMetadata("x-egress-caller", caller);
    return stub_->Fetch(&context, request, response);
  }

  // The header lines /echo-headers saw, lower-cased names, one per line.
  static std::string SeenHeaders(const FetchResponse& response) {
    return absl::AsciiStrToLower(response.body());
  }
};

TEST_F(HostileCallerTest, MaxBodyBytesAboveTheCeilingFailsAtOnceAndNothingIsSent) {
  Start();
  const int accepted = faults().accepted();
  FetchRequest request = Request(faults().Url("/endless-body"));
  request.set_max_body_bytes(uint64_t{1} << 62);
  request.mutable_timeout()->set_seconds(2);
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("max_body_bytes of 4611686018427387904 is above the limit of 67108864 "
                        "bytes (limits.max_body_bytes_ceiling)"));
  EXPECT_EQ(faults().accepted(), accepted);
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::INVALID_ARGUMENT), 1);
}

TEST_F(HostileCallerTest, ARequestTargetOverTheLimitIsInvalidAndNothingIsSent) {
  Start();
  const int accepted = faults().accepted();
  FetchResponse response;
  const grpc::Status status =
      Fetch(Request(faults().Url("/ok?q=" + std::string(70 * 1024, 'a'))), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("bytes; egress sends at most 65533"));
  EXPECT_EQ(faults().accepted(), accepted);
  ExpectHealthy();
}

TEST_F(HostileCallerTest, ATimeoutOutsideTheDurationRangeIsInvalidAndNothingIsSent) {
  Start();
  const int accepted = faults().accepted();
  FetchRequest request = Request(faults().Url("/ok"));
  request.mutable_timeout()->set_seconds(1);
  request.mutable_timeout()->set_nanos(-500'000'000);  // signs that disagree
  FetchResponse response;
  grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("timeout: not a valid google.protobuf.Duration"));
  request.mutable_timeout()->set_seconds(int64_t{1} << 62);
  request.mutable_timeout()->set_nanos(0);
  status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(faults().accepted(), accepted);
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::INVALID_ARGUMENT), 2);
}

TEST_F(HostileCallerTest, PrefixAboveTheCeilingFailsToo) {
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->set_default_max_body_bytes(1 << 20);
    c.mutable_limits()->set_max_body_bytes_ceiling(1 << 20);
  });
  FetchRequest request = Request(faults().Url("/endless-body"), egress::v1::BODY_MODE_PREFIX);
  request.set_max_body_bytes((1 << 20) + 1);
  FetchResponse response;
  EXPECT_EQ(Fetch(request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  request.set_max_body_bytes(1 << 20);
  const grpc::Status status = Fetch(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body().size(), 1u << 20);
  EXPECT_TRUE(response.body_truncated());
}

// One fetch holds 600 KiB of a 1 MiB budget; the next cannot reserve what it reads and
// fails at once instead of waiting on the stalled body too.
TEST_F(HostileCallerTest, FetchThatFindsTheBodyBudgetSpentIsResourceExhaustedAtOnce) {
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->set_default_max_body_bytes(1 << 20);
    c.mutable_limits()->set_max_body_bytes_ceiling(1 << 20);
    c.mutable_limits()->set_buffered_body_budget_bytes(1 << 20);
  });
  BackgroundFetch holder(*stub_, Request(faults().Url("/stall-body")));
  ASSERT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 600 * 1024; }));

  FetchRequest request = Request(faults().Url("/stall-body"));
  request.mutable_timeout()->set_seconds(3);
  FetchResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("egress is holding its limit of 1048576 response body bytes for all "
                        "fetches together (limits.buffered_body_budget_bytes)"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_LE(observer_.buffered_body_peak, 1u << 20);

  holder.Cancel();
  EXPECT_EQ(holder.Wait().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
}

// The holder's 600 KiB fill the budget; a FetchStream cannot hold even its one chunk.
TEST_F(HostileCallerTest, FetchStreamChunkCountsAgainstTheBodyBudget) {
  constexpr uint64_t kBudget = 600 * 1024;
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->set_default_max_body_bytes(kBudget);
    c.mutable_limits()->set_max_body_bytes_ceiling(kBudget);
    c.mutable_limits()->set_buffered_body_budget_bytes(kBudget);
  });
  BackgroundFetch holder(*stub_, Request(faults().Url("/stall-body")));
  ASSERT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == kBudget; }));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = stub_->FetchStream(&context, Request(faults().Url("/ok")));
  egress::v1::FetchChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  EXPECT_EQ(chunk.head().status_code(), 200);
  EXPECT_FALSE(reader->Read(&chunk));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("(limits.buffered_body_budget_bytes)"));

  holder.Cancel();
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
}

// Eight callers each ask for the ceiling of an endless body at once: what egress holds
// stays within the budget (sampled as its resident memory), not eight times the ceiling.
TEST_F(HostileCallerTest, ManyLargeFetchesStayWithinTheBodyBudget) {
  constexpr uint64_t kBudget = 16 << 20;
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->set_max_body_bytes_ceiling(kBudget);
    c.mutable_limits()->set_buffered_body_budget_bytes(kBudget);
  });
  std::vector<std::unique_ptr<BackgroundFetch>> fetches;
  for (int i = 0; i < 8; ++i) {
    FetchRequest request = Request(faults().Url("/endless-body"));
    request.set_max_body_bytes(kBudget);
    // Sanitizer builds read bodies several times slower.
    fetches.push_back(std::make_unique<BackgroundFetch>(*stub_, request, "", Gap(30000)));
  }
  RssGrowth growth;
  int exhausted = 0;
  for (auto& fetch : fetches) {
    exhausted += fetch->Wait().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  const int64_t grown = growth.Stop();
  EXPECT_EQ(exhausted, 8);  // over max_body_bytes, or refused by the budget
  EXPECT_LE(observer_.buffered_body_peak, kBudget);
  // Strings grow by doubling: up to twice what is reserved, and some slack.
  if (!SanitizerBuild()) {
    EXPECT_LT(grown, 4 * int64_t{kBudget}) << "resident memory grew by " << grown;
  }
  EXPECT_TRUE(WaitFor([&] { return observer_.buffered_body_bytes == 0; }));
}

TEST_F(HostileCallerTest, TimeoutLongerThanMaxTimeoutIsCutShortAndSaysSo) {
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->mutable_max_timeout()->set_nanos(300'000'000);
  });
  FetchRequest request = Request(faults().Url("/never"));
  request.mutable_timeout()->set_seconds(60);
  FetchResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("(egress ends every fetch after 300ms: limits.max_timeout)"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(HostileCallerTest, CallerAtItsConcurrencyLimitIsTurnedAwayWhileOthersAreServed) {
  Start([](egress::v1::Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");  // the test's calls
    c.mutable_limits()->set_max_concurrent_fetches_per_caller(2);
  });
  const int accepted = faults().accepted();
  BackgroundFetch first(*stub_, Request(faults().Url("/never")), "greedy");
  BackgroundFetch second(*stub_, Request(faults().Url("/never")), "greedy");
  ASSERT_TRUE(WaitFor([&] { return faults().accepted() == accepted + 2; }));

  FetchResponse response;
  const grpc::Status third = FetchAs("greedy", Request(faults().Url("/ok")), &response);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(third.error_message(),
              HasSubstr("caller \"greedy\" has its limit of 2 concurrent fetches under way "
                        "(limits.max_concurrent_fetches_per_caller)"));
  EXPECT_TRUE(FetchAs("modest", Request(faults().Url("/ok")), &response).ok());

  first.Cancel();
  EXPECT_EQ(first.Wait().error_code(), grpc::StatusCode::CANCELLED);
  // Its place frees up once egress has seen the cancellation and ended the fetch.
  EXPECT_TRUE(WaitFor([&] { return FetchAs("greedy", Request(faults().Url("/ok")), &response).ok(); }));
}

TEST_F(HostileCallerTest, CallersWithoutAnIdentityShareOneConcurrencyLimit) {
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->set_max_concurrent_fetches_per_caller(1);
  });
  const int accepted = faults().accepted();
  BackgroundFetch holder(*stub_, Request(faults().Url("/never")));
  ASSERT_TRUE(WaitFor([&] { return faults().accepted() == accepted + 1; }));
  FetchResponse response;
  const grpc::Status status = Fetch(Request(faults().Url("/ok")), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("callers without an identity have their limit of 1 concurrent fetches "
                        "under way (limits.max_concurrent_fetches_per_caller)"));
  holder.Cancel();
  EXPECT_EQ(holder.Wait().error_code(), grpc::StatusCode::CANCELLED);
}

// A caller's place frees before its answer leaves, so a caller that waits for each
// answer never meets its own last fetch (CI saw the fetch after one refused when the
// place freed only once gRPC was done with the call).
TEST_F(HostileCallerTest, CallerFetchingOneAtATimeIsNeverTurnedAway) {
  Start([](egress::v1::Config& c) {
    c.mutable_limits()->set_max_concurrent_fetches_per_caller(1);
  });
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    FetchResponse response;
    const grpc::Status status = Fetch(Request(faults().Url("/ok")), &response);
    refused += status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    ASSERT_TRUE(status.ok() || status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << status.error_message();
  }
  EXPECT_EQ(refused, 0);
}

TEST_F(HostileCallerTest, CredentialsAreDroppedWhenARedirectChangesOrigin) {
  Start();
  FetchRequest request = Request(faults().Url("/redirect-other-origin"));
  request.set_follow_redirects(true);
  for (const auto& [name, value] : {std::pair{"Authorization", "Bearer secret"},
                                    {"Cookie", "session=secret"},
                                    {"Proxy-Authorization", "Basic secret"},
                                    {"X-Trace", "kept"}}) {
    auto* header = request.add_headers();
    header->set_name(name);
    header->set_value(value);
  }
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status_code(), 200);
  EXPECT_THAT(SeenHeaders(response), HasSubstr("host: localhost:"));
  EXPECT_THAT(SeenHeaders(response), HasSubstr("x-trace: kept"));
  EXPECT_THAT(SeenHeaders(response), Not(HasSubstr("secret")));
}

TEST_F(HostileCallerTest, CredentialsFollowARedirectWithinTheOrigin) {
  Start();
  FetchRequest request = Request(faults().Url("/redirect-same-origin"));
  request.set_follow_redirects(true);
  auto* header = request.add_headers();
  header->set_name("Authorization");
  header->set_value("Bearer secret");
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(SeenHeaders(response), HasSubstr("authorization: bearer secret"));
}

TEST_F(HostileCallerTest, RedirectStripHeadersReplacesTheDefaultList) {
  Start([](egress::v1::Config& c) {
    c.mutable_policy()->add_redirect_strip_headers("X-Api-Key");
  });
  FetchRequest request = Request(faults().Url("/redirect-other-origin"));
  request.set_follow_redirects(true);
  for (const auto& [name, value] :
       {std::pair{"X-Api-Key", "key-secret"}, {"Authorization", "Bearer kept"}}) {
    auto* header = request.add_headers();
    header->set_name(name);
    header->set_value(value);
  }
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_THAT(SeenHeaders(response), Not(HasSubstr("key-secret")));
  EXPECT_THAT(SeenHeaders(response), HasSubstr("authorization: bearer kept"));
}

TEST_F(HostileCallerTest, HeaderValueThatIsNotUtf8ArrivesByteForByte) {
  Start();
  FetchResponse response;
  const grpc::Status status = Fetch(Request(faults().Url("/latin1-header")), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const egress::v1::Header* disposition = nullptr;
  for (const auto& header : response.headers()) {
    if (header.name() == "Content-Disposition") disposition = &header;
  }
  ASSERT_NE(disposition, nullptr);
  EXPECT_EQ(disposition->value_bytes(), "attachment; filename=\"caf\xE9.txt\"");
  EXPECT_EQ(disposition->value(), "attachment; filename=\"caf\u00e9.txt\"");
  for (const auto& header : response.headers()) {
    if (&header != disposition) {
      EXPECT_EQ(header.value_bytes(), "") << header.name();
    }
  }
}

TEST_F(HostileCallerTest, HeaderValueBytesAreSentInsteadOfTheValue) {
  Start();
  FetchRequest request = Request(faults().Url("/echo-headers"));
  auto* header = request.add_headers();
  header->set_name("X-Name");
  header->set_value("ignored");
  header->set_value_bytes("caf\xE9");
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  const std::vector<std::string> lines = absl::StrSplit(response.body(), "\r\n");
  EXPECT_THAT(lines, ::testing::Contains("X-Name: caf\xE9"));
  EXPECT_THAT(response.body(), Not(HasSubstr("ignored")));
}

TEST_F(HostileCallerTest, ErrorMessageQuotingUpstreamBytesIsValidUtf8) {
  Start();
  FetchRequest request = Request(faults().Url("/latin1-location"));
  request.set_follow_redirects(true);
  FetchResponse response;
  const grpc::Status status = Fetch(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("http://caf\\xe9 .test/"));
  EXPECT_TRUE(IsUtf8(status.error_message())) << status.error_message();
}

}  // namespace
}  // namespace egress::testing

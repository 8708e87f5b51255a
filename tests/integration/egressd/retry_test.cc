// Retries of whole fetches (transport.retry, FetchRequest.max_attempts) against the
// fault server's switchable /switch: what is retried and what never is, the budget that
// bounds retries under an origin that always fails, Retry-After, the deadline, and a
// cancel during the backoff.
#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "service/config/proto_time.h"
#include "tests/support/child_process.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using transport::RetryReason;

class RetryTest : public EgressFaultsTest {
 protected:
  void TearDown() override {
    faults().SetSwitch(FaultServer::Switch::kOk);
    EgressFaultsTest::TearDown();
  }

  // Retries on for every origin: `attempts`, a short backoff, and a budget that does not
  // get in the way unless given.
  void StartWithRetries(uint32_t attempts, uint32_t budget_percent = 100,
                        uint32_t min_per_second = 100,
                        absl::Duration base_backoff = absl::Milliseconds(1)) {
    StartEgress([=](egress::v1::Config& c) {
      auto* retry = c.mutable_transport()->mutable_retry();
      retry->set_max_attempts(attempts);
      ToProto(base_backoff, retry->mutable_base_backoff());
      ToProto(base_backoff, retry->mutable_max_backoff());
      retry->set_budget_percent(budget_percent);
      retry->set_min_retries_per_second(min_per_second);
    });
  }

  FetchRequest Switch(const std::string& method = "GET") const {
    FetchRequest request = Request(faults().Url("/switch"));
    request.set_method(method);
    return request;
  }

  int Retries(RetryReason reason) const {
    return observer_.retries_by_reason[static_cast<size_t>(reason)];
  }
};

TEST_F(RetryTest, AnIdempotentRequestIsRetriedOn503UntilItsAttemptsAreSpent) {
  StartWithRetries(3);
  faults().SetSwitch(FaultServer::Switch::k503);
  const int before = faults().switch_requests();
  FetchResponse response;
  ASSERT_TRUE(Fetch(Switch(), &response).ok());
  EXPECT_EQ(response.status_code(), 503);  // the last attempt's answer
  EXPECT_EQ(faults().switch_requests() - before, 3);
  EXPECT_EQ(Retries(RetryReason::kStatus), 2);
}

TEST_F(RetryTest, ARetryThatFindsTheUpstreamRecoveredGivesItsAnswer) {
  StartWithRetries(2);
  faults().SetSwitch(FaultServer::Switch::k503RetryAfter1);  // a second to switch it back
  BackgroundFetch fetch(*stub_, Switch());
  ASSERT_TRUE(WaitFor([&] { return Retries(RetryReason::kStatus) == 1; }));
  faults().SetSwitch(FaultServer::Switch::kOk);
  EXPECT_TRUE(fetch.Wait().ok()) << fetch.Wait().error_message();
}

TEST_F(RetryTest, ANonIdempotentRequestThatWasWrittenIsNeverRetried) {
  StartWithRetries(3);
  for (auto behaviour : {FaultServer::Switch::k503, FaultServer::Switch::kReset}) {
    faults().SetSwitch(behaviour);
    const int before = faults().switch_requests();
    FetchResponse response;
    const grpc::Status status = Fetch(Switch("POST"), &response);
    if (behaviour == FaultServer::Switch::k503) {
      EXPECT_TRUE(status.ok());
      EXPECT_EQ(response.status_code(), 503);
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    }
    EXPECT_EQ(faults().switch_requests() - before, 1);
  }
  EXPECT_EQ(observer_.retries, 0);
}

TEST_F(RetryTest, AResetIsRetriedForAnIdempotentRequest) {
  StartWithRetries(3);
  faults().SetSwitch(FaultServer::Switch::kReset);
  const int before = faults().switch_requests();
  FetchResponse response;
  EXPECT_EQ(Fetch(Switch("PUT"), &response).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(faults().switch_requests() - before, 3);
  EXPECT_EQ(Retries(RetryReason::kReset), 2);
}

// Nothing was written when the connection failed: any method may go again.
TEST_F(RetryTest, AConnectFailureIsRetriedForAnyMethod) {
  StartWithRetries(3);
  const ClosedPort closed;
  FetchRequest request = Request(absl::StrCat("http://127.0.0.1:", closed.port(), "/"));
  request.set_method("POST");
  FetchResponse response;
  EXPECT_EQ(Fetch(request, &response).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Retries(RetryReason::kConnectFailed), 2);
}

// Under an origin that always fails, retries stay within budget_percent of the fetches.
TEST_F(RetryTest, RetriesNeverExceedTheBudgetUnderAnOriginThatAlwaysFails) {
  StartWithRetries(/*attempts=*/3, /*budget_percent=*/20, /*min_per_second=*/0);
  faults().SetSwitch(FaultServer::Switch::k503);
  constexpr int kFetches = 50;
  const int before = faults().switch_requests();
  for (int i = 0; i < kFetches; ++i) {
    FetchResponse response;
    ASSERT_TRUE(Fetch(Switch(), &response).ok());
  }
  const int retries = Retries(RetryReason::kStatus);
  EXPECT_LE(retries, kFetches * 20 / 100);
  EXPECT_GE(retries, kFetches * 20 / 100 - 1);  // what the budget earned was spent
  EXPECT_EQ(faults().switch_requests() - before, kFetches + retries);
  EXPECT_GT(observer_.retry_budget_exhausted, 0);
}

// Off by default; a request may ask for attempts of its own.
TEST_F(RetryTest, ARequestOptsInWithMaxAttempts) {
  StartEgress();
  faults().SetSwitch(FaultServer::Switch::k503);
  int before = faults().switch_requests();
  FetchResponse response;
  ASSERT_TRUE(Fetch(Switch(), &response).ok());
  EXPECT_EQ(faults().switch_requests() - before, 1);
  FetchRequest request = Switch();
  request.set_max_attempts(2);
  before = faults().switch_requests();
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(faults().switch_requests() - before, 2);
  request.set_max_attempts(11);
  EXPECT_EQ(Fetch(request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A Retry-After that ends past the deadline is not waited for: the 503 is the answer.
TEST_F(RetryTest, ARetryAfterPastTheDeadlineIsNotWaitedFor) {
  StartWithRetries(3);
  faults().SetSwitch(FaultServer::Switch::k503RetryAfter1);
  FetchRequest request = Switch();
  request.mutable_timeout()->set_nanos(500'000'000);
  const int before = faults().switch_requests();
  FetchResponse response;
  ASSERT_TRUE(Fetch(request, &response).ok());
  EXPECT_EQ(response.status_code(), 503);
  EXPECT_EQ(faults().switch_requests() - before, 1);
  EXPECT_EQ(observer_.retries, 0);
}

// A caller that cancels during the backoff ends the fetch then; no attempt follows.
TEST_F(RetryTest, ACancelDuringTheBackoffEndsTheFetch) {
  StartWithRetries(3, 100, 0, /*base_backoff=*/absl::Seconds(20));
  faults().SetSwitch(FaultServer::Switch::k503RetryAfter1);
  // Retry-After 1 s is honoured over the backoff; cancel while waiting for it.
  const int before = faults().switch_requests();
  BackgroundFetch fetch(*stub_, Switch());
  ASSERT_TRUE(WaitFor([&] { return observer_.retries == 1; }));
  fetch.Cancel();
  EXPECT_EQ(fetch.Wait().error_code(), grpc::StatusCode::CANCELLED);
  std::this_thread::sleep_for(Gap(1500));  // past the Retry-After
  EXPECT_EQ(faults().switch_requests() - before, 1);
}

}  // namespace
}  // namespace egress::testing

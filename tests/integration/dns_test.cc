// Name lookups: many at once, each bounded by its own timeout, capped per caller and in
// all. The test's own DNS server listens at 127.0.0.53:53, where run_in_netns.sh points
// /etc/resolv.conf (timeout 1 s, 1 attempt), inside the test's network namespace.
#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "tests/support/dns_server.h"
#include "tests/support/egress_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;
using transport::DnsResult;
using Clock = std::chrono::steady_clock;

class DnsTest : public EgressTest {
 protected:
  void SetUp() override {
    dns_ = DnsServer::Start("127.0.0.53");
    ASSERT_NE(dns_, nullptr) << "cannot bind 127.0.0.53:53";
    dns_->Answer("answered.test", "127.0.0.1");
  }

  // nginx, by a name.
  FetchRequest RequestFor(const std::string& host, int timeout_ms = 0) const {
    FetchRequest request =
        Request(absl::StrCat("http://", host, ":", nginx().http_port(), "/cl/1k"));
    if (timeout_ms) {
      request.mutable_timeout()->set_seconds(timeout_ms / 1000);
      request.mutable_timeout()->set_nanos(timeout_ms % 1000 * 1'000'000);
    }
    return request;
  }

  grpc::Status FetchAs(const std::string& caller, const FetchRequest& request,
                       FetchResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!caller.empty()) context.AddMetadata("x-egress-caller", caller);
    return stub_->Fetch(&context, request, response);
  }

  // Starts fetches to names the DNS server never answers, one per name, each on a thread
  // of its own; returns once the server has seen a query for each (or after 300 ms).
  void StartUnanswered(const std::vector<std::string>& names, int timeout_ms,
                       const std::string& caller = "") {
    for (const auto& name : names) {
      dns_->Ignore(name);
      unanswered_.emplace_back();
      Unanswered& fetch = unanswered_.back();
      fetch.name = name;
      fetch.thread = std::thread([this, &fetch, timeout_ms, caller] {
        const auto start = Clock::now();
        FetchResponse response;
        fetch.status = FetchAs(caller, RequestFor(fetch.name, timeout_ms), &response);
        fetch.took = Clock::now() - start;
      });
    }
    const auto give_up = Clock::now() + Gap(300);
    for (const auto& name : names) {
      while (dns_->Queries(name) == 0 && Clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }

  void JoinUnanswered() {
    for (auto& fetch : unanswered_) fetch.thread.join();
  }

  void TearDown() override {
    for (auto& fetch : unanswered_) {
      if (fetch.thread.joinable()) fetch.thread.join();
    }
    EgressTest::TearDown();
  }

  struct Unanswered {
    std::string name;
    std::thread thread;
    grpc::Status status;
    Clock::duration took{};
  };

  std::unique_ptr<DnsServer> dns_;
  std::list<Unanswered> unanswered_;  // a list: threads hold references to its elements
};

TEST_F(DnsTest, NameTheServerAnswersIsFetched) {
  StartEgress();
  FetchResponse response;
  const grpc::Status status = Fetch(RequestFor("answered.test"), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
  EXPECT_EQ(response.connection().remote_address(),
            absl::StrCat("127.0.0.1:", nginx().http_port()));
  EXPECT_EQ(observer_.DnsLookups(DnsResult::kOk), 1);
}

TEST_F(DnsTest, NameThatDoesNotExistIsUnavailable) {
  StartEgress();
  FetchResponse response;
  const grpc::Status status = Fetch(RequestFor("missing.test"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat("resolving host \"missing.test\" for http://missing.test:",
                                     nginx().http_port(), " failed: the name does not exist")));
  EXPECT_EQ(observer_.DnsLookups(DnsResult::kNxdomain), 1);
}

TEST_F(DnsTest, NameInEtcHostsNeedsNoDnsServer) {
  StartEgress();
  dns_.reset();  // nothing listens on 127.0.0.53
  FetchResponse response;
  const grpc::Status status = Fetch(RequestFor("loop.test"), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
}

// The case: with the old resolver (one getaddrinfo at a time) the answered name
// waited behind the unanswered ones.
TEST_F(DnsTest, AnsweredNameIsFetchedPromptlyWhileFourLookupsGoUnanswered) {
  StartEgress();
  StartUnanswered({"silent1.test", "silent2.test", "silent3.test", "silent4.test"}, 900);
  for (const auto& fetch : unanswered_) {
    EXPECT_GT(dns_->Queries(fetch.name), 0) << fetch.name << "'s lookup has not started";
  }
  const auto start = Clock::now();
  FetchResponse response;
  const grpc::Status status = Fetch(RequestFor("answered.test", 5000), &response);
  const auto took = Clock::now() - start;
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_LT(took, Gap(300)) << "the answered lookup waited for the unanswered ones";
  JoinUnanswered();
  for (const auto& fetch : unanswered_) {
    EXPECT_EQ(fetch.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << fetch.name;
  }
}

TEST_F(DnsTest, UnansweredLookupsEndAtTheirOwnTimeouts) {
  StartEgress();
  const std::vector<int> timeouts_ms = {200, 350, 500, 650};
  for (size_t i = 0; i < timeouts_ms.size(); ++i) {
    StartUnanswered({absl::StrCat("slow", i, ".test")}, timeouts_ms[i]);
  }
  JoinUnanswered();
  size_t i = 0;
  for (const auto& fetch : unanswered_) {
    const int timeout_ms = timeouts_ms[i++];
    EXPECT_EQ(fetch.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << fetch.name;
    EXPECT_THAT(fetch.status.error_message(),
                HasSubstr(absl::StrCat("deadline expired while resolving host \"", fetch.name,
                                       "\"")));
    EXPECT_GE(fetch.took, std::chrono::milliseconds(timeout_ms)) << fetch.name;
    EXPECT_LT(fetch.took, std::chrono::milliseconds(timeout_ms) + Gap(150)) << fetch.name;
  }
  EXPECT_EQ(observer_.DnsLookups(DnsResult::kTimeout), 4);
}

TEST_F(DnsTest, LookupsPastTheCallersLimitAreResourceExhausted) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");  // the test's calls
    c.mutable_transport()->mutable_dns()->set_max_lookups_per_caller(2);
  });
  StartUnanswered({"batch1.test", "batch2.test"}, 1500, "batch");
  FetchResponse response;
  const grpc::Status refused = FetchAs("batch", RequestFor("answered.test"), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("caller \"batch\" already has 2 name lookups in flight, the most "
                        "transport.dns.max_lookups_per_caller allows"));
  const grpc::Status other = FetchAs("web", RequestFor("answered.test"), &response);
  EXPECT_TRUE(other.ok()) << other.error_message();
  EXPECT_EQ(observer_.DnsLookups(DnsResult::kOverLimit), 1);
  JoinUnanswered();
}

TEST_F(DnsTest, LookupsPastTheTotalLimitAreResourceExhausted) {
  StartEgress([](egress::v1::Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");  // the test's calls
    c.mutable_transport()->mutable_dns()->set_max_lookups(2);
  });
  StartUnanswered({"busy1.test"}, 1500, "batch");
  StartUnanswered({"busy2.test"}, 1500, "report");
  FetchResponse response;
  const grpc::Status refused = FetchAs("web", RequestFor("answered.test"), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("2 name lookups are in flight, the most transport.dns.max_lookups "
                        "allows"));
  EXPECT_EQ(observer_.DnsLookups(DnsResult::kOverLimit), 1);
  JoinUnanswered();
}

TEST_F(DnsTest, ConfiguredServersAreAskedInsteadOfResolvConfs) {
  auto own = DnsServer::Start("127.0.0.54", 0);
  ASSERT_NE(own, nullptr);
  own->Answer("own.test", "127.0.0.1");
  StartEgress([&](egress::v1::Config& c) {
    c.mutable_transport()->mutable_dns()->add_servers(absl::StrCat("127.0.0.54:", own->port()));
  });
  FetchResponse response;
  const grpc::Status status = Fetch(RequestFor("own.test"), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), NginxUpstream::FileContent("1k"));
  EXPECT_GT(own->Queries("own.test"), 0);
  EXPECT_EQ(dns_->Queries("own.test"), 0);
}

}  // namespace
}  // namespace egress::testing

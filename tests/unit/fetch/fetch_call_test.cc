// A Fetch or FetchStream call's logic runs without gRPC: FetchCall drives a fake caller
// side, against a real upstream on loopback, and the fake sees what a caller would get.
#include "service/fetch/fetch_call.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/config/config_store.h"
#include "service/transport/policy/address_policy.h"
#include "tests/support/child_process.h"
#include "tests/support/counting_observer.h"
#include "tests/support/keep_alive_server.h"
#include "tests/support/status_details.h"

namespace egress::fetch {
namespace {

using egress::v1::FetchRequest;
using egress::v1::FetchResponse;

// A one-time signal between threads, on std::mutex and std::condition_variable, which
// ThreadSanitizer sees (the system's Abseil is not built with its annotations).
class Signal {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    changed_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return notified_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool notified_ = false;
};

// What the fake caller side was given, in order; outlives the fake (which the call frees).
struct Seen {
  std::mutex mu;
  std::vector<std::string> events;  // "head", "body", "finish"
  FetchResponse response;           // the head as sent (FetchStream), or the whole answer (Fetch)
  std::string body;                 // FetchStream's body bytes
  grpc::Status status;
  Signal finished;
  Signal released;
};

// A caller side with no front end: it records what the call sends, takes every message at
// once, and is Done when the test says so (as gRPC's OnDone comes after Finish).
class FakeCaller final : public CallerSide {
 public:
  FakeCaller(FetchCall::Rpc rpc, Seen& seen, std::multimap<std::string, std::string> metadata)
      : seen_(seen), metadata_(std::move(metadata)), call_(rpc, *this) {}

  void Start(const Context& service, FetchRequest& request) { call_.Start(service, request); }
  // After this the fake may be gone.
  void Done() { call_.Done(); }

  std::string Peer() const override { return "ipv4:127.0.0.1:40000"; }
  absl::InlinedVector<absl::string_view, 1> Metadata(absl::string_view key) const override {
    absl::InlinedVector<absl::string_view, 1> values;
    const auto [first, last] = metadata_.equal_range(std::string(key));
    for (auto it = first; it != last; ++it) values.emplace_back(it->second);
    return values;
  }
  std::string CertificateName(egress::v1::IdentitySource) const override { return ""; }
  absl::Time Deadline() const override { return absl::Now() + absl::Seconds(10); }

  FetchResponse& Response() override { return response_; }
  void SendHead() override {
    {
      std::lock_guard<std::mutex> lock(seen_.mu);
      seen_.events.push_back("head");
      seen_.response = response_;
    }
    call_.OnSent(absl::OkStatus());
  }
  void SendBody(std::string bytes) override {
    {
      std::lock_guard<std::mutex> lock(seen_.mu);
      seen_.events.push_back("body");
      seen_.body += bytes;
    }
    call_.OnSent(absl::OkStatus());
  }
  void Finish(const grpc::Status& status) override {
    {
      std::lock_guard<std::mutex> lock(seen_.mu);
      seen_.events.push_back("finish");
      if (status.ok() && seen_.events.front() == "finish") seen_.response = response_;
      seen_.status = status;
    }
    seen_.finished.Notify();
  }
  void Release() override {
    Seen& seen = seen_;
    delete this;
    seen.released.Notify();
  }

 private:
  Seen& seen_;
  const std::multimap<std::string, std::string> metadata_;
  FetchResponse response_;
  FetchCall call_;
};

class FetchCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    transport::TransportSettings settings;
    settings.io_threads = 2;
    transport::PolicyRules open_policy;
    open_policy.enabled = false;  // the upstream is on loopback
    settings.policy = std::make_shared<transport::AddressPolicy>(open_policy);
    auto created = transport::Transport::Create(settings, observer_);
    ASSERT_TRUE(created.ok()) << created.status();
    transport_ = *std::move(created);
    context_ = std::make_unique<Context>(Context{*transport_, config_, observer_,
                                                 fetches_in_flight_, stopped_, body_budget_,
                                                 caller_counts_, quotas_, quota_stores_,
                                                 nullptr});
  }

  // Runs one call to its end: Finish, then Done, then the caller side's release.
  void Call(FetchCall::Rpc rpc, FetchRequest request,
            std::multimap<std::string, std::string> metadata = {}) {
    auto* caller = new FakeCaller(rpc, seen_, std::move(metadata));
    caller->Start(*context_, request);
    seen_.finished.Wait();
    caller->Done();
    seen_.released.Wait();
  }

  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(seen_.mu);
    return seen_.events;
  }

  testing::KeepAliveServer upstream_{5, 0, std::chrono::milliseconds(0)};
  testing::CountingObserver observer_;
  ConfigStore config_{ServiceConfig{}};
  std::atomic<uint32_t> fetches_in_flight_{0};
  std::atomic<bool> stopped_{false};
  BodyBudget body_budget_{observer_};
  CallerCounts caller_counts_;
  QuotaTable quotas_{observer_};
  QuotaStores quota_stores_;
  // After what it works with, so destroyed first.
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<Context> context_;
  Seen seen_;
};

TEST_F(FetchCallTest, FetchFinishesOkWithTheHeadAndTheWholeBodyInOneAnswer) {
  FetchRequest request;
  request.set_url(upstream_.Url("/whole"));
  Call(FetchCall::Rpc::kFetch, request);

  EXPECT_EQ(events(), std::vector<std::string>{"finish"});
  EXPECT_TRUE(seen_.status.ok()) << seen_.status.error_message();
  EXPECT_EQ(seen_.response.status_code(), 200);
  EXPECT_EQ(seen_.response.body(), "ok");
  EXPECT_FALSE(seen_.response.body_truncated());
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::OK), 1);
  EXPECT_EQ(fetches_in_flight_, 0u);
  EXPECT_EQ(upstream_.responses(), 1);
}

TEST_F(FetchCallTest, FetchStreamSendsTheHeadThenTheBodyBytesThenFinishesOk) {
  FetchRequest request;
  request.set_url(upstream_.Url("/stream"));
  Call(FetchCall::Rpc::kFetchStream, request);

  EXPECT_EQ(events(), (std::vector<std::string>{"head", "body", "finish"}));
  EXPECT_TRUE(seen_.status.ok()) << seen_.status.error_message();
  EXPECT_EQ(seen_.response.status_code(), 200);
  EXPECT_TRUE(seen_.response.body().empty()) << "the head carries no body";
  EXPECT_EQ(seen_.body, "ok");
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::OK), 1);
  EXPECT_EQ(observer_.CostOf("").response_bytes, 2u);
}

TEST_F(FetchCallTest, FetchWithBodyModeNoneAnswersTheHeadWithoutTheBody) {
  FetchRequest request;
  request.set_url(upstream_.Url("/none"));
  request.set_body_mode(egress::v1::BODY_MODE_NONE);
  Call(FetchCall::Rpc::kFetch, request);

  EXPECT_TRUE(seen_.status.ok()) << seen_.status.error_message();
  EXPECT_EQ(seen_.response.status_code(), 200);
  EXPECT_TRUE(seen_.response.body().empty());
}

TEST_F(FetchCallTest, AnUnreachableUpstreamFinishesUnavailableWithItsReasonAndTheCallersTrace) {
  const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  const testing::ClosedPort closed;
  FetchRequest request;
  request.set_url(absl::StrCat("http://127.0.0.1:", closed.port(), "/"));
  Call(FetchCall::Rpc::kFetch, request,
       {{"traceparent", absl::StrCat("00-", trace_id, "-00f067aa0ba902b7-01")}});

  EXPECT_EQ(events(), std::vector<std::string>{"finish"});
  EXPECT_EQ(seen_.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  const auto info = testing::ErrorInfoOf(seen_.status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->domain(), "egress.v1");
  EXPECT_FALSE(info->reason().empty());
  EXPECT_NE(info->reason(), "UPSTREAM_UNAVAILABLE") << "the transport's own reason, not the default";
  ASSERT_EQ(info->metadata().count("trace_id"), 1u);
  EXPECT_EQ(info->metadata().at("trace_id"), trace_id);
  EXPECT_EQ(observer_.Fetches(grpc::StatusCode::UNAVAILABLE), 1);
}

TEST_F(FetchCallTest, FetchRefusesMaxBodyBytesAboveTheCeilingWithoutAskingTheUpstream) {
  FetchRequest request;
  request.set_url(upstream_.Url("/big"));
  request.set_max_body_bytes(ServiceConfig{}.limits.max_body_bytes_ceiling + 1);
  Call(FetchCall::Rpc::kFetch, request);

  EXPECT_EQ(seen_.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(testing::ErrorInfoOf(seen_.status).value_or(google::rpc::ErrorInfo()).reason(),
            "MAX_BODY_BYTES_ABOVE_CEILING");
  EXPECT_EQ(upstream_.responses(), 0);
  EXPECT_EQ(fetches_in_flight_, 0u);
}

TEST_F(FetchCallTest, TheCallerIsNamedByItsHeaderFromATrustedPeer) {
  ServiceConfig config;
  config.callers.caller_header = "x-caller";
  config.callers.header_trusted_cidrs.push_back(*transport::Cidr::Parse("127.0.0.0/8"));
  config_.Set(config);
  FetchRequest request;
  request.set_url(upstream_.Url("/named"));
  Call(FetchCall::Rpc::kFetch, request, {{"x-caller", "billing"}});

  EXPECT_TRUE(seen_.status.ok()) << seen_.status.error_message();
  EXPECT_EQ(observer_.CostOf("billing").fetches, 1u);
  EXPECT_EQ(observer_.CostOf("").fetches, 0u);
}

}  // namespace
}  // namespace egress::fetch

// Rolling a policy out safely: report-only rules (policy.report_only) let through what
// they would deny and count it, and TransportAdmin.DryRunConfig replays the latest
// decisions against a proposed config and names what it would change, which must be
// exactly what applying that config then does to the same traffic. Upstream: nginx on
// 127.0.0.1 and 127.0.0.2 (redirector.test, by the netns's /etc/hosts).
#include <future>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/metrics/metrics.h"
#include "service/transport/transport.h"
#include "tests/support/admin_fixture.h"

namespace egress::testing {
namespace {

using egress::v1::Config;
using egress::v1::DryRunConfigResponse;
using egress::v1::FetchResponse;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using transport::DenyReason;

class PolicyRolloutTest : public EgressAdminTest {
 protected:
  // Callers are named by x-egress-caller, trusted from the test's own address.
  static void NameCallers(Config& c) {
    c.mutable_policy()->set_caller_header("x-egress-caller");
    c.mutable_policy()->add_caller_header_trusted_peers("127.0.0.1");
  }

  grpc::Status FetchAs(const std::string& caller, const std::string& url) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!caller.empty()) context.AddMetadata("x-egress-caller", caller);
    FetchResponse response;
    return stub_->Fetch(&context, Request(url), &response);
  }

  // A fetch straight from the transport (no caller), its body let go of.
  absl::StatusOr<transport::Response> TransportFetch(EgressServer& server, const std::string& url) {
    auto request = transport::MakeRequest("GET", url, {}, "");
    EXPECT_TRUE(request.ok()) << request.status();
    std::promise<absl::StatusOr<transport::Response>> promise;
    server.transport().Fetch(*std::move(request), absl::Now() + absl::Seconds(20),
                             [&](absl::StatusOr<transport::Response> response) {
                               promise.set_value(std::move(response));
                             });
    return promise.get_future().get();
  }

  grpc::Status DryRun(const Config& config, DryRunConfigResponse* answer) {
    egress::v1::DryRunConfigRequest request;
    *request.mutable_config() = config;
    grpc::ClientContext context;
    return admin_stub_->DryRunConfig(&context, request, answer);
  }

  grpc::Status Update(const Config& config) {
    egress::v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    grpc::ClientContext context;
    Config in_force;
    return admin_stub_->UpdateConfig(&context, request, &in_force);
  }

  Config Current() {
    grpc::ClientContext context;
    Config config;
    EXPECT_TRUE(admin_stub_->GetConfig(&context, egress::v1::GetConfigRequest(), &config).ok());
    return config;
  }

  std::string Url127(int last_byte, const std::string& path = "/cl/1k") const {
    return absl::StrCat("http://127.0.0.", last_byte, ":", nginx().http_port(), path);
  }

};

TEST_F(PolicyRolloutTest, ReportOnlyRulesDenyNothingAndCountWhatTheyWouldHaveDenied) {
  StartEgress([](Config& c) {
    NameCallers(c);
    auto* report_only = c.mutable_policy()->mutable_report_only();
    report_only->add_deny_cidrs("127.0.0.1/32");
    report_only->add_deny_hosts("localhost");
    auto* rule = report_only->add_callers();
    rule->set_identity("billing");
    rule->add_allowed_hosts("api.example.com");
    report_only->set_unknown_callers(egress::v1::UNKNOWN_CALLERS_DENY);
  });
  // Twice each: the second fetch reuses the pooled connection and is judged by its address.
  for (int i = 0; i < 2; ++i) {
    const grpc::Status billing = FetchAs("billing", nginx().HttpUrl("/cl/1k"));
    EXPECT_TRUE(billing.ok()) << billing.error_message();
    const grpc::Status anonymous = FetchAs("", nginx().HttpsUrl("/cl/1k"));
    EXPECT_TRUE(anonymous.ok()) << anonymous.error_message();
    WaitForQuietPool();
  }
  EXPECT_EQ(nginx().WaitForRequests(LoggedUri("/cl/1k"), 4).size(), 4u);  // all reached it
  EXPECT_GE(observer_.requests_reused, 2);
  EXPECT_EQ(observer_.WouldDeny("deny_cidrs:127.0.0.1/32"), 2);  // billing, to 127.0.0.1
  EXPECT_EQ(observer_.WouldDeny("callers:billing"), 2);
  EXPECT_EQ(observer_.WouldDeny("deny_hosts:localhost"), 2);     // the anonymous caller
  EXPECT_EQ(observer_.WouldDeny("unknown_callers"), 2);
  EXPECT_EQ(observer_.AllDenied(), 0);
}

TEST_F(PolicyRolloutTest, EnforcedRulesStillDenyBesideReportOnlyOnes) {
  StartEgress([](Config& c) {
    c.mutable_policy()->add_deny_hosts("redirector.test");
    c.mutable_policy()->mutable_report_only()->add_deny_cidrs("127.0.0.0/8");
  });
  const grpc::Status denied =
      FetchAs("", absl::StrCat("http://redirector.test:", nginx().http_port(), "/cl/1k"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
  EXPECT_THAT(denied.error_message(), HasSubstr("matches policy.deny_hosts"));
  EXPECT_EQ(observer_.Denied(DenyReason::kHostDenied), 1);
  EXPECT_EQ(observer_.WouldDeny("deny_cidrs:127.0.0.0/8"), 0);  // denied: nothing to report
  EXPECT_TRUE(FetchAs("", Url127(1)).ok());
  EXPECT_EQ(observer_.WouldDeny("deny_cidrs:127.0.0.0/8"), 1);
}

TEST_F(PolicyRolloutTest, TheResponseNamesTheReportOnlyRulesThatWouldHaveDeniedIt) {
  StartEgress([](Config& c) {
    c.mutable_policy()->mutable_report_only()->add_deny_cidrs("127.0.0.1/32");
  });
  auto flagged = TransportFetch(*server_, Url127(1));
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  EXPECT_THAT(flagged->would_deny_rules, UnorderedElementsAre("deny_cidrs:127.0.0.1/32"));
  flagged->body.reset();
  auto clean = TransportFetch(*server_, Url127(2));
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_TRUE(clean->would_deny_rules.empty());
}

// The counter as Prometheus reads it, from egressd's own metrics.
TEST(PolicyRolloutMetricsTest, WouldDenyIsCountedByRuleInPrometheus) {
  Config proto;
  proto.mutable_policy()->add_allow_cidrs("127.0.0.0/8");
  proto.mutable_policy()->mutable_report_only()->add_deny_cidrs("127.0.0.1/32");
  auto config = BuildConfig(proto);
  ASSERT_TRUE(config.ok()) << config.status();
  Metrics metrics(100);
  auto server = EgressServer::Start(*config, "127.0.0.1:0", metrics, metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  auto nginx = NginxUpstream::Start(absl::StrCat(::testing::TempDir(), "/rollout-nginx"));
  for (int i = 0; i < 3; ++i) {
    auto request = transport::MakeRequest("GET", nginx->HttpUrl("/cl/1k"), {}, "");
    ASSERT_TRUE(request.ok());
    std::promise<absl::Status> done;
    (*server)->transport().Fetch(*std::move(request), absl::Now() + absl::Seconds(20),
                                 [&](absl::StatusOr<transport::Response> response) {
                                   done.set_value(response.status());
                                 });
    ASSERT_TRUE(done.get_future().get().ok());
  }
  std::map<std::string, double> by_rule;
  for (const auto& family : metrics.Collect()) {
    if (family.name != "egress_policy_would_deny_total") continue;
    for (const auto& metric : family.metric) {
      ASSERT_EQ(metric.label.size(), 1u);
      EXPECT_EQ(metric.label[0].name, "rule");
      by_rule[metric.label[0].value] = metric.counter.value;
    }
  }
  EXPECT_EQ(by_rule, (std::map<std::string, double>{{"deny_cidrs:127.0.0.1/32", 3}}));
}

TEST_F(PolicyRolloutTest, ADryRunNamesExactlyTheFetchesThatApplyingTheConfigChanges) {
  const std::string redirector =
      absl::StrCat("http://redirector.test:", nginx().http_port(), "/cl/1k");  // 127.0.0.2
  // In force: billing may reach 127.0.0.1 and redirector.test; redirector.test is denied.
  StartEgress([](Config& c) {
    NameCallers(c);
    c.mutable_policy()->add_deny_hosts("redirector.test");
    auto* billing = c.mutable_policy()->add_callers();
    billing->set_identity("billing");
    billing->add_allowed_hosts("127.0.0.1");
    billing->add_allowed_hosts("redirector.test");
  });
  StartAdmin();
  struct Traffic {
    std::string caller, url, origin;
  };
  const std::string origin1 = absl::StrCat("http://127.0.0.1:", nginx().http_port());
  const std::string origin2 = absl::StrCat("http://127.0.0.2:", nginx().http_port());
  const std::string origin3 = absl::StrCat("http://redirector.test:", nginx().http_port());
  const std::vector<Traffic> traffic = {{"billing", Url127(1), origin1},
                                        {"billing", Url127(2), origin2},
                                        {"search", Url127(1), origin1},
                                        {"search", redirector, origin3}};
  // Each fetch twice; whether it was let through, by caller and origin.
  auto run = [&] {
    std::map<std::pair<std::string, std::string>, int> allowed;
    for (int i = 0; i < 2; ++i) {
      for (const Traffic& t : traffic) {
        const grpc::Status status = FetchAs(t.caller, t.url);
        EXPECT_TRUE(status.ok() || status.error_code() == grpc::StatusCode::PERMISSION_DENIED)
            << status.error_message();
        allowed[{t.caller, t.origin}] += status.ok() ? 1 : 0;
      }
      WaitForQuietPool();
    }
    return allowed;
  };
  const auto before = run();

  // Proposed: billing may reach 127.0.0.2 only, 127.0.0.1 is denied, redirector.test is not.
  Config proposed = Current();
  proposed.mutable_policy()->clear_deny_hosts();
  proposed.mutable_policy()->add_deny_cidrs("127.0.0.1/32");
  proposed.mutable_policy()->mutable_callers(0)->clear_allowed_hosts();
  proposed.mutable_policy()->mutable_callers(0)->add_allowed_hosts("127.0.0.2");
  DryRunConfigResponse answer;
  const grpc::Status dry_run = DryRun(proposed, &answer);
  ASSERT_TRUE(dry_run.ok()) << dry_run.error_message();
  EXPECT_EQ(answer.decisions_replayed(), 8u);
  using Change = std::tuple<std::string, std::string, uint64_t, std::string, std::string>;
  std::set<Change> newly_denied, newly_allowed;
  for (const auto& c : answer.newly_denied()) {
    newly_denied.emplace(c.caller(), c.origin(), c.fetches(), c.rule(), c.previous_rule());
  }
  for (const auto& c : answer.newly_allowed()) {
    newly_allowed.emplace(c.caller(), c.origin(), c.fetches(), c.rule(), c.previous_rule());
  }
  EXPECT_EQ(newly_denied,
            (std::set<Change>{{"billing", origin1, 2, "callers:billing", "allow_cidrs:127.0.0.0/8"},
                              {"search", origin1, 2, "deny_cidrs:127.0.0.1/32",
                               "allow_cidrs:127.0.0.0/8"}}));
  // redirector.test was denied by its name, so it was never looked up: the dry run lets
  // it through with no address to judge ("unresolved").
  EXPECT_EQ(newly_allowed,
            (std::set<Change>{{"billing", origin2, 2, "allow_cidrs:127.0.0.0/8", "callers:billing"},
                              {"search", origin3, 2, "unresolved",
                               "deny_hosts:redirector.test"}}));

  // Enforced, the same traffic changes exactly so.
  const grpc::Status applied = Update(proposed);
  ASSERT_TRUE(applied.ok()) << applied.error_message();
  const auto after = run();
  std::set<Change> denied_now, allowed_now;
  for (const auto& [who, allowed] : after) {
    const int was = before.at(who);
    const auto& [caller, origin] = who;
    if (allowed < was) {
      denied_now.emplace(caller, origin, was - allowed, "", "");
    } else if (allowed > was) {
      allowed_now.emplace(caller, origin, allowed - was, "", "");
    }
  }
  const auto without_rules = [](const std::set<Change>& changes) {
    std::set<Change> stripped;
    for (const auto& [caller, origin, fetches, rule, previous] : changes) {
      stripped.emplace(caller, origin, fetches, "", "");
    }
    return stripped;
  };
  EXPECT_EQ(denied_now, without_rules(newly_denied));
  EXPECT_EQ(allowed_now, without_rules(newly_allowed));
}

TEST_F(PolicyRolloutTest, TheDecisionHistoryKeepsOnlyTheLatestN) {
  StartEgress([](Config& c) {
    c.mutable_policy()->set_decision_history_size(3);
    c.mutable_policy()->add_deny_cidrs("127.0.0.3/32");
  });
  StartAdmin();
  for (int port = 1; port <= 5; ++port) {  // denied at once: nothing is connected to
    EXPECT_EQ(FetchAs("", absl::StrCat("http://127.0.0.3:", port, "/")).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  Config open = Current();
  open.mutable_policy()->clear_deny_cidrs();
  DryRunConfigResponse answer;
  ASSERT_TRUE(DryRun(open, &answer).ok());
  EXPECT_EQ(answer.decisions_replayed(), 3u);
  std::vector<std::string> origins;
  for (const auto& c : answer.newly_allowed()) origins.push_back(c.origin());
  EXPECT_THAT(origins, UnorderedElementsAre("http://127.0.0.3:3", "http://127.0.0.3:4",
                                            "http://127.0.0.3:5"));
}

TEST_F(PolicyRolloutTest, AnInvalidProposedConfigIsRefusedAndChangesNothing) {
  StartEgress([](Config& c) { c.mutable_policy()->add_deny_hosts("redirector.test"); });
  StartAdmin();
  const Config in_force = Current();
  Config invalid = in_force;
  invalid.mutable_policy()->mutable_report_only()->add_deny_cidrs("10.0.0.0/33");
  DryRunConfigResponse answer;
  const grpc::Status dry_run = DryRun(invalid, &answer);
  EXPECT_EQ(dry_run.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(dry_run.error_message(), HasSubstr("policy.report_only.deny_cidrs[0]"));
  // UpdateConfig refuses a malformed report-only rule as it does an enforced one.
  const grpc::Status update = Update(invalid);
  EXPECT_EQ(update.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(update.error_message(), HasSubstr("policy.report_only.deny_cidrs[0]"));
  Config bad_caller = in_force;
  bad_caller.mutable_policy()->mutable_report_only()->add_callers()->set_identity("billing");
  EXPECT_EQ(DryRun(bad_caller, &answer).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Current(), in_force));
  EXPECT_EQ(FetchAs("", absl::StrCat("http://redirector.test:", nginx().http_port(), "/"))
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace egress::testing

// The dry run's answer stays within what a gRPC client takes, however many distinct
// callers and hosts the history holds.
#include "service/admin/dry_run.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/ip/address.hpp"
#include "gtest/gtest.h"

namespace egress {
namespace {

using transport::PolicyDecision;

TEST(DryRunTest, EachListIsCutAtAThousandEntriesAndTheRestIsCounted) {
  std::vector<PolicyDecision> decisions;
  for (int i = 0; i < 1500; ++i) {
    PolicyDecision decision;
    decision.origin.host = absl::StrCat("host", i, ".example.com");
    decision.origin.port = 80;
    decision.addresses = {boost::asio::ip::make_address("192.0.2.1")};
    decision.verdict.rule = "default_allow";
    decisions.push_back(decision);
  }
  decisions.push_back(decisions.back());  // the same change again: one entry, two fetches
  transport::PolicyRules rules;
  rules.deny_cidrs.push_back(*transport::Cidr::Parse("192.0.2.0/24"));
  const auto answer = DryRun(decisions, transport::AddressPolicy(std::move(rules)));
  EXPECT_EQ(answer.decisions_replayed(), 1501u);
  EXPECT_EQ(answer.newly_denied_size(), 1000);
  EXPECT_EQ(answer.newly_denied_fetches_omitted(), 501u);
  EXPECT_EQ(answer.newly_denied(0).rule(), "deny_cidrs:192.0.2.0/24");
  EXPECT_EQ(answer.newly_allowed_size(), 0);
}

}  // namespace
}  // namespace egress

#include "service/admin/dry_run.h"

#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace egress {
namespace {

// Entries per list at most: 100,000 decisions of distinct callers and hosts would make
// an answer larger than a gRPC client takes (4 MiB by default).
constexpr int kMaxChanges = 1000;

}  // namespace

egress::v1::DryRunConfigResponse DryRun(const std::vector<transport::PolicyDecision>& decisions,
                                        const transport::AddressPolicy& proposed) {
  egress::v1::DryRunConfigResponse answer;
  answer.set_decisions_replayed(decisions.size());
  // newly denied, caller, origin, rule, previous rule
  using Key = std::tuple<bool, std::string, std::string, std::string, std::string>;
  absl::flat_hash_map<Key, egress::v1::PolicyChange*> changes;
  for (const transport::PolicyDecision& decision : decisions) {
    const transport::PolicyVerdict now =
        proposed.Evaluate(decision.caller, decision.origin.host, decision.addresses);
    const bool denied = now.denied.has_value();
    if (denied == decision.verdict.denied.has_value()) continue;
    Key key{denied, decision.caller, decision.origin.Key(), now.rule, decision.verdict.rule};
    egress::v1::PolicyChange*& change = changes[key];
    if (!change &&
        (denied ? answer.newly_denied_size() : answer.newly_allowed_size()) >= kMaxChanges) {
      if (denied) {
        answer.set_newly_denied_fetches_omitted(answer.newly_denied_fetches_omitted() + 1);
      } else {
        answer.set_newly_allowed_fetches_omitted(answer.newly_allowed_fetches_omitted() + 1);
      }
      continue;
    }
    if (!change) {
      change = denied ? answer.add_newly_denied() : answer.add_newly_allowed();
      change->set_caller(decision.caller);
      change->set_origin(std::get<2>(key));
      for (const auto& address : decision.addresses) change->add_addresses(address.to_string());
      change->set_rule(now.rule);
      change->set_previous_rule(decision.verdict.rule);
    }
    change->set_fetches(change->fetches() + 1);
  }
  return answer;
}

}  // namespace egress

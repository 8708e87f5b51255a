#ifndef EGRESS_SERVICE_ADMIN_DRY_RUN_H_
#define EGRESS_SERVICE_ADMIN_DRY_RUN_H_

#include <vector>

#include "egress/v1/egress.pb.h"
#include "service/transport/policy/address_policy.h"
#include "service/transport/policy/policy_history.h"

namespace egress {

// Asks `proposed` what the live policy was asked for each of `decisions` (the same
// AddressPolicy::Evaluate the transport's checks make up), and answers which fetches
// it would newly deny or allow: one entry per caller, destination and pair of deciding
// rules, in the order they first appear. A report-only rule's "would deny" counts as
// allowed, then and now.
egress::v1::DryRunConfigResponse DryRun(const std::vector<transport::PolicyDecision>& decisions,
                                        const transport::AddressPolicy& proposed);

}  // namespace egress

#endif  // EGRESS_SERVICE_ADMIN_DRY_RUN_H_

#ifndef EGRESS_SERVICE_TRANSPORT_POLICY_POLICY_DENIAL_H_
#define EGRESS_SERVICE_TRANSPORT_POLICY_POLICY_DENIAL_H_

#include <string>

#include "absl/status/status.h"
#include "service/transport/http/origin.h"
#include "service/transport/policy/address_policy.h"

namespace egress::transport {

// The PERMISSION_DENIED a caller gets when `verdict` refuses `origin` for `caller`: by a
// caller rule before any connection, or for an address (resolved or pooled). Its reason
// is POLICY_DENIED, with the rule that decided (as PolicyVerdict names it), the host,
// the origin, the address and the caller.
absl::Status PolicyDenial(const Origin& origin, const PolicyVerdict& verdict,
                          const std::string& caller);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POLICY_POLICY_DENIAL_H_

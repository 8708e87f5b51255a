#ifndef EGRESS_SERVICE_FETCH_CALLER_IDENTITY_H_
#define EGRESS_SERVICE_FETCH_CALLER_IDENTITY_H_

// Who is calling: the name a fetch's limits, quotas and log know its caller by, from a
// trusted peer's caller_header or the peer's mTLS client certificate.

#include <string>

#include "service/config/config.h"
#include "service/fetch/caller_side.h"

namespace egress::fetch {

// The caller's identity: caller_header's value when a trusted peer (a mesh proxy) sent
// it, else the name policy.identity_source picks from its mTLS client certificate;
// empty when neither says.
std::string CallerIdentity(const CallerSide& caller, const CallerPolicy& callers);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_CALLER_IDENTITY_H_

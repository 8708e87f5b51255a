#include "service/fetch/caller_identity.h"

#include <algorithm>

#include "service/fetch/peer_address.h"

namespace egress::fetch {
namespace {

// Whether caller_header may be believed from this peer: its address or its certificate
// identity is listed in policy.caller_header_trusted_peers.
bool HeaderTrusted(const CallerSide& caller, const CallerPolicy& callers,
                   const std::string& certificate_identity) {
  if (!certificate_identity.empty() &&
      std::find(callers.header_trusted_identities.begin(),
                callers.header_trusted_identities.end(),
                certificate_identity) != callers.header_trusted_identities.end()) {
    return true;
  }
  if (callers.header_trusted_cidrs.empty()) return false;
  const auto address = PeerAddress(caller.Peer());
  return address && std::any_of(callers.header_trusted_cidrs.begin(),
                                callers.header_trusted_cidrs.end(),
                                [&](const transport::Cidr& c) { return c.Contains(*address); });
}

}  // namespace

std::string CallerIdentity(const CallerSide& caller, const CallerPolicy& callers) {
  std::string certificate_identity = caller.CertificateName(callers.identity_source);
  if (!callers.caller_header.empty() && HeaderTrusted(caller, callers, certificate_identity)) {
    const auto values = caller.Metadata(callers.caller_header);
    if (!values.empty()) {
      // Two values (a proxy that appends to what its client sent): which one the trusted
      // peer set cannot be told, so neither names the caller.
      if (values.size() > 1) return "";
      return std::string(values.front());
    }
  }
  return certificate_identity;
}

}  // namespace egress::fetch

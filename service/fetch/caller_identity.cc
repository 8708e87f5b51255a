#include "service/fetch/caller_identity.h"

#include <algorithm>
#include <iterator>

#include "grpc/grpc_security_constants.h"
#include "grpcpp/server_context.h"
#include "service/fetch/peer_address.h"

namespace egress::fetch {
namespace {

// The first value of an AuthContext property, or empty.
std::string FirstProperty(const grpc::AuthContext& auth, const char* name) {
  for (const auto& value : auth.FindPropertyValues(name)) {
    return std::string(value.data(), value.size());
  }
  return "";
}

// The name policy.identity_source picks from the peer's mTLS client certificate; empty
// when the peer sent none (plaintext, or TLS without client certificates).
std::string CertificateIdentity(const grpc::CallbackServerContext& context,
                                const CallerPolicy& callers) {
  const auto auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  switch (callers.identity_source) {
    case egress::v1::IDENTITY_SOURCE_DNS_SAN:
      return FirstProperty(*auth, GRPC_PEER_DNS_PROPERTY_NAME);
    case egress::v1::IDENTITY_SOURCE_COMMON_NAME:
      return FirstProperty(*auth, GRPC_X509_CN_PROPERTY_NAME);
    default:
      return FirstProperty(*auth, GRPC_PEER_URI_PROPERTY_NAME);
  }
}

// Whether caller_header may be believed from this peer: its address or its certificate
// identity is listed in policy.caller_header_trusted_peers.
bool HeaderTrusted(const grpc::CallbackServerContext& context, const CallerPolicy& callers,
                   const std::string& certificate_identity) {
  if (!certificate_identity.empty() &&
      std::find(callers.header_trusted_identities.begin(),
                callers.header_trusted_identities.end(),
                certificate_identity) != callers.header_trusted_identities.end()) {
    return true;
  }
  if (callers.header_trusted_cidrs.empty()) return false;
  const auto address = PeerAddress(context.peer());
  return address && std::any_of(callers.header_trusted_cidrs.begin(),
                                callers.header_trusted_cidrs.end(),
                                [&](const transport::Cidr& c) { return c.Contains(*address); });
}

}  // namespace

std::string CallerIdentity(const grpc::CallbackServerContext& context,
                           const CallerPolicy& callers) {
  std::string certificate_identity = CertificateIdentity(context, callers);
  if (!callers.caller_header.empty() && HeaderTrusted(context, callers, certificate_identity)) {
    const auto& metadata = context.client_metadata();
    const auto [first, last] = metadata.equal_range(callers.caller_header);
    if (first != last) {
      // Two values (a proxy that appends to what its client sent): which one the trusted
      // peer set cannot be told, so neither names the caller.
      if (std::next(first) != last) return "";
      return std::string(first->second.data(), first->second.size());
    }
  }
  return certificate_identity;
}

}  // namespace egress::fetch

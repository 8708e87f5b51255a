#ifndef EGRESS_SERVICE_FETCH_CERTIFICATE_NAMES_H_
#define EGRESS_SERVICE_FETCH_CERTIFICATE_NAMES_H_

// The names a caller's verified client certificate carries, read the way gRPC's library
// server (C-core 1.51) reads them into its AuthContext, so that either data plane, and
// the admin service, name a certificate alike.

#include <openssl/x509.h>

#include <optional>
#include <string>
#include <vector>

#include "egress/v1/egress.pb.h"
#include "grpcpp/security/auth_context.h"

namespace egress::fetch {

struct CertificateNames {
  std::vector<std::string> uri_sans;  // AuthContext's peer_uri, in the certificate's order
  std::vector<std::string> dns_sans;  // peer_dns
  std::string common_name;            // x509_common_name: the subject's first CN
};

// What an AuthContext holds for its peer; nothing when the peer is not authenticated
// (plaintext, or TLS without a client certificate).
CertificateNames NamesOf(const grpc::AuthContext& auth);
// What C-core puts in an AuthContext for `certificate`, a verified client certificate:
// the SANs and the CN as UTF-8. Nothing for null. None where C-core fails the handshake
// instead: a CN, or a DNS, email or URI SAN, that does not convert to UTF-8, or an IP SAN
// of neither 4 nor 16 bytes (so that a name C-core would refuse cannot reach the
// identity rules as "" on the other data plane).
std::optional<CertificateNames> NamesOf(const X509* certificate);

// The name policy.identity_source picks: the first URI SAN (UNSPECIFIED too), the first
// DNS SAN, or the common name; empty when the certificate has none.
std::string CertificateName(const CertificateNames& names, egress::v1::IdentitySource source);

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_CERTIFICATE_NAMES_H_

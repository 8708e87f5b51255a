#include "service/fetch/grpc_caller_side.h"

#include <chrono>

#include "grpcpp/server_context.h"
#include "service/fetch/certificate_names.h"

namespace egress::fetch {

std::string GrpcCallerSide::Peer() const { return context_.peer(); }

absl::InlinedVector<absl::string_view, 1> GrpcCallerSide::Metadata(absl::string_view key) const {
  absl::InlinedVector<absl::string_view, 1> values;
  const auto& metadata = context_.client_metadata();
  const auto [first, last] = metadata.equal_range(grpc::string_ref(key.data(), key.size()));
  for (auto it = first; it != last; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  return values;
}

// Plaintext, or TLS without client certificates, gives no name.
std::string GrpcCallerSide::CertificateName(egress::v1::IdentitySource source) const {
  const auto auth = context_.auth_context();
  return auth ? fetch::CertificateName(NamesOf(*auth), source) : "";
}

// gRPC says "no deadline" with a time point far in the future.
absl::Time GrpcCallerSide::Deadline() const {
  const auto deadline = context_.deadline();
  if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
    return absl::FromChrono(deadline);
  }
  return absl::InfiniteFuture();
}

}  // namespace egress::fetch

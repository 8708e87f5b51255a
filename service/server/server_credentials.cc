#include "service/server/server_credentials.h"

#include "absl/strings/str_cat.h"
#include "service/base/files.h"
#include "service/transport/tls/client_context.h"

namespace egress {

absl::StatusOr<ListenerCredentials> LoadServerCredentials(const ServerTlsFiles& files,
                                                          const std::string& flag_prefix) {
  if (!files.any()) return ListenerCredentials();
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_prefix, "_cert and ", flag_prefix, "_key: set both to serve TLS"));
  }
  auto cert = ReadBoundedFile(files.cert_file, transport::kMaxPemFileBytes);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_prefix, "_cert: ", cert.status().message()));
  }
  auto key = ReadBoundedFile(files.key_file, transport::kMaxPemFileBytes);
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag_prefix, "_key: ", key.status().message()));
  }
  ListenerCredentials credentials;
  credentials.loops.certificate_chain = *cert;
  credentials.loops.private_key = *key;
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca_file.empty()) {
    auto ca = ReadBoundedFile(files.client_ca_file, transport::kMaxPemFileBytes);
    if (!ca.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag_prefix, "_client_ca: ", ca.status().message()));
    }
    credentials.loops.client_ca = *ca;
    options.pem_root_certs = *ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  credentials.library = grpc::SslServerCredentials(options);
  return credentials;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files, const std::string& flag_prefix) {
  auto credentials = LoadServerCredentials(files, flag_prefix);
  if (!credentials.ok()) return credentials.status();
  return std::move(credentials->library);
}

}  // namespace egress

#include "service/server_credentials.h"

#include "absl/strings/str_cat.h"
#include "service/config_reloader.h"

namespace egress {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files, const std::string& flag_prefix) {
  if (!files.any()) return grpc::InsecureServerCredentials();
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_prefix, "_cert and ", flag_prefix, "_key: set both to serve TLS"));
  }
  auto cert = ReadWholeFile(files.cert_file);
  auto key = ReadWholeFile(files.key_file);
  if (!cert.ok() || !key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag_prefix, "_cert/_key: cannot read \"",
                                                   files.cert_file, "\" or \"", files.key_file,
                                                   "\""));
  }
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!files.client_ca_file.empty()) {
    auto ca = ReadWholeFile(files.client_ca_file);
    if (!ca.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag_prefix, "_client_ca: cannot read \"", files.client_ca_file, "\""));
    }
    options.pem_root_certs = *ca;
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace egress

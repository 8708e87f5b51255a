#include "service/transport/tls.h"

#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"

namespace egress::transport {

namespace ssl = boost::asio::ssl;

absl::StatusOr<std::shared_ptr<ssl::context>> MakeClientTlsContext(
    const ClientTlsFiles& files) {
  const std::string& extra_ca_file = files.extra_ca_file;
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  context->set_default_verify_paths(ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot load the system trust store: ",
                                            ec.message()));
  }
  if (!extra_ca_file.empty()) {
    context->load_verify_file(extra_ca_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "transport.extra_ca_file: cannot load \"", extra_ca_file, "\": ", ec.message()));
    }
  }
  if (files.client_cert_file.empty() != files.client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "client_cert_file and client_key_file: set both for mTLS, or neither");
  }
  if (!files.client_cert_file.empty()) {
    context->use_certificate_chain_file(files.client_cert_file, ec);
    if (!ec) context->use_private_key_file(files.client_key_file, ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client_cert_file/client_key_file: cannot load \"", files.client_cert_file, "\" / \"",
          files.client_key_file, "\": ", ec.message()));
    }
  }
  context->set_verify_mode(ssl::verify_peer);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  return context;
}

}  // namespace egress::transport

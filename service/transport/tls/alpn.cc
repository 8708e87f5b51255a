#include "service/transport/tls/alpn.h"

namespace egress::transport::http2 {

bool OfferHttp2(SSL* ssl, bool http1_fallback) {
  // Length-prefixed names, in order of preference.
  static constexpr unsigned char kProtocols[] = "\x02h2\x08http/1.1";
  const unsigned int length = http1_fallback ? sizeof(kProtocols) - 1 : 3;  // or "\x02h2"
  SSL_set_options(ssl, SSL_OP_NO_RENEGOTIATION);
  return SSL_set_alpn_protos(ssl, kProtocols, length) == 0;
}

std::string NegotiatedProtocol(const SSL* ssl) {
  const unsigned char* name = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl, &name, &length);
  return name ? std::string(reinterpret_cast<const char*>(name), length) : std::string();
}

}  // namespace egress::transport::http2

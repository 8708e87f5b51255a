#ifndef EGRESS_SERVICE_TRANSPORT_TLS_ALPN_H_
#define EGRESS_SERVICE_TRANSPORT_TLS_ALPN_H_

#include <openssl/ssl.h>

#include <string>

namespace egress::transport::http2 {

// Before a TLS handshake: offers HTTP/2 through ALPN (RFC 9113 3.2), "h2" first and,
// with `http1_fallback`, "http/1.1" after it, and turns TLS 1.2 renegotiation off,
// which HTTP/2 forbids (RFC 9113 9.2.1) and which a TlsStream cannot carry while a read
// and a write overlap. False if OpenSSL refused (out of memory).
bool OfferHttp2(SSL* ssl, bool http1_fallback = true);

// After the handshake: the protocol the server chose ("h2", "http/1.1"), or "" when it
// chose none (a server without ALPN speaks HTTP/1.1).
std::string NegotiatedProtocol(const SSL* ssl);

inline constexpr char kHttp2Protocol[] = "h2";

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_TLS_ALPN_H_

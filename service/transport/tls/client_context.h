#ifndef EGRESS_SERVICE_TRANSPORT_TLS_CLIENT_CONTEXT_H_
#define EGRESS_SERVICE_TRANSPORT_TLS_CLIENT_CONTEXT_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/ssl/context.hpp"
#include "service/transport/tls/session_store.h"

namespace egress::transport {

// The most a PEM file egressd reads may hold: a certificate, a chain, a private key or a
// CA bundle (the system's whole bundle of about 140 CAs is some 220 KiB). Used for the
// transport's files here and for the --grpc_tls_* / --admin_tls_* files alike.
inline constexpr size_t kMaxPemFileBytes = 1 << 20;

struct ClientTlsFiles {
  std::string extra_ca_file;     // PEM CAs trusted besides the system store
  std::string client_cert_file;  // PEM certificate shown to servers that ask (mTLS)
  std::string client_key_file;
};

// A client TLS context: TLS 1.2 and 1.3, peer verification on, the system trust store
// plus the given files, each read with the bounded reader (service/base/files.h: a regular
// file of at most kMaxPemFileBytes, opened without blocking). Errors name the file and
// the config field. The context has a
// TlsSessionStore of its own, used by connections that call OfferTlsSession.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(
    const ClientTlsFiles& files);

// Origins whose sessions a context keeps, at most (a session with its server's
// certificate chain is a few KiB).
inline constexpr size_t kMaxTlsSessionOrigins = 1024;

// Session resumption for `ssl`, made from a context of MakeClientTlsContext, before its
// handshake: offers the session saved for `origin_key` if there is one, and saves the
// sessions its server sends (with TLS 1.3 they come after the handshake) under that key.
// Without this call a connection neither offers nor saves sessions.
void OfferTlsSession(SSL* ssl, const std::string& origin_key);
// After a failed handshake: the session it offered, if any, is not offered again.
void ForgetOfferedTlsSession(SSL* ssl);
// Whether the server's certificate (of the session, when resumed) is valid for `host`, a
// name or an IP literal. A resumed handshake verifies nothing, so this is checked again.
bool PeerCertificateMatches(SSL* ssl, const std::string& host);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_TLS_CLIENT_CONTEXT_H_

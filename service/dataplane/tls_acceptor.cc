#include "service/dataplane/tls_acceptor.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core/error.hpp"
#include "service/transport/tls/alpn.h"

namespace egress::dataplane {
namespace {

namespace net = boost::asio;

// What the loops speak, by ALPN: h2, or grpc-exp (gRPC's clients offer it before h2, and
// C-core serves it as HTTP/2 too). Length-prefixed, in the server's order of preference.
constexpr unsigned char kProtocols[] = "\x02h2\x08grpc-exp";

// gRPC's library server's TLS 1.2 cipher suites (its GRPC_SSL_CIPHER_SUITES default);
// TLS 1.3's are OpenSSL's.
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384";

// OpenSSL's ALPN callback: one of kProtocols, else no protocol at all (NOACK, as C-core
// answers); the handshake's end then closes the connection.
int SelectProtocol(SSL*, const unsigned char** out, unsigned char* out_size,
                   const unsigned char* offered, unsigned int offered_size, void*) {
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_size, kProtocols, sizeof(kProtocols) - 1, offered,
                            offered_size) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

bool SpeaksHttp2(const SSL* ssl) {
  const std::string protocol = transport::http2::NegotiatedProtocol(ssl);
  return protocol == transport::http2::kHttp2Protocol || protocol == "grpc-exp";
}

absl::Status Refused(absl::string_view what, const boost::system::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat("the Egress listener's TLS ", what, " does not load: ", ec.message()));
}

// Every certificate of `pem` is trusted to sign callers' certificates, and named to them
// as an acceptable issuer.
absl::Status TrustClientCas(SSL_CTX* context, const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  if (!bio) return absl::ResourceExhaustedError("out of memory reading the client CAs");
  X509_STORE* store = SSL_CTX_get_cert_store(context);
  int loaded = 0;
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    const bool added = X509_STORE_add_cert(store, certificate) == 1 &&
                       SSL_CTX_add_client_CA(context, certificate) == 1;
    X509_free(certificate);
    if (!added) break;
    ++loaded;
  }
  ERR_clear_error();  // the end of the PEM reads as an error
  if (loaded == 0) {
    return absl::InvalidArgumentError(
        "the Egress listener's client CAs (--grpc_tls_client_ca) hold no PEM certificate");
  }
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsAcceptor>> TlsAcceptor::Create(const TlsSettings& settings,
                                                                 FetchObserver& observer) {
  std::unique_ptr<TlsAcceptor> acceptor(new TlsAcceptor(settings.handshake_timeout, observer));
  SSL_CTX* context = acceptor->context_.native_handle();
  boost::system::error_code ec;
  acceptor->context_.use_certificate_chain(net::buffer(settings.certificate_chain), ec);
  if (ec) return Refused("certificate (--grpc_tls_cert)", ec);
  acceptor->context_.use_private_key(net::buffer(settings.private_key),
                                     net::ssl::context::pem, ec);
  if (ec) return Refused("key (--grpc_tls_key)", ec);
  if (SSL_CTX_check_private_key(context) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the Egress listener's TLS key (--grpc_tls_key) is not the certificate's "
        "(--grpc_tls_cert)");
  }
  if (!settings.client_ca.empty()) {
    if (absl::Status trusted = TrustClientCas(context, settings.client_ca); !trusted.ok()) {
      return trusted;
    }
  }
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION);
  SSL_CTX_set_cipher_list(context, kTls12Ciphers);
  // HTTP/2 forbids renegotiation (RFC 9113 9.2.1), and a TlsStream cannot carry it while
  // a read and a write overlap. No session resumption: a connection is long-lived, and
  // every one is verified afresh.
  SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(context, 0);
  SSL_CTX_set_alpn_select_cb(context, SelectProtocol, nullptr);
  return acceptor;
}

void TlsAcceptor::Handshake(boost::asio::ip::tcp::socket socket, ConnectionSlot slot,
                            OnReady on_ready) {
  auto tls = std::make_unique<transport::TlsStream>(socket.get_executor(), context_);
  SSL_set_accept_state(tls->native_handle());
  tls->next_layer().socket() = std::move(socket);
  // The stream's timeout closes the socket under whatever the handshake waits for.
  tls->next_layer().expires_after(absl::ToChronoNanoseconds(timeout_));
  transport::TlsStream& stream = *tls;
  // An eviction closes the socket too, on the loop, while the handshake is under way.
  struct Handshaking {
    transport::TlsStream* stream;  // null once the handshake's handler ran
    bool evicted = false;
  };
  auto handshaking = std::make_shared<Handshaking>(Handshaking{&stream});
  // True: nobody could evict the slot before it was evictable.
  slot.EvictWith([handshaking, loop = stream.get_executor()](CallRefusal) {
    net::post(loop, [handshaking] {
      // Done: the session it became (if any) closes itself (ConnectionSlot::EvictWith).
      if (!handshaking->stream) return;
      handshaking->evicted = true;
      handshaking->stream->next_layer().close();
    });
  });
  stream.async_handshake([this, tls = std::move(tls), slot = std::move(slot), handshaking,
                          on_ready = std::move(on_ready)](boost::beast::error_code ec) mutable {
    handshaking->stream = nullptr;
    // Each refusal below closes the connection: the stream goes with this handler.
    if (handshaking->evicted) return observer_.OnCallRefused(CallRefusal::kPrefaceEvicted);
    if (ec == boost::beast::error::timeout) {
      return observer_.OnCallRefused(CallRefusal::kTlsHandshakeTimeout);
    }
    // A caller that closed before its first byte (a TCP probe, a load balancer's check)
    // tried no handshake: nothing failed.
    if (ec && BIO_number_read(SSL_get_rbio(tls->native_handle())) == 0) return;
    if (ec) return observer_.OnCallRefused(CallRefusal::kTlsHandshakeFailed);
    if (!SpeaksHttp2(tls->native_handle())) {
      return observer_.OnCallRefused(CallRefusal::kTlsNoH2);
    }
    tls->next_layer().expires_never();
    std::optional<fetch::CertificateNames> certificate =
        fetch::NamesOf(SSL_get0_peer_certificate(tls->native_handle()));
    // Names C-core cannot read fail its handshake: refused alike.
    if (!certificate) return observer_.OnCallRefused(CallRefusal::kTlsHandshakeFailed);
    on_ready(CallerStream(std::move(tls), *std::move(certificate)), std::move(slot));
  });
}

}  // namespace egress::dataplane

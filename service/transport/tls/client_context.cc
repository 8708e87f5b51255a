#include "service/transport/tls/client_context.h"

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "boost/asio/ip/address.hpp"
#include "service/base/files.h"
#include "service/transport/policy/address_policy.h"

namespace egress::transport {

namespace ssl = boost::asio::ssl;

namespace {

// What a connection that resumes keeps on its SSL object (ex_data).
struct Resumption {
  std::string key;                       // the origin
  const SSL_SESSION* offered = nullptr;  // the store's; compared only, never dereferenced
};

template <class T>
void DeleteExData(void* /*parent*/, void* ptr, CRYPTO_EX_DATA* /*ad*/, int /*index*/,
                  long /*argl*/, void* /*argp*/) {
  delete static_cast<T*>(ptr);
}

int ContextStoreIndex() {
  static const int index =
      SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &DeleteExData<TlsSessionStore>);
  return index;
}

int ResumptionIndex() {
  static const int index =
      SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &DeleteExData<Resumption>);
  return index;
}

TlsSessionStore* StoreOf(SSL_CTX* context) {
  return static_cast<TlsSessionStore*>(SSL_CTX_get_ex_data(context, ContextStoreIndex()));
}

// The store and the connections each get sessions of their own: OpenSSL changes a
// connection's session (freeing an SSL that was not shut down marks it not resumable),
// and connections on other threads must not share one.
TlsSessionStore::SessionPtr Copy(const SSL_SESSION* session) {
  SSL_SESSION* copy = SSL_SESSION_dup(session);
  if (!copy) return nullptr;
  return TlsSessionStore::SessionPtr(copy, SSL_SESSION_free);
}

// OpenSSL's new-session callback: the server sent a session (TLS 1.2: at the end of the
// handshake; TLS 1.3: a ticket after it). Returns 0: OpenSSL keeps its reference.
int SaveNewSession(SSL* ssl, SSL_SESSION* session) {
  const auto* resumption = static_cast<Resumption*>(SSL_get_ex_data(ssl, ResumptionIndex()));
  TlsSessionStore* store = StoreOf(SSL_get_SSL_CTX(ssl));
  // Resumption off for this origin; or (defence only: verify_peer fails such handshakes)
  // a certificate that did not verify, whose session must never skip verification.
  if (!resumption || !store || SSL_get_verify_result(ssl) != X509_V_OK) return 0;
  if (auto copy = Copy(session)) store->Save(resumption->key, std::move(copy));
  return 0;
}

}  // namespace

void OfferTlsSession(SSL* ssl, const std::string& origin_key) {
  TlsSessionStore* store = StoreOf(SSL_get_SSL_CTX(ssl));
  if (!store) return;
  auto resumption = std::make_unique<Resumption>();
  resumption->key = origin_key;
  if (const auto saved = store->Find(origin_key)) {
    const auto copy = Copy(saved.get());
    // SSL_set_session takes a reference of its own.
    if (copy && SSL_set_session(ssl, copy.get())) resumption->offered = saved.get();
  }
  if (SSL_set_ex_data(ssl, ResumptionIndex(), resumption.get())) resumption.release();
}

void ForgetOfferedTlsSession(SSL* ssl) {
  const auto* resumption = static_cast<Resumption*>(SSL_get_ex_data(ssl, ResumptionIndex()));
  TlsSessionStore* store = StoreOf(SSL_get_SSL_CTX(ssl));
  if (resumption && resumption->offered && store) {
    store->Forget(resumption->key, resumption->offered);
  }
}

bool PeerCertificateMatches(SSL* ssl, const std::string& host) {
  const X509* certificate = SSL_get0_peer_certificate(ssl);
  if (!certificate) return false;
  X509* cert = const_cast<X509*>(certificate);  // X509_check_* take non-const
  if (const auto ip = HostAddress(host)) {
    return X509_check_ip_asc(cert, ip->to_string().c_str(), 0) == 1;
  }
  return X509_check_host(cert, host.data(), host.size(), 0, nullptr) == 1;
}

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
    // Read here, bounded and without blocking, then handed over as bytes: OpenSSL's own
    // open (load_verify_file) would wait forever on a FIFO. Every certificate of a bundle
    // is added.
    auto bundle = ReadBoundedFile(extra_ca_file, kMaxPemFileBytes);
    if (!bundle.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("transport.extra_ca_file: ", bundle.status().message()));
    }
    context->add_certificate_authority(boost::asio::buffer(*bundle), ec);
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
    auto chain = ReadBoundedFile(files.client_cert_file, kMaxPemFileBytes);
    if (!chain.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("client_cert_file: ", chain.status().message()));
    }
    auto key = ReadBoundedFile(files.client_key_file, kMaxPemFileBytes);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("client_key_file: ", key.status().message()));
    }
    context->use_certificate_chain(boost::asio::buffer(*chain), ec);
    if (!ec) context->use_private_key(boost::asio::buffer(*key), ssl::context::pem, ec);
    OPENSSL_cleanse(key->data(), key->size());  // the key stays in the context only
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client_cert_file/client_key_file: cannot load \"", files.client_cert_file, "\" / \"",
          files.client_key_file, "\": ", ec.message()));
    }
  }
  context->set_verify_mode(ssl::verify_peer);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  // Client-side caching, kept in the context's own store (OpenSSL's internal store is
  // for servers and looks sessions up by ID, not by origin).
  SSL_CTX* native = context->native_handle();
  auto store = std::make_unique<TlsSessionStore>(kMaxTlsSessionOrigins);
  if (!SSL_CTX_set_ex_data(native, ContextStoreIndex(), store.get())) {
    return absl::InternalError("cannot attach a TLS session store to the TLS context");
  }
  store.release();  // the context frees it (DeleteExData)
  SSL_CTX_set_session_cache_mode(native,
                                 SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(native, &SaveNewSession);
  return context;
}

}  // namespace egress::transport

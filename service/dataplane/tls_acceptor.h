#ifndef EGRESS_SERVICE_DATAPLANE_TLS_ACCEPTOR_H_
#define EGRESS_SERVICE_DATAPLANE_TLS_ACCEPTOR_H_

// The TLS side of the data plane's port: each accepted connection's handshake, on the
// loop that accepted it, as gRPC's library server (C-core 1.51) does it: TLS 1.2 or 1.3,
// ALPN h2 (or grpc-exp, which gRPC's clients offer first and C-core also takes) or the
// connection is closed, the caller's certificate required and verified when a client CA
// is given (mTLS), and the whole handshake bounded in time.

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "service/dataplane/caller_limits.h"
#include "service/dataplane/caller_stream.h"
#include "service/dataplane/tls_settings.h"
#include "service/fetch/fetch_observer.h"

namespace egress::dataplane {

class TlsAcceptor {
 public:
  // INVALID_ARGUMENT when the certificate, the key or the client CAs do not load, or the
  // key is not the certificate's. Each refused handshake is reported to `observer`.
  static absl::StatusOr<std::unique_ptr<TlsAcceptor>> Create(const TlsSettings& settings,
                                                             FetchObserver& observer);

  using OnReady = std::function<void(CallerStream, ConnectionSlot)>;
  // Runs `socket`'s handshake on its loop, holding its `slot`; `on_ready` gets the TLS
  // stream and the slot once it is done with h2. A handshake that fails (cleartext, a
  // certificate missing or not verified), that ends without h2, that is not done within
  // the settings' bound, or whose slot is evicted for a newer connection, closes the
  // connection and counts in egress_calls_refused_total (tls_handshake_failed,
  // tls_no_h2, tls_handshake_timeout, preface_evicted). The acceptor must outlive the
  // loop's handlers.
  void Handshake(boost::asio::ip::tcp::socket socket, ConnectionSlot slot, OnReady on_ready);

 private:
  TlsAcceptor(absl::Duration timeout, FetchObserver& observer)
      : context_(boost::asio::ssl::context::tls_server), timeout_(timeout), observer_(observer) {}

  boost::asio::ssl::context context_;
  const absl::Duration timeout_;
  FetchObserver& observer_;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_TLS_ACCEPTOR_H_

#ifndef EGRESS_SERVICE_DATAPLANE_TLS_SETTINGS_H_
#define EGRESS_SERVICE_DATAPLANE_TLS_SETTINGS_H_

// What the data plane on the loops serves TLS with: the PEM of egressd's --grpc_tls_*
// files, read once (service/server/server_credentials.h), and the handshake's bound.

#include <string>

#include "absl/time/time.h"

namespace egress::dataplane {

struct TlsSettings {
  std::string certificate_chain;  // PEM: the server's certificate, then its chain
  std::string private_key;        // PEM
  // PEM CAs a caller's certificate must chain to (mTLS); empty: no certificate is asked.
  std::string client_ca;
  // A connection whose handshake is not done by then is closed (and counted): gRPC's
  // library server's bound (GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 120 s by default).
  absl::Duration handshake_timeout = absl::Seconds(120);

  bool enabled() const { return !certificate_chain.empty(); }
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_TLS_SETTINGS_H_

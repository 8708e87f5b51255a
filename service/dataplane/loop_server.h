#ifndef EGRESS_SERVICE_DATAPLANE_LOOP_SERVER_H_
#define EGRESS_SERVICE_DATAPLANE_LOOP_SERVER_H_

// egressd's data plane served on the transport's event loops (issue 37): egress.v1.Egress
// Fetch and FetchStream, grpc.health.v1.Health Check and Watch, and server reflection
// (grpc.reflection.v1alpha) over HTTP/2 (nghttp2,
// cleartext with prior knowledge, or TLS with ALPN h2 and mTLS), by a gRPC server of
// egressd's own, so that a fetch's call and its upstream I/O share a loop's thread. Any
// other method is answered UNIMPLEMENTED.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/dataplane/connection_registry.h"
#include "service/dataplane/health_watch.h"
#include "service/dataplane/loop_listener.h"
#include "service/dataplane/server_reflection.h"
#include "service/dataplane/server_session.h"
#include "service/dataplane/tls_acceptor.h"
#include "service/fetch/fetch_context.h"

namespace egress::dataplane {

class LoopServer final : private Methods {
 public:
  // Serves on `address` ("ip:port"; port 0 picks one) on every loop of `loops`, with the
  // calls' shared `service`; both must outlive the server's connections (the loops own
  // them: stopping the loops ends them). Over TLS when `tls` is enabled (INVALID_ARGUMENT
  // when its PEM does not load).
  static absl::StatusOr<std::unique_ptr<LoopServer>> Start(transport::EventLoops& loops,
                                                           const std::string& address,
                                                           const fetch::Context& service,
                                                           const SessionLimits& limits,
                                                           const TlsSettings& tls = {});

  int port() const { return listener_->port(); }
  // Accepts no more connections; those open go on until the loops stop.
  void StopAccepting() { listener_->Stop(); }
  // Shutdown: health answers NOT_SERVING from now, and each Watch call is told.
  void NotServing() { health_.Set(ServingStatus::kNotServing); }
  // Shutdown: every connection gets a graceful GOAWAY, and so does each accepted from now.
  void GoAwayAll() { connections_.GoAwayAll(); }
  // Closes the connections still open; returns once they are closed, or after `wait`.
  void CloseAll(absl::Duration wait) { connections_.CloseAll(wait); }

 private:
  LoopServer(const fetch::Context& service, const SessionLimits& limits)
      : service_(service),
        limits_(limits),
        open_(std::make_shared<ConnectionLedger>(limits.caller)) {}

  bool Serves(absl::string_view path) const override;
  void Start(const std::shared_ptr<ServerSession>& session, IncomingCall call) override;
  bool StreamsRequests(absl::string_view path) const override;
  void CheckHealth(ServerSession& session, int32_t stream_id, const std::string& service);
  // A connection accepted (and, with TLS, through its handshake) within its `slot`.
  void Serve(CallerStream stream, ConnectionSlot slot);

  const fetch::Context& service_;
  const SessionLimits limits_;
  std::unique_ptr<TlsAcceptor> tls_;  // null: cleartext
  // Caller connections open now, over every loop (limits_.caller's bounds).
  const std::shared_ptr<ConnectionLedger> open_;
  ConnectionRegistry connections_;
  HealthWatchers health_{ServingStatus::kServing};
  const ServerReflection reflection_{
      {"egress.v1.Egress", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}};
  std::unique_ptr<LoopListener> listener_;
};

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_LOOP_SERVER_H_

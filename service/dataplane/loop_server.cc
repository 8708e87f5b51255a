#include "service/dataplane/loop_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/base/error_reason.h"
#include "service/dataplane/loop_caller_side.h"
#include "service/fetch/status_mapping.h"

namespace egress::dataplane {
namespace {

constexpr absl::string_view kFetch = "/egress.v1.Egress/Fetch";
constexpr absl::string_view kFetchStream = "/egress.v1.Egress/FetchStream";
constexpr absl::string_view kHealthCheck = "/grpc.health.v1.Health/Check";
constexpr absl::string_view kHealthWatch = "/grpc.health.v1.Health/Watch";

}  // namespace

absl::StatusOr<std::unique_ptr<LoopServer>> LoopServer::Start(transport::EventLoops& loops,
                                                             const std::string& address,
                                                             const fetch::Context& service,
                                                             const SessionLimits& limits,
                                                             const TlsSettings& tls) {
  std::unique_ptr<LoopServer> server(new LoopServer(service, limits));
  if (tls.enabled()) {
    auto acceptor = TlsAcceptor::Create(tls, service.observer);
    if (!acceptor.ok()) return acceptor.status();
    server->tls_ = *std::move(acceptor);
  }
  auto listener = LoopListener::Start(
      loops, address, [server = server.get()](boost::asio::ip::tcp::socket socket) {
        boost::system::error_code ec;
        const auto caller = socket.remote_endpoint(ec);
        if (ec) return;  // gone already
        ConnectionSlot slot = server->open_->Take(caller.address());
        if (!slot.held()) {
          // Closed at once, as `socket` goes: the caller sees the connection end.
          return server->service_.observer.OnCallRefused(CallRefusal::kTooManyConnections);
        }
        if (!server->tls_) return server->Serve(std::move(socket), std::move(slot));
        server->tls_->Handshake(std::move(socket), std::move(slot),
                                [server](CallerStream stream, ConnectionSlot slot) {
                                  server->Serve(std::move(stream), std::move(slot));
                                });
      },
      [&observer = service.observer] { observer.OnCallRefused(CallRefusal::kAcceptFailed); });
  if (!listener.ok()) return listener.status();
  server->listener_ = *std::move(listener);
  return server;
}

void LoopServer::Serve(CallerStream stream, ConnectionSlot slot) {
  Methods& methods = *this;
  SessionLimits limits = limits_;
  limits.max_call_time = service_.config.Get()->limits.max_timeout;  // now
  auto session =
      std::make_shared<ServerSession>(std::move(stream), methods, limits, service_.observer);
  session->Hold(std::move(slot));
  session->Start();
  connections_.Add(session);
}

bool LoopServer::Serves(absl::string_view path) const {
  return path == kFetch || path == kFetchStream || path == kHealthCheck ||
         path == kHealthWatch || path == kServerReflectionInfo;
}

bool LoopServer::StreamsRequests(absl::string_view path) const {
  return path == kServerReflectionInfo;
}

void LoopServer::Start(const std::shared_ptr<ServerSession>& session, IncomingCall call) {
  if (call.path == kFetch) {
    return StartFetch(fetch::FetchCall::Rpc::kFetch, service_, session, std::move(call));
  }
  if (call.path == kFetchStream) {
    return StartFetch(fetch::FetchCall::Rpc::kFetchStream, service_, session, std::move(call));
  }
  if (call.path == kServerReflectionInfo) {
    return reflection_.Serve(session, call.stream_id, service_.observer);
  }
  auto health_service = HealthCheckService(call.message);
  if (!health_service.ok()) {
    service_.observer.OnCallRefused(CallRefusal::kBadRequestMessage);
    return session->Answer(call.stream_id, std::nullopt, ToGrpcStatus(health_service.status()));
  }
  if (call.path == kHealthWatch) return health_.Start(session, call.stream_id, *health_service);
  CheckHealth(*session, call.stream_id, *health_service);
}

// The whole server ("") and egress.v1.Egress are SERVING until shutdown begins; any other
// service is NOT_FOUND, as gRPC's own health service answers.
void LoopServer::CheckHealth(ServerSession& session, int32_t stream_id,
                             const std::string& service) {
  if (!IsHealthService(service)) {
    return session.Answer(stream_id, std::nullopt,
                          ToGrpcStatus(transport::WithReason(
                              absl::NotFoundError(absl::StrCat(
                                  "unknown service ", absl::string_view(service).substr(
                                                          0, ServerSession::kQuotedBytes))),
                              "SERVICE_NOT_FOUND")));
  }
  session.Answer(stream_id, HealthCheckResponse(health_.status()), grpc::Status::OK);
}

}  // namespace egress::dataplane

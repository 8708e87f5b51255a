#include "service/dataplane/loop_server.h"

#include <utility>

#include "google/protobuf/unknown_field_set.h"
#include "service/base/error_reason.h"
#include "service/dataplane/loop_caller_side.h"
#include "service/fetch/status_mapping.h"

namespace egress::dataplane {
namespace {

constexpr absl::string_view kFetch = "/egress.v1.Egress/Fetch";
constexpr absl::string_view kFetchStream = "/egress.v1.Egress/FetchStream";
constexpr absl::string_view kHealthCheck = "/grpc.health.v1.Health/Check";

// grpc.health.v1 (Debian ships no stubs for it): HealthCheckRequest.service is field 1,
// HealthCheckResponse.status field 1 with SERVING = 1, NOT_SERVING = 2.
constexpr int kServiceField = 1;
constexpr int kStatusField = 1;
enum HealthStatus { kServing = 1, kNotServing = 2 };

}  // namespace

absl::StatusOr<std::unique_ptr<LoopServer>> LoopServer::Start(transport::EventLoops& loops,
                                                             const std::string& address,
                                                             const fetch::Context& service,
                                                             const SessionLimits& limits) {
  std::unique_ptr<LoopServer> server(new LoopServer(service, limits));
  auto listener = LoopListener::Start(
      loops, address, [server = server.get()](boost::asio::ip::tcp::socket socket) {
        Methods& methods = *server;
        SessionLimits limits = server->limits_;
        limits.max_call_time = server->service_.config.Get()->limits.max_timeout;  // now
        auto session = std::make_shared<ServerSession>(std::move(socket), methods, limits,
                                                       server->service_.observer);
        session->Start();
        server->connections_.Add(session);
      },
      [&observer = service.observer] { observer.OnCallRefused(CallRefusal::kAcceptFailed); });
  if (!listener.ok()) return listener.status();
  server->listener_ = *std::move(listener);
  return server;
}

bool LoopServer::Serves(absl::string_view path) const {
  return path == kFetch || path == kFetchStream || path == kHealthCheck;
}

void LoopServer::Start(const std::shared_ptr<ServerSession>& session, IncomingCall call) {
  if (call.path == kFetch) {
    return StartFetch(fetch::FetchCall::Rpc::kFetch, service_, session, std::move(call));
  }
  if (call.path == kFetchStream) {
    return StartFetch(fetch::FetchCall::Rpc::kFetchStream, service_, session, std::move(call));
  }
  CheckHealth(*session, call);
}

// The whole server ("") and egress.v1.Egress are SERVING until shutdown begins; any other
// service is NOT_FOUND, as gRPC's own health service answers.
void LoopServer::CheckHealth(ServerSession& session, const IncomingCall& call) {
  google::protobuf::UnknownFieldSet request;
  if (!request.ParseFromString(call.message)) {
    service_.observer.OnCallRefused(CallRefusal::kBadRequestMessage);
    return session.Answer(call.stream_id, nullptr,
                          ToGrpcStatus(transport::WithReason(
                              absl::InvalidArgumentError(
                                  "the request message is not a grpc.health.v1.HealthCheckRequest"),
                              "REQUEST_MESSAGE_UNREADABLE")));
  }
  std::string name;
  for (int i = 0; i < request.field_count(); ++i) {
    const auto& field = request.field(i);
    if (field.number() == kServiceField &&
        field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      name = field.length_delimited();
    }
  }
  if (!name.empty() && name != "egress.v1.Egress") {
    return session.Answer(call.stream_id, nullptr,
                          ToGrpcStatus(transport::WithReason(
                              absl::NotFoundError("unknown service " + name),
                              "SERVICE_NOT_FOUND")));
  }
  google::protobuf::UnknownFieldSet response;
  response.AddVarint(kStatusField, service_.stopped ? kNotServing : kServing);
  std::string message;
  response.SerializeToString(&message);
  session.Answer(call.stream_id, &message, grpc::Status::OK);
}

}  // namespace egress::dataplane

#include "service/server/server.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "service/base/error_reason.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/dataplane/loop_server.h"
#include "service/fetch/fetch_service.h"
#include "service/fleet/membership.h"
#include "service/transport/transport.h"

namespace egress {
namespace {

// Room in a FetchRequest message for everything but its body and headers: the URL,
// method and the other fields.
constexpr uint64_t kRequestEnvelopeBytes = 1 << 20;

// How long Shutdown goes on refusing fetches after the last one, and then keeps gRPC's
// calls open: ample for a call on its way to be refused, even under a sanitizer.
constexpr absl::Duration kRefusalTime = absl::Milliseconds(250);
// How long a lookup of affinity.service may take: c-ares asks each server for 1.8 s.
constexpr absl::Duration kFleetLookUpTime = absl::Seconds(5);

// The request message gRPC must take so that a body and headers within the limits reach
// FetchService, which then names the limit a larger one breaks. gRPC's own default
// (4 MiB) would refuse a body under limits.max_request_body_bytes (8 MiB). Headers count
// twice: their protobuf framing can outweigh the ": " and CRLF the header limit counts.
// BuildConfig's caps keep this under 2 GiB, what gRPC can take.
uint64_t MaxRequestMessageBytes(const FetchLimits& limits) {
  return limits.max_request_body_bytes + 2 * uint64_t{limits.max_request_header_bytes} +
         kRequestEnvelopeBytes;
}

// A duration as the milliseconds of a gRPC channel argument (an int).
int ChannelArgMillis(absl::Duration d) {
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT_MAX));
}

}  // namespace

absl::Status CheckConnectionAge(const ConnectionAge& connection_age) {
  if (connection_age.max_age < absl::ZeroDuration() ||
      connection_age.grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the gRPC connection age (", absl::FormatDuration(connection_age.max_age),
        ") and its grace (", absl::FormatDuration(connection_age.grace),
        ") must not be negative; a max age of 0 means unlimited"));
  }
  if (connection_age.max_idle < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the gRPC connection max idle (", absl::FormatDuration(connection_age.max_idle),
        ") must not be negative; 0 means unlimited"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DataPlane> ParseDataPlane(absl::string_view name) {
  if (name == "grpc_library") return DataPlane::kGrpcLibrary;
  if (name == "loops") return DataPlane::kLoops;
  return absl::InvalidArgumentError(
      absl::StrCat("--data_plane=", name, ": give grpc_library or loops"));
}

absl::StatusOr<std::unique_ptr<EgressServer>> EgressServer::Start(
    const ServiceConfig& config, const std::string& grpc_listen,
    transport::TransportObserver& transport_observer, FetchObserver& fetch_observer,
    ListenerCredentials credentials, AccessLog* access_log,
    const ConnectionAge& connection_age, DataPlane data_plane,
    const dataplane::CallerLimits& caller_limits) {
  if (absl::Status age = CheckConnectionAge(connection_age); !age.ok()) return age;
  std::unique_ptr<EgressServer> server(new EgressServer());
  auto transport = transport::Transport::Create(config.transport, transport_observer);
  if (!transport.ok()) return transport.status();
  server->transport_ = *std::move(transport);
  server->config_ = std::make_unique<ConfigStore>(config);
  server->fleet_ = std::make_unique<fleet::Membership>(
      [transport = server->transport_.get()](
          const std::string& host, std::function<void(fleet::Membership::Addresses)> done) {
        transport->LookUp(host, fleet::kMaxMembers, absl::Now() + kFleetLookUpTime,
                          std::move(done));
      });
  server->fleet_->Follow(config.fleet);
  server->fetch_service_ =
      std::make_unique<FetchService>(*server->transport_, *server->config_, fetch_observer,
                                     access_log);
  server->max_request_message_bytes_ = MaxRequestMessageBytes(config.limits);
  if (data_plane == DataPlane::kLoops) {
    dataplane::SessionLimits limits;
    limits.max_message_bytes = server->max_request_message_bytes_;
    limits.caller = caller_limits;
    limits.lifetime = {connection_age.max_age, connection_age.grace, connection_age.max_idle};
    auto loop_server = dataplane::LoopServer::Start(server->transport_->loops(), grpc_listen,
                                                    server->fetch_service_->context(), limits,
                                                    credentials.loops);
    if (!loop_server.ok()) return loop_server.status();
    server->loop_server_ = *std::move(loop_server);
    server->grpc_port_ = server->loop_server_->port();
    return server;
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(static_cast<int>(server->max_request_message_bytes_));
  if (connection_age.max_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               std::max(1, ChannelArgMillis(connection_age.max_age)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               ChannelArgMillis(connection_age.grace));
  }
  if (connection_age.max_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               std::max(1, ChannelArgMillis(connection_age.max_idle)));
  }
  builder.AddListeningPort(grpc_listen, credentials.library, &server->grpc_port_);
  builder.RegisterService(server->fetch_service_.get());
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", grpc_listen));
  }
  return server;
}

absl::StatusOr<ServiceConfig> EgressServer::ValidateConfig(const egress::v1::Config& proto) const {
  auto config = BuildConfig(proto);
  if (!config.ok()) return transport::WithReason(config.status(), "INVALID_CONFIG");
  if (const uint64_t needed = MaxRequestMessageBytes(config->limits);
      needed > max_request_message_bytes_) {
    return transport::WithReason(absl::InvalidArgumentError(absl::StrCat(
        "limits.max_request_body_bytes (", config->limits.max_request_body_bytes,
        ") and limits.max_request_header_bytes (", config->limits.max_request_header_bytes,
        ") need a gRPC request message limit of ", needed, " bytes; egressd set ",
        max_request_message_bytes_,
        " from its start config, and it stays until a restart: put the larger limits in "
        "--config and restart")), "RESTART_REQUIRED");
  }
  return config;
}

absl::StatusOr<egress::v1::Config> EgressServer::ApplyConfig(const egress::v1::Config& proto,
                                                             const Admit& admit) {
  auto config = ValidateConfig(proto);
  if (!config.ok()) return config.status();
  std::lock_guard<std::mutex> lock(apply_mu_);
  if (admit) {
    if (auto status = admit(config_->Get()->proto); !status.ok()) return status;
  }
  if (auto status = transport_->UpdateSettings(config->transport); !status.ok()) {
    return transport::WithReason(status, "INVALID_CONFIG");
  }
  if (apply_max_origin_labels_) apply_max_origin_labels_(config->max_origin_labels);
  egress::v1::Config in_force = config->proto;
  const fleet::FleetSettings fleet = config->fleet;
  config_->Set(*std::move(config));
  fleet_->Follow(fleet);
  return in_force;
}

void EgressServer::OnMaxOriginLabels(std::function<void(size_t)> apply) {
  std::lock_guard<std::mutex> lock(apply_mu_);
  apply_max_origin_labels_ = std::move(apply);
}

void EgressServer::Shutdown(absl::Duration grace) {
  // NOT_SERVING for good, new fetches refused, those under way given the grace period.
  // Only then does gRPC shut down, ending what is left at once (health Watch calls,
  // which gRPC would otherwise wait on for the whole grace period).
  if (server_) server_->GetHealthCheckService()->Shutdown();
  fetch_service_->StopAccepting();
  // Then the loops' connections get their GOAWAY: the calls under way go on, new ones go
  // to another replica. Health answers NOT_SERVING on connections opened meanwhile.
  if (loop_server_) {
    loop_server_->NotServing();
    loop_server_->GoAwayAll();
  }
  const absl::Time deadline = absl::Now() + grace;
  const auto wait_for_fetches = [&](absl::Time until) {
    while (fetch_service_->fetches_in_flight() > 0 && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  };
  wait_for_fetches(deadline);
  // Once gRPC shuts down, a call still on its way is CANCELLED, which callers do not
  // retry. Refusing a moment longer (UNAVAILABLE, SHUTTING_DOWN: retried elsewhere) lets
  // callers that keep sending learn that first, and health-checking ones leave.
  absl::SleepFor(std::min(kRefusalTime, std::max(deadline - absl::Now(), absl::ZeroDuration())));
  wait_for_fetches(deadline);
  if (loop_server_) {
    // What is left (health Watch calls) ends now, as gRPC's server ends it, and, as gRPC's
    // Shutdown waits for the calls it cancels, so do the loops: a call still finishing when
    // they stop would never be freed.
    loop_server_->StopAccepting();
    loop_server_->CloseAll(kRefusalTime);
    wait_for_fetches(absl::Now() + kRefusalTime);
    return;
  }
  // The same moment for a call gRPC had accepted but not yet handed to the fetch service.
  server_->Shutdown(absl::ToChronoTime(absl::Now() + std::min(kRefusalTime, grace)));
}

uint32_t EgressServer::fetches_in_flight() const {
  return fetch_service_->fetches_in_flight();
}

void EgressServer::Wait() { server_->Wait(); }

EgressServer::~EgressServer() {
  if (server_ || loop_server_) Shutdown(absl::ZeroDuration());
  // The transport's I/O threads may still hold the last reference to a finished RPC,
  // whose destructor gives its bytes back to the fetch service's body budget: stop them
  // before the fetch service goes.
  fleet_.reset();  // its lookups go through the transport
  transport_.reset();
}

}  // namespace egress

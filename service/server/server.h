#ifndef EGRESS_SERVICE_SERVER_SERVER_H_
#define EGRESS_SERVICE_SERVER_SERVER_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/dataplane/caller_limits.h"
#include "service/server/server_credentials.h"

// Declared, not included: every integration test includes this header, and the
// definitions (the transport, gRPC's server, the loops' server) would double each test's
// compile.
namespace grpc {
class Server;
}  // namespace grpc
namespace egress::v1 {
class Config;
}  // namespace egress::v1
namespace egress::transport {
class Transport;
class TransportObserver;
}  // namespace egress::transport
namespace egress::dataplane {
class LoopServer;
}  // namespace egress::dataplane
namespace egress::fleet {
class Membership;
}  // namespace egress::fleet

namespace egress {

class AccessLog;
class ConfigStore;
class FetchObserver;
class FetchService;
struct ServiceConfig;

// How long a caller's gRPC connection to the Egress listener lives. At `max_age` (gRPC
// adds up to 10 % jitter) egressd sends GOAWAY: the client opens a new connection for
// its next calls, and a load balancer in front of several replicas (kube-proxy
// balances connections, not calls) spreads callers over replicas that joined since.
// Calls under way get `grace` to finish before the old connection is closed. Zero
// max_age: connections live as long as the client keeps them. egressd's
// --grpc_max_connection_age and --grpc_max_connection_age_grace.
struct ConnectionAge {
  absl::Duration max_age = absl::Minutes(5);
  // As long as limits.max_timeout's default: a fetch under way at the age is not cut
  // short before its own deadline.
  absl::Duration grace = absl::Minutes(5);
  // A connection with no call open for this long gets GOAWAY too (calls that start in
  // the meantime get `grace`): callers that went quiet give their connections back. Zero,
  // gRPC's default: never. egressd's --grpc_max_connection_idle.
  absl::Duration max_idle = absl::ZeroDuration();
};

// INVALID_ARGUMENT when the age, its grace or the max idle is negative (EgressServer::Start checks it too).
absl::Status CheckConnectionAge(const ConnectionAge& connection_age);

// What serves egress.v1.Egress and health on the Egress port (egressd's --data_plane).
enum class DataPlane {
  kGrpcLibrary,  // gRPC's library server: the reference and an operator's fallback
  kLoops,        // egressd's own server on the transport's loops (the default, issue 37;
                 // docs/data-plane.md)
};

// The DataPlane a --data_plane value names ("grpc_library" or "loops"); INVALID_ARGUMENT
// naming the two otherwise.
absl::StatusOr<DataPlane> ParseDataPlane(absl::string_view name);

// egressd without its flags: the transport and the gRPC server around it (Egress,
// health, reflection). main.cc and the integration tests both start it this way.
class EgressServer {
 public:
  // Binds grpc_listen ("host:port"; port 0 picks a free one) and starts serving. Each
  // fetch gives a line to `access_log`, when there is one; it must outlive the server.
  // INVALID_ARGUMENT for a negative connection age or grace. With DataPlane::kLoops the
  // loops serve with credentials.loops (cleartext when it is not enabled), and
  // `caller_limits` bound each caller's connections (the library server has its own).
  static absl::StatusOr<std::unique_ptr<EgressServer>> Start(
      const ServiceConfig& config, const std::string& grpc_listen,
      transport::TransportObserver& transport_observer, FetchObserver& fetch_observer,
      ListenerCredentials credentials = {},
      AccessLog* access_log = nullptr, const ConnectionAge& connection_age = {},
      DataPlane data_plane = DataPlane::kLoops,
      const dataplane::CallerLimits& caller_limits = {});
  ~EgressServer();

  int grpc_port() const { return grpc_port_; }
  // Fetch and FetchStream RPCs gRPC is not done with (what shutdown waits for).
  uint32_t fetches_in_flight() const;
  transport::Transport& transport() { return *transport_; }
  // The fleet's members now (Config.affinity), each origin's owner among them.
  const fleet::Membership& fleet() const { return *fleet_; }
  const ConfigStore& config() const { return *config_; }

  // Validates a whole new config and swaps it in atomically; returns the config now in
  // force (defaults filled in). On error nothing changes. A config whose request limits
  // need a larger gRPC message than the one fixed at Start is refused (INVALID_ARGUMENT):
  // that takes a restart. `admit`, when given, is shown
  // the config in force at the moment of the swap (no other ApplyConfig can come
  // between) and may refuse the new one with its status.
  using Admit = std::function<absl::Status(const egress::v1::Config& in_force)>;
  // What ApplyConfig would swap in for `proto`, or its INVALID_ARGUMENT; applies nothing.
  absl::StatusOr<ServiceConfig> ValidateConfig(const egress::v1::Config& proto) const;
  absl::StatusOr<egress::v1::Config> ApplyConfig(const egress::v1::Config& proto,
                                                 const Admit& admit = {});
  // `apply` gets metrics.max_origin_labels of every config ApplyConfig swaps in (main.cc
  // passes it on to the Prometheus metrics' origin label slots).
  void OnMaxOriginLabels(std::function<void(size_t)> apply);
  // Turns health NOT_SERVING and refuses new fetches, lets those in flight finish (for up
  // to `grace`), goes on refusing for a moment (250 ms within the grace), then stops the
  // gRPC server: calls it had just accepted are refused too, and whatever is left after
  // another moment (health Watch calls) is cancelled. On the loops every connection gets
  // a graceful GOAWAY once health is NOT_SERVING (and so does each accepted during the
  // grace); at the end the listener stops and the connections left are closed.
  void Shutdown(absl::Duration grace);
  // Until the gRPC library server stops (DataPlane::kGrpcLibrary only).
  void Wait();

 private:
  EgressServer() = default;

  std::unique_ptr<ConfigStore> config_;
  std::mutex apply_mu_;  // one ApplyConfig at a time
  std::function<void(size_t)> apply_max_origin_labels_ ABSL_GUARDED_BY(apply_mu_);
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<FetchService> fetch_service_;
  std::unique_ptr<grpc::Server> server_;  // null with DataPlane::kLoops
  // Serves on the transport's loops: stopped before the transport, destroyed after it.
  std::unique_ptr<dataplane::LoopServer> loop_server_;
  // Looks affinity.service up through the transport: destroyed before it.
  std::unique_ptr<fleet::Membership> fleet_;
  int grpc_port_ = 0;
  // The largest request message gRPC accepts, fixed at Start (see ApplyConfig).
  uint64_t max_request_message_bytes_ = 0;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_SERVER_SERVER_H_

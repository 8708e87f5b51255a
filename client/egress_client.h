#ifndef EGRESS_CLIENT_EGRESS_CLIENT_H_
#define EGRESS_CLIENT_EGRESS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "egress/v1/egress.grpc.pb.h"
#include "google/rpc/error_details.pb.h"
#include "grpcpp/grpcpp.h"

namespace egress::client {

// TLS to one of egressd's listeners (--grpc_tls_* or --admin_tls_*). Off unless
// `enabled` or a file is set.
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;    // PEM roots egressd's certificate must chain to; empty: the system's
  std::string cert_file;  // PEM client certificate and its key, for mTLS (both or neither)
  std::string key_file;
  // The name egressd's certificate must carry when it is not the target's host (e.g.
  // "egressd.egress.svc" through a port-forward to 127.0.0.1).
  std::string server_name;
  bool on() const {
    return enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

struct ClientOptions {
  std::string target = "127.0.0.1:50051";        // egressd's --grpc_listen
  std::string admin_target = "127.0.0.1:50052";  // egressd's --admin_listen
  // The gRPC deadline of a call that sets no timeout of its own.
  absl::Duration default_timeout = absl::Seconds(30);
  TlsOptions tls;        // to `target`
  TlsOptions admin_tls;  // to `admin_target`
  // Sent as "authorization: Bearer <token>" on the admin calls (egressd's
  // --admin_token_file); never on Fetch.
  std::string admin_token;
  // Metadata sent on every Fetch and FetchStream, e.g. {"x-egress-caller", "billing"}
  // when egressd names callers by policy.caller_header. Keys in lower case.
  std::vector<std::pair<std::string, std::string>> metadata;
  // gRPC channel arguments of the Egress channel (`target`), e.g.
  // GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS. Unless they set a service config
  // (SetServiceConfigJSON) or a load-balancing policy (SetLoadBalancingPolicyName), the
  // channel takes kDefaultServiceConfig: calls go round robin over every address the
  // target resolves to, skipping a replica whose health is NOT_SERVING ("dns:///egressd-headless.egress.svc.cluster.local:50051", a
  // headless Service, is one address per ready replica). The admin channel takes
  // neither: its calls go to one egressd, the first address of `admin_target`.
  grpc::ChannelArguments channel_args;
  // How many times a fetch that a stopping egressd turned away is sent again, within its
  // deadline; round_robin gives each try to the next replica. 0: never. Turned away:
  // refused (UNAVAILABLE, reason SHUTTING_DOWN: nothing was sent upstream), or, for a
  // GET, HEAD, OPTIONS or TRACE (safe to repeat), cancelled by egressd (CANCELLED; gRPC
  // cancels the calls that reach a server after its shutdown began).
  int shutdown_retries = 3;
};

// The service config every client of egressd defaults to: round_robin over every
// address of the target, and gRPC's client-side health checking, which takes a replica
// out of the rotation as soon as its health turns NOT_SERVING (egressd's first step at
// SIGTERM), before its GOAWAY.
inline constexpr char kDefaultServiceConfig[] =
    R"({"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}})";

// What to do with a response body.
enum class BodyMode {
  kFull,      // the whole body (RESOURCE_EXHAUSTED over max_body_bytes)
  kHeadOnly,  // status and headers; egressd drains the body in the background
  kPrefix,    // the first max_body_bytes bytes
};

struct FetchOptions {
  std::string method;  // empty: GET
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  BodyMode body_mode = BodyMode::kFull;
  uint64_t max_body_bytes = 0;  // kFull: 0 = egressd's default; kPrefix: the prefix
  absl::Duration timeout = absl::ZeroDuration();  // zero: ClientOptions::default_timeout
  bool follow_redirects = false;
};

// Maps a gRPC status to absl::Status: the same code, egressd's message unchanged, and
// each detail of its google.rpc.Status (the grpc-status-details-bin trailer) as a
// payload under the detail's type URL, for ErrorInfoOf and RetryDelayOf.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Why egressd failed a call, from the status a call returned: the google.rpc.ErrorInfo
// with a stable reason ("POLICY_DENIED", "INVALID_URL", "CONCURRENCY_LIMIT", ...), the
// domain "egress.v1" and metadata (for POLICY_DENIED: "rule", "host", "origin" and, when
// an address rule decided, "address"). nullopt when the error carries none, e.g. one
// that gRPC itself made (no connection to egressd, a deadline).
std::optional<google::rpc::ErrorInfo> ErrorInfoOf(const absl::Status& status);

// How long egressd asks the caller to wait before a retry (google.rpc.RetryInfo), or
// nullopt when it does not expect a retry to help.
std::optional<absl::Duration> RetryDelayOf(const absl::Status& status);

// A caller of egressd: Fetch and FetchStream on the Egress service, and the
// TransportAdmin calls. Every call has a deadline (the request's timeout, else the
// client's default) and returns egressd's error as an absl::Status: INVALID_ARGUMENT for
// a bad URL or header, PERMISSION_DENIED for the egress policy, UNAVAILABLE when the
// upstream cannot be reached, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED for limits. A fetch
// that a stopping egressd turned away is sent again (ClientOptions::shutdown_retries),
// within the same deadline. Thread-safe: calls may run concurrently from many threads.
class EgressClient {
 public:
  // A TLS file that cannot be read fails every call with that error (INVALID_ARGUMENT
  // naming the file); Create reports it at once.
  explicit EgressClient(ClientOptions options = {});
  static absl::StatusOr<std::unique_ptr<EgressClient>> Create(ClientOptions options);

  // One request; an HTTP error status (404, 503) is a successful call.
  absl::StatusOr<egress::v1::FetchResponse> Fetch(absl::string_view url,
                                                  const FetchOptions& options = {}) const;

  // Streams the body: returns the head (status, headers, connection) after passing
  // each body chunk to `on_body`, in order. `on_body` returning false stops the stream;
  // egressd then drains the rest of the body in the background.
  absl::StatusOr<egress::v1::FetchResponse> FetchStream(
      absl::string_view url, const FetchOptions& options,
      const std::function<bool(absl::string_view chunk)>& on_body) const;

  absl::StatusOr<egress::v1::Config> GetConfig() const;
  // Validates and swaps in the whole config; returns the config now in force.
  absl::StatusOr<egress::v1::Config> UpdateConfig(const egress::v1::Config& config) const;
  absl::StatusOr<egress::v1::PoolStats> GetPoolStats() const;
  // Validates `config` and replays egressd's recent policy decisions against it; applies
  // nothing.
  absl::StatusOr<egress::v1::DryRunConfigResponse> DryRunConfig(
      const egress::v1::Config& config) const;

  // The request Fetch and FetchStream send for these arguments.
  static egress::v1::FetchRequest MakeRequest(absl::string_view url,
                                              const FetchOptions& options);

 private:
  // The deadline of a call of `timeout`, or of the default when it is zero.
  absl::Time Deadline(absl::Duration timeout) const;
  std::unique_ptr<grpc::ClientContext> Context(absl::Time deadline) const;
  // Context() with the metadata of a Fetch, or of an admin call.
  std::unique_ptr<grpc::ClientContext> FetchContext(absl::Time deadline) const;
  // Whether to send a fetch of `method` again after `failure` on try `attempt` (0 the
  // first): a stopping egressd's refusal, within shutdown_retries and the deadline;
  // pauses before the retry.
  bool RetryRefusal(const absl::Status& failure, absl::string_view method, int attempt,
                    absl::Time deadline) const;
  std::unique_ptr<grpc::ClientContext> AdminContext() const;

  ClientOptions options_;
  absl::Status setup_;  // why the channels could not be made as asked, if so
  std::unique_ptr<egress::v1::Egress::Stub> egress_;
  std::unique_ptr<egress::v1::TransportAdmin::Stub> admin_;
};

}  // namespace egress::client

#endif  // EGRESS_CLIENT_EGRESS_CLIENT_H_

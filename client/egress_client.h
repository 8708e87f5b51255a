#ifndef EGRESS_CLIENT_EGRESS_CLIENT_H_
#define EGRESS_CLIENT_EGRESS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "egress/v1/egress.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace egress::client {

struct ClientOptions {
  std::string target = "127.0.0.1:50051";        // egressd's --grpc_listen
  std::string admin_target = "127.0.0.1:50052";  // egressd's --admin_listen
  // The gRPC deadline of a call that sets no timeout of its own.
  absl::Duration default_timeout = absl::Seconds(30);
};

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

// Maps a gRPC status to absl::Status: the same code, egressd's message unchanged.
absl::Status FromGrpcStatus(const grpc::Status& status);

// A caller of egressd: Fetch and FetchStream on the Egress service, and the
// TransportAdmin calls. Every call has a deadline (the request's timeout, else the
// client's default) and returns egressd's error as an absl::Status: INVALID_ARGUMENT for
// a bad URL or header, PERMISSION_DENIED for the egress policy, UNAVAILABLE when the
// upstream cannot be reached, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED for limits.
// Thread-safe: calls may run concurrently from many threads.
class EgressClient {
 public:
  explicit EgressClient(ClientOptions options = {});

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

  // The request Fetch and FetchStream send for these arguments.
  static egress::v1::FetchRequest MakeRequest(absl::string_view url,
                                              const FetchOptions& options);

 private:
  // A context whose deadline is `timeout`, or the default when it is zero.
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const;

  ClientOptions options_;
  std::unique_ptr<egress::v1::Egress::Stub> egress_;
  std::unique_ptr<egress::v1::TransportAdmin::Stub> admin_;
};

}  // namespace egress::client

#endif  // EGRESS_CLIENT_EGRESS_CLIENT_H_

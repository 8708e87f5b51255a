#ifndef EGRESS_SERVICE_CONFIG_SERVICE_CONFIG_H_
#define EGRESS_SERVICE_CONFIG_SERVICE_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "service/fleet/fleet_settings.h"
#include "service/limits/quota_store.h"
#include "service/limits/quotas.h"
#include "service/transport/settings.h"

namespace egress {

// A FULL fetch that leaves max_body_bytes at 0 gets at most this much body, so that the
// whole answer fits the 4 MiB a gRPC client accepts by default (grpcurl, a stub made by
// hand): a larger body is egressd's own RESOURCE_EXHAUSTED RESPONSE_TOO_LARGE, counted as
// such, never an answer counted OK that the caller's gRPC then refuses (egressd cannot see
// the caller's limit). The 256 KiB left hold the rest of the FetchResponse: response
// headers of up to transport.max_response_header_bytes (64 KiB) grow at most threefold as
// protobuf (a value that is not UTF-8 comes as its Latin-1 reading in UTF-8, up to twice
// its size, and byte for byte in value_bytes), and status, connection info, timing and
// trace ids take under 1 KiB. A caller who raises max_body_bytes must raise its client's
// receive limit too; the clients in client/ accept any size.
constexpr uint64_t kDefaultClientMessageBytes = 4 << 20;  // gRPC's default receive limit
constexpr uint64_t kAnswerRoomBytes = 256 << 10;
constexpr uint64_t kDefaultMaxBodyBytes = kDefaultClientMessageBytes - kAnswerRoomBytes;  // 3,932,160

// The settings of the gRPC front end that are not the transport's.
struct FetchLimits {
  uint64_t default_max_body_bytes = kDefaultMaxBodyBytes;
  uint64_t max_request_body_bytes = 8 << 20;
  absl::Duration default_timeout = absl::Seconds(60);
  uint32_t max_concurrent_fetches = 10000;
  uint32_t max_request_header_bytes = 64 * 1024;
  uint64_t max_body_bytes_ceiling = 64 << 20;
  uint64_t buffered_body_budget_bytes = 256 << 20;
  absl::Duration max_timeout = absl::Minutes(5);
  uint32_t max_concurrent_fetches_per_caller = 0;  // 0: no per-caller limit
};

// How callers are identified, and what redirects may carry; which hosts each caller may
// reach is in the transport's policy (transport::CallerRules).
struct CallerPolicy {
  std::string caller_header;  // metadata key naming the caller; empty: not used
  uint32_t max_redirects = 5;
  // Lower-case names of request headers dropped when a redirect changes origin.
  std::vector<std::string> redirect_strip_headers = {
      "authorization", "proxy-authorization", "cookie", "cookie2", "www-authenticate"};
  egress::v1::IdentitySource identity_source = egress::v1::IDENTITY_SOURCE_URI_SAN;
  // Peers whose caller_header is believed: by connection address, or by mTLS identity.
  std::vector<transport::Cidr> header_trusted_cidrs;
  std::vector<std::string> header_trusted_identities;
};

// What the access log writes (access_log in the config; where it goes is --access_log).
struct AccessLogSettings {
  double sample_ratio = 1.0;          // of successful fetches; the others are all logged
  uint32_t max_lines_per_second = 0;  // 0: no cap
  uint32_t queue_lines = 10000;
  bool log_query = false;
};

// The config in force: validated, with every default filled in, never changed after
// it is built (a new config is a new object).
struct ServiceConfig {
  egress::v1::Config proto;  // as GetConfig shows it: defaults filled in
  transport::TransportSettings transport;
  FetchLimits limits;
  CallerPolicy callers;
  size_t max_origin_labels = 100;  // distinct origins in metrics before "other"
  AccessLogSettings access_log;
  std::vector<QuotaRule> quotas;  // in the config's order
  QuotaStoreSettings quota_store;
  fleet::FleetSettings fleet;  // Config.affinity
};

}  // namespace egress

#endif  // EGRESS_SERVICE_CONFIG_SERVICE_CONFIG_H_

#ifndef EGRESS_SERVICE_CONFIG_SECTIONS_H_
#define EGRESS_SERVICE_CONFIG_SECTIONS_H_

// Internal to service/config: the builder of each section of egress.v1.Config, which
// BuildConfig (config.cc) calls in turn, and what one section borrows from another. Each
// checks its section and fills the proto's unset fields with the defaults (GetConfig shows
// what is in force); errors are INVALID_ARGUMENT and name the field.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "google/protobuf/repeated_field.h"
#include "service/config/service_config.h"
#include "service/limits/quota_store.h"
#include "service/limits/quotas.h"
#include "service/transport/settings.h"

namespace egress::config_internal {

// transport_config.cc

// transport's own fields: pool sizes, upstream input bounds, connection lifetime,
// timeouts, DNS, happy eyeballs, circuit breaker, retry and HTTP/2. transport.origins are
// built afterwards, over these settings and Config.drain.
absl::Status BuildTransport(egress::v1::TransportConfig* tp, transport::TransportSettings& t);

// A happy_eyeballs_delay: positive, and at least RFC 8305's floor of 10 ms.
absl::Status CheckHappyEyeballsDelay(absl::string_view name, absl::Duration delay);

// The connection lifetime fields of the transport or of an origin override (`name`, the
// path of either in the config): what no setting may hold. Defined for
// egress::v1::TransportConfig and egress::v1::OriginOverride.
template <class Proto>
absl::Status CheckLifetime(const std::string& name, const Proto& proto);

// origin_override_config.cc

// One transport.origins entry over the transport's settings.
absl::StatusOr<transport::OriginOverride> BuildOverride(int index,
                                                        egress::v1::OriginOverride* proto,
                                                        const transport::TransportSettings& base);

// drain_config.cc

// The drain policy a DrainPolicy message asks for. Unset fields take `fallback`'s values
// when the mode is the same, else the built-in defaults of the mode asked for (an
// origin switched to ADAPTIVE gets ADAPTIVE's ceilings, not FIXED's caps).
absl::StatusOr<transport::DrainSettings> BuildDrain(absl::string_view name,
                                                    egress::v1::DrainPolicy* drain,
                                                    transport::DrainSettings fallback);

// http2_config.cc

// transport.http2, or an origins entry's over `fallback` (the transport's).
absl::StatusOr<transport::Http2Settings> BuildHttp2(absl::string_view name,
                                                    egress::v1::Http2Config* proto,
                                                    transport::Http2Settings fallback);

// resilience_config.cc

// transport.circuit_breaker, or an origins entry's over `fallback` (the transport's).
absl::StatusOr<transport::CircuitBreakerSettings> BuildCircuitBreaker(
    absl::string_view name, egress::v1::CircuitBreakerConfig* proto,
    transport::CircuitBreakerSettings fallback);

// transport.retry, or an origins entry's over `fallback` (the transport's).
absl::StatusOr<transport::RetrySettings> BuildRetry(absl::string_view name,
                                                    egress::v1::RetryConfig* proto,
                                                    transport::RetrySettings fallback);

// limits_config.cc

// Config.limits: body sizes, request sizes, timeouts and concurrency.
absl::Status BuildLimits(egress::v1::FetchLimits* limits, FetchLimits& l);

// access_log_config.cc

// What the access log writes; sample_ratio is a wrapper so that 0 is not "unset".
absl::Status BuildAccessLog(egress::v1::AccessLogConfig* log, AccessLogSettings* settings);

// policy_config.cc

// Config.policy: the address policy and its decision history (into config->transport),
// and how callers are identified and redirected (into config->callers).
absl::Status BuildPolicy(egress::v1::PolicyConfig* policy, ServiceConfig* config);

// quota_config.cc

// Config.quota_store: "host:port" of Redis, its timeout and failure mode.
absl::Status BuildQuotaStore(egress::v1::QuotaStoreConfig* store, QuotaStoreSettings* settings);

// Config.quotas, each burst filled in.
absl::Status BuildQuotas(google::protobuf::RepeatedPtrField<egress::v1::QuotaRule>* list,
                         const QuotaStoreSettings& store, std::vector<QuotaRule>* rules);

// affinity_config.cc

// Config.affinity: the fleet's members, each rewritten in its one spelling.
absl::Status BuildAffinity(egress::v1::AffinityConfig* affinity, fleet::FleetSettings* fleet);

}  // namespace egress::config_internal

#endif  // EGRESS_SERVICE_CONFIG_SECTIONS_H_

#include "service/config/sections.h"

#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "service/config/proto_time.h"

namespace egress::config_internal {
namespace {

// The connection lifetime fields (BuildLifetime's, in transport_config.cc) in an origin
// override: only those set apply.
absl::Status OverrideLifetime(const std::string& name, const v1::OriginOverride& proto,
                              transport::OriginOverride& o) {
  if (auto status = CheckLifetime(name, proto); !status.ok()) return status;
  if (proto.has_keepalive_hint_margin()) {
    o.keepalive_hint_margin = FromProto(proto.keepalive_hint_margin());
  }
  if (proto.has_max_connection_age()) o.max_connection_age = FromProto(proto.max_connection_age());
  if (proto.has_max_connection_age_jitter_percent()) {
    o.max_connection_age_jitter_percent = proto.max_connection_age_jitter_percent();
  }
  if (proto.has_max_requests_per_connection()) {
    o.max_requests_per_connection = proto.max_requests_per_connection();
  }
  if (proto.min_idle_per_origin()) o.min_idle_per_origin = proto.min_idle_per_origin();
  return absl::OkStatus();
}

// Pre-warming stays within what the pool keeps: connections over max_idle_per_origin
// would be closed as soon as they were dialed, and dialed again.
absl::Status CheckMinIdle(const std::string& name, const transport::TransportSettings& s) {
  if (s.min_idle_per_origin > s.max_idle_per_origin) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": min_idle_per_origin (", s.min_idle_per_origin,
        ") must be at most max_idle_per_origin (", s.max_idle_per_origin, ")"));
  }
  if (s.max_conns_per_origin > 0 && s.min_idle_per_origin > s.max_conns_per_origin) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": min_idle_per_origin (", s.min_idle_per_origin,
        ") must be at most max_conns_per_origin (", s.max_conns_per_origin, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<transport::OriginOverride> BuildOverride(int index,
                                                        egress::v1::OriginOverride* proto,
                                                        const transport::TransportSettings& base) {
  const std::string name = absl::StrCat("transport.origins[", index, "]");
  transport::OriginOverride o;
  auto host = transport::HostPattern::Parse(proto->host());
  if (!host.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".host: ", host.status().message()));
  }
  o.host = *std::move(host);
  if (proto->max_idle_per_origin()) o.max_idle_per_origin = proto->max_idle_per_origin();
  if (proto->max_conns_per_origin()) o.max_conns_per_origin = proto->max_conns_per_origin();
  for (auto [field, set, value, out] : {
           std::make_tuple("idle_timeout", proto->has_idle_timeout(), proto->idle_timeout(),
                           &o.idle_timeout),
           std::make_tuple("connect_timeout", proto->has_connect_timeout(),
                           proto->connect_timeout(), &o.connect_timeout),
           std::make_tuple("tls_handshake_timeout", proto->has_tls_handshake_timeout(),
                           proto->tls_handshake_timeout(), &o.tls_handshake_timeout),
           std::make_tuple("response_header_timeout", proto->has_response_header_timeout(),
                           proto->response_header_timeout(), &o.response_header_timeout)}) {
    if (!set) continue;
    if (FromProto(value) <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ".", field, ": must be positive"));
    }
    *out = FromProto(value);
  }
  if (proto->has_happy_eyeballs_delay()) {
    const absl::Duration delay = FromProto(proto->happy_eyeballs_delay());
    if (auto status = CheckHappyEyeballsDelay(name + ".happy_eyeballs_delay", delay);
        !status.ok()) {
      return status;
    }
    o.happy_eyeballs_delay = delay;
  }
  if (proto->has_drain()) {
    auto drain = BuildDrain(name + ".drain", proto->mutable_drain(), base.drain);
    if (!drain.ok()) return drain.status();
    o.drain = *drain;
  }
  if (proto->has_circuit_breaker()) {
    auto breaker = BuildCircuitBreaker(name + ".circuit_breaker",
                                       proto->mutable_circuit_breaker(), base.circuit_breaker);
    if (!breaker.ok()) return breaker.status();
    o.circuit_breaker = *breaker;
  }
  if (proto->has_retry()) {
    auto retry = BuildRetry(name + ".retry", proto->mutable_retry(), base.retry);
    if (!retry.ok()) return retry.status();
    o.retry = *retry;
  }
  if (proto->has_http2()) {
    auto http2 = BuildHttp2(name + ".http2", proto->mutable_http2(), base.http2);
    if (!http2.ok()) return http2.status();
    o.http2 = *http2;
  }
  if (auto status = OverrideLifetime(name, *proto, o); !status.ok()) return status;
  if (auto status = CheckMinIdle(name, base.With(o)); !status.ok()) return status;
  o.extra_ca_file = proto->extra_ca_file();
  o.client_cert_file = proto->client_cert_file();
  o.client_key_file = proto->client_key_file();
  if (proto->has_tls_session_resumption()) {
    o.tls_session_resumption = proto->tls_session_resumption().value();
  }
  if (proto->has_honor_keepalive_hints()) {
    o.honor_keepalive_hints = proto->honor_keepalive_hints().value();
  }
  if (o.client_cert_file.empty() != o.client_key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": set client_cert_file and client_key_file together"));
  }
  return o;
}

}  // namespace egress::config_internal

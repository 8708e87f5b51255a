#include "service/transport/settings_snapshot.h"

#include "service/transport/tls/client_context.h"

namespace egress::transport {

namespace net = boost::asio;

std::optional<size_t> Snapshot::OverrideIndex(absl::string_view host) const {
  for (size_t i = 0; i < settings.origin_overrides.size(); ++i) {
    if (settings.origin_overrides[i].host.Matches(host)) return i;
  }
  return std::nullopt;
}

std::shared_ptr<net::ssl::context> Snapshot::TlsFor(absl::string_view host) const {
  const std::optional<size_t> i = OverrideIndex(host);
  return i && override_tls[*i] ? override_tls[*i] : tls_context;
}

const TransportSettings& Snapshot::SettingsFor(absl::string_view host) const {
  const std::optional<size_t> i = OverrideIndex(host);
  return i ? for_override[*i] : for_other_hosts;
}

absl::StatusOr<std::shared_ptr<const Snapshot>> MakeSnapshot(
    TransportSettings settings) {
  auto snapshot = std::make_shared<Snapshot>();
  auto tls = MakeClientTlsContext({settings.extra_ca_file, "", ""});
  if (!tls.ok()) return tls.status();
  snapshot->tls_context = *std::move(tls);
  for (const OriginOverride& o : settings.origin_overrides) {
    if (!o.HasTls()) {
      snapshot->override_tls.push_back(nullptr);
      continue;
    }
    auto own = MakeClientTlsContext(
        {o.extra_ca_file.empty() ? settings.extra_ca_file : o.extra_ca_file, o.client_cert_file,
         o.client_key_file});
    if (!own.ok()) return own.status();
    snapshot->override_tls.push_back(*std::move(own));
  }
  snapshot->for_other_hosts = settings.With(OriginOverride{});
  for (const OriginOverride& o : settings.origin_overrides) {
    snapshot->for_override.push_back(settings.With(o));
  }
  snapshot->settings = std::move(settings);
  return snapshot;
}

PoolLimitsByHost PoolLimitsOf(const TransportSettings& settings) {
  PoolLimitsByHost limits;
  const auto limits_of = [](const TransportSettings& s, uint32_t min_idle) {
    return PoolLimits{s.max_idle_per_origin,   s.max_conns_per_origin,
                      s.idle_timeout,          s.max_waiting_per_origin,
                      s.drain.mode == DrainMode::kAdaptive, s.drain.min_dial_cost,
                      LifetimeLimits{s.max_connection_age, s.max_connection_age_jitter_percent,
                                     s.max_requests_per_connection, s.keepalive_hint_margin,
                                     s.honor_keepalive_hints},
                      min_idle, s.http2.mode, s.http2.ping_interval};
  };
  limits.defaults = limits_of(settings, 0);  // pre-warming is for origins overrides name
  for (const OriginOverride& o : settings.origin_overrides) {
    const TransportSettings s = settings.With(o);
    limits.overrides.emplace_back(o.host, limits_of(s, s.min_idle_per_origin));
  }
  return limits;
}

std::vector<std::pair<std::string, CircuitBreakerSettings>> BreakerSettingsOf(
    const Snapshot& snapshot) {
  std::vector<std::pair<std::string, CircuitBreakerSettings>> breakers{
      {"", snapshot.for_other_hosts.circuit_breaker}};
  for (size_t i = 0; i < snapshot.for_override.size(); ++i) {
    breakers.emplace_back(snapshot.settings.origin_overrides[i].host.pattern,
                          snapshot.for_override[i].circuit_breaker);
  }
  return breakers;
}

}  // namespace egress::transport

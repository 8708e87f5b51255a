#ifndef EGRESS_SERVICE_TRANSPORT_SETTINGS_H_
#define EGRESS_SERVICE_TRANSPORT_SETTINGS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "absl/time/time.h"
#include "boost/asio/ip/udp.hpp"
#include "service/transport/policy/address_policy.h"

namespace egress::transport {

enum class DrainMode {
  kOff,    // never drain: unread bytes mean the connection is closed (Go 1.26)
  kFixed,  // drain up to max_bytes or max_duration (Go 1.27)
  kAdaptive,  // drain while finishing is cheaper than a new connection, within the caps
};

// What happens to a response body the caller did not read to its end.
struct DrainSettings {
  DrainMode mode = DrainMode::kFixed;
  uint64_t max_bytes = 256 * 1024;  // FIXED: the cap; ADAPTIVE: the hard ceiling
  absl::Duration max_duration = absl::Milliseconds(50);
  // ADAPTIVE only: drain while finishing takes less than a dial times this.
  double cost_factor = 1.0;
  // ADAPTIVE only: a dial is taken to cost at least this, whatever was learned.
  absl::Duration min_dial_cost = absl::ZeroDuration();

  // The built-in defaults of a mode: ADAPTIVE's ceilings are far above FIXED's caps.
  static DrainSettings DefaultsFor(DrainMode mode) {
    DrainSettings settings;
    settings.mode = mode;
    if (mode == DrainMode::kAdaptive) {
      settings.max_bytes = 4 * 1024 * 1024;
      settings.max_duration = absl::Seconds(1);
    }
    return settings;
  }
};

// Name lookups. Each is bounded by the connect timeout and the request's deadline.
struct DnsSettings {
  uint32_t max_lookups_per_caller = 64;  // in flight, per caller identity
  uint32_t max_lookups = 1024;           // in flight, all callers together
  // Asked instead of /etc/resolv.conf's nameservers when not empty.
  std::vector<boost::asio::ip::udp::endpoint> servers;
  // The cache of answers (see DnsCache).
  bool cache = true;
  uint32_t cache_max_entries = 10000;
  absl::Duration min_ttl = absl::ZeroDuration();
  absl::Duration max_ttl = absl::Seconds(300);
  absl::Duration negative_ttl = absl::Seconds(5);  // NXDOMAIN and NODATA
  absl::Duration stale_for = absl::Seconds(30);    // past the TTL, when the servers fail
};

// Circuit breaking per origin (outlier detection): after `consecutive_failures` failed
// fetches in a row, an origin's fetches fail at once for `open_for`, with no upstream
// traffic; then one fetch at a time goes as a probe until one succeeds.
struct CircuitBreakerSettings {
  uint32_t consecutive_failures = 0;  // 0 = no breaker
  absl::Duration open_for = absl::Seconds(30);
  // Whether a 5xx response counts as a failure (connect failures, resets, protocol
  // errors and the transport's own timeouts always do).
  bool count_5xx = true;

  bool enabled() const { return consecutive_failures > 0; }
  bool operator==(const CircuitBreakerSettings& other) const {
    return consecutive_failures == other.consecutive_failures &&
           open_for == other.open_for && count_5xx == other.count_5xx;
  }
  bool operator!=(const CircuitBreakerSettings& other) const { return !(*this == other); }
};

// Retries of whole fetches, opt-in (max_attempts 1: none): after a connect or TLS
// failure (nothing was written: any method), a reset or close before the response, or a
// 502, 503 or 504 (idempotent methods only), with exponential backoff and full jitter
// (or the response's Retry-After in seconds; a 429 is retried only with one), only
// within the fetch's deadline, and only while the origin's retry budget allows: retries
// earn budget_percent of a retry per request, plus min_retries_per_second, so that
// retries cannot multiply an outage.
inline constexpr uint32_t kMaxAttempts = 10;  // per fetch, the first included

struct RetrySettings {
  uint32_t max_attempts = 1;  // the first included
  absl::Duration base_backoff = absl::Milliseconds(25);
  absl::Duration max_backoff = absl::Milliseconds(250);
  uint32_t budget_percent = 20;
  uint32_t min_retries_per_second = 3;

  bool enabled() const { return max_attempts > 1; }
};

// Which protocol connections to an origin speak (see egress.v1.Http2Mode).
enum class Http2Mode {
  kAuto,            // https: ALPN offers h2 and http/1.1; http: HTTP/1.1
  kOff,             // HTTP/1.1 only
  kRequired,        // https: ALPN offers h2 only; http: as kPriorKnowledge
  kPriorKnowledge,  // http: HTTP/2 from the first byte (h2c); https: as kRequired
};

struct Http2Settings {
  Http2Mode mode = Http2Mode::kAuto;
  uint32_t max_concurrent_streams = 100;  // further bounded by the server's SETTINGS
  uint32_t stream_window_bytes = 256 * 1024;
  uint32_t connection_window_bytes = 1024 * 1024;
  absl::Duration ping_interval = absl::Seconds(30);  // of a connection with no stream
  absl::Duration ping_timeout = absl::Seconds(5);

  // Whether ALPN offers h2 to an https origin.
  bool OffersH2OverTls() const { return mode != Http2Mode::kOff; }
  // Whether a connection must speak HTTP/2: ALPN offers nothing else to an https origin,
  // and an http origin gets it with prior knowledge.
  bool RequiresH2() const {
    return mode == Http2Mode::kRequired || mode == Http2Mode::kPriorKnowledge;
  }
};

struct TransportSettings;

// Settings for the origins whose host matches, over the defaults. Unset fields keep the
// default; any TLS field set gives the matching origins a TLS context of their own.
struct OriginOverride {
  HostPattern host;
  std::optional<uint32_t> max_idle_per_origin;
  std::optional<uint32_t> max_conns_per_origin;
  std::optional<absl::Duration> idle_timeout;
  std::optional<absl::Duration> connect_timeout;
  std::optional<absl::Duration> tls_handshake_timeout;
  std::optional<absl::Duration> response_header_timeout;
  std::optional<absl::Duration> happy_eyeballs_delay;
  std::optional<DrainSettings> drain;
  std::optional<absl::Duration> keepalive_hint_margin;
  std::optional<bool> honor_keepalive_hints;
  std::optional<absl::Duration> max_connection_age;  // zero: unlimited for these origins
  std::optional<uint32_t> max_connection_age_jitter_percent;
  std::optional<uint32_t> max_requests_per_connection;  // zero: unlimited for these origins
  std::optional<uint32_t> min_idle_per_origin;
  std::string extra_ca_file;
  std::string client_cert_file;  // PEM, presented to upstreams that ask (mTLS)
  std::string client_key_file;
  std::optional<bool> tls_session_resumption;
  std::optional<CircuitBreakerSettings> circuit_breaker;
  std::optional<RetrySettings> retry;
  std::optional<Http2Settings> http2;

  bool HasTls() const {
    return !extra_ca_file.empty() || !client_cert_file.empty() || !client_key_file.empty();
  }
};

// Everything the shared transport is configured with; built-in defaults serve.
struct TransportSettings {
  uint32_t max_idle_per_origin = 100;
  uint32_t max_conns_per_origin = 0;  // 0 = unlimited
  uint32_t max_waiting_per_origin = 256;
  absl::Duration idle_timeout = absl::Seconds(90);
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration tls_handshake_timeout = absl::Seconds(10);
  absl::Duration response_header_timeout = absl::Seconds(30);
  // Between the starts of connection attempts to a host's addresses (RFC 8305).
  absl::Duration happy_eyeballs_delay = absl::Milliseconds(250);
  std::string extra_ca_file;  // PEM, trusted in addition to the system store
  // New connections resume the origin's last TLS session (abbreviated handshake).
  bool tls_session_resumption = true;
  uint32_t max_response_header_bytes = 64 * 1024;  // the trailers' limit too, as in Go
  uint32_t max_chunk_line_bytes = 4096;             // a chunk-size line with extensions
  uint32_t max_interim_responses = 5;               // 1xx responses before the final one
  // Connection lifetime (see LifetimeLimits): an idle connection expires this long before
  // the timeout a server announces in Keep-Alive.
  absl::Duration keepalive_hint_margin = absl::Seconds(1);
  bool honor_keepalive_hints = true;  // false: a server's Keep-Alive hint bounds nothing
  absl::Duration max_connection_age = absl::ZeroDuration();  // 0 = unlimited
  uint32_t max_connection_age_jitter_percent = 10;
  uint32_t max_requests_per_connection = 0;  // 0 = unlimited
  // Idle connections kept ready (pre-warmed) for each origin an override matches, once
  // it has been asked for; origins no override matches get none.
  uint32_t min_idle_per_origin = 0;
  uint32_t io_threads = 0;  // 0 = one per core
  DrainSettings drain;
  CircuitBreakerSettings circuit_breaker;
  RetrySettings retry;
  Http2Settings http2;
  uint64_t drain_budget_bytes = 32 * 1024 * 1024;  // ADAPTIVE drains, all origins together
  std::shared_ptr<const AddressPolicy> policy = std::make_shared<AddressPolicy>(PolicyRules{});
  size_t policy_history_size = 1000;  // the latest policy decisions kept, for dry runs
  std::vector<OriginOverride> origin_overrides;  // first match wins
  DnsSettings dns;

  // The first override matching `host`, if any.
  const OriginOverride* OverrideFor(absl::string_view host) const {
    for (const auto& o : origin_overrides) {
      if (o.host.Matches(host)) return &o;
    }
    return nullptr;
  }

  // The drain policy for `host`, without copying the rest.
  const DrainSettings& DrainFor(absl::string_view host) const {
    const OriginOverride* o = OverrideFor(host);
    return o && o->drain ? *o->drain : drain;
  }

  // These settings as they apply to `host`.
  TransportSettings ForHost(absl::string_view host) const {
    const OriginOverride* o = OverrideFor(host);
    return o ? With(*o) : With(OriginOverride{});
  }

  // These settings with an override's fields laid over them (and no overrides left).
  TransportSettings With(const OriginOverride& override_) const {
    const OriginOverride* o = &override_;
    TransportSettings s = *this;
    s.origin_overrides.clear();
    s.max_idle_per_origin = o->max_idle_per_origin.value_or(s.max_idle_per_origin);
    s.max_conns_per_origin = o->max_conns_per_origin.value_or(s.max_conns_per_origin);
    s.idle_timeout = o->idle_timeout.value_or(s.idle_timeout);
    s.connect_timeout = o->connect_timeout.value_or(s.connect_timeout);
    s.tls_handshake_timeout = o->tls_handshake_timeout.value_or(s.tls_handshake_timeout);
    s.response_header_timeout = o->response_header_timeout.value_or(s.response_header_timeout);
    s.happy_eyeballs_delay = o->happy_eyeballs_delay.value_or(s.happy_eyeballs_delay);
    s.drain = o->drain.value_or(s.drain);
    s.circuit_breaker = o->circuit_breaker.value_or(s.circuit_breaker);
    s.retry = o->retry.value_or(s.retry);
    s.http2 = o->http2.value_or(s.http2);
    s.tls_session_resumption = o->tls_session_resumption.value_or(s.tls_session_resumption);
    s.keepalive_hint_margin = o->keepalive_hint_margin.value_or(s.keepalive_hint_margin);
    s.honor_keepalive_hints = o->honor_keepalive_hints.value_or(s.honor_keepalive_hints);
    s.max_connection_age = o->max_connection_age.value_or(s.max_connection_age);
    s.max_connection_age_jitter_percent =
        o->max_connection_age_jitter_percent.value_or(s.max_connection_age_jitter_percent);
    s.max_requests_per_connection =
        o->max_requests_per_connection.value_or(s.max_requests_per_connection);
    s.min_idle_per_origin = o->min_idle_per_origin.value_or(s.min_idle_per_origin);
    return s;
  }
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_SETTINGS_H_

#include "service/config/sections.h"

#include <optional>
#include <string>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "boost/asio/ip/address.hpp"
#include "service/config/fields.h"
#include "service/config/proto_time.h"

namespace egress::config_internal {

absl::Status CheckHappyEyeballsDelay(absl::string_view name, absl::Duration delay) {
  if (delay < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": must be at least 10ms (RFC 8305's floor; got ", absl::FormatDuration(delay),
        ")"));
  }
  return absl::OkStatus();
}

template <class Proto>
absl::Status CheckLifetime(const std::string& name, const Proto& proto) {
  for (auto [field, set, value] :
       {std::make_tuple("keepalive_hint_margin", proto.has_keepalive_hint_margin(),
                        proto.keepalive_hint_margin()),
        std::make_tuple("max_connection_age", proto.has_max_connection_age(),
                        proto.max_connection_age())}) {
    if (set && FromProto(value) < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ".", field,
                                                     ": must not be negative (got ",
                                                     absl::FormatDuration(FromProto(value)), ")"));
    }
  }
  if (proto.has_max_connection_age_jitter_percent() &&
      proto.max_connection_age_jitter_percent() > 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".max_connection_age_jitter_percent: must be at most 100 (got ",
        proto.max_connection_age_jitter_percent(), ")"));
  }
  return absl::OkStatus();
}

template absl::Status CheckLifetime(const std::string& name, const v1::TransportConfig& proto);
template absl::Status CheckLifetime(const std::string& name, const v1::OriginOverride& proto);

namespace {

// transport.keepalive_hint_margin, max_connection_age(_jitter_percent) and
// max_requests_per_connection; the defaults filled in.
absl::Status BuildLifetime(v1::TransportConfig* tp, transport::TransportSettings& t) {
  if (auto status = CheckLifetime("transport", *tp); !status.ok()) return status;
  if (tp->has_keepalive_hint_margin()) {
    t.keepalive_hint_margin = FromProto(tp->keepalive_hint_margin());
  } else {
    ToProto(t.keepalive_hint_margin, tp->mutable_keepalive_hint_margin());
  }
  t.max_connection_age = FromProto(tp->max_connection_age());
  if (tp->has_max_connection_age_jitter_percent()) {
    t.max_connection_age_jitter_percent = tp->max_connection_age_jitter_percent();
  } else {
    tp->set_max_connection_age_jitter_percent(t.max_connection_age_jitter_percent);
  }
  t.max_requests_per_connection = tp->max_requests_per_connection();
  t.min_idle_per_origin = tp->min_idle_per_origin();
  return absl::OkStatus();
}

// A nameserver: "10.0.0.2", "10.0.0.2:53", "fd00::2" or "[fd00::2]:53".
absl::StatusOr<boost::asio::ip::udp::endpoint> ParseNameserver(absl::string_view text) {
  const auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not an IP address with an optional port (\"10.0.0.2\", "
        "\"10.0.0.2:53\" or \"[fd00::2]:53\")"));
  };
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(std::string(text), ec);
  if (!ec) return boost::asio::ip::udp::endpoint(address, 53);
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return invalid();
  const std::optional<int> port = ParsePort(text.substr(colon + 1));
  if (!port) return invalid();
  absl::string_view host = text.substr(0, colon);
  const bool bracketed = absl::ConsumePrefix(&host, "[") && absl::ConsumeSuffix(&host, "]");
  address = boost::asio::ip::make_address(std::string(host), ec);
  // An IPv6 address takes brackets before a port, or its last group reads as the port.
  if (ec || address.is_v6() != bracketed) return invalid();
  return boost::asio::ip::udp::endpoint(address, static_cast<uint16_t>(*port));
}

// transport.dns's cache fields.
absl::Status BuildDnsCache(egress::v1::DnsConfig* dns, transport::DnsSettings* settings) {
  settings->cache = !dns->disable_cache();
  NumberOrDefault(dns, &v1::DnsConfig::cache_max_entries, &v1::DnsConfig::set_cache_max_entries,
                  &settings->cache_max_entries);
  // has_*() is read before mutable_*() creates the field.
  const bool min_set = dns->has_min_ttl(), max_set = dns->has_max_ttl(),
             negative_set = dns->has_negative_ttl(), stale_set = dns->has_stale_for();
  for (auto [name, set, field, out] : {
           std::make_tuple("transport.dns.min_ttl", min_set, dns->mutable_min_ttl(),
                           &settings->min_ttl),
           std::make_tuple("transport.dns.max_ttl", max_set, dns->mutable_max_ttl(),
                           &settings->max_ttl),
           std::make_tuple("transport.dns.negative_ttl", negative_set,
                           dns->mutable_negative_ttl(), &settings->negative_ttl),
           std::make_tuple("transport.dns.stale_for", stale_set, dns->mutable_stale_for(),
                           &settings->stale_for),
       }) {
    if (auto status = DurationOrZero(name, set, field, out); !status.ok()) return status;
  }
  if (settings->min_ttl > settings->max_ttl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.dns.min_ttl (", absl::FormatDuration(settings->min_ttl),
        ") must not be above transport.dns.max_ttl (", absl::FormatDuration(settings->max_ttl),
        ")"));
  }
  return absl::OkStatus();
}

absl::Status BuildDns(egress::v1::DnsConfig* dns, transport::DnsSettings* settings) {
  NumberOrDefault(dns, &v1::DnsConfig::max_lookups_per_caller,
                  &v1::DnsConfig::set_max_lookups_per_caller, &settings->max_lookups_per_caller);
  NumberOrDefault(dns, &v1::DnsConfig::max_lookups, &v1::DnsConfig::set_max_lookups,
                  &settings->max_lookups);
  for (int i = 0; i < dns->servers_size(); ++i) {
    auto server = ParseNameserver(dns->servers(i));
    if (!server.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("transport.dns.servers[", i, "]: ", server.status().message()));
    }
    settings->servers.push_back(*server);
  }
  return BuildDnsCache(dns, settings);
}

// Bounds on what an upstream may make the transport buffer or loop on.
absl::Status UpstreamInputLimits(v1::TransportConfig* tp, transport::TransportSettings& t) {
  NumberOrDefault(tp, &v1::TransportConfig::max_chunk_line_bytes,
                  &v1::TransportConfig::set_max_chunk_line_bytes, &t.max_chunk_line_bytes);
  if (t.max_chunk_line_bytes < 256 || t.max_chunk_line_bytes > kMaxChunkLineBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.max_chunk_line_bytes: must be from 256 to ", kMaxChunkLineBytes, " (got ",
        t.max_chunk_line_bytes, ")"));
  }
  NumberOrDefault(tp, &v1::TransportConfig::max_interim_responses,
                  &v1::TransportConfig::set_max_interim_responses, &t.max_interim_responses);
  if (t.max_interim_responses > 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.max_interim_responses: must be at most 100 (got ", t.max_interim_responses,
        ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BuildTransport(v1::TransportConfig* tp, transport::TransportSettings& t) {
  NumberOrDefault(tp, &v1::TransportConfig::max_idle_per_origin,
                  &v1::TransportConfig::set_max_idle_per_origin, &t.max_idle_per_origin);
  t.max_conns_per_origin = tp->max_conns_per_origin();
  NumberOrDefault(tp, &v1::TransportConfig::max_waiting_per_origin,
                  &v1::TransportConfig::set_max_waiting_per_origin, &t.max_waiting_per_origin);
  NumberOrDefault(tp, &v1::TransportConfig::drain_budget_bytes,
                  &v1::TransportConfig::set_drain_budget_bytes, &t.drain_budget_bytes);
  NumberOrDefault(tp, &v1::TransportConfig::max_response_header_bytes,
                  &v1::TransportConfig::set_max_response_header_bytes,
                  &t.max_response_header_bytes);
  if (t.max_response_header_bytes < 1024 || t.max_response_header_bytes > kMaxResponseHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport.max_response_header_bytes: must be from 1024 to ", kMaxResponseHeaderBytes,
        " (got ", t.max_response_header_bytes, ")"));
  }
  if (auto status = UpstreamInputLimits(tp, t); !status.ok()) return status;
  if (auto status = BuildLifetime(tp, t); !status.ok()) return status;
  t.io_threads = tp->io_threads();
  if (t.io_threads > kMaxIoThreads) {
    return absl::InvalidArgumentError(absl::StrCat("transport.io_threads: at most ",
                                                   kMaxIoThreads, " (got ", t.io_threads, ")"));
  }
  t.extra_ca_file = tp->extra_ca_file();
  if (!tp->has_tls_session_resumption()) tp->mutable_tls_session_resumption()->set_value(true);
  t.tls_session_resumption = tp->tls_session_resumption().value();
  if (!tp->has_honor_keepalive_hints()) tp->mutable_honor_keepalive_hints()->set_value(true);
  t.honor_keepalive_hints = tp->honor_keepalive_hints().value();
  // has_*() is read before mutable_*() creates the field.
  const bool idle_set = tp->has_idle_timeout(), connect_set = tp->has_connect_timeout(),
             tls_set = tp->has_tls_handshake_timeout(),
             header_set = tp->has_response_header_timeout();
  for (auto [name, set, field, out] : {
           std::make_tuple("transport.idle_timeout", idle_set, tp->mutable_idle_timeout(),
                           &t.idle_timeout),
           std::make_tuple("transport.connect_timeout", connect_set,
                           tp->mutable_connect_timeout(), &t.connect_timeout),
           std::make_tuple("transport.tls_handshake_timeout", tls_set,
                           tp->mutable_tls_handshake_timeout(), &t.tls_handshake_timeout),
           std::make_tuple("transport.response_header_timeout", header_set,
                           tp->mutable_response_header_timeout(), &t.response_header_timeout),
       }) {
    if (auto status = DurationField(name, set, field, *out, out); !status.ok()) return status;
  }

  if (auto status = BuildDns(tp->mutable_dns(), &t.dns); !status.ok()) return status;
  const bool happy_eyeballs_set = tp->has_happy_eyeballs_delay();
  if (auto status = DurationField("transport.happy_eyeballs_delay", happy_eyeballs_set,
                                  tp->mutable_happy_eyeballs_delay(), t.happy_eyeballs_delay,
                                  &t.happy_eyeballs_delay);
      !status.ok()) {
    return status;
  }
  if (auto status = CheckHappyEyeballsDelay("transport.happy_eyeballs_delay",
                                            t.happy_eyeballs_delay);
      !status.ok()) {
    return status;
  }

  auto breaker = BuildCircuitBreaker("transport.circuit_breaker", tp->mutable_circuit_breaker(),
                                     t.circuit_breaker);
  if (!breaker.ok()) return breaker.status();
  t.circuit_breaker = *breaker;
  auto retry = BuildRetry("transport.retry", tp->mutable_retry(), t.retry);
  if (!retry.ok()) return retry.status();
  t.retry = *retry;
  auto http2 = BuildHttp2("transport.http2", tp->mutable_http2(), t.http2);
  if (!http2.ok()) return http2.status();
  t.http2 = *http2;
  return absl::OkStatus();
}

}  // namespace egress::config_internal

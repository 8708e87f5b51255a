#include "service/config/config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/tokenizer.h"
#include "boost/asio/ip/address.hpp"
#include "google/protobuf/text_format.h"
#include "service/base/log_text.h"
#include "service/config/proto_time.h"

namespace egress {
namespace {

namespace v1 = egress::v1;

// Each origin label adds some 35 series to every scrape.
constexpr size_t kMaxOriginLabels = 10000;
// gRPC holds a request message whole, and cannot take one of 2 GiB.
constexpr uint64_t kMaxRequestBodyBytes = 1 << 30;
constexpr uint32_t kMaxRequestHeaderBytes = 16 << 20;
// A drain reads a body nobody asked for to save one dial: a gigabyte is far past that.
constexpr uint64_t kMaxDrainBytes = 1 << 30;
// What one upstream response may make a connection buffer: its head, a chunk line.
constexpr uint32_t kMaxResponseHeaderBytes = 16 << 20;
constexpr uint32_t kMaxChunkLineBytes = 1 << 20;
// A Fetch answer travels whole in one gRPC message, which protobuf caps below 2 GiB.
constexpr uint64_t kMaxBodyBytesCeiling = 1 << 30;
// Far past any machine's memory, and far from the arithmetic's limits.
constexpr uint64_t kMaxBufferedBodyBudgetBytes = uint64_t{1} << 40;
constexpr uint32_t kMaxIoThreads = 1024;
// A dry run replays the whole history while the admin call waits.
constexpr size_t kMaxDecisionHistory = 100000;
// Each fetch looks for its quota rule among them all.
constexpr int kMaxQuotaRules = 1000;
constexpr double kMaxQuotaRate = 1e6;

// A number left at zero means the default: the proto is filled in with it (GetConfig
// shows what is in force); otherwise the setting takes the proto's number.
template <class Proto, class Number, class Setting>
void NumberOrDefault(Proto* proto, Number (Proto::*get)() const, void (Proto::*set)(Number),
                     Setting* setting) {
  if ((proto->*get)() == 0) (proto->*set)(static_cast<Number>(*setting));
  *setting = static_cast<Setting>((proto->*get)());
}

using google::protobuf::Duration;

// Collects the first parse error with its position and the line it is on, so that
// the message names the field even when the parser's own words do not.
// The first error, with the offending line quoted. The one place a config's text reaches
// an error message (and so stderr, the admin caller, the reloader's log): protobuf's
// message (which quotes the token) and the line are each bounded and escaped
// (service/base/log_text.h), however long the line and whatever bytes it holds.
class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ParseErrors(absl::string_view text) : text_(text) {}
  void AddError(int line, int column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ",
                          OneLogLine(message, kMaxQuotedBytes));
    if (auto quoted = Line(line)) {
      absl::StrAppend(&first_, " (in \"", QuoteForLog(absl::StripAsciiWhitespace(*quoted)), "\")");
    }
  }
  const std::string& first() const { return first_; }

 private:
  // Line `number` (from 0) of the text, without copying the text.
  std::optional<absl::string_view> Line(int number) const {
    if (number < 0) return std::nullopt;
    size_t start = 0;
    for (int i = 0; i < number; ++i) {
      start = text_.find('\n', start);
      if (start == absl::string_view::npos) return std::nullopt;
      ++start;
    }
    return text_.substr(start, text_.find('\n', start) - start);
  }

  const absl::string_view text_;
  std::string first_;
};

// Fills an unset duration with its default; rejects a negative or explicitly zero one.
absl::Status DurationField(absl::string_view name, bool set, Duration* field,
                           absl::Duration fallback, absl::Duration* out) {
  absl::Duration value = FromProto(*field);
  if (value < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": must not be negative (got ",
                                                   absl::FormatDuration(value), ")"));
  }
  if (set && value == absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": must be positive; leave it out for the default (",
                     absl::FormatDuration(fallback), ")"));
  }
  if (!set) {
    value = fallback;
    ToProto(value, field);
  }
  *out = value;
  return absl::OkStatus();
}

// Parses every entry of a repeated field, naming the entry in errors.
template <typename T>
absl::Status ParseList(absl::string_view name,
                       const google::protobuf::RepeatedPtrField<std::string>& texts,
                       std::vector<T>* out) {
  for (int i = 0; i < texts.size(); ++i) {
    auto parsed = T::Parse(texts[i]);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", i, "]: ", parsed.status().message()));
    }
    out->push_back(*std::move(parsed));
  }
  return absl::OkStatus();
}

// The drain policy a DrainPolicy message asks for. Unset fields take `fallback`'s values
// when the mode is the same, else the built-in defaults of the mode asked for (an
// origin switched to ADAPTIVE gets ADAPTIVE's ceilings, not FIXED's caps).
absl::StatusOr<transport::DrainSettings> BuildDrain(absl::string_view name,
                                                    egress::v1::DrainPolicy* drain,
                                                    transport::DrainSettings fallback) {
  transport::DrainMode mode = fallback.mode;
  switch (drain->mode()) {
    case egress::v1::DRAIN_MODE_UNSPECIFIED: break;
    case egress::v1::DRAIN_MODE_OFF: mode = transport::DrainMode::kOff; break;
    case egress::v1::DRAIN_MODE_FIXED: mode = transport::DrainMode::kFixed; break;
    case egress::v1::DRAIN_MODE_ADAPTIVE: mode = transport::DrainMode::kAdaptive; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(name, ".mode: unknown mode ", drain->mode()));
  }
  transport::DrainSettings settings =
      mode == fallback.mode ? fallback : transport::DrainSettings::DefaultsFor(mode);
  drain->set_mode(mode == transport::DrainMode::kOff     ? egress::v1::DRAIN_MODE_OFF
                  : mode == transport::DrainMode::kFixed ? egress::v1::DRAIN_MODE_FIXED
                                                         : egress::v1::DRAIN_MODE_ADAPTIVE);
  NumberOrDefault(drain, &v1::DrainPolicy::max_bytes, &v1::DrainPolicy::set_max_bytes,
                  &settings.max_bytes);
  if (settings.max_bytes > kMaxDrainBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".max_bytes: at most ", kMaxDrainBytes, " (got ", settings.max_bytes,
        "); max_duration bounds a drain's time, mode DRAIN_MODE_OFF turns drains off"));
  }
  const bool duration_set = drain->has_max_duration();
  if (auto status = DurationField(absl::StrCat(name, ".max_duration"), duration_set,
                                  drain->mutable_max_duration(), settings.max_duration,
                                  &settings.max_duration);
      !status.ok()) {
    return status;
  }
  if (drain->cost_factor() < 0 || drain->cost_factor() > 1000 ||
      std::isnan(drain->cost_factor())) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".cost_factor: must be between 0 (exclusive) and 1000 (got ",
        drain->cost_factor(), ")"));
  }
  NumberOrDefault(drain, &v1::DrainPolicy::cost_factor, &v1::DrainPolicy::set_cost_factor,
                  &settings.cost_factor);
  if (drain->has_min_dial_cost()) {
    const absl::Duration floor = FromProto(drain->min_dial_cost());
    if (floor < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".min_dial_cost: must not be negative (got ",
                       absl::FormatDuration(floor), ")"));
    }
    settings.min_dial_cost = floor;
  } else {
    ToProto(settings.min_dial_cost, drain->mutable_min_dial_cost());
  }
  return settings;
}

// transport.circuit_breaker, or an origins entry's over `fallback` (the transport's).
absl::StatusOr<transport::CircuitBreakerSettings> BuildCircuitBreaker(
    absl::string_view name, egress::v1::CircuitBreakerConfig* proto,
    transport::CircuitBreakerSettings fallback) {
  transport::CircuitBreakerSettings settings = fallback;
  if (proto->has_consecutive_failures()) {
    if (proto->consecutive_failures() > 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".consecutive_failures: must be at most 1000 (got ",
                       proto->consecutive_failures(), ")"));
    }
    settings.consecutive_failures = proto->consecutive_failures();
  }
  proto->set_consecutive_failures(settings.consecutive_failures);
  const bool open_for_set = proto->has_open_for();
  if (auto status = DurationField(absl::StrCat(name, ".open_for"), open_for_set,
                                  proto->mutable_open_for(), settings.open_for,
                                  &settings.open_for);
      !status.ok()) {
    return status;
  }
  if (settings.open_for < absl::Milliseconds(1) || settings.open_for > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".open_for: must be between 1ms and 1h (got ",
                     absl::FormatDuration(settings.open_for), ")"));
  }
  if (proto->has_count_5xx()) settings.count_5xx = proto->count_5xx().value();
  proto->mutable_count_5xx()->set_value(settings.count_5xx);
  return settings;
}

// transport.retry, or an origins entry's over `fallback` (the transport's).
absl::StatusOr<transport::RetrySettings> BuildRetry(absl::string_view name,
                                                    egress::v1::RetryConfig* proto,
                                                    transport::RetrySettings fallback) {
  transport::RetrySettings settings = fallback;
  if (proto->max_attempts() != 0) settings.max_attempts = proto->max_attempts();
  if (settings.max_attempts > transport::kMaxAttempts) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".max_attempts: at most ",
                                                   transport::kMaxAttempts, " (got ",
                                                   settings.max_attempts, ")"));
  }
  proto->set_max_attempts(settings.max_attempts);
  const bool base_set = proto->has_base_backoff(), max_set = proto->has_max_backoff();
  if (auto status = DurationField(absl::StrCat(name, ".base_backoff"), base_set,
                                  proto->mutable_base_backoff(), settings.base_backoff,
                                  &settings.base_backoff);
      !status.ok()) {
    return status;
  }
  if (auto status = DurationField(absl::StrCat(name, ".max_backoff"), max_set,
                                  proto->mutable_max_backoff(), settings.max_backoff,
                                  &settings.max_backoff);
      !status.ok()) {
    return status;
  }
  if (settings.max_backoff < settings.base_backoff) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".max_backoff: must be at least base_backoff (",
        absl::FormatDuration(settings.base_backoff), "); got ",
        absl::FormatDuration(settings.max_backoff)));
  }
  if (proto->has_budget_percent()) settings.budget_percent = proto->budget_percent();
  if (settings.budget_percent > 100) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".budget_percent: at most 100 (got ",
                                                   settings.budget_percent, ")"));
  }
  proto->set_budget_percent(settings.budget_percent);
  if (proto->has_min_retries_per_second()) {
    settings.min_retries_per_second = proto->min_retries_per_second();
  }
  if (settings.min_retries_per_second > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".min_retries_per_second: at most 1000 (got ", settings.min_retries_per_second,
        ")"));
  }
  proto->set_min_retries_per_second(settings.min_retries_per_second);
  return settings;
}

// transport.http2, or an origins entry's over `fallback` (the transport's).
absl::StatusOr<transport::Http2Settings> BuildHttp2(absl::string_view name,
                                                    egress::v1::Http2Config* proto,
                                                    transport::Http2Settings fallback) {
  using transport::Http2Mode;
  transport::Http2Settings settings = fallback;
  switch (proto->mode()) {
    case v1::HTTP2_MODE_UNSPECIFIED: break;
    case v1::HTTP2_MODE_AUTO: settings.mode = Http2Mode::kAuto; break;
    case v1::HTTP2_MODE_OFF: settings.mode = Http2Mode::kOff; break;
    case v1::HTTP2_MODE_REQUIRED: settings.mode = Http2Mode::kRequired; break;
    case v1::HTTP2_MODE_PRIOR_KNOWLEDGE: settings.mode = Http2Mode::kPriorKnowledge; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".mode: unknown mode ", static_cast<int>(proto->mode())));
  }
  static constexpr v1::Http2Mode kModes[] = {v1::HTTP2_MODE_AUTO, v1::HTTP2_MODE_OFF,
                                             v1::HTTP2_MODE_REQUIRED,
                                             v1::HTTP2_MODE_PRIOR_KNOWLEDGE};
  proto->set_mode(kModes[static_cast<int>(settings.mode)]);
  const auto bounded = [&](absl::string_view field, uint32_t value, uint32_t least,
                           uint32_t most) -> absl::Status {
    if (value >= least && value <= most) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(name, ".", field, ": must be between ",
                                                   least, " and ", most, " (got ", value, ")"));
  };
  if (proto->max_concurrent_streams()) {
    settings.max_concurrent_streams = proto->max_concurrent_streams();
  }
  if (auto status = bounded("max_concurrent_streams", settings.max_concurrent_streams, 1, 1000);
      !status.ok()) {
    return status;
  }
  proto->set_max_concurrent_streams(settings.max_concurrent_streams);
  if (proto->stream_window_bytes()) settings.stream_window_bytes = proto->stream_window_bytes();
  if (auto status = bounded("stream_window_bytes", settings.stream_window_bytes, 16 * 1024,
                            16 * 1024 * 1024);
      !status.ok()) {
    return status;
  }
  proto->set_stream_window_bytes(settings.stream_window_bytes);
  if (proto->connection_window_bytes()) {
    settings.connection_window_bytes = proto->connection_window_bytes();
  }
  if (auto status = bounded("connection_window_bytes", settings.connection_window_bytes,
                            settings.stream_window_bytes, 1u << 30);
      !status.ok()) {
    return status;
  }
  proto->set_connection_window_bytes(settings.connection_window_bytes);
  if (proto->has_ping_interval()) {  // 0: never
    settings.ping_interval = FromProto(proto->ping_interval());
    if (settings.ping_interval < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ".ping_interval: must not be negative (got ",
          absl::FormatDuration(settings.ping_interval), ")"));
    }
  }
  ToProto(settings.ping_interval, proto->mutable_ping_interval());
  const bool timeout_set = proto->has_ping_timeout();
  if (auto status = DurationField(absl::StrCat(name, ".ping_timeout"), timeout_set,
                                  proto->mutable_ping_timeout(), settings.ping_timeout,
                                  &settings.ping_timeout);
      !status.ok()) {
    return status;
  }
  if (settings.ping_timeout < absl::Milliseconds(1) || settings.ping_timeout > absl::Minutes(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".ping_timeout: must be between 1ms and 1m (got ",
                     absl::FormatDuration(settings.ping_timeout), ")"));
  }
  return settings;
}

// A happy_eyeballs_delay: positive, and at least RFC 8305's floor of 10 ms.
absl::Status CheckHappyEyeballsDelay(absl::string_view name, absl::Duration delay) {
  if (delay < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": must be at least 10ms (RFC 8305's floor; got ", absl::FormatDuration(delay),
        ")"));
  }
  return absl::OkStatus();
}

// The connection lifetime fields of the transport or of an origin override (`name`, the
// path of either in the config): what no setting may hold.
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

// The same fields in an origin override: only those set apply.
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

// One transport.origins entry over the transport's settings.
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
  uint32_t port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(text.substr(colon + 1), &port) ||
      port == 0 || port > 65535) {
    return invalid();
  }
  absl::string_view host = text.substr(0, colon);
  const bool bracketed = absl::ConsumePrefix(&host, "[") && absl::ConsumeSuffix(&host, "]");
  address = boost::asio::ip::make_address(std::string(host), ec);
  // An IPv6 address takes brackets before a port, or its last group reads as the port.
  if (ec || address.is_v6() != bracketed) return invalid();
  return boost::asio::ip::udp::endpoint(address, static_cast<uint16_t>(port));
}

// Fills an unset duration with its default; rejects a negative one (zero is a value).
absl::Status DurationOrZero(absl::string_view name, bool set, Duration* field,
                            absl::Duration* out) {
  if (!set) {
    ToProto(*out, field);
    return absl::OkStatus();
  }
  const absl::Duration value = FromProto(*field);
  if (value < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": must not be negative (got ",
                                                   absl::FormatDuration(value), ")"));
  }
  *out = value;
  return absl::OkStatus();
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

// policy.redirect_strip_headers: lower-cased; the default list when left empty.
absl::Status BuildRedirectStripHeaders(egress::v1::PolicyConfig* policy, CallerPolicy* callers) {
  if (policy->redirect_strip_headers_size() == 0) {
    for (const auto& name : callers->redirect_strip_headers) {
      policy->add_redirect_strip_headers(name);
    }
    return absl::OkStatus();
  }
  callers->redirect_strip_headers.clear();
  for (int i = 0; i < policy->redirect_strip_headers_size(); ++i) {
    const std::string& name = policy->redirect_strip_headers(i);
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy.redirect_strip_headers[", i, "]: must not be empty"));
    }
    callers->redirect_strip_headers.push_back(absl::AsciiStrToLower(name));
  }
  return absl::OkStatus();
}

// policy.allow_hosts: names only. Their resolution is trusted past the built-in
// denials; an address there would open what policy.allow_cidrs is for, so it is refused
// and the message names the CIDR to write instead.
absl::Status ParseAllowHosts(const google::protobuf::RepeatedPtrField<std::string>& texts,
                             std::vector<transport::HostPattern>* hosts) {
  if (auto status = ParseList("policy.allow_hosts", texts, hosts); !status.ok()) return status;
  for (size_t i = 0; i < hosts->size(); ++i) {
    if (const auto& address = (*hosts)[i].address) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy.allow_hosts[", i, "]: \"", texts[static_cast<int>(i)],
          "\" is an IP address, and allow_hosts opens names only; allow an address with "
          "policy.allow_cidrs (\"", address->to_string(), "/", address->is_v4() ? 32 : 128,
          "\")"));
    }
  }
  return absl::OkStatus();
}

// A caller rule's hosts. An empty list would restrict nothing or everything depending on
// how it is read, so it is refused; "*" alone says "any host" on purpose.
absl::Status BuildCallerHosts(const std::string& name, const egress::v1::CallerRule& rule,
                              std::vector<transport::HostPattern>* hosts) {
  const auto& texts = rule.allowed_hosts();
  if (texts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".allowed_hosts: empty; list the hosts caller \"", rule.identity(),
        "\" may reach, or \"*\" for every host the policy allows"));
  }
  if (std::find(texts.begin(), texts.end(), "*") != texts.end()) {
    if (texts.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ".allowed_hosts: \"*\" allows every host; list it alone or not at all"));
    }
    return absl::OkStatus();
  }
  return ParseList(name + ".allowed_hosts", texts, hosts);
}

// The callers and unknown_callers fields of policy or policy.report_only (`prefix`):
// one rule per identity.
absl::Status BuildCallerRules(const std::string& prefix,
                              const google::protobuf::RepeatedPtrField<v1::CallerRule>& list,
                              v1::UnknownCallers unknown_callers,
                              transport::CallerRules* rules) {
  for (int i = 0; i < list.size(); ++i) {
    const auto& rule = list[i];
    const std::string entry = absl::StrCat(prefix, "callers[", i, "]");
    if (rule.identity().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ".identity: must not be empty"));
    }
    if (rules->allowed_hosts.contains(rule.identity())) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".identity: caller \"", rule.identity(), "\" has an earlier rule; give it one"));
    }
    if (auto status = BuildCallerHosts(entry, rule, &rules->allowed_hosts[rule.identity()]);
        !status.ok()) {
      return status;
    }
  }
  if (!v1::UnknownCallers_IsValid(unknown_callers)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "unknown_callers: unknown value ", unknown_callers));
  }
  rules->deny_unknown = unknown_callers == v1::UNKNOWN_CALLERS_DENY;
  return absl::OkStatus();
}

// identity_source and caller_header_trusted_peers, defaults filled in.
absl::Status BuildCallerIdentification(egress::v1::PolicyConfig* policy, CallerPolicy* callers) {
  switch (policy->identity_source()) {
    case v1::IDENTITY_SOURCE_UNSPECIFIED:
      policy->set_identity_source(v1::IDENTITY_SOURCE_URI_SAN);
      break;
    case v1::IDENTITY_SOURCE_URI_SAN:
    case v1::IDENTITY_SOURCE_DNS_SAN:
    case v1::IDENTITY_SOURCE_COMMON_NAME: break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("policy.identity_source: unknown value ", policy->identity_source()));
  }
  callers->identity_source = policy->identity_source();
  for (int i = 0; i < policy->caller_header_trusted_peers_size(); ++i) {
    const std::string& peer = policy->caller_header_trusted_peers(i);
    if (peer.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy.caller_header_trusted_peers[", i, "]: must not be empty"));
    }
    // An address or network names the peer's connection; anything else an mTLS identity.
    if (auto cidr = transport::Cidr::Parse(peer); cidr.ok()) {
      callers->header_trusted_cidrs.push_back(*std::move(cidr));
    } else {
      callers->header_trusted_identities.push_back(peer);
    }
  }
  return absl::OkStatus();
}

// The limits that bound what one caller can make egressd hold: body bytes and time.
absl::Status BuildCallerLimits(egress::v1::FetchLimits* limits, FetchLimits* l) {
  NumberOrDefault(limits, &v1::FetchLimits::max_body_bytes_ceiling,
                  &v1::FetchLimits::set_max_body_bytes_ceiling, &l->max_body_bytes_ceiling);
  NumberOrDefault(limits, &v1::FetchLimits::buffered_body_budget_bytes,
                  &v1::FetchLimits::set_buffered_body_budget_bytes,
                  &l->buffered_body_budget_bytes);
  l->max_concurrent_fetches_per_caller = limits->max_concurrent_fetches_per_caller();
  if (l->max_body_bytes_ceiling > kMaxBodyBytesCeiling) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.max_body_bytes_ceiling: at most ", kMaxBodyBytesCeiling, " (got ",
        l->max_body_bytes_ceiling, "); a Fetch answer travels whole in one gRPC message "
        "(FetchStream takes larger bodies)"));
  }
  if (l->buffered_body_budget_bytes > kMaxBufferedBodyBudgetBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.buffered_body_budget_bytes: at most ", kMaxBufferedBodyBudgetBytes, " (got ",
        l->buffered_body_budget_bytes, ")"));
  }
  if (l->max_body_bytes_ceiling < l->default_max_body_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.max_body_bytes_ceiling: must be at least limits.default_max_body_bytes (",
        l->default_max_body_bytes, "); got ", l->max_body_bytes_ceiling));
  }
  // A fetch allowed to ask for the ceiling must be able to hold it.
  if (l->buffered_body_budget_bytes < l->max_body_bytes_ceiling) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.buffered_body_budget_bytes: must be at least limits.max_body_bytes_ceiling (",
        l->max_body_bytes_ceiling, "); got ", l->buffered_body_budget_bytes));
  }
  const bool max_timeout_set = limits->has_max_timeout();
  return DurationField("limits.max_timeout", max_timeout_set, limits->mutable_max_timeout(),
                       l->max_timeout, &l->max_timeout);
}

// What the access log writes; sample_ratio is a wrapper so that 0 is not "unset".
absl::Status BuildAccessLog(egress::v1::AccessLogConfig* log, AccessLogSettings* settings) {
  constexpr uint32_t kMaxQueueLines = 1'000'000;
  if (log->has_sample_ratio()) {
    const double ratio = log->sample_ratio().value();
    if (!(ratio > 0 && ratio <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "access_log.sample_ratio: must be above 0 and at most 1 (got ", ratio, ")"));
    }
  } else {
    log->mutable_sample_ratio()->set_value(settings->sample_ratio);
  }
  settings->sample_ratio = log->sample_ratio().value();
  settings->max_lines_per_second = log->max_lines_per_second();
  NumberOrDefault(log, &v1::AccessLogConfig::queue_lines, &v1::AccessLogConfig::set_queue_lines,
                  &settings->queue_lines);
  if (settings->queue_lines > kMaxQueueLines) {
    return absl::InvalidArgumentError(absl::StrCat("access_log.queue_lines: at most ",
                                                   kMaxQueueLines, " (got ",
                                                   settings->queue_lines, ")"));
  }
  settings->log_query = log->log_query();
  return absl::OkStatus();
}

absl::Status BuildPolicy(egress::v1::PolicyConfig* policy, ServiceConfig* config) {
  if (policy->unknown_callers() == v1::UNKNOWN_CALLERS_UNSPECIFIED) {
    policy->set_unknown_callers(v1::UNKNOWN_CALLERS_DEFAULT_POLICY);
  }
  transport::PolicyRules rules;
  rules.enabled = !policy->disabled();
  const v1::ReportOnlyRules& report_only = policy->report_only();
  transport::ReportOnlyRules& reported = rules.report_only;
  for (auto status :
       {ParseList("policy.allow_cidrs", policy->allow_cidrs(), &rules.allow_cidrs),
        ParseList("policy.deny_cidrs", policy->deny_cidrs(), &rules.deny_cidrs),
        ParseAllowHosts(policy->allow_hosts(), &rules.allow_hosts),
        ParseList("policy.deny_hosts", policy->deny_hosts(), &rules.deny_hosts),
        BuildCallerRules("policy.", policy->callers(), policy->unknown_callers(),
                         &rules.callers),
        ParseList("policy.report_only.deny_cidrs", report_only.deny_cidrs(), &reported.deny_cidrs),
        ParseList("policy.report_only.deny_hosts", report_only.deny_hosts(), &reported.deny_hosts),
        BuildCallerRules("policy.report_only.", report_only.callers(),
                         report_only.unknown_callers(), &reported.callers)}) {
    if (!status.ok()) return status;
  }
  config->transport.policy = std::make_shared<transport::AddressPolicy>(std::move(rules));
  NumberOrDefault(policy, &v1::PolicyConfig::decision_history_size,
                  &v1::PolicyConfig::set_decision_history_size,
                  &config->transport.policy_history_size);
  if (config->transport.policy_history_size > kMaxDecisionHistory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy.decision_history_size: at most ", kMaxDecisionHistory, " (got ",
        config->transport.policy_history_size, ")"));
  }

  CallerPolicy& callers = config->callers;
  callers.caller_header = absl::AsciiStrToLower(policy->caller_header());
  NumberOrDefault(policy, &v1::PolicyConfig::max_redirects,
                  &v1::PolicyConfig::set_max_redirects, &callers.max_redirects);
  if (auto status = BuildRedirectStripHeaders(policy, &callers); !status.ok()) return status;
  return BuildCallerIdentification(policy, &callers);
}

// A quota rule's name: short, and safe as a metric label and in a table key.
bool ValidQuotaName(absl::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-';
  });
}

// Config.quota_store: "host:port" of Redis, its timeout and failure mode.
absl::Status BuildQuotaStore(v1::QuotaStoreConfig* store, QuotaStoreSettings* settings) {
  constexpr absl::Duration kMaxTimeout = absl::Seconds(5);
  const bool timeout_set = store->has_timeout();
  if (auto status = DurationField("quota_store.timeout", timeout_set, store->mutable_timeout(),
                                  settings->timeout, &settings->timeout);
      !status.ok()) {
    return status;
  }
  if (settings->timeout > kMaxTimeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("quota_store.timeout: at most ", absl::FormatDuration(kMaxTimeout),
                     " (got ", absl::FormatDuration(settings->timeout), "); a fetch waits for it"));
  }
  settings->fail_closed = store->fail_closed();
  if (store->redis().empty()) return absl::OkStatus();
  const size_t colon = store->redis().rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(store->redis().substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quota_store.redis: \"host:port\" of a Redis server (got \"", store->redis(), "\")"));
  }
  settings->host = store->redis().substr(0, colon);
  settings->port = port;
  return absl::OkStatus();
}

// Config.quotas, each burst filled in.
absl::Status BuildQuotas(google::protobuf::RepeatedPtrField<v1::QuotaRule>* list,
                         const QuotaStoreSettings& store, std::vector<QuotaRule>* rules) {
  if (list->size() > kMaxQuotaRules) {
    return absl::InvalidArgumentError(
        absl::StrCat("quotas: at most ", kMaxQuotaRules, " rules (got ", list->size(), ")"));
  }
  for (int i = 0; i < list->size(); ++i) {
    v1::QuotaRule& proto = (*list)[i];
    const std::string entry = absl::StrCat("quotas[", i, "]");
    if (!ValidQuotaName(proto.name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".name: 1-64 of a-z, 0-9, '_' and '-' (got \"", proto.name(), "\")"));
    }
    if (std::any_of(rules->begin(), rules->end(),
                    [&](const QuotaRule& r) { return r.name == proto.name(); })) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ".name: \"", proto.name(), "\" is taken by an earlier rule"));
    }
    if (proto.caller().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".caller: must not be empty; name a caller identity, or \"*\" for any"));
    }
    QuotaRule rule;
    rule.name = proto.name();
    rule.caller = proto.caller();
    const auto& hosts = proto.hosts();
    if (hosts.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".hosts: empty; list the hosts the quota covers, or \"*\" for every host"));
    }
    if (std::find(hosts.begin(), hosts.end(), "*") != hosts.end()) {
      if (hosts.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            entry, ".hosts: \"*\" covers every host; list it alone or not at all"));
      }
    } else if (auto status = ParseList(entry + ".hosts", hosts, &rule.hosts); !status.ok()) {
      return status;
    }
    const double rate = proto.requests_per_second();
    if (!(rate >= 0 && rate <= kMaxQuotaRate)) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".requests_per_second: from 0 to ", kMaxQuotaRate, " (got ", rate, ")"));
    }
    if (rate == 0 && proto.burst() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ".burst: only with requests_per_second"));
    }
    if (proto.burst() > kMaxQuotaRate) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ".burst: at most ", kMaxQuotaRate, " (got ", proto.burst(), ")"));
    }
    if (rate > 0 && proto.burst() == 0) {
      proto.set_burst(static_cast<uint32_t>(std::max(1.0, std::ceil(rate))));
    }
    if (rate == 0 && proto.max_concurrent() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ": limits nothing; set max_concurrent, requests_per_second or both"));
    }
    if (proto.global() && (rate == 0 || store.host.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".global: a global rule needs requests_per_second and quota_store.redis"));
    }
    rule.global = proto.global();
    rule.max_concurrent = proto.max_concurrent();
    rule.requests_per_second = rate;
    rule.burst = proto.burst();
    rules->push_back(std::move(rule));
  }
  return absl::OkStatus();
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

absl::StatusOr<ServiceConfig> BuildConfig(const egress::v1::Config& proto) {
  if (absl::Status durations = CheckDurations(proto); !durations.ok()) return durations;
  ServiceConfig config;
  config.proto = proto;
  transport::TransportSettings& t = config.transport;
  auto* tp = config.proto.mutable_transport();

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

  auto drain = BuildDrain("drain", config.proto.mutable_drain(), t.drain);
  if (!drain.ok()) return drain.status();
  t.drain = *drain;

  for (int i = 0; i < tp->origins_size(); ++i) {
    auto o = BuildOverride(i, tp->mutable_origins(i), t);
    if (!o.ok()) return o.status();
    t.origin_overrides.push_back(*std::move(o));
  }

  auto* metrics = config.proto.mutable_metrics();
  NumberOrDefault(metrics, &v1::MetricsConfig::max_origin_labels,
                  &v1::MetricsConfig::set_max_origin_labels, &config.max_origin_labels);
  if (config.max_origin_labels > kMaxOriginLabels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics.max_origin_labels: at most ", kMaxOriginLabels, " (got ",
        config.max_origin_labels, "); each origin label adds some 35 series to every scrape"));
  }

  if (auto status = BuildAccessLog(config.proto.mutable_access_log(), &config.access_log);
      !status.ok()) {
    return status;
  }

  auto* limits = config.proto.mutable_limits();
  FetchLimits& l = config.limits;
  NumberOrDefault(limits, &v1::FetchLimits::default_max_body_bytes,
                  &v1::FetchLimits::set_default_max_body_bytes, &l.default_max_body_bytes);
  NumberOrDefault(limits, &v1::FetchLimits::max_request_body_bytes,
                  &v1::FetchLimits::set_max_request_body_bytes, &l.max_request_body_bytes);
  if (l.max_request_body_bytes > kMaxRequestBodyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.max_request_body_bytes: at most ", kMaxRequestBodyBytes, " (got ",
        l.max_request_body_bytes, "); a request body travels whole in one gRPC message"));
  }
  NumberOrDefault(limits, &v1::FetchLimits::max_concurrent_fetches,
                  &v1::FetchLimits::set_max_concurrent_fetches, &l.max_concurrent_fetches);
  NumberOrDefault(limits, &v1::FetchLimits::max_request_header_bytes,
                  &v1::FetchLimits::set_max_request_header_bytes, &l.max_request_header_bytes);
  if (l.max_request_header_bytes > kMaxRequestHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.max_request_header_bytes: at most ", kMaxRequestHeaderBytes, " (got ",
        l.max_request_header_bytes, "); a request travels whole in one gRPC message"));
  }
  const bool timeout_set = limits->has_default_timeout();
  if (auto status = DurationField("limits.default_timeout", timeout_set,
                                  limits->mutable_default_timeout(), l.default_timeout,
                                  &l.default_timeout);
      !status.ok()) {
    return status;
  }
  if (auto status = BuildCallerLimits(limits, &l); !status.ok()) return status;
  if (auto status = BuildPolicy(config.proto.mutable_policy(), &config); !status.ok()) {
    return status;
  }
  if (auto status = BuildQuotaStore(config.proto.mutable_quota_store(), &config.quota_store);
      !status.ok()) {
    return status;
  }
  if (auto status =
          BuildQuotas(config.proto.mutable_quotas(), config.quota_store, &config.quotas);
      !status.ok()) {
    return status;
  }
  return config;
}

absl::StatusOr<egress::v1::Config> ParseConfigText(const std::string& text,
                                                   const std::string& source) {
  egress::v1::Config proto;
  ParseErrors errors(text);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &proto)) {
    return absl::InvalidArgumentError(absl::StrCat("config \"", source, "\": ", errors.first()));
  }
  return proto;
}

absl::StatusOr<ServiceConfig> LoadConfigText(const std::string& text, const std::string& source) {
  auto proto = ParseConfigText(text, source);
  if (!proto.ok()) return proto.status();
  auto config = BuildConfig(*proto);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config \"", source, "\": ", config.status().message()));
  }
  return config;
}

std::vector<std::string> ConfigWarnings(const ServiceConfig& config) {
  std::vector<std::string> warnings;
  const auto& policy = config.proto.policy();
  if (!policy.caller_header().empty() && policy.caller_header_trusted_peers().empty()) {
    warnings.push_back(absl::StrCat(
        "policy.caller_header \"", policy.caller_header(),
        "\" is set but policy.caller_header_trusted_peers is empty: the header is ignored "
        "from every peer; list the mesh proxies' addresses or identities"));
  }
  if (policy.callers_size() > 0 && policy.unknown_callers() != v1::UNKNOWN_CALLERS_DENY) {
    warnings.push_back(
        "policy.callers is set and policy.unknown_callers is DEFAULT_POLICY: a caller with no "
        "identity or no rule gets the whole policy; set unknown_callers: UNKNOWN_CALLERS_DENY "
        "so that only listed callers may fetch");
  }
  return warnings;
}

std::string DescribeConfig(const ServiceConfig& config) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(config.proto, &text);
  return text;
}

}  // namespace egress

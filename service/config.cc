#include "service/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "service/proto_time.h"

namespace egress {
namespace {

namespace v1 = egress::v1;

// Each origin label adds some 35 series to every scrape.
constexpr size_t kMaxOriginLabels = 10000;

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
class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ParseErrors(const std::string& text) : lines_(absl::StrSplit(text, '\n')) {}
  void AddError(int line, int column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
    if (line >= 0 && static_cast<size_t>(line) < lines_.size()) {
      absl::StrAppend(&first_, " (in \"", absl::StripAsciiWhitespace(lines_[line]), "\")");
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::vector<std::string> lines_;
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
  if (proto->has_drain()) {
    auto drain = BuildDrain(name + ".drain", proto->mutable_drain(), base.drain);
    if (!drain.ok()) return drain.status();
    o.drain = *drain;
  }
  o.extra_ca_file = proto->extra_ca_file();
  o.client_cert_file = proto->client_cert_file();
  o.client_key_file = proto->client_key_file();
  if (o.client_cert_file.empty() != o.client_key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": set client_cert_file and client_key_file together"));
  }
  return o;
}

absl::Status BuildPolicy(egress::v1::PolicyConfig* policy, ServiceConfig* config) {
  transport::PolicyRules rules;
  rules.enabled = !policy->disabled();
  for (auto status : {ParseList("policy.allow_cidrs", policy->allow_cidrs(), &rules.allow_cidrs),
                      ParseList("policy.deny_cidrs", policy->deny_cidrs(), &rules.deny_cidrs),
                      ParseList("policy.allow_hosts", policy->allow_hosts(), &rules.allow_hosts),
                      ParseList("policy.deny_hosts", policy->deny_hosts(), &rules.deny_hosts)}) {
    if (!status.ok()) return status;
  }
  config->transport.policy = std::make_shared<transport::AddressPolicy>(std::move(rules));

  CallerPolicy& callers = config->callers;
  callers.caller_header = absl::AsciiStrToLower(policy->caller_header());
  for (int i = 0; i < policy->callers_size(); ++i) {
    const auto& rule = policy->callers(i);
    const std::string name = absl::StrCat("policy.callers[", i, "]");
    if (rule.identity().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ".identity: must not be empty"));
    }
    auto& hosts = callers.allowed_hosts[rule.identity()];
    if (auto status = ParseList(name + ".allowed_hosts", rule.allowed_hosts(), &hosts);
        !status.ok()) {
      return status;
    }
  }
  NumberOrDefault(policy, &v1::PolicyConfig::max_redirects,
                  &v1::PolicyConfig::set_max_redirects, &callers.max_redirects);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServiceConfig> BuildConfig(const egress::v1::Config& proto) {
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
  if (t.max_response_header_bytes < 1024) {
    return absl::InvalidArgumentError(
        "transport.max_response_header_bytes: must be at least 1024");
  }
  t.io_threads = tp->io_threads();
  t.extra_ca_file = tp->extra_ca_file();
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

  auto* limits = config.proto.mutable_limits();
  FetchLimits& l = config.limits;
  NumberOrDefault(limits, &v1::FetchLimits::default_max_body_bytes,
                  &v1::FetchLimits::set_default_max_body_bytes, &l.default_max_body_bytes);
  NumberOrDefault(limits, &v1::FetchLimits::max_request_body_bytes,
                  &v1::FetchLimits::set_max_request_body_bytes, &l.max_request_body_bytes);
  NumberOrDefault(limits, &v1::FetchLimits::max_concurrent_fetches,
                  &v1::FetchLimits::set_max_concurrent_fetches, &l.max_concurrent_fetches);
  NumberOrDefault(limits, &v1::FetchLimits::max_request_header_bytes,
                  &v1::FetchLimits::set_max_request_header_bytes, &l.max_request_header_bytes);
  const bool timeout_set = limits->has_default_timeout();
  if (auto status = DurationField("limits.default_timeout", timeout_set,
                                  limits->mutable_default_timeout(), l.default_timeout,
                                  &l.default_timeout);
      !status.ok()) {
    return status;
  }
  if (auto status = BuildPolicy(config.proto.mutable_policy(), &config); !status.ok()) {
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

std::string DescribeConfig(const ServiceConfig& config) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(config.proto, &text);
  return text;
}

}  // namespace egress

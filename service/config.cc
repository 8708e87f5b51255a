#include "service/config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "service/proto_time.h"

namespace egress {
namespace {

using google::protobuf::Duration;

// Collects the first parse error with its position.
class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Fills a zero duration with its default, or rejects a negative one.
absl::Status DurationField(absl::string_view name, Duration* field, absl::Duration fallback,
                           absl::Duration* out) {
  absl::Duration value = FromProto(*field);
  if (value < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": must not be negative (got ",
                                                   absl::FormatDuration(value), ")"));
  }
  if (value == absl::ZeroDuration()) {
    value = fallback;
    ToProto(value, field);
  }
  *out = value;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServiceConfig> BuildConfig(const egress::v1::Config& proto) {
  ServiceConfig config;
  config.proto = proto;
  transport::TransportSettings& t = config.transport;
  auto* tp = config.proto.mutable_transport();

  if (tp->max_idle_per_origin() == 0) tp->set_max_idle_per_origin(t.max_idle_per_origin);
  t.max_idle_per_origin = tp->max_idle_per_origin();
  t.max_conns_per_origin = tp->max_conns_per_origin();
  if (tp->max_response_header_bytes() == 0) {
    tp->set_max_response_header_bytes(t.max_response_header_bytes);
  }
  t.max_response_header_bytes = tp->max_response_header_bytes();
  if (t.max_response_header_bytes < 1024) {
    return absl::InvalidArgumentError(
        "transport.max_response_header_bytes: must be at least 1024");
  }
  t.io_threads = tp->io_threads();
  t.extra_ca_file = tp->extra_ca_file();
  for (auto [name, field, out] : {
           std::make_tuple("transport.idle_timeout", tp->mutable_idle_timeout(), &t.idle_timeout),
           std::make_tuple("transport.connect_timeout", tp->mutable_connect_timeout(),
                           &t.connect_timeout),
           std::make_tuple("transport.tls_handshake_timeout",
                           tp->mutable_tls_handshake_timeout(), &t.tls_handshake_timeout),
           std::make_tuple("transport.response_header_timeout",
                           tp->mutable_response_header_timeout(), &t.response_header_timeout),
       }) {
    if (auto status = DurationField(name, field, *out, out); !status.ok()) return status;
  }

  auto* drain = config.proto.mutable_drain();
  switch (drain->mode()) {
    case egress::v1::DRAIN_MODE_UNSPECIFIED:
      drain->set_mode(egress::v1::DRAIN_MODE_FIXED);
      [[fallthrough]];
    case egress::v1::DRAIN_MODE_FIXED:
      t.drain.mode = transport::DrainMode::kFixed;
      break;
    case egress::v1::DRAIN_MODE_OFF:
      t.drain.mode = transport::DrainMode::kOff;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("drain.mode: ", egress::v1::DrainMode_Name(drain->mode()),
                       " is not supported yet; use DRAIN_MODE_FIXED or DRAIN_MODE_OFF"));
  }
  if (drain->max_bytes() == 0) drain->set_max_bytes(t.drain.max_bytes);
  t.drain.max_bytes = drain->max_bytes();
  if (auto status = DurationField("drain.max_duration", drain->mutable_max_duration(),
                                  t.drain.max_duration, &t.drain.max_duration);
      !status.ok()) {
    return status;
  }

  auto* metrics = config.proto.mutable_metrics();
  if (metrics->max_origin_labels() == 0) metrics->set_max_origin_labels(config.max_origin_labels);
  config.max_origin_labels = metrics->max_origin_labels();

  auto* limits = config.proto.mutable_limits();
  FetchLimits& l = config.limits;
  if (limits->default_max_body_bytes() == 0) {
    limits->set_default_max_body_bytes(l.default_max_body_bytes);
  }
  l.default_max_body_bytes = limits->default_max_body_bytes();
  if (limits->max_request_body_bytes() == 0) {
    limits->set_max_request_body_bytes(l.max_request_body_bytes);
  }
  l.max_request_body_bytes = limits->max_request_body_bytes();
  if (auto status = DurationField("limits.default_timeout", limits->mutable_default_timeout(),
                                  l.default_timeout, &l.default_timeout);
      !status.ok()) {
    return status;
  }
  return config;
}

absl::StatusOr<ServiceConfig> LoadConfigFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("config file \"", path,
                                                   "\" cannot be read"));
  }
  std::stringstream text;
  text << file.rdbuf();

  egress::v1::Config proto;
  ParseErrors errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &proto)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file \"", path, "\": ", errors.first()));
  }
  auto config = BuildConfig(proto);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file \"", path, "\": ", config.status().message()));
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

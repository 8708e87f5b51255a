#include "service/config/fields.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/config/proto_time.h"
#include "service/transport/policy/address_policy.h"

namespace egress::config_internal {

using google::protobuf::Duration;

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

absl::StatusOr<ServerAddress> ServerAddress::Parse(absl::string_view text) {
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not \"host:port\": ", why));
  };
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return refuse("no port");
  absl::string_view host = text.substr(0, colon);
  ServerAddress address;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &address.port) || address.port <= 0 ||
      address.port > 65535) {
    return refuse("the port is not a number in 1..65535");
  }
  const bool bracketed = absl::ConsumePrefix(&host, "[") && absl::ConsumeSuffix(&host, "]");
  if (host.empty()) return refuse("no host");
  if (absl::StrContains(host, ':') != bracketed) {
    return refuse("an IPv6 address goes in brackets, and nothing else does");
  }
  auto pattern = transport::HostPattern::Parse(host);
  if (!pattern.ok()) return refuse("the host is neither a name nor an IP address");
  if (absl::StartsWith(pattern->pattern, "*.")) return refuse("a wildcard names no server");
  address.host = std::move(pattern->pattern);
  return address;
}

std::string ServerAddress::ToString() const {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                      : absl::StrCat(host, ":", port);
}

}  // namespace egress::config_internal

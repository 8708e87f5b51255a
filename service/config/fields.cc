#include "service/config/fields.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "boost/asio/ip/address.hpp"
#include "service/base/host_port.h"
#include "service/base/log_text.h"
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

namespace {

// A DNS name's shape (RFC 1035, with '_' as getaddrinfo takes it): labels of 1 to 63
// letters, digits, '-' or '_', 253 characters in all, its last label not starting with
// a digit (that would be an address that is none, such as 10.0.0.999).
bool IsHostName(absl::string_view name) {
  if (name.empty() || name.size() > 253 || transport::LooksLikeAnAddress(name)) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || label.size() > 63) return false;
    for (const char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

std::optional<int> ParsePort(absl::string_view text) {
  int port = 0;
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
      !absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

absl::StatusOr<ServerAddress> ServerAddress::Parse(absl::string_view text) {
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", QuoteForLog(text), "\" is not \"host:port\": ", why));
  };
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return refuse("no port");
  const std::optional<int> port = ParsePort(text.substr(colon + 1));
  if (!port) return refuse("the port is not a number in 1..65535");
  ServerAddress address;
  address.port = *port;
  absl::string_view host = text.substr(0, colon);
  const bool bracketed = absl::StartsWith(host, "[") && absl::EndsWith(host, "]");
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host.empty()) return refuse("no host");
  if (absl::StrContains(host, ':') != bracketed || absl::StrContains(host, '[') ||
      absl::StrContains(host, ']')) {
    return refuse("an IPv6 address goes in brackets, and nothing else does");
  }
  if (std::optional<boost::asio::ip::address> ip = transport::HostAddress(host)) {
    ip = transport::ServerAddressOf(*ip);
    if (!ip) return refuse("the address names no server");
    address.host = transport::AddressText(*ip);
    return address;
  }
  if (bracketed) return refuse("what the brackets hold is no IPv6 address");
  address.host = absl::AsciiStrToLower(absl::StripSuffix(host, "."));
  if (!IsHostName(address.host)) {
    return refuse(
        "the host is neither a name (labels of letters, digits, '-' and '_') nor an "
        "IP address");
  }
  return address;
}

std::string ServerAddress::ToString() const { return HostPort(host, port); }

}  // namespace egress::config_internal

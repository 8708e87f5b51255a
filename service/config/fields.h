#ifndef EGRESS_SERVICE_CONFIG_FIELDS_H_
#define EGRESS_SERVICE_CONFIG_FIELDS_H_

// Internal to service/config: the bounds on what a config may ask for, and the helpers
// every section's builder reads its fields with.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/repeated_field.h"

namespace egress::config_internal {

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

// Fills an unset duration with its default; rejects a negative or explicitly zero one.
absl::Status DurationField(absl::string_view name, bool set, google::protobuf::Duration* field,
                           absl::Duration fallback, absl::Duration* out);

// Fills an unset duration with its default; rejects a negative one (zero is a value).
absl::Status DurationOrZero(absl::string_view name, bool set, google::protobuf::Duration* field,
                            absl::Duration* out);

// The port of a config field's "host:port": digits only (no sign, space or newline, which
// SimpleAtoi would pass), 1..65535.
std::optional<int> ParsePort(absl::string_view text);

// A server a config field names, "host:port": a DNS name (lower-cased, one trailing dot
// dropped; labels of 1-63 letters, digits, '-' or '_', 253 characters in all) or an IP
// address in any spelling transport::HostAddress reads (IPv6 in brackets; an IPv4-mapped
// one is its IPv4 address; none that names no server, 0.0.0.0, :: or multicast), and a
// port of digits only, written in one spelling, so that two spellings of one server are
// one and writing it again changes nothing.
struct ServerAddress {
  std::string host;  // the name, or the address's usual text (IPv6 without brackets)
  int port = 0;      // 1..65535

  static absl::StatusOr<ServerAddress> Parse(absl::string_view text);
  std::string ToString() const;  // "host:port", IPv6 in brackets
};

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

}  // namespace egress::config_internal

#endif  // EGRESS_SERVICE_CONFIG_FIELDS_H_

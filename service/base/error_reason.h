#ifndef EGRESS_SERVICE_BASE_ERROR_REASON_H_
#define EGRESS_SERVICE_BASE_ERROR_REASON_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace egress::transport {

// Why an error happened, for a program to act on: a stable reason (UPPER_SNAKE_CASE,
// listed in egress.proto), details as key/value pairs (the rule that denied, the host),
// and when a retry may succeed, how long to wait first. It travels inside the
// absl::Status as payloads, so every layer passes it on unchanged; the gRPC layer sends
// it as google.rpc.ErrorInfo and RetryInfo.
struct ErrorReason {
  std::string reason;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::optional<absl::Duration> retry_delay;
};

// The retry delay of a refusal for load (a limit that frees as other fetches end): soon,
// with the caller's own backoff on top.
inline constexpr absl::Duration kRetryAfterLoad = absl::Milliseconds(100);

using ErrorMetadata = std::initializer_list<std::pair<absl::string_view, absl::string_view>>;

// `status` with `reason` attached (replacing any earlier one); metadata with an empty
// value is left out. An OK status stays OK.
absl::Status WithReason(absl::Status status, absl::string_view reason,
                        ErrorMetadata metadata = {},
                        std::optional<absl::Duration> retry_delay = std::nullopt);
absl::Status WithReason(absl::Status status, const ErrorReason& reason);
// The reason attached to `status`, if any.
std::optional<ErrorReason> ReasonOf(const absl::Status& status);

// The report-only rules that would have denied a fetch that then failed, for the access
// log (not for the caller: they stay out of ErrorInfo), and their reading back.
absl::Status WithWouldDenyRules(absl::Status status, const std::vector<std::string>& rules);
std::vector<std::string> WouldDenyRulesOf(const absl::Status& status);

// A caller's or an upstream's text quoted in an error message: C-escaped, other bytes
// than printable ASCII as \xNN (the message is one line of printable ASCII), and cut
// after its first 200 bytes (an invalid URL may be megabytes, and the message travels in
// gRPC's trailers).
std::string Quoted(absl::string_view text);

// An error whose message quotes a URL (a caller's, or an upstream's Location): `before`,
// Quoted(url), `after`. Every message that quotes a URL is made here. The URL travels
// beside the message too, so that the access log can show the message with the URL
// redacted by its one rule in place of the quote; the caller gets the message as it is.
absl::Status UrlError(absl::StatusCode code, absl::string_view before, absl::string_view url,
                      absl::string_view after);
// The URL `status`'s message quotes, if UrlError made it.
std::optional<std::string> QuotedUrlOf(const absl::Status& status);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_BASE_ERROR_REASON_H_

#include "service/base/error_reason.h"

#include <cstdint>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace egress::transport {
namespace {

// Payload type URLs: the reason, one per metadata key, and the retry delay in
// nanoseconds.
constexpr absl::string_view kPrefix = "egress.v1/";
constexpr absl::string_view kReason = "egress.v1/reason";
constexpr absl::string_view kMetadataPrefix = "egress.v1/metadata/";
constexpr absl::string_view kRetryDelay = "egress.v1/retry_delay_ns";
// Outside kPrefix: WithReason does not replace them.
constexpr absl::string_view kWouldDeny = "egress.v1.policy/would_deny_rules";
constexpr absl::string_view kQuotedUrl = "egress.v1.log/quoted_url";

}  // namespace

absl::Status WithReason(absl::Status status, absl::string_view reason, ErrorMetadata metadata,
                        std::optional<absl::Duration> retry_delay) {
  ErrorReason attached{std::string(reason), {}, retry_delay};
  for (const auto& [key, value] : metadata) attached.metadata.emplace_back(key, value);
  return WithReason(std::move(status), attached);
}

absl::Status WithReason(absl::Status status, const ErrorReason& reason) {
  if (status.ok()) return status;
  std::vector<std::string> earlier;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord&) {
    if (absl::StartsWith(url, kPrefix)) earlier.emplace_back(url);
  });
  for (const auto& url : earlier) status.ErasePayload(url);
  status.SetPayload(kReason, absl::Cord(reason.reason));
  for (const auto& [key, value] : reason.metadata) {
    if (value.empty()) continue;
    status.SetPayload(absl::StrCat(kMetadataPrefix, key), absl::Cord(value));
  }
  if (reason.retry_delay) {
    status.SetPayload(kRetryDelay,
                      absl::Cord(absl::StrCat(absl::ToInt64Nanoseconds(*reason.retry_delay))));
  }
  return status;
}

std::optional<ErrorReason> ReasonOf(const absl::Status& status) {
  const auto reason = status.GetPayload(kReason);
  if (!reason) return std::nullopt;
  ErrorReason result{std::string(*reason), {}, std::nullopt};
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    if (absl::ConsumePrefix(&url, kMetadataPrefix)) {
      result.metadata.emplace_back(std::string(url), std::string(value));
    } else if (url == kRetryDelay) {
      int64_t nanoseconds = 0;
      if (absl::SimpleAtoi(std::string(value), &nanoseconds)) {
        result.retry_delay = absl::Nanoseconds(nanoseconds);
      }
    }
  });
  return result;
}

absl::Status WithWouldDenyRules(absl::Status status, const std::vector<std::string>& rules) {
  if (!status.ok() && !rules.empty()) status.SetPayload(kWouldDeny, absl::Cord(absl::StrJoin(rules, "\n")));
  return status;
}

std::vector<std::string> WouldDenyRulesOf(const absl::Status& status) {
  const auto rules = status.GetPayload(kWouldDeny);
  if (!rules) return {};
  return absl::StrSplit(std::string(*rules), '\n');
}

std::string Quoted(absl::string_view text) {
  constexpr size_t kMaxQuoted = 200;
  if (text.size() <= kMaxQuoted) return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxQuoted)), "\"... (",
                      text.size(), " bytes)");
}

absl::Status UrlError(absl::StatusCode code, absl::string_view before, absl::string_view url,
                      absl::string_view after) {
  absl::Status status(code, absl::StrCat(before, Quoted(url), after));
  status.SetPayload(kQuotedUrl, absl::Cord(url));
  return status;
}

std::optional<std::string> QuotedUrlOf(const absl::Status& status) {
  const auto url = status.GetPayload(kQuotedUrl);
  if (!url) return std::nullopt;
  return std::string(*url);
}

}  // namespace egress::transport

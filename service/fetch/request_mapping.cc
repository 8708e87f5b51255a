#include "service/fetch/request_mapping.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/config/proto_time.h"
#include "service/base/error_reason.h"
#include "service/transport/settings.h"

namespace egress::fetch {

using egress::v1::FetchRequest;

const std::string& ValueOf(const egress::v1::Header& header) {
  return header.value_bytes().empty() ? header.value() : header.value_bytes();
}

std::string HeaderValue(const FetchRequest& request, absl::string_view name) {
  for (const auto& header : request.headers()) {
    if (absl::EqualsIgnoreCase(header.name(), name)) return ValueOf(header);
  }
  return "";
}

absl::StatusOr<transport::HttpRequest> ToHttpRequest(FetchRequest& request,
                                                      const FetchLimits& limits) {
  if (request.body().size() > limits.max_request_body_bytes) {
    return transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "request body of ", request.body().size(), " bytes exceeds the limit of ",
            limits.max_request_body_bytes, " bytes (limits.max_request_body_bytes)")),
        "REQUEST_TOO_LARGE", {{"limit", "limits.max_request_body_bytes"}});
  }
  transport::HeaderList headers;
  headers.reserve(request.headers_size());
  size_t header_bytes = 0;
  for (const auto& header : request.headers()) {
    const std::string& value = ValueOf(header);
    header_bytes += header.name().size() + value.size() + 4;  // ": " and CRLF
    headers.emplace_back(header.name(), value);
  }
  if (header_bytes > limits.max_request_header_bytes) {
    return transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "request headers of ", header_bytes, " bytes exceed the limit of ",
            limits.max_request_header_bytes, " bytes (limits.max_request_header_bytes)")),
        "REQUEST_TOO_LARGE", {{"limit", "limits.max_request_header_bytes"}});
  }
  if (request.has_timeout()) {
    if (absl::Status timeout = CheckDurations(request.timeout(), "timeout"); !timeout.ok()) {
      return timeout;
    }
  }
  if (request.max_attempts() > transport::kMaxAttempts) {
    return absl::InvalidArgumentError(absl::StrCat("max_attempts of ", request.max_attempts(),
                                                   " is above the limit of ",
                                                   transport::kMaxAttempts));
  }
  auto http_request = transport::MakeRequest(request.method(), request.url(),
                                             std::move(headers),
                                             std::move(*request.mutable_body()));
  if (http_request.ok() && request.max_attempts() > 0) {
    http_request->max_attempts = request.max_attempts();
  }
  return http_request;
}

absl::Time Deadline(absl::Time caller_deadline, const FetchRequest& request,
                    const FetchLimits& limits, bool* capped) {
  const absl::Time now = absl::Now();
  absl::Time deadline = caller_deadline;
  if (request.has_timeout() && FromProto(request.timeout()) > absl::ZeroDuration()) {
    deadline = std::min(deadline, now + FromProto(request.timeout()));
  }
  if (deadline == absl::InfiniteFuture()) deadline = now + limits.default_timeout;
  *capped = deadline > now + limits.max_timeout;
  return std::min(deadline, now + limits.max_timeout);
}

}  // namespace egress::fetch

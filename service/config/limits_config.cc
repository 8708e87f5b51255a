#include "service/config/sections.h"

#include "absl/strings/str_cat.h"
#include "service/config/fields.h"

namespace egress::config_internal {
namespace {

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

}  // namespace

absl::Status BuildLimits(egress::v1::FetchLimits* limits, FetchLimits& l) {
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
  return BuildCallerLimits(limits, &l);
}

}  // namespace egress::config_internal

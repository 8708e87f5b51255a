#include "service/config/sections.h"

#include "absl/strings/str_cat.h"
#include "service/config/fields.h"

namespace egress::config_internal {

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

}  // namespace egress::config_internal

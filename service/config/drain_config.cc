#include "service/config/sections.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "service/config/fields.h"
#include "service/config/proto_time.h"

namespace egress::config_internal {

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
  if (settings.max_bytes > kMaxDrainBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".max_bytes: at most ", kMaxDrainBytes, " (got ", settings.max_bytes,
        "); max_duration bounds a drain's time, mode DRAIN_MODE_OFF turns drains off"));
  }
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

}  // namespace egress::config_internal

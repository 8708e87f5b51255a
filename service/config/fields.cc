#include "service/config/fields.h"

#include "absl/strings/str_cat.h"
#include "service/config/proto_time.h"

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

}  // namespace egress::config_internal

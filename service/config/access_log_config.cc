#include "service/config/sections.h"

#include "absl/strings/str_cat.h"
#include "service/config/fields.h"

namespace egress::config_internal {

absl::Status BuildAccessLog(egress::v1::AccessLogConfig* log, AccessLogSettings* settings) {
  constexpr uint32_t kMaxQueueLines = 1'000'000;
  if (log->has_sample_ratio()) {
    const double ratio = log->sample_ratio().value();
    if (!(ratio > 0 && ratio <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "access_log.sample_ratio: must be above 0 and at most 1 (got ", ratio, ")"));
    }
  } else {
    log->mutable_sample_ratio()->set_value(settings->sample_ratio);
  }
  settings->sample_ratio = log->sample_ratio().value();
  settings->max_lines_per_second = log->max_lines_per_second();
  NumberOrDefault(log, &v1::AccessLogConfig::queue_lines, &v1::AccessLogConfig::set_queue_lines,
                  &settings->queue_lines);
  if (settings->queue_lines > kMaxQueueLines) {
    return absl::InvalidArgumentError(absl::StrCat("access_log.queue_lines: at most ",
                                                   kMaxQueueLines, " (got ",
                                                   settings->queue_lines, ")"));
  }
  settings->log_query = log->log_query();
  return absl::OkStatus();
}

}  // namespace egress::config_internal

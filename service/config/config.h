#ifndef EGRESS_SERVICE_CONFIG_CONFIG_H_
#define EGRESS_SERVICE_CONFIG_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "egress/v1/egress.pb.h"
#include "service/config/service_config.h"

namespace egress {

// Checks a config and fills in defaults for fields left unset (zero for numbers).
// Errors are INVALID_ARGUMENT and name the field, e.g. "transport.connect_timeout: must
// be positive" for an explicit zero timeout.
absl::StatusOr<ServiceConfig> BuildConfig(const egress::v1::Config& proto);

// Parses text-format egress.v1.Config and builds it; unknown fields are errors.
// `source` (the file name) prefixes error messages.
absl::StatusOr<ServiceConfig> LoadConfigText(const std::string& text, const std::string& source);

// Parses text-format egress.v1.Config (`source` names it in errors); no validation.
absl::StatusOr<egress::v1::Config> ParseConfigText(const std::string& text,
                                                   const std::string& source);

// What an operator should know about a valid config that may not do what they think
// (e.g. caller_header set with no trusted peers, so it is ignored); one line each.
std::vector<std::string> ConfigWarnings(const ServiceConfig& config);

// The config as one line of text, for the start-up log.
std::string DescribeConfig(const ServiceConfig& config);

}  // namespace egress

#endif  // EGRESS_SERVICE_CONFIG_CONFIG_H_

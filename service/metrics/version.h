#ifndef EGRESS_SERVICE_METRICS_VERSION_H_
#define EGRESS_SERVICE_METRICS_VERSION_H_

namespace egress {

// egressd's release version: egress_build_info{version} reports it.
inline constexpr char kVersion[] = "1.0.0";

}  // namespace egress

#endif  // EGRESS_SERVICE_METRICS_VERSION_H_

#ifndef EGRESS_SERVICE_METRICS_PROCESS_METRICS_H_
#define EGRESS_SERVICE_METRICS_PROCESS_METRICS_H_

#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace egress {

// The process metrics every Prometheus client exports (process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds, process_start_time_seconds), with the meaning and units of the Go and
// Python clients, and egress_build_info. Read from /proc at each scrape; a metric whose
// source cannot be read or parsed is left out of that scrape.
class ProcessMetrics final : public prometheus::Collectable {
 public:
  // `proc` is where procfs is mounted; tests point it at a directory of their own.
  explicit ProcessMetrics(std::string proc = "/proc");

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string proc_;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_METRICS_PROCESS_METRICS_H_

#ifndef EGRESS_SERVICE_METRICS_H_
#define EGRESS_SERVICE_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include <mutex>
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/transport/observer.h"

namespace egress {

// The transport's decision points as Prometheus metrics (names in shared/design.md).
// Families are built once; each origin's label children are created on its first
// event and cached. Past max_origins distinct origins, new ones count as "other".
class Metrics final : public transport::TransportObserver {
 public:
  explicit Metrics(size_t max_origins = 100);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void OnUpstreamRequest(const transport::Origin& origin, bool reused) override;
  void OnConnectionOpened(const transport::Origin& origin) override;
  void OnConnectionClosed(const transport::Origin& origin,
                          transport::CloseReason reason) override;
  void OnDrainStarted(const transport::Origin& origin) override;
  void OnDrainCompleted(const transport::Origin& origin, uint64_t bytes,
                        absl::Duration duration) override;
  void OnDrainAbandoned(const transport::Origin& origin, transport::DrainAbandonReason reason,
                        uint64_t bytes, absl::Duration duration) override;
  void OnDrainSkipped(const transport::Origin& origin,
                      transport::DrainSkipReason reason) override;
  void OnRetry(const transport::Origin& origin) override;

 private:
  // Every child of one origin label value.
  struct OriginMetrics {
    prometheus::Counter* requests_new;
    prometheus::Counter* requests_reused;
    prometheus::Counter* opened;
    std::array<prometheus::Counter*, transport::kCloseReasonCount> closed;
    prometheus::Counter* drains_started;
    prometheus::Counter* drains_completed;
    std::array<prometheus::Counter*, transport::kDrainAbandonReasonCount> abandoned;
    std::array<prometheus::Counter*, transport::kDrainSkipReasonCount> skipped;
    prometheus::Counter* drain_bytes;
    prometheus::Counter* retries;
  };

  OriginMetrics& For(const transport::Origin& origin);
  OriginMetrics MakeOriginMetrics(const std::string& label);

  const size_t max_origins_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& opened_;
  prometheus::Family<prometheus::Counter>& closed_;
  prometheus::Family<prometheus::Counter>& drains_started_;
  prometheus::Family<prometheus::Counter>& drains_completed_;
  prometheus::Family<prometheus::Counter>& drains_abandoned_;
  prometheus::Family<prometheus::Counter>& drains_skipped_;
  prometheus::Family<prometheus::Counter>& drain_bytes_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Histogram& drain_duration_;

  std::mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<OriginMetrics>> origins_ ABSL_GUARDED_BY(mu_);
};

}  // namespace egress

#endif  // EGRESS_SERVICE_METRICS_H_

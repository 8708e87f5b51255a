#ifndef EGRESS_SERVICE_TRANSPORT_DRAIN_COST_MODEL_H_
#define EGRESS_SERVICE_TRANSPORT_DRAIN_COST_MODEL_H_

#include <cstdint>

#include "absl/time/time.h"
#include "service/transport/observer.h"

namespace egress::transport {

// Learns one origin's costs from what the transport sees: moving averages that weigh
// recent samples most, so that a change in the network shows within a few requests.
// Not thread-safe: its owner (the pool) guards it.
class CostModel {
 public:
  // Drains shorter than this say more about the socket buffer than about the origin.
  static constexpr uint64_t kMinRateSampleBytes = 16 * 1024;

  // A dial succeeded after `duration` (DNS + connect + TLS).
  void RecordDial(absl::Duration duration);
  // A drain ended. `warm`: the connection had carried an earlier response, so TCP's
  // slow start no longer dominates how fast the body arrived. An abandoned drain
  // forgets the drain time learned so far: waiting on this origin's drains is a gamble.
  void RecordDrain(uint64_t bytes, absl::Duration duration, bool completed, bool warm);

  const OriginCost& estimate() const { return estimate_; }

 private:
  OriginCost estimate_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DRAIN_COST_MODEL_H_

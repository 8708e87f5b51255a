#include "service/transport/drain/cost_model.h"

namespace egress::transport {
namespace {

// Weight of the newest sample.
constexpr double kWeight = 0.3;

template <typename T>
void Blend(std::optional<T>& average, T sample) {
  average = average ? *average * (1 - kWeight) + sample * kWeight : sample;
}

}  // namespace

void CostModel::RecordDial(absl::Duration duration) { Blend(estimate_.dial, duration); }

void CostModel::RecordDrain(uint64_t bytes, absl::Duration duration, bool completed, bool warm) {
  if (!completed) {
    estimate_.drain_time.reset();
    return;
  }
  Blend(estimate_.drain_time, duration);
  if (warm && bytes >= kMinRateSampleBytes && duration > absl::ZeroDuration()) {
    Blend(estimate_.body_bytes_per_second, static_cast<double>(bytes) / absl::ToDoubleSeconds(duration));
  }
}

}  // namespace egress::transport

#include "service/transport/drain/drain_decision.h"

#include <algorithm>

namespace egress::transport {

std::optional<absl::Duration> DialCost(absl::Duration min_dial_cost, const OriginCost& cost) {
  if (cost.dial) return std::max(*cost.dial, min_dial_cost);
  if (min_dial_cost > absl::ZeroDuration()) return min_dial_cost;
  return std::nullopt;
}

DrainDecision DecideDrain(const DrainSettings& settings, const UnreadBody& body,
                          const OriginCost& cost) {
  if (settings.mode == DrainMode::kOff) return DrainSkipReason::kDisabled;
  if (!body.keep_alive) return DrainSkipReason::kConnectionClose;
  if (body.remaining_length && *body.remaining_length > settings.max_bytes) {
    return DrainSkipReason::kOverByteCap;
  }
  Drain drain{settings.max_bytes, settings.max_duration};
  if (settings.mode != DrainMode::kAdaptive) return drain;

  drain.budgeted = true;
  const std::optional<absl::Duration> dial = DialCost(settings.min_dial_cost, cost);
  if (!dial) return drain;  // nothing learned yet: the ceilings alone
  const absl::Duration worth = *dial * settings.cost_factor;
  if (body.remaining_length && cost.body_bytes_per_second &&
      absl::Seconds(*body.remaining_length / *cost.body_bytes_per_second) > worth) {
    return DrainSkipReason::kSlowerThanDial;
  }
  drain.max_pause = std::min(worth, settings.max_duration);
  return drain;
}

std::optional<absl::Duration> ExpectedTimeToFinish(const DrainProgress& drain,
                                                   const OriginCost& cost) {
  if (drain.remaining_length && cost.body_bytes_per_second) {
    return absl::Seconds(*drain.remaining_length / *cost.body_bytes_per_second);
  }
  if (cost.drain_time) return std::max(*cost.drain_time - drain.elapsed, absl::ZeroDuration());
  return std::nullopt;
}

AcquireDecision DecideAcquire(std::optional<absl::Duration> dial_cost,
                              const std::vector<std::optional<absl::Duration>>& finishes) {
  std::optional<absl::Duration> soonest;
  for (const auto& finish : finishes) {
    if (finish && (!soonest || *finish < *soonest)) soonest = finish;
  }
  if (!dial_cost || !soonest || *soonest >= *dial_cost) {
    return {DrainAwareChoice::kDial, absl::ZeroDuration()};
  }
  // Estimates are averages: some slack before giving up on one that is a little late.
  const absl::Duration slack = std::max(*soonest / 2, absl::Milliseconds(1));
  return {DrainAwareChoice::kWait, std::min(*soonest + slack, *dial_cost)};
}

}  // namespace egress::transport

#include "service/transport/drain_decision.h"

namespace egress::transport {

DrainDecision DecideDrain(const DrainSettings& settings, const UnreadBody& body) {
  if (settings.mode == DrainMode::kOff) return DrainSkipReason::kDisabled;
  if (!body.keep_alive) return DrainSkipReason::kConnectionClose;
  if (body.remaining_length && *body.remaining_length > settings.max_bytes) {
    return DrainSkipReason::kOverByteCap;
  }
  return Drain{settings.max_bytes, settings.max_duration};
}

}  // namespace egress::transport

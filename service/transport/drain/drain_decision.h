#ifndef EGRESS_SERVICE_TRANSPORT_DRAIN_DRAIN_DECISION_H_
#define EGRESS_SERVICE_TRANSPORT_DRAIN_DRAIN_DECISION_H_

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "service/transport/observer.h"
#include "service/transport/settings.h"

namespace egress::transport {

// What is known about an unfinished response body when its caller lets go of it.
struct UnreadBody {
  bool keep_alive = true;                     // neither side said Connection: close
  std::optional<uint64_t> remaining_length;   // Content-Length still unread; none if chunked
};

struct Drain {
  uint64_t max_bytes;  // give up once more than this has been read
  absl::Duration max_duration;
  // ADAPTIVE: give up when no byte comes for this long (a dial would have been cheaper).
  absl::Duration max_pause = absl::InfiniteDuration();
  bool budgeted = false;  // ADAPTIVE: the bytes count against the global drain budget
  friend bool operator==(const Drain& a, const Drain& b) {
    return a.max_bytes == b.max_bytes && a.max_duration == b.max_duration &&
           a.max_pause == b.max_pause && a.budgeted == b.budgeted;
  }
};

// Either drain within the given caps, or skip (and close the connection) for a reason.
using DrainDecision = std::variant<Drain, DrainSkipReason>;

// What a new connection to an origin costs as ADAPTIVE sees it: the learned estimate,
// raised to the configured floor; none while neither is known.
std::optional<absl::Duration> DialCost(absl::Duration min_dial_cost, const OriginCost& cost);

// OFF and FIXED follow Go 1.27: drain unless the connection cannot be reused anyway
// (Connection: close), draining is off, or the known remaining length is over the cap.
// ADAPTIVE also skips a body whose known rest, at the origin's body rate, would take
// longer than a dial times the cost factor, and drains the others while bytes keep
// coming (no pause longer than that) within its ceilings and the global budget.
DrainDecision DecideDrain(const DrainSettings& settings, const UnreadBody& body,
                          const OriginCost& cost = {});

// A drain under way, as a request looking for a connection sees it.
struct DrainProgress {
  absl::Duration elapsed;
  std::optional<uint64_t> remaining_length;  // body bytes still to come, when known
};

// How long until a drain under way is expected to end: the known rest at the origin's
// body rate, else the origin's usual drain time less what has passed; none when
// nothing has been learned.
std::optional<absl::Duration> ExpectedTimeToFinish(const DrainProgress& drain,
                                                   const OriginCost& cost);

struct AcquireDecision {
  DrainAwareChoice choice;
  absl::Duration wait;  // kWait: how long at most, then dial
  friend bool operator==(const AcquireDecision& a, const AcquireDecision& b) {
    return a.choice == b.choice && a.wait == b.wait;
  }
};

// For a request that found no idle connection while drains were under way, given when
// each is expected to end (none where unknown): wait for the soonest when it is expected
// before a dial would be done, for that long and some slack but never longer than the
// dial; otherwise dial at once.
AcquireDecision DecideAcquire(std::optional<absl::Duration> dial_cost,
                              const std::vector<std::optional<absl::Duration>>& finishes);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DRAIN_DRAIN_DECISION_H_

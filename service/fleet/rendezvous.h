#ifndef EGRESS_SERVICE_FLEET_RENDEZVOUS_H_
#define EGRESS_SERVICE_FLEET_RENDEZVOUS_H_

// Which replica owns an origin: rendezvous (highest random weight) hashing. Every
// replica that knows the same members names the same owner, whatever their order; a
// member that joins takes only the origins it now weighs most for, and one that leaves
// gives up only its own, so a change of membership moves 1/N of the origins.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace egress::fleet {

// The weight of `member` for `origin`. Fixed across processes, machines and releases
// (replicas of two releases must agree during a rollout), hence not absl::Hash, which is
// seeded per process: FNV-1a over member, a zero byte and origin, then SplitMix64's
// finalizer, so that names differing in one byte get unrelated weights.
uint64_t RendezvousWeight(absl::string_view member, absl::string_view origin);

// The member that weighs most for `origin` (on a tie, the smaller name); empty when
// there are no members.
absl::string_view OwnerOf(const std::vector<std::string>& members, absl::string_view origin);

}  // namespace egress::fleet

#endif  // EGRESS_SERVICE_FLEET_RENDEZVOUS_H_

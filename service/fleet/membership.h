#ifndef EGRESS_SERVICE_FLEET_MEMBERSHIP_H_
#define EGRESS_SERVICE_FLEET_MEMBERSHIP_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/base/poller.h"
#include "service/fleet/fleet_settings.h"

namespace egress::fleet {

// The fleet's members as this replica knows them now: the configured peers, or the
// addresses the configured service's name has, looked up again every `refresh` on a
// thread of its own. A lookup that fails, or finds no address, changes nothing: the
// members found last stay (none before the first answer), so that a DNS outage moves no
// origin to another owner.
class Membership {
 public:
  using Members = std::vector<std::string>;  // "host:port" each, sorted, no repeats
  // The addresses `host` has now, each in its usual text ("10.0.0.7", "fd00::7"). `done`
  // runs once, on any thread, within a few seconds (egressd: the transport's resolver,
  // its DNS settings and cache).
  using Addresses = absl::StatusOr<std::vector<std::string>>;
  using LookUp = std::function<void(const std::string& host, std::function<void(Addresses)> done)>;

  explicit Membership(LookUp look_up, absl::Duration refresh = absl::Seconds(1));
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Follows each config swapped in: peers count at once; a service from its first
  // answer, looked up at once. Settings as they were change nothing.
  void Follow(const FleetSettings& settings);
  std::shared_ptr<const Members> Current() const;

 private:
  // On the poller's thread: looks the service up, waits for the answer, keeps it.
  void Refresh();

  const LookUp look_up_;
  mutable std::mutex mu_;
  FleetSettings settings_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Members> members_ ABSL_GUARDED_BY(mu_);
  // The poller's: the last lookup failed, or found more than kMaxMembers (each logged
  // once until it is no longer so).
  bool failing_ = false;
  bool truncated_ = false;
  Poller poller_;  // last: it starts once the rest is set, and stops first
};

}  // namespace egress::fleet

#endif  // EGRESS_SERVICE_FLEET_MEMBERSHIP_H_

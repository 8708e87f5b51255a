#ifndef EGRESS_SERVICE_FLEET_MEMBERSHIP_H_
#define EGRESS_SERVICE_FLEET_MEMBERSHIP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/ip/address.hpp"
#include "service/base/poller.h"
#include "service/fleet/fleet_settings.h"

namespace egress::fleet {

// The fleet's members as this replica knows them now: the configured peers, or the
// addresses the configured service's name has, looked up again every `refresh` on a
// thread of its own. A replica is one member: of a dual-stack answer (an A and an AAAA
// record for each replica) only the IPv4 addresses count, an IPv4-mapped address counts
// as its IPv4 one, and an address that names no server (unspecified, multicast) is left
// out, as affinity.peers refuses them. A lookup that fails, or finds no address, changes
// nothing: the members found last stay (none before the first answer), so that a DNS
// outage moves no origin to another owner.
class Membership {
 public:
  using Members = std::vector<std::string>;  // "host:port" each, sorted, no repeats
  // The addresses `host` has now, at most kMaxMembers of each family. `done` runs once,
  // on any thread, within a few seconds (egressd: Transport::LookUp).
  using Addresses = absl::StatusOr<std::vector<boost::asio::ip::address>>;
  using LookUp = std::function<void(const std::string& host, std::function<void(Addresses)> done)>;

  explicit Membership(LookUp look_up, absl::Duration refresh = absl::Seconds(1));
  ~Membership();  // waits for a lookup under way no more than 50 ms
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Follows each config swapped in: peers count at once; a service from its first
  // answer, looked up at once (an answer for the settings before is not taken). Settings
  // as they were change nothing.
  void Follow(const FleetSettings& settings);
  std::shared_ptr<const Members> Current() const;

 private:
  // On the poller's thread: looks the service up, waits for the answer, keeps it.
  void Refresh();
  // The members an answer makes (see the class comment), for `port`.
  Members MembersOf(const std::vector<boost::asio::ip::address>& addresses, uint16_t port);

  const LookUp look_up_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  FleetSettings settings_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Members> members_ ABSL_GUARDED_BY(mu_);
  // The poller's: the settings it looked up last, and whether their last lookup failed
  // or found more than kMaxMembers (each logged once until it is no longer so).
  FleetSettings refreshed_;
  bool failing_ = false;
  bool truncated_ = false;
  Poller poller_;  // last: it starts once the rest is set, and stops first
};

}  // namespace egress::fleet

#endif  // EGRESS_SERVICE_FLEET_MEMBERSHIP_H_

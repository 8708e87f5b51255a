#ifndef EGRESS_SERVICE_TRANSPORT_POLICY_POLICY_HISTORY_H_
#define EGRESS_SERVICE_TRANSPORT_POLICY_POLICY_HISTORY_H_

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "boost/asio/ip/address.hpp"
#include "service/transport/policy/address_policy.h"
#include "service/transport/http/origin.h"

namespace egress::transport {

// What the egress policy decided for one fetch (each redirect hop is a fetch), with what
// it was decided on, so that another policy can be asked the same (AddressPolicy::
// Evaluate).
struct PolicyDecision {
  absl::Time time;
  std::string caller;  // the caller's identity; empty when it has none
  Origin origin;
  // The addresses checked: those the host resolved to, or the one a pooled connection
  // is connected to; none when a caller rule decided before the name was resolved.
  std::vector<boost::asio::ip::address> addresses;
  PolicyVerdict verdict;
};

// The latest policy decisions, at most `capacity`: the oldest goes first. Thread-safe.
class PolicyHistory {
 public:
  explicit PolicyHistory(size_t capacity) : capacity_(capacity) {}

  void Add(PolicyDecision decision);
  // Keeps the latest `capacity` decisions from now on (0 keeps none).
  void SetCapacity(size_t capacity);
  // The decisions held, oldest first.
  std::vector<PolicyDecision> Recent() const;

 private:
  mutable std::mutex mu_;
  size_t capacity_ ABSL_GUARDED_BY(mu_);
  std::deque<PolicyDecision> decisions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POLICY_POLICY_HISTORY_H_

#ifndef EGRESS_SERVICE_FLEET_FLEET_SETTINGS_H_
#define EGRESS_SERVICE_FLEET_FLEET_SETTINGS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace egress::fleet {

// The most members a fleet has: affinity.peers may list no more, and of a service's
// addresses, the first this many in sorted order are the members (each replica sorts
// the same answer alike).
constexpr size_t kMaxMembers = 256;

// Config.affinity, validated (service/config): where the fleet's members come from.
struct FleetSettings {
  std::vector<std::string> peers;  // affinity.peers, "host:port" each, in one spelling
  // affinity.service: the name whose addresses are the members, and the port each gets;
  // an empty host: none.
  std::string service_host;
  uint16_t service_port = 0;

  bool operator==(const FleetSettings& other) const {
    return peers == other.peers && service_host == other.service_host &&
           service_port == other.service_port;
  }
};

}  // namespace egress::fleet

#endif  // EGRESS_SERVICE_FLEET_FLEET_SETTINGS_H_

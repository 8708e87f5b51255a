#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "service/base/log_text.h"
#include "service/config/fields.h"
#include "service/config/sections.h"
#include "service/fleet/fleet_settings.h"
#include "service/transport/policy/address_policy.h"

namespace egress::config_internal {

absl::Status BuildAffinity(egress::v1::AffinityConfig* affinity, fleet::FleetSettings* fleet) {
  std::vector<std::string>* members = &fleet->peers;
  if (static_cast<size_t>(affinity->peers_size()) > fleet::kMaxMembers) {
    return absl::InvalidArgumentError(absl::StrCat("affinity.peers: at most ", fleet::kMaxMembers,
                                                   " (got ", affinity->peers_size(), ")"));
  }
  std::vector<ServerAddress> peers;
  if (auto status = ParseList("affinity.peers", affinity->peers(), &peers); !status.ok()) {
    return status;
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    std::string member = peers[i].ToString();
    if (absl::c_linear_search(*members, member)) {  // at most 256 members
      const std::string& given = affinity->peers(static_cast<int>(i));
      return absl::InvalidArgumentError(absl::StrCat(
          "affinity.peers[", i, "]: \"", QuoteForLog(given), "\" names ", member, " again"));
    }
    *affinity->mutable_peers(static_cast<int>(i)) = member;
    members->push_back(std::move(member));
  }
  if (affinity->service().empty()) return absl::OkStatus();
  const std::string quoted = QuoteForLog(affinity->service());
  if (!members->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("affinity.service (\"", quoted,
                     "\") and affinity.peers are both set; the members "
                     "come from one of them: the Service's addresses or the list"));
  }
  absl::StatusOr<ServerAddress> service = ServerAddress::Parse(affinity->service());
  if (!service.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("affinity.service: ", service.status().message()));
  }
  if (transport::HostAddress(service->host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("affinity.service: \"", quoted,
                     "\" is an address, not a name whose addresses are "
                     "the replicas; list addresses in affinity.peers"));
  }
  affinity->set_service(service->ToString());
  fleet->service_host = service->host;
  fleet->service_port = static_cast<uint16_t>(service->port);
  return absl::OkStatus();
}

}  // namespace egress::config_internal

#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "service/base/log_text.h"
#include "service/config/fields.h"
#include "service/config/sections.h"

namespace egress::config_internal {

absl::Status BuildAffinity(egress::v1::AffinityConfig* affinity,
                           std::vector<std::string>* members) {
  if (affinity->peers_size() > kMaxFleetMembers) {
    return absl::InvalidArgumentError(absl::StrCat("affinity.peers: at most ", kMaxFleetMembers,
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
  return absl::OkStatus();
}

}  // namespace egress::config_internal

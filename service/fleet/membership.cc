#include "service/fleet/membership.h"

#include <algorithm>
#include <condition_variable>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/base/host_port.h"
#include "service/base/log_text.h"
#include "service/transport/policy/address_policy.h"

namespace egress::fleet {

namespace {

// A lookup's answer, shared with its callback, which may come after the refresh has
// stopped waiting (or never, if the resolver goes first).
struct PendingAnswer {
  std::mutex mu;
  std::condition_variable answered;
  std::optional<Membership::Addresses> addresses;
};

// How long a refresh waits for its lookup: the lookup's own deadline (a few seconds)
// ends it first; this bounds the wait should its answer never come.
constexpr absl::Duration kLookUpWait = absl::Seconds(30);
// How often a waiting refresh looks whether egressd is stopping.
constexpr absl::Duration kStopCheck = absl::Milliseconds(50);

}  // namespace

Membership::Membership(LookUp look_up, absl::Duration refresh)
    : look_up_(std::move(look_up)),
      members_(std::make_shared<const Members>()),
      poller_(refresh, [this] { Refresh(); }) {}

Membership::~Membership() { stopping_ = true; }

void Membership::Follow(const FleetSettings& settings) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (settings == settings_) return;
    settings_ = settings;
    if (settings.service_host.empty()) {
      Members peers = settings.peers;
      std::sort(peers.begin(), peers.end());
      members_ = std::make_shared<const Members>(std::move(peers));
      return;
    }
  }
  poller_.Wake();
}

std::shared_ptr<const Membership::Members> Membership::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return members_;
}

void Membership::Refresh() {
  FleetSettings settings;
  {
    std::lock_guard<std::mutex> lock(mu_);
    settings = settings_;
  }
  if (settings.service_host.empty()) return;
  if (!(settings == refreshed_)) {  // a new service: its own first failure is logged
    refreshed_ = settings;
    failing_ = truncated_ = false;
  }
  auto pending = std::make_shared<PendingAnswer>();
  look_up_(settings.service_host, [pending](Addresses addresses) {
    std::lock_guard<std::mutex> lock(pending->mu);
    pending->addresses = std::move(addresses);
    pending->answered.notify_all();
  });
  Addresses addresses = absl::DeadlineExceededError("no answer");
  {
    std::unique_lock<std::mutex> lock(pending->mu);
    const absl::Time give_up = absl::Now() + kLookUpWait;
    while (!pending->addresses && !stopping_ && absl::Now() < give_up) {
      pending->answered.wait_for(lock, absl::ToChronoNanoseconds(kStopCheck));
    }
    if (!pending->addresses) return;  // stopping, or an answer that never came
    addresses = std::move(*pending->addresses);
  }
  Members members = addresses.ok() ? MembersOf(*addresses, settings.service_port) : Members();
  if (members.empty()) {
    if (!failing_) {
      std::cerr << OneLogLine(absl::StrCat(
                       "egressd: affinity.service ", settings.service_host, ": no members found (",
                       addresses.ok() ? "no address of a server" : addresses.status().ToString(),
                       "); the members found last stay until a lookup finds some"))
                << std::endl;
    }
    failing_ = true;
    return;
  }
  failing_ = false;
  std::lock_guard<std::mutex> lock(mu_);
  if (settings_ == settings) members_ = std::make_shared<const Members>(std::move(members));
}

Membership::Members Membership::MembersOf(const std::vector<boost::asio::ip::address>& addresses,
                                          uint16_t port) {
  std::vector<boost::asio::ip::address> servers;
  for (const auto& address : addresses) {
    if (auto server = transport::ServerAddressOf(address)) servers.push_back(*server);
  }
  const bool any_v4 = std::any_of(servers.begin(), servers.end(),
                                  [](const auto& address) { return address.is_v4(); });
  Members members;
  for (const auto& server : servers) {
    if (server.is_v4() || !any_v4) {
      members.push_back(HostPort(transport::AddressText(server), port));
    }
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  if (members.size() > kMaxMembers) {
    if (!truncated_) {
      std::cerr << OneLogLine(absl::StrCat("egressd: affinity.service has ", members.size(),
                                           " members; the first ", kMaxMembers,
                                           " in sorted order count"))
                << std::endl;
    }
    truncated_ = true;
    members.resize(kMaxMembers);
  } else {
    truncated_ = false;
  }
  return members;
}

}  // namespace egress::fleet

#include "service/fleet/membership.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/base/host_port.h"
#include "service/base/log_text.h"

namespace egress::fleet {

namespace {

// How long a refresh waits for its lookup: the lookup's own deadline (a few seconds)
// ends it first; this only keeps a stopping egressd from waiting on a lookup forever.
constexpr std::chrono::seconds kLookUpWait(30);

}  // namespace

Membership::Membership(LookUp look_up, absl::Duration refresh)
    : look_up_(std::move(look_up)),
      members_(std::make_shared<const Members>()),
      poller_(refresh, [this] { Refresh(); }) {}

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
  auto answer = std::make_shared<std::promise<Addresses>>();
  std::future<Addresses> answered = answer->get_future();
  look_up_(settings.service_host,
           [answer](Addresses addresses) { answer->set_value(std::move(addresses)); });
  if (answered.wait_for(kLookUpWait) != std::future_status::ready) return;
  const Addresses addresses = answered.get();
  if (!addresses.ok() || addresses->empty()) {
    if (!failing_) {
      std::cerr << OneLogLine(absl::StrCat(
                       "egressd: affinity.service ", settings.service_host, ": no members found (",
                       addresses.ok() ? "no address" : addresses.status().ToString(),
                       "); the members found last stay until a lookup answers"))
                << std::endl;
    }
    failing_ = true;
    return;
  }
  failing_ = false;
  Members members;
  for (const std::string& address : *addresses) {
    members.push_back(HostPort(address, settings.service_port));
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  if (members.size() > kMaxMembers) {
    if (!truncated_) {
      std::cerr << OneLogLine(absl::StrCat("egressd: affinity.service ", settings.service_host,
                                           " has ", members.size(), " addresses; the first ",
                                           kMaxMembers, " in sorted order are the members"))
                << std::endl;
    }
    truncated_ = true;
    members.resize(kMaxMembers);
  } else {
    truncated_ = false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (settings_ == settings) members_ = std::make_shared<const Members>(std::move(members));
}

}  // namespace egress::fleet

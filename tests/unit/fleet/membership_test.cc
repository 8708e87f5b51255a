// Membership: the fleet's members from the configured peers, or from a name's addresses
// looked up again and again (here through a lookup the test answers), kept through
// failures.
#include "service/fleet/membership.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "boost/asio/ip/address.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/wait_for.h"

namespace egress::fleet {
namespace {

using ::egress::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Answers each lookup at once with what the test set last, or, while holding, keeps
// the lookup's callback for the test to answer; counts the lookups.
class FakeDns {
 public:
  void Set(Membership::Addresses answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = true;
  }
  // Answers the held lookups with `answer`; how many there were.
  int AnswerHeld(const Membership::Addresses& answer) {
    std::vector<std::function<void(Membership::Addresses)>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held.swap(held_);
    }
    for (auto& done : held) done(answer);
    return static_cast<int>(held.size());
  }
  int LookUps() {
    std::lock_guard<std::mutex> lock(mu_);
    return lookups_;
  }
  Membership::LookUp AsLookUp() {
    return [this](const std::string&, std::function<void(Membership::Addresses)> done) {
      Membership::Addresses answer = absl::UnavailableError("not set");
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++lookups_;
        if (holding_) return held_.push_back(std::move(done));
        answer = answer_;
      }
      done(std::move(answer));
    };
  }

 private:
  std::mutex mu_;
  Membership::Addresses answer_ = absl::UnavailableError("not set");
  bool holding_ = false;
  std::vector<std::function<void(Membership::Addresses)>> held_;
  int lookups_ = 0;
};

std::vector<boost::asio::ip::address> Addresses(const std::vector<std::string>& texts) {
  std::vector<boost::asio::ip::address> addresses;
  for (const std::string& text : texts) addresses.push_back(boost::asio::ip::make_address(text));
  return addresses;
}

FleetSettings Service(const std::string& host, uint16_t port) {
  FleetSettings settings;
  settings.service_host = host;
  settings.service_port = port;
  return settings;
}

Membership::Members Current(const Membership& membership) { return *membership.Current(); }

constexpr absl::Duration kRefresh = absl::Milliseconds(20);
constexpr absl::Duration kPatience = absl::Seconds(10);

TEST(MembershipTest, PeersAreTheMembersAtOnceSortedAndNeverLookedUp) {
  FakeDns dns;
  Membership membership(dns.AsLookUp(), kRefresh);
  EXPECT_THAT(Current(membership), IsEmpty());
  FleetSettings peers;
  peers.peers = {"peer-b:7443", "10.0.0.1:7443", "peer-a:7443"};
  membership.Follow(peers);
  EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "peer-a:7443", "peer-b:7443"));
  absl::SleepFor(kRefresh * 5);
  EXPECT_EQ(dns.LookUps(), 0);
}

// Each address the name has is a member with the service's port; an address that joins
// is a member from the next lookup, one that leaves is not.
TEST(MembershipTest, TheServicesAddressesAreTheMembersAsTheyChange) {
  FakeDns dns;
  dns.Set(Addresses({"10.0.0.2", "10.0.0.1", "10.0.0.2"}));
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers.ns.svc", 7443));
  ASSERT_TRUE(WaitFor([&] { return !Current(membership).empty(); }, kPatience));
  EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "10.0.0.2:7443"));
  dns.Set(Addresses({"10.0.0.3", "10.0.0.1"}));
  ASSERT_TRUE(WaitFor([&] { return Current(membership).back() == "10.0.0.3:7443"; }, kPatience));
  EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "10.0.0.3:7443"));
  EXPECT_GE(dns.LookUps(), 2);
}

// A replica is one member: a dual-stack answer counts its IPv4 addresses, an IPv4-mapped
// address is its IPv4 one, and what names no server is left out (as affinity.peers
// refuses it); IPv6 addresses count when there is no IPv4 one.
TEST(MembershipTest, EachReplicaIsOneMemberReadAsPeersAre) {
  FakeDns dns;
  dns.Set(Addresses({"fd00::1", "10.0.0.1", "fd00::2", "::ffff:10.0.0.2", "0.0.0.0",
                     "::", "224.0.0.1", "ff02::1", "10.0.0.2"}));
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return !Current(membership).empty(); }, kPatience));
  EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "10.0.0.2:7443"));
  dns.Set(Addresses({"fd00::2", "fd00::1", "ff02::1"}));
  ASSERT_TRUE(WaitFor(
      [&] { return Current(membership).size() == 2 && Current(membership)[0] == "[fd00::1]:7443"; },
      kPatience));
  EXPECT_THAT(Current(membership), ElementsAre("[fd00::1]:7443", "[fd00::2]:7443"));
}

// A failed lookup, or one that finds no address, changes nothing: an outage of DNS must
// not move every origin to another owner (or leave none with an owner).
TEST(MembershipTest, ALookupThatFailsOrFindsNothingKeepsTheMembersFoundLast) {
  FakeDns dns;
  dns.Set(Addresses({"10.0.0.1", "10.0.0.2"}));
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return Current(membership).size() == 2; }, kPatience));
  for (const Membership::Addresses& failure :
       {Membership::Addresses(absl::UnavailableError("SERVFAIL")),
        Membership::Addresses(Addresses({})),
        Membership::Addresses(Addresses({"0.0.0.0", "ff02::1"}))}) {
    dns.Set(failure);
    const int before = dns.LookUps();
    ASSERT_TRUE(WaitFor([&] { return dns.LookUps() >= before + 3; }, kPatience));
    EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "10.0.0.2:7443"));
  }
}

// An answer of more addresses than a fleet has members (a name that is no headless
// Service, an answer grown by a hostile server): the first kMaxMembers, in sorted order,
// as every replica given the same answer takes them.
TEST(MembershipTest, AnAnswerOfMoreAddressesThanMembersKeepsTheFirstInOrder) {
  FakeDns dns;
  std::vector<std::string> addresses;
  for (int i = 0; i < 300; ++i) addresses.push_back(absl::StrCat("10.0.", i / 256, ".", i % 256));
  dns.Set(Addresses(addresses));
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return !Current(membership).empty(); }, kPatience));
  Membership::Members all;
  for (const std::string& address : addresses) all.push_back(address + ":7443");
  std::sort(all.begin(), all.end());
  all.resize(kMaxMembers);
  EXPECT_EQ(Current(membership), all);
  EXPECT_EQ(std::count(all.begin(), all.end(), "10.0.1.0:7443"), 0);  // one left out
}

// Switching to a list takes effect at once, and an answer for the service followed
// before, arriving after the switch, does not count.
TEST(MembershipTest, AnAnswerForTheServiceFollowedBeforeDoesNotCount) {
  FakeDns dns;
  dns.Set(Addresses({"10.0.0.1"}));
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return Current(membership).size() == 1; }, kPatience));
  dns.Hold();
  const int before = dns.LookUps();
  ASSERT_TRUE(WaitFor([&] { return dns.LookUps() > before; }, kPatience));  // one held
  FleetSettings peers;
  peers.peers = {"peer-a:7443", "peer-b:7443"};
  membership.Follow(peers);
  EXPECT_THAT(Current(membership), ElementsAre("peer-a:7443", "peer-b:7443"));
  EXPECT_EQ(dns.AnswerHeld(Addresses({"10.0.0.9"})), 1);
  absl::SleepFor(kRefresh * 5);
  EXPECT_THAT(Current(membership), ElementsAre("peer-a:7443", "peer-b:7443"));
  EXPECT_EQ(dns.LookUps(), before + 1);  // the list is never looked up
}

// A membership destroyed while its lookup waits for an answer that never comes stops at
// once; the answer, should it come later, goes nowhere.
TEST(MembershipTest, DestroyedWhileALookupWaitsItStopsAtOnce) {
  FakeDns dns;
  dns.Hold();
  auto membership = std::make_unique<Membership>(dns.AsLookUp(), kRefresh);
  membership->Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return dns.LookUps() == 1; }, kPatience));
  const absl::Time start = absl::Now();
  membership.reset();
  // Not a measure of speed: whether it stopped, or waited out its lookup (30 s).
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(dns.AnswerHeld(Addresses({"10.0.0.1"})), 1);
}

}  // namespace
}  // namespace egress::fleet

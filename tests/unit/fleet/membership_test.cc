// Membership: the fleet's members from the configured peers, or from a name's addresses
// looked up again and again (here through a lookup the test answers), kept through
// failures.
#include "service/fleet/membership.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/wait_for.h"

namespace egress::fleet {
namespace {

using ::egress::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Answers each lookup at once with what the test set last, and counts them per name.
class FakeDns {
 public:
  void Set(Membership::Addresses answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }
  int LookUps(const std::string& host) {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(std::count(hosts_.begin(), hosts_.end(), host));
  }
  Membership::LookUp AsLookUp() {
    return [this](const std::string& host, std::function<void(Membership::Addresses)> done) {
      Membership::Addresses answer = absl::UnavailableError("not set");
      {
        std::lock_guard<std::mutex> lock(mu_);
        hosts_.push_back(host);
        answer = answer_;
      }
      done(std::move(answer));
    };
  }

 private:
  std::mutex mu_;
  Membership::Addresses answer_ = absl::UnavailableError("not set");
  std::vector<std::string> hosts_;
};

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
  EXPECT_EQ(dns.LookUps("peer-a"), 0);
}

// Each address the name has is a member with the service's port; an address that joins
// is a member from the next lookup, one that leaves is not.
TEST(MembershipTest, TheServicesAddressesAreTheMembersAsTheyChange) {
  FakeDns dns;
  dns.Set(std::vector<std::string>{"10.0.0.2", "fd00::7", "10.0.0.1", "10.0.0.2"});
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers.ns.svc", 7443));
  ASSERT_TRUE(WaitFor([&] { return !Current(membership).empty(); }, kPatience));
  EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "10.0.0.2:7443", "[fd00::7]:7443"));
  dns.Set(std::vector<std::string>{"10.0.0.3", "10.0.0.1"});
  ASSERT_TRUE(WaitFor([&] { return Current(membership).size() == 2; }, kPatience));
  EXPECT_THAT(Current(membership), ElementsAre("10.0.0.1:7443", "10.0.0.3:7443"));
  EXPECT_GE(dns.LookUps("peers.ns.svc"), 2);
}

// A failed lookup, or one that finds no address, changes nothing: an outage of DNS must
// not move every origin to another owner (or leave none with an owner).
TEST(MembershipTest, ALookupThatFailsOrFindsNothingKeepsTheMembersFoundLast) {
  FakeDns dns;
  dns.Set(std::vector<std::string>{"10.0.0.1", "10.0.0.2"});
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return Current(membership).size() == 2; }, kPatience));
  for (const Membership::Addresses& failure :
       {Membership::Addresses(absl::UnavailableError("SERVFAIL")),
        Membership::Addresses(std::vector<std::string>{})}) {
    dns.Set(failure);
    const int before = dns.LookUps("peers");
    ASSERT_TRUE(WaitFor([&] { return dns.LookUps("peers") >= before + 3; }, kPatience));
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
  dns.Set(addresses);
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

// Switching to a list takes effect at once; an answer for the service followed before
// arrives too late to count.
TEST(MembershipTest, AConfigThatSwitchesToPeersStopsFollowingTheService) {
  FakeDns dns;
  dns.Set(std::vector<std::string>{"10.0.0.1"});
  Membership membership(dns.AsLookUp(), kRefresh);
  membership.Follow(Service("peers", 7443));
  ASSERT_TRUE(WaitFor([&] { return Current(membership).size() == 1; }, kPatience));
  FleetSettings peers;
  peers.peers = {"peer-a:7443", "peer-b:7443"};
  membership.Follow(peers);
  EXPECT_THAT(Current(membership), ElementsAre("peer-a:7443", "peer-b:7443"));
  const int looked_up = dns.LookUps("peers");
  absl::SleepFor(kRefresh * 5);
  EXPECT_LE(dns.LookUps("peers"), looked_up + 1);  // at most one already under way
  EXPECT_THAT(Current(membership), ElementsAre("peer-a:7443", "peer-b:7443"));
}

}  // namespace
}  // namespace egress::fleet

#include "service/fleet/rendezvous.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace egress::fleet {
namespace {

std::vector<std::string> Members(int n) {
  std::vector<std::string> members;
  for (int i = 1; i <= n; ++i) members.push_back(absl::StrCat("10.0.0.", i, ":7443"));
  return members;
}

std::vector<std::string> Origins(int n) {
  std::vector<std::string> origins;
  for (int i = 0; i < n; ++i) origins.push_back(absl::StrCat("https://api", i, ".example.com:443"));
  return origins;
}

TEST(RendezvousTest, NoMembersNoOwner) { EXPECT_EQ(OwnerOf({}, "https://a.example:443"), ""); }

TEST(RendezvousTest, EveryMemberOwnsItsShare) {
  const std::vector<std::string> members = Members(5);
  std::map<std::string, int> owned;
  for (const std::string& origin : Origins(10000)) ++owned[std::string(OwnerOf(members, origin))];
  ASSERT_EQ(owned.size(), members.size());
  for (const auto& [member, count] : owned) {
    EXPECT_GT(count, 1700) << member;  // 2,000 each, give or take
    EXPECT_LT(count, 2300) << member;
  }
}

TEST(RendezvousTest, TheOrderOfMembersDoesNotMatter) {
  std::vector<std::string> members = Members(7);
  std::vector<std::string> reversed(members.rbegin(), members.rend());
  for (const std::string& origin : Origins(1000)) {
    EXPECT_EQ(OwnerOf(members, origin), OwnerOf(reversed, origin)) << origin;
  }
}

// A member that leaves gives up its own origins and no other; one that joins takes
// only origins, from whoever held them, and no origin moves between the others.
TEST(RendezvousTest, AChangeOfMembershipMovesOnlyTheChangedMembersOrigins) {
  const std::vector<std::string> three = Members(3);
  const std::vector<std::string> four = Members(4);
  int moved = 0;
  for (const std::string& origin : Origins(10000)) {
    const absl::string_view before = OwnerOf(three, origin);
    const absl::string_view after = OwnerOf(four, origin);
    if (before != after) {
      EXPECT_EQ(after, four.back()) << origin;
      ++moved;
    }
  }
  EXPECT_GT(moved, 2000);  // a quarter, give or take
  EXPECT_LT(moved, 3000);
}

// Replicas of two releases must name the same owner during a rollout: the weights are
// fixed for good. The expected values come from a separate implementation of the same
// definition (FNV-1a, then SplitMix64's finalizer), in Python; absl::Hash, seeded per
// process, would fail here on every run.
TEST(RendezvousTest, WeightsAreTheSameInEveryProcessAndRelease) {
  EXPECT_EQ(RendezvousWeight("", ""), 0x25fc6dd36ce04b20ULL);
  const std::string origin = "https://api.example.com:443";
  EXPECT_EQ(RendezvousWeight("10.0.0.1:7443", origin), 0xaae51af658c8622bULL);
  EXPECT_EQ(RendezvousWeight("10.0.0.2:7443", origin), 0x1107fc53bd83b557ULL);
  EXPECT_EQ(RendezvousWeight("10.0.0.3:7443", origin), 0xa5606956d3d252afULL);
  EXPECT_EQ(OwnerOf(Members(3), origin), "10.0.0.1:7443");
}

TEST(RendezvousTest, TheSeparatorKeepsMemberAndOriginApart) {
  EXPECT_NE(RendezvousWeight("ab", "c"), RendezvousWeight("a", "bc"));
}

}  // namespace
}  // namespace egress::fleet

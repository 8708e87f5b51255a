// AddressPolicy on addresses alone: how operator CIDR rules meet the IPv6 forms of an
// IPv4 address, and the built-in denial of the IPv4-translated range.
#include "service/transport/address_policy.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace egress::transport {
namespace {

namespace ip = boost::asio::ip;

ip::address Address(const std::string& text) { return ip::make_address(text); }

AddressPolicy PolicyWith(std::vector<std::string> allow, std::vector<std::string> deny) {
  PolicyRules rules;
  for (const auto& cidr : allow) rules.allow_cidrs.push_back(*Cidr::Parse(cidr));
  for (const auto& cidr : deny) rules.deny_cidrs.push_back(*Cidr::Parse(cidr));
  rules.allow_hosts.push_back(*HostPattern::Parse("*.example.com"));
  return AddressPolicy(std::move(rules));
}

// 10.1.2.3 as a resolver may hand it over in IPv6.
const char* const kForms[] = {
    "::ffff:10.1.2.3",     // IPv4-mapped
    "::ffff:a01:203",      // the same, in hex
    "::ffff:0:10.1.2.3",   // IPv4-translated (RFC 2765)
    "64:ff9b::10.1.2.3",   // NAT64 well-known prefix
    "64:ff9b::a01:203",
};

TEST(AddressPolicyTest, AnIpv4DenyRuleDeniesTheMappedTranslatedAndNat64FormsOfItsAddresses) {
  // allow_hosts would let the host through; only the deny rule stands in the way.
  const AddressPolicy policy = PolicyWith({}, {"10.1.2.0/24"});
  EXPECT_EQ(policy.Check("api.example.com", Address("10.1.2.3")), DenyReason::kCidrDenied);
  for (const char* form : kForms) {
    EXPECT_EQ(policy.Check("api.example.com", Address(form)), DenyReason::kCidrDenied) << form;
  }
}

TEST(AddressPolicyTest, AnIpv4DenyRuleLeavesOtherEmbeddedAddressesAlone) {
  const AddressPolicy policy = PolicyWith({}, {"10.1.2.0/24"});
  for (const char* other : {"::ffff:10.1.3.3", "64:ff9b::10.1.3.3", "64:ff9b:1::a01:203",
                            "::10.1.2.3", "2002:a01:203::1"}) {
    EXPECT_NE(policy.Check("api.example.com", Address(other)), DenyReason::kCidrDenied) << other;
  }
}

TEST(AddressPolicyTest, AnIpv4AllowRuleAllowsTheSameFormsOfItsAddresses) {
  const AddressPolicy policy = PolicyWith({"10.1.2.0/24"}, {});
  for (const char* form : kForms) {
    EXPECT_EQ(policy.Check("internal.test", Address(form)), std::nullopt) << form;
  }
  // Outside the rule the built-in denial of the embedding range still applies.
  EXPECT_EQ(policy.Check("internal.test", Address("::ffff:10.9.9.9")),
            DenyReason::kIpv4Embedded);
}

TEST(AddressPolicyTest, AnAllowRuleForAllOfIpv4DoesNotAllowIpv6Loopback) {
  // ::1 is ::0.0.0.1 in the deprecated IPv4-compatible form, which is not followed.
  const AddressPolicy policy = PolicyWith({"0.0.0.0/0"}, {});
  EXPECT_EQ(policy.Check("internal.test", Address("::1")), DenyReason::kLoopback);
  EXPECT_EQ(policy.Check("internal.test", Address("::")), DenyReason::kUnspecified);
}

TEST(AddressPolicyTest, TheIpv4TranslatedRangeIsDeniedByDefault) {
  const AddressPolicy policy{PolicyRules{}};
  EXPECT_EQ(policy.Check("x.test", Address("::ffff:0:7f00:1")), DenyReason::kIpv4Embedded);
  EXPECT_EQ(policy.Check("x.test", Address("::ffff:0:8.8.8.8")), DenyReason::kIpv4Embedded);
  EXPECT_EQ(AddressPolicy::SpecialRange(Address("::ffff:0:a9fe:a9fe")),
            DenyReason::kIpv4Embedded);
}

TEST(AddressPolicyTest, EmbeddedIpv4ReadsOnlyTheFormsThatReachThatIpv4Host) {
  EXPECT_EQ(EmbeddedIpv4(Address("::ffff:192.0.2.1")), ip::make_address_v4("192.0.2.1"));
  EXPECT_EQ(EmbeddedIpv4(Address("::ffff:0:192.0.2.1")), ip::make_address_v4("192.0.2.1"));
  EXPECT_EQ(EmbeddedIpv4(Address("64:ff9b::192.0.2.1")), ip::make_address_v4("192.0.2.1"));
  EXPECT_EQ(EmbeddedIpv4(Address("::192.0.2.1")), std::nullopt);
  EXPECT_EQ(EmbeddedIpv4(Address("2001:db8::1")), std::nullopt);
  EXPECT_EQ(EmbeddedIpv4(Address("192.0.2.1")), std::nullopt);
}

// allow_hosts are for names: a pattern that would match an address spelt as a host
// ("*.1" against 10.0.0.1 or 127.1) opens nothing.
TEST(AddressPolicyTest, AllowHostsNeverMatchAHostThatIsAnAddress) {
  PolicyRules rules;
  for (const char* pattern : {"*.1", "*.0x7f000001", "127.1", "2130706433", "*.example.com"}) {
    rules.allow_hosts.push_back(*HostPattern::Parse(pattern));
  }
  const AddressPolicy policy(std::move(rules));
  for (const char* host : {"10.0.0.1", "127.1", "2130706433", "a.0x7f000001", "::1", "[::1]"}) {
    EXPECT_TRUE(LooksLikeAnAddress(host)) << host;
  }
  EXPECT_EQ(policy.Check("10.0.0.1", Address("10.0.0.1")), DenyReason::kPrivate);
  EXPECT_EQ(policy.Check("127.1", Address("127.0.0.1")), DenyReason::kLoopback);
  EXPECT_EQ(policy.Check("2130706433", Address("127.0.0.1")), DenyReason::kLoopback);
  // A name still matches, and names that merely hold digits are names.
  EXPECT_EQ(policy.Check("metadata.example.com", Address("169.254.169.254")), std::nullopt);
  for (const char* name : {"1password.com", "api.example.com.", "3com.example.com"}) {
    EXPECT_FALSE(LooksLikeAnAddress(name)) << name;
  }
}

}  // namespace
}  // namespace egress::transport

// AddressPolicy on addresses alone: how operator CIDR rules meet the IPv6 forms of an
// IPv4 address, the built-in denial of the IPv4-translated range, and the verdicts
// (with report-only rules) that live fetches and dry runs share.
#include "service/transport/policy/address_policy.h"

#include <array>
#include <optional>
#include <string>

#include "gmock/gmock.h"
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
// opens nothing (config refuses addresses there at load; a wildcard over an address,
// "*.1", is no pattern at all).
TEST(AddressPolicyTest, AllowHostsNeverMatchAHostThatIsAnAddress) {
  PolicyRules rules;
  for (const char* pattern : {"127.1", "2130706433", "*.example.com"}) {
    rules.allow_hosts.push_back(*HostPattern::Parse(pattern));
  }
  for (const char* pattern : {"*.1", "*.0x7f000001", "*.0.0.1", "1.2.3.999"}) {
    EXPECT_FALSE(HostPattern::Parse(pattern).ok()) << pattern;
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

// A report-only rule is noted where it stands in the precedence: ahead of the allow
// rules it would beat if it were enforced, behind the enforced denials.
TEST(AddressPolicyTest, AReportOnlyDenyRuleIsReportedWhereItWouldHaveDenied) {
  PolicyRules rules;
  rules.allow_cidrs.push_back(*Cidr::Parse("10.0.0.0/8"));
  rules.deny_hosts.push_back(*HostPattern::Parse("blocked.example.com"));
  rules.report_only.deny_cidrs.push_back(*Cidr::Parse("10.1.0.0/16"));
  const AddressPolicy policy(std::move(rules));
  const PolicyVerdict reported = policy.Evaluate("", "api.example.com", {Address("10.1.2.3")});
  EXPECT_FALSE(reported.denied);
  EXPECT_EQ(reported.rule, "allow_cidrs:10.0.0.0/8");
  EXPECT_THAT(reported.would_deny, ::testing::ElementsAre("deny_cidrs:10.1.0.0/16"));
  const PolicyVerdict denied = policy.Evaluate("", "blocked.example.com", {Address("10.1.2.3")});
  EXPECT_EQ(denied.denied, DenyReason::kHostDenied);
  EXPECT_EQ(denied.rule, "deny_hosts:blocked.example.com");
  EXPECT_TRUE(denied.would_deny.empty());
}

// With several addresses the dial connects to any the policy allows: a report-only rule
// would deny the fetch only if it would deny all of them.
TEST(AddressPolicyTest, AReportOnlyRuleWouldDenyAHostOnlyWhenItWouldDenyEveryAllowedAddress) {
  PolicyRules rules;
  rules.report_only.deny_cidrs.push_back(*Cidr::Parse("8.8.8.8"));
  const AddressPolicy policy(std::move(rules));
  EXPECT_THAT(policy.CheckAddresses("dns.example", {Address("8.8.8.8")}).would_deny,
              ::testing::ElementsAre("deny_cidrs:8.8.8.8/32"));
  const PolicyVerdict two = policy.CheckAddresses("dns.example",
                                                  {Address("8.8.8.8"), Address("8.8.4.4")});
  EXPECT_TRUE(two.would_deny.empty());
  EXPECT_EQ(two.allowed.size(), 2u);
  // 127.0.0.1 is denied anyway: only 8.8.8.8 is allowed, and it would be denied.
  EXPECT_THAT(policy.CheckAddresses("dns.example", {Address("127.0.0.1"), Address("8.8.8.8")})
                  .would_deny,
              ::testing::ElementsAre("deny_cidrs:8.8.8.8/32"));
}

TEST(AddressPolicyTest, CallerRulesAreNamedByTheirIdentityEnforcedOrReported) {
  PolicyRules rules;
  rules.callers.allowed_hosts["billing"] = {*HostPattern::Parse("api.stripe.com")};
  rules.report_only.callers.allowed_hosts["search"] = {*HostPattern::Parse("*.google.com")};
  rules.report_only.callers.deny_unknown = true;
  const AddressPolicy policy(std::move(rules));
  const PolicyVerdict billing = policy.CheckName("billing", "evil.example");
  EXPECT_EQ(billing.denied, DenyReason::kCallerNotAllowed);
  EXPECT_EQ(billing.rule, "callers:billing");
  EXPECT_THAT(policy.CheckName("search", "bing.com").would_deny,
              ::testing::ElementsAre("callers:search"));
  EXPECT_THAT(policy.CheckName("", "bing.com").would_deny,
              ::testing::ElementsAre("unknown_callers"));
  EXPECT_TRUE(policy.CheckName("billing", "api.stripe.com").would_deny.empty());
}

// A fetch a caller rule denied was never resolved: its host is used when it is an
// address literal, else its address rules cannot be replayed.
TEST(AddressPolicyTest, EvaluatingAFetchWithoutAddressesUsesItsLiteralHostOrSaysUnresolved) {
  const AddressPolicy policy{PolicyRules{}};
  const PolicyVerdict literal = policy.Evaluate("", "127.0.0.1", {});
  EXPECT_EQ(literal.denied, DenyReason::kLoopback);
  EXPECT_EQ(literal.rule, "builtin:loopback");
  const PolicyVerdict name = policy.Evaluate("", "api.example.com", {});
  EXPECT_FALSE(name.denied);
  EXPECT_EQ(name.rule, "unresolved");
}

// The one reading of a URL's host as an address: every spelling getaddrinfo and WHATWG
// URL parsers take is that address; a name, or a host of an address's shape that is
// none, is no address.
TEST(HostAddressTest, EverySpellingOfAnAddressIsThatAddress) {
  for (const char* spelling : {"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0X7F000001",
                               "0177.0.0.1", "0x7f.0.0.1", "0x7f.1", "127.000.000.001",
                               "127.0.0.1."}) {
    EXPECT_EQ(HostAddress(spelling), std::optional<ip::address>(Address("127.0.0.1")))
        << spelling;
  }
  for (const char* spelling : {"::1", "[::1]", "[0:0:0:0:0:0:0:1]"}) {
    EXPECT_EQ(HostAddress(spelling), std::optional<ip::address>(Address("::1"))) << spelling;
  }
  EXPECT_EQ(HostAddress("[::ffff:127.0.0.1]"), Address("::ffff:127.0.0.1"));
  for (const char* none : {"example.com", "localhost", "cafe", "dead.beef", "1password.com",
                           "api.example.com.", "1.2.3.999", "127.0.0.1.5", "127.0.0.1 x",
                           "[::1", "fe80::1%lo", ""}) {
    EXPECT_EQ(HostAddress(none), std::nullopt) << none;
  }
}

// AddressText writes what address::to_string writes: the text hosts and rules are kept in
// must not change with the faster IPv4 writer. Every octet's width, edge and zeros.
TEST(AddressTextTest, WritesWhatToStringWrites) {
  for (const char* text : {"0.0.0.0", "255.255.255.255", "1.2.3.4", "10.0.0.1", "100.64.9.99",
                           "127.0.0.1", "192.168.10.200", "8.80.255.0", "::", "::1", "2001:db8::1",
                           "::ffff:127.0.0.1", "fe80::1:2:3:4"}) {
    EXPECT_EQ(AddressText(Address(text)), Address(text).to_string()) << text;
    EXPECT_EQ(AddressText(Address(text)), text);
  }
  const std::array<uint32_t, 6> widths = {0, 9, 10, 99, 100, 255};  // 1, 2 and 3 digits
  for (uint32_t a : widths) {
    for (uint32_t b : widths) {
      for (uint32_t c : widths) {
        for (uint32_t d : widths) {
          const ip::address address = ip::address_v4(a << 24 | b << 16 | c << 8 | d);
          EXPECT_EQ(AddressText(address), address.to_string());
        }
      }
    }
  }
}

// Every rule that takes host patterns matches through HostAddress: an address written
// in one spelling matches a URL's host in every other (and the IPv6 forms embedding
// it), a name pattern never matches an address, an address pattern never a name.
TEST(HostPatternTest, AnAddressPatternMatchesEverySpellingOfItsAddressAndNothingElse) {
  for (const char* written : {"127.0.0.1", "127.1", "0x7f000001", "[::ffff:127.0.0.1]"}) {
    const absl::StatusOr<HostPattern> pattern = HostPattern::Parse(written);
    ASSERT_TRUE(pattern.ok()) << written << ": " << pattern.status();
    for (const char* host : {"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1",
                             "[::ffff:127.0.0.1]", "::ffff:127.0.0.1", "64:ff9b::7f00:1"}) {
      EXPECT_TRUE(pattern->Matches(host)) << written << " against " << host;
    }
    for (const char* other : {"127.0.0.2", "127.2", "::1", "localhost", "127.0.0.1.example.com"}) {
      EXPECT_FALSE(pattern->Matches(other)) << written << " against " << other;
    }
  }
  const HostPattern v6 = *HostPattern::Parse("[::1]");
  EXPECT_EQ(v6.pattern, "::1");
  EXPECT_TRUE(v6.Matches("0:0::1"));
  EXPECT_FALSE(v6.Matches("127.0.0.1"));
  const HostPattern names = *HostPattern::Parse("*.example.com");
  EXPECT_TRUE(names.Matches("API.example.com."));
  EXPECT_FALSE(names.Matches("127.0.0.1"));
}

// deny_hosts, report_only.deny_hosts and a caller's hosts meet every spelling of an
// address the same way, before any address is resolved and after.
TEST(AddressPolicyTest, EveryHostRuleMeetsEverySpellingOfAnAddress) {
  PolicyRules rules;
  rules.allow_cidrs.push_back(*Cidr::Parse("127.0.0.0/8"));
  rules.deny_hosts.push_back(*HostPattern::Parse("127.0.0.3"));
  rules.report_only.deny_hosts.push_back(*HostPattern::Parse("127.0.0.4"));
  rules.callers.allowed_hosts["billing"] = {*HostPattern::Parse("127.0.0.5")};
  const AddressPolicy policy(std::move(rules));
  for (const char* host : {"127.0.0.3", "127.3", "2130706435", "0x7f000003", "0177.0.0.3",
                           "[::ffff:127.0.0.3]"}) {
    EXPECT_EQ(policy.CheckName("", host).denied, DenyReason::kHostDenied) << host;
    EXPECT_EQ(policy.Check(host, Address("127.0.0.3")), DenyReason::kHostDenied) << host;
    EXPECT_EQ(policy.Evaluate("", host, {}).rule, "deny_hosts:127.0.0.3") << host;
  }
  for (const char* host : {"127.0.0.4", "127.4", "2130706436", "0x7f000004", "0177.0.0.4",
                           "[::ffff:127.0.0.4]"}) {
    EXPECT_THAT(policy.Evaluate("", host, {}).would_deny,
                ::testing::ElementsAre("deny_hosts:127.0.0.4"))
        << host;
  }
  for (const char* host : {"127.0.0.5", "127.5", "2130706437", "0x7f000005", "0177.0.0.5",
                           "[::ffff:127.0.0.5]"}) {
    EXPECT_FALSE(policy.CheckName("billing", host).denied) << host;
  }
  EXPECT_EQ(policy.CheckName("billing", "127.6").denied, DenyReason::kCallerNotAllowed);
}

// A name deny_hosts lists is denied by the name stage, before it has an address: the
// dial never looks it up.
TEST(AddressPolicyTest, ANameInDenyHostsIsDeniedBeforeItHasAnAddress) {
  PolicyRules rules;
  rules.deny_hosts.push_back(*HostPattern::Parse("*.blocked.test"));
  rules.callers.allowed_hosts["billing"] = {*HostPattern::Parse("*.test")};
  const AddressPolicy policy(std::move(rules));
  for (const char* caller : {"", "billing", "search"}) {
    const PolicyVerdict verdict = policy.CheckName(caller, "api.blocked.test");
    EXPECT_EQ(verdict.denied, DenyReason::kHostDenied) << caller;
    EXPECT_EQ(verdict.rule, "deny_hosts:*.blocked.test") << caller;
  }
  EXPECT_EQ(policy.CheckHost("API.Blocked.Test.").denied, DenyReason::kHostDenied);
  EXPECT_FALSE(policy.CheckHost("blocked.test").denied);
}

}  // namespace
}  // namespace egress::transport

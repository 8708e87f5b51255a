#ifndef EGRESS_SERVICE_TRANSPORT_POLICY_ADDRESS_POLICY_H_
#define EGRESS_SERVICE_TRANSPORT_POLICY_ADDRESS_POLICY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "boost/asio/ip/address.hpp"

namespace egress::transport {

// An IPv4 or IPv6 network. Contains: IPv4 networks match IPv4 addresses only (an
// operator's rule also matches IPv6 forms of an IPv4 address: see EmbeddedIpv4).
struct Cidr {
  boost::asio::ip::address network;
  int prefix_length = 0;
  std::string text;  // "network/prefix_length", made once: rule names quote it per fetch

  // "10.0.0.0/8", "fc00::/7", or a single address ("192.0.2.1" means /32).
  static absl::StatusOr<Cidr> Parse(absl::string_view text);
  bool Contains(const boost::asio::ip::address& address) const;
  const std::string& ToString() const { return text; }
};

// The address a URL's host stands for, when it is one: an IPv6 literal (bracketed or
// not) or an IPv4 address in any spelling getaddrinfo, curl and WHATWG URL parsers take
// (inet_aton's: "127.1", "2130706433", "0x7f000001", "0177.0.0.1", one trailing dot).
// None for a name. The one reading of a host as an address: the URL parser, the dial
// and every rule that takes host patterns go through it.
std::optional<boost::asio::ip::address> HostAddress(absl::string_view host);

// The address a server is reached at, as config fields (host:port) and the fleet's
// members take one: an IPv4-mapped IPv6 address is its IPv4 address (two spellings of
// one server); none for an address that names no server (unspecified, multicast).
std::optional<boost::asio::ip::address> ServerAddressOf(boost::asio::ip::address address);

// An address's usual text, the one address::to_string writes ("192.0.2.1", "2001:db8::1"):
// the spelling hosts, rules and pools meet in. IPv4's is written here rather than by
// inet_ntop, whose printf was a fifth of what building a request cost per fetch.
std::string AddressText(const boost::asio::ip::address& address);

// "api.example.com" matches that name only; "*.example.com" matches every name below
// example.com (not example.com itself). Case-insensitive. An address (any spelling
// HostAddress reads) matches that address in every spelling, and its IPv6 forms that
// embed it (EmbeddedIpv4); a name never matches an address, nor an address a name.
// A wildcard over an address ("*.1") is refused: it would match nothing.
struct HostPattern {
  std::string pattern;  // lower case, no trailing dot; for an address, its usual text
  std::optional<boost::asio::ip::address> address;  // set when the pattern is an address

  static absl::StatusOr<HostPattern> Parse(absl::string_view text);
  bool Matches(absl::string_view host) const;
};

// Which hosts each caller may reach (policy.callers, policy.unknown_callers).
struct CallerRules {
  // Per identity, the only hosts it may reach; an empty list ("*") means any host.
  absl::flat_hash_map<std::string, std::vector<HostPattern>> allowed_hosts;
  // Callers with no identity, or no rule, are refused.
  bool deny_unknown = false;
};

// Rules that deny nothing (policy.report_only): checked as if added to the enforced
// ones, and what they would deny is reported instead.
struct ReportOnlyRules {
  std::vector<Cidr> deny_cidrs;
  std::vector<HostPattern> deny_hosts;
  // A caller without a rule here or in the enforced rules is "unknown" for deny_unknown.
  CallerRules callers;
};

// What the operator configured on top of the built-in denials.
struct PolicyRules {
  bool enabled = true;  // false: every destination is allowed (for trusted test setups)
  std::vector<Cidr> allow_cidrs;
  std::vector<Cidr> deny_cidrs;
  std::vector<HostPattern> allow_hosts;
  std::vector<HostPattern> deny_hosts;
  CallerRules callers;
  ReportOnlyRules report_only;
};

// Why a destination was denied; these strings are the `reason` label of
// egress_policy_denied_total.
enum class DenyReason {
  kHostDenied,     // the host matches policy.deny_hosts
  kCidrDenied,     // the address is in policy.deny_cidrs
  kLoopback,       // 127.0.0.0/8, ::1
  kPrivate,        // RFC 1918, fec0::/10
  kLinkLocal,      // 169.254.0.0/16 (cloud metadata), fe80::/10
  kCgnat,          // 100.64.0.0/10
  kUnspecified,    // 0.0.0.0/8, ::
  kMulticast,      // 224.0.0.0/4, ff00::/8
  kBroadcast,      // 255.255.255.255
  kReserved,       // 240.0.0.0/4, documentation and benchmark ranges
  kUniqueLocal,    // fc00::/7
  kIpv4Embedded,   // ::ffff:0:0/96, ::ffff:0:0:0/96, ::/96, 64:ff9b::/96, 64:ff9b:1::/48,
                   // 2002::/16, 2001::/32
  kCallerNotAllowed,  // the caller's rule does not list the host
  kUnknownCaller,     // the caller has no identity or no rule, and such callers are denied
};
inline constexpr size_t kDenyReasonCount = 14;
absl::string_view ToString(DenyReason reason);

// What the policy says of a fetch, or of one stage of it (its caller, its addresses).
// Rules are named as an operator wrote them, "<config field>:<entry>": "deny_hosts:
// *.example.com", "deny_cidrs:10.0.0.0/8", "allow_cidrs:...", "allow_hosts:...",
// "callers:billing", "unknown_callers"; and "builtin:<range>" (e.g. "builtin:loopback"),
// "default_allow" (no rule matched), "disabled" (policy.disabled), "unresolved" (no
// address was known to check). The names come from the config, never from a request,
// so they are bounded as metric labels.
struct PolicyVerdict {
  std::optional<DenyReason> denied;  // set when an enforced rule denies
  std::string rule;                  // the rule that decided; empty when no stage did
  // For a denial by an address rule, the address (the first of those resolved).
  std::optional<boost::asio::ip::address> denied_address;
  // Report-only rules that would have denied what was allowed, one per stage at most.
  std::vector<std::string> would_deny;
  // For a verdict on addresses: those the enforced rules allow, in the order given.
  std::vector<boost::asio::ip::address> allowed;
};

// The IPv4 address an IPv6 address stands for, when it is one of the forms that reach
// that IPv4 host: IPv4-mapped ::ffff:a.b.c.d (RFC 4291), IPv4-translated
// ::ffff:0:a.b.c.d (RFC 2765) and NAT64's well-known prefix 64:ff9b::a.b.c.d (RFC 6052).
// Not the deprecated IPv4-compatible ::a.b.c.d (it holds ::1), nor network-specific
// NAT64 prefixes, 6to4 or Teredo: the built-in denials refuse those forms whole.
std::optional<boost::asio::ip::address_v4> EmbeddedIpv4(const boost::asio::ip::address& address);

// Whether a URL's host has the shape of an address rather than a name: it holds a ':'
// (IPv6) or its last label starts with a digit (10.0.0.1, 127.1, 2130706433,
// 0x7f000001, and 1.2.3.999, which is no address either). No top-level domain starts
// with a digit.
bool LooksLikeAnAddress(absl::string_view host);

// Decides which destinations egress may connect to. Checked on resolved addresses, so
// every spelling of an address (decimal, octal, hex, short IPv4 forms, names that
// resolve inward, IPv6 forms of an IPv4 address) meets the same rule. An IPv4 rule in
// allow_cidrs or deny_cidrs also matches the EmbeddedIpv4 forms of its addresses.
// Precedence, first match wins:
//   1. deny_hosts matches the host            -> denied
//   2. deny_cidrs contains the address        -> denied
//   3. allow_cidrs contains the address       -> allowed
//   4. allow_hosts matches the host           -> allowed (a name only: never a host
//                                                that LooksLikeAnAddress, so "*.1" or
//                                                "*.0x7f" opens no address literal)
//   5. a built-in special-purpose range       -> denied
//   6. otherwise                              -> allowed
// deny_hosts and the caller rules are also decided before any name is resolved
// (CheckName). Report-only rules take their
// place in the same order: one that matches is noted and the walk goes on, so what it
// would deny is what it would deny if it were enforced.
class AddressPolicy {
 public:
  explicit AddressPolicy(PolicyRules rules) : rules_(std::move(rules)) {}

  // None when `address` (resolved for `host`) may be connected to.
  std::optional<DenyReason> Check(absl::string_view host,
                                  const boost::asio::ip::address& address) const;

  // The rules about names alone, decided before any lookup so that a name they deny is
  // never sent to DNS. CheckHost: policy.deny_hosts (what every dial checks first).
  // CheckName, the name stage of a fetch: deny_hosts, then whether `caller` (its
  // identity; empty when it has none) may reach `host` at all. Allowed verdicts name no
  // rule: the addresses decide.
  PolicyVerdict CheckHost(absl::string_view host) const;
  PolicyVerdict CheckName(absl::string_view caller, absl::string_view host) const;
  // The address stage, over every address `host` resolved to (or the one a pooled
  // connection is connected to): allowed when the enforced rules allow one of them,
  // denied (for the first address) otherwise; a report-only rule would deny when it
  // would deny every allowed one.
  PolicyVerdict CheckAddresses(absl::string_view host,
                               const std::vector<boost::asio::ip::address>& addresses) const;
  // Both stages, as a fetch meets them: what live fetches get, and what a dry run
  // replays. With no address (a fetch denied before its name was resolved), the host
  // itself when it is an address (HostAddress); else the address stage is "unresolved".
  PolicyVerdict Evaluate(absl::string_view caller, absl::string_view host,
                         const std::vector<boost::asio::ip::address>& addresses) const;
  // The verdict on a fetch from those of its two stages: the first denial, else the
  // address stage's with the report-only rules of both.
  static PolicyVerdict Combine(PolicyVerdict caller_stage, PolicyVerdict address_stage);

  // The built-in special-purpose range holding `address`, if any.
  static std::optional<DenyReason> SpecialRange(const boost::asio::ip::address& address);
  // Every built-in special-purpose range, with why it is denied.
  static const std::vector<std::pair<Cidr, DenyReason>>& SpecialRanges();

 private:
  // The caller rules of CheckName.
  PolicyVerdict CheckCaller(absl::string_view caller, absl::string_view host) const;
  // One address through the precedence above: the verdict of its enforced rules, and
  // the first report-only rule that would deny it.
  PolicyVerdict Decide(absl::string_view host, const boost::asio::ip::address& address) const;

  PolicyRules rules_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_POLICY_ADDRESS_POLICY_H_

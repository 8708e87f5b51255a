#include "service/transport/policy/address_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace egress::transport {
namespace {

namespace ip = boost::asio::ip;

// Built-in special-purpose ranges (RFC 6890 and friends), most specific first where
// they overlap.
struct SpecialCidr {
  const char* cidr;
  DenyReason reason;
};
constexpr SpecialCidr kSpecialRanges[] = {
    {"0.0.0.0/8", DenyReason::kUnspecified},
    {"10.0.0.0/8", DenyReason::kPrivate},
    {"100.64.0.0/10", DenyReason::kCgnat},
    {"127.0.0.0/8", DenyReason::kLoopback},
    {"169.254.0.0/16", DenyReason::kLinkLocal},
    {"172.16.0.0/12", DenyReason::kPrivate},
    {"192.0.0.0/24", DenyReason::kReserved},
    {"192.0.2.0/24", DenyReason::kReserved},
    {"192.168.0.0/16", DenyReason::kPrivate},
    {"198.18.0.0/15", DenyReason::kReserved},
    {"198.51.100.0/24", DenyReason::kReserved},
    {"203.0.113.0/24", DenyReason::kReserved},
    {"224.0.0.0/4", DenyReason::kMulticast},
    {"255.255.255.255/32", DenyReason::kBroadcast},
    {"240.0.0.0/4", DenyReason::kReserved},
    {"::/128", DenyReason::kUnspecified},
    {"::1/128", DenyReason::kLoopback},
    {"::ffff:0:0/96", DenyReason::kIpv4Embedded},
    {"::ffff:0:0:0/96", DenyReason::kIpv4Embedded},  // IPv4-translated (RFC 2765)
    {"::/96", DenyReason::kIpv4Embedded},
    {"64:ff9b::/96", DenyReason::kIpv4Embedded},
    {"64:ff9b:1::/48", DenyReason::kIpv4Embedded},
    {"100::/64", DenyReason::kReserved},
    {"2001::/32", DenyReason::kIpv4Embedded},
    {"2001:db8::/32", DenyReason::kReserved},
    {"2002::/16", DenyReason::kIpv4Embedded},
    {"fc00::/7", DenyReason::kUniqueLocal},
    {"fe80::/10", DenyReason::kLinkLocal},
    {"fec0::/10", DenyReason::kPrivate},
    {"ff00::/8", DenyReason::kMulticast},
};

template <size_t N>
bool PrefixEqual(const std::array<unsigned char, N>& a, const std::array<unsigned char, N>& b,
                 int bits) {
  for (int i = 0; i < bits / 8; ++i) {
    if (a[i] != b[i]) return false;
  }
  if (bits % 8 == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - bits % 8));
  return (a[bits / 8] & mask) == (b[bits / 8] & mask);
}

// An operator's rule: an IPv4 network also matches the IPv4 an IPv6 address embeds.
bool RuleContains(const Cidr& rule, const ip::address& address) {
  if (rule.Contains(address)) return true;
  if (!rule.network.is_v4()) return false;
  const std::optional<ip::address_v4> embedded = EmbeddedIpv4(address);
  return embedded && rule.Contains(ip::address(*embedded));
}

std::string Normalize(absl::string_view host) {
  return absl::AsciiStrToLower(absl::StripSuffix(host, "."));
}

// An IPv6 form of an IPv4 address (EmbeddedIpv4) as that IPv4 address; any other as is.
ip::address Unembedded(const ip::address& address) {
  const std::optional<ip::address_v4> embedded = EmbeddedIpv4(address);
  return embedded ? ip::address(*embedded) : address;
}

}  // namespace

absl::StatusOr<Cidr> Cidr::Parse(absl::string_view text) {
  const auto slash = text.find('/');
  const std::string address_text(text.substr(0, slash));
  boost::system::error_code ec;
  Cidr cidr;
  cidr.network = ip::make_address(address_text, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a CIDR: \"", address_text, "\" is not an IP address"));
  }
  const int max_length = cidr.network.is_v4() ? 32 : 128;
  cidr.prefix_length = max_length;
  if (slash != absl::string_view::npos &&
      (!absl::SimpleAtoi(text.substr(slash + 1), &cidr.prefix_length) ||
       cidr.prefix_length < 0 || cidr.prefix_length > max_length)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a CIDR: the prefix length must be 0 to ",
                                                   max_length));
  }
  cidr.text = absl::StrCat(cidr.network.to_string(), "/", cidr.prefix_length);
  return cidr;
}

bool Cidr::Contains(const ip::address& address) const {
  if (network.is_v4() != address.is_v4()) return false;
  if (address.is_v4()) {
    return PrefixEqual(network.to_v4().to_bytes(), address.to_v4().to_bytes(), prefix_length);
  }
  return PrefixEqual(network.to_v6().to_bytes(), address.to_v6().to_bytes(), prefix_length);
}

std::optional<ip::address> HostAddress(absl::string_view host) {
  absl::string_view text = host;
  if (absl::ConsumePrefix(&text, "[") && !absl::ConsumeSuffix(&text, "]")) return std::nullopt;
  boost::system::error_code ec;
  if (absl::StrContains(text, ':')) {
    const ip::address_v6 v6 = ip::make_address_v6(std::string(text), ec);
    // A zone ("fe80::1%eth0") names an interface of this machine: no URL's host.
    if (ec || v6.scope_id() != 0) return std::nullopt;
    return ip::address(v6);
  }
  text = absl::StripSuffix(text, ".");
  // inet_aton is what getaddrinfo reads a numeric host with; it also takes what follows
  // a space, so only the characters of its numbers and dots are given to it.
  const bool numeric = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == 'x' || c == 'X' ||
           c == '.';
  });
  in_addr v4{};
  if (!numeric || inet_aton(std::string(text).c_str(), &v4) == 0) return std::nullopt;
  return ip::address(ip::address_v4(ntohl(v4.s_addr)));
}

std::optional<ip::address> ServerAddressOf(ip::address address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = ip::make_address_v4(ip::v4_mapped, address.to_v6());
  }
  if (address.is_unspecified() || address.is_multicast()) return std::nullopt;
  return address;
}

std::string AddressText(const ip::address& address) {
  if (!address.is_v4()) return address.to_string();
  const ip::address_v4::bytes_type b = address.to_v4().to_bytes();
  return absl::StrCat(int{b[0]}, ".", int{b[1]}, ".", int{b[2]}, ".", int{b[3]});
}

absl::StatusOr<HostPattern> HostPattern::Parse(absl::string_view text) {
  if (const std::optional<ip::address> address = HostAddress(text)) {
    return HostPattern{AddressText(*address), address};
  }
  std::string pattern = Normalize(text);
  absl::string_view name = absl::StripPrefix(pattern, "*.");
  const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
  });
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a host pattern: use a name (api.example.com), *.suffix or "
        "an IP address"));
  }
  if (LooksLikeAnAddress(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a host pattern: \"", name, "\" has the shape of an address "
        "but is none (its last label starts with a digit), so it matches no host; name one "
        "address, or use a CIDR field for a network"));
  }
  return HostPattern{std::move(pattern), std::nullopt};
}

bool HostPattern::Matches(absl::string_view host) const {
  if (const std::optional<ip::address> host_address = HostAddress(host)) {
    return address && Unembedded(*address) == Unembedded(*host_address);
  }
  if (address) return false;
  const std::string name = Normalize(host);
  if (absl::StartsWith(pattern, "*.")) {
    return absl::EndsWith(name, absl::string_view(pattern).substr(1));
  }
  return name == pattern;
}

bool LooksLikeAnAddress(absl::string_view host) {
  if (absl::StrContains(host, ':')) return true;  // IPv6, bracketed or not
  const absl::string_view last = absl::StripSuffix(host, ".").substr(
      absl::StripSuffix(host, ".").find_last_of('.') + 1);
  return !last.empty() && absl::ascii_isdigit(static_cast<unsigned char>(last[0]));
}

std::optional<ip::address_v4> EmbeddedIpv4(const ip::address& address) {
  if (!address.is_v6()) return std::nullopt;
  const ip::address_v6::bytes_type bytes = address.to_v6().to_bytes();
  // The 96-bit prefixes, each followed by the 32 bits of the IPv4 address.
  static constexpr std::array<unsigned char, 12> kPrefixes[] = {
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff},        // ::ffff:0:0/96, mapped
      {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0},        // ::ffff:0:0:0/96, translated
      {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0},     // 64:ff9b::/96, NAT64
  };
  for (const auto& prefix : kPrefixes) {
    if (std::equal(prefix.begin(), prefix.end(), bytes.begin())) {
      return ip::address_v4({bytes[12], bytes[13], bytes[14], bytes[15]});
    }
  }
  return std::nullopt;
}

absl::string_view ToString(DenyReason reason) {
  switch (reason) {
    case DenyReason::kHostDenied: return "host_denied";
    case DenyReason::kCidrDenied: return "cidr_denied";
    case DenyReason::kLoopback: return "loopback";
    case DenyReason::kPrivate: return "private";
    case DenyReason::kLinkLocal: return "link_local";
    case DenyReason::kCgnat: return "cgnat";
    case DenyReason::kUnspecified: return "unspecified";
    case DenyReason::kMulticast: return "multicast";
    case DenyReason::kBroadcast: return "broadcast";
    case DenyReason::kReserved: return "reserved";
    case DenyReason::kUniqueLocal: return "unique_local";
    case DenyReason::kIpv4Embedded: return "ipv4_embedded";
    case DenyReason::kCallerNotAllowed: return "caller_not_allowed";
    case DenyReason::kUnknownCaller: return "unknown_caller";
  }
  return "unknown";
}

const std::vector<std::pair<Cidr, DenyReason>>& AddressPolicy::SpecialRanges() {
  static const auto* ranges = [] {
    auto* list = new std::vector<std::pair<Cidr, DenyReason>>();
    for (const auto& special : kSpecialRanges) {
      list->emplace_back(*Cidr::Parse(special.cidr), special.reason);
    }
    return list;
  }();
  return *ranges;
}

std::optional<DenyReason> AddressPolicy::SpecialRange(const ip::address& address) {
  for (const auto& [cidr, reason] : SpecialRanges()) {
    if (cidr.Contains(address)) return reason;
  }
  return std::nullopt;
}

PolicyVerdict AddressPolicy::Decide(absl::string_view host, const ip::address& address) const {
  PolicyVerdict verdict;
  if (!rules_.enabled) {
    verdict.rule = "disabled";
    return verdict;
  }
  const auto first_host = [&](const std::vector<HostPattern>& list) {
    return std::find_if(list.begin(), list.end(),
                        [&](const HostPattern& p) { return p.Matches(host); });
  };
  const auto first_cidr = [&](const std::vector<Cidr>& list) {
    return std::find_if(list.begin(), list.end(),
                        [&](const Cidr& c) { return RuleContains(c, address); });
  };
  const auto deny = [&](DenyReason reason, std::string rule) {
    PolicyVerdict denial;
    denial.denied = reason;
    denial.rule = std::move(rule);
    denial.denied_address = address;
    return denial;
  };
  const ReportOnlyRules& report_only = rules_.report_only;
  if (PolicyVerdict by_name = CheckHost(host); by_name.denied) {
    return deny(DenyReason::kHostDenied, std::move(by_name.rule));
  }
  if (auto p = first_host(report_only.deny_hosts); p != report_only.deny_hosts.end()) {
    verdict.would_deny.push_back(absl::StrCat("deny_hosts:", p->pattern));
  }
  if (auto c = first_cidr(rules_.deny_cidrs); c != rules_.deny_cidrs.end()) {
    return deny(DenyReason::kCidrDenied, absl::StrCat("deny_cidrs:", c->ToString()));
  }
  if (auto c = first_cidr(report_only.deny_cidrs);
      verdict.would_deny.empty() && c != report_only.deny_cidrs.end()) {
    verdict.would_deny.push_back(absl::StrCat("deny_cidrs:", c->ToString()));
  }
  if (auto c = first_cidr(rules_.allow_cidrs); c != rules_.allow_cidrs.end()) {
    verdict.rule = absl::StrCat("allow_cidrs:", c->ToString());
    return verdict;
  }
  if (auto p = first_host(rules_.allow_hosts);
      !LooksLikeAnAddress(host) && p != rules_.allow_hosts.end() && !p->address) {
    verdict.rule = absl::StrCat("allow_hosts:", p->pattern);
    return verdict;
  }
  if (auto reason = SpecialRange(address)) {
    return deny(*reason, absl::StrCat("builtin:", ToString(*reason)));
  }
  verdict.rule = "default_allow";
  return verdict;
}

std::optional<DenyReason> AddressPolicy::Check(absl::string_view host,
                                               const ip::address& address) const {
  return Decide(host, address).denied;
}

PolicyVerdict AddressPolicy::CheckHost(absl::string_view host) const {
  PolicyVerdict verdict;
  if (!rules_.enabled) return verdict;
  const auto& deny = rules_.deny_hosts;
  const auto p = std::find_if(deny.begin(), deny.end(),
                              [&](const HostPattern& pattern) { return pattern.Matches(host); });
  if (p != deny.end()) {
    verdict.denied = DenyReason::kHostDenied;
    verdict.rule = absl::StrCat("deny_hosts:", p->pattern);
  }
  return verdict;
}

PolicyVerdict AddressPolicy::CheckName(absl::string_view caller, absl::string_view host) const {
  PolicyVerdict verdict = CheckHost(host);
  return verdict.denied ? verdict : CheckCaller(caller, host);
}

PolicyVerdict AddressPolicy::CheckCaller(absl::string_view caller, absl::string_view host) const {
  PolicyVerdict verdict;
  if (!rules_.enabled) return verdict;
  // A rule's hosts, or none: whether they leave `host` out.
  const auto excludes = [&](const std::vector<HostPattern>& hosts) {
    return !hosts.empty() && std::none_of(hosts.begin(), hosts.end(),
                                          [&](const HostPattern& p) { return p.Matches(host); });
  };
  const std::string name(caller);
  const auto& enforced = rules_.callers.allowed_hosts;
  const auto& reported = rules_.report_only.callers.allowed_hosts;
  const auto rule = enforced.find(name);
  if (rule != enforced.end() && excludes(rule->second)) {
    verdict.denied = DenyReason::kCallerNotAllowed;
    verdict.rule = absl::StrCat("callers:", rule->first);
    return verdict;
  }
  if (rule == enforced.end() && rules_.callers.deny_unknown) {
    verdict.denied = DenyReason::kUnknownCaller;
    verdict.rule = "unknown_callers";
    return verdict;
  }
  const auto report_only_rule = reported.find(name);
  if (report_only_rule != reported.end() && excludes(report_only_rule->second)) {
    verdict.would_deny.push_back(absl::StrCat("callers:", report_only_rule->first));
  } else if (report_only_rule == reported.end() && rule == enforced.end() &&
             rules_.report_only.callers.deny_unknown) {
    verdict.would_deny.push_back("unknown_callers");
  }
  return verdict;
}

PolicyVerdict AddressPolicy::CheckAddresses(absl::string_view host,
                                            const std::vector<ip::address>& addresses) const {
  PolicyVerdict verdict, first_denial;
  bool every_allowed_would_be_denied = true;
  for (const ip::address& address : addresses) {
    PolicyVerdict one = Decide(host, address);
    if (one.denied) {
      if (!first_denial.denied) first_denial = std::move(one);
      continue;
    }
    if (verdict.allowed.empty()) {
      verdict.rule = one.rule;
      verdict.would_deny = one.would_deny;
    }
    every_allowed_would_be_denied = every_allowed_would_be_denied && !one.would_deny.empty();
    verdict.allowed.push_back(address);
  }
  if (verdict.allowed.empty() && first_denial.denied) return first_denial;
  if (verdict.allowed.empty()) verdict.rule = "unresolved";
  if (!every_allowed_would_be_denied) verdict.would_deny.clear();
  return verdict;
}

PolicyVerdict AddressPolicy::Evaluate(absl::string_view caller, absl::string_view host,
                                      const std::vector<ip::address>& addresses) const {
  std::vector<ip::address> checked = addresses;
  const std::optional<ip::address> literal = HostAddress(host);
  if (checked.empty() && literal) checked.push_back(*literal);
  return Combine(CheckName(caller, host), CheckAddresses(host, checked));
}

PolicyVerdict AddressPolicy::Combine(PolicyVerdict caller_stage, PolicyVerdict address_stage) {
  if (caller_stage.denied) return caller_stage;
  if (address_stage.denied) return address_stage;
  address_stage.would_deny.insert(address_stage.would_deny.begin(),
                                  caller_stage.would_deny.begin(), caller_stage.would_deny.end());
  return address_stage;
}

}  // namespace egress::transport

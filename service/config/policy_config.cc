#include "service/config/sections.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "service/config/fields.h"

namespace egress::config_internal {
namespace {

// policy.redirect_strip_headers: lower-cased; the default list when left empty.
absl::Status BuildRedirectStripHeaders(egress::v1::PolicyConfig* policy, CallerPolicy* callers) {
  if (policy->redirect_strip_headers_size() == 0) {
    for (const auto& name : callers->redirect_strip_headers) {
      policy->add_redirect_strip_headers(name);
    }
    return absl::OkStatus();
  }
  callers->redirect_strip_headers.clear();
  for (int i = 0; i < policy->redirect_strip_headers_size(); ++i) {
    const std::string& name = policy->redirect_strip_headers(i);
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy.redirect_strip_headers[", i, "]: must not be empty"));
    }
    callers->redirect_strip_headers.push_back(absl::AsciiStrToLower(name));
  }
  return absl::OkStatus();
}

// policy.allow_hosts: names only. Their resolution is trusted past the built-in
// denials; an address there would open what policy.allow_cidrs is for, so it is refused
// and the message names the CIDR to write instead.
absl::Status ParseAllowHosts(const google::protobuf::RepeatedPtrField<std::string>& texts,
                             std::vector<transport::HostPattern>* hosts) {
  if (auto status = ParseList("policy.allow_hosts", texts, hosts); !status.ok()) return status;
  for (size_t i = 0; i < hosts->size(); ++i) {
    if (const auto& address = (*hosts)[i].address) {
      return absl::InvalidArgumentError(absl::StrCat(
          "policy.allow_hosts[", i, "]: \"", texts[static_cast<int>(i)],
          "\" is an IP address, and allow_hosts opens names only; allow an address with "
          "policy.allow_cidrs (\"", address->to_string(), "/", address->is_v4() ? 32 : 128,
          "\")"));
    }
  }
  return absl::OkStatus();
}

// A caller rule's hosts. An empty list would restrict nothing or everything depending on
// how it is read, so it is refused; "*" alone says "any host" on purpose.
absl::Status BuildCallerHosts(const std::string& name, const egress::v1::CallerRule& rule,
                              std::vector<transport::HostPattern>* hosts) {
  const auto& texts = rule.allowed_hosts();
  if (texts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ".allowed_hosts: empty; list the hosts caller \"", rule.identity(),
        "\" may reach, or \"*\" for every host the policy allows"));
  }
  if (std::find(texts.begin(), texts.end(), "*") != texts.end()) {
    if (texts.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ".allowed_hosts: \"*\" allows every host; list it alone or not at all"));
    }
    return absl::OkStatus();
  }
  return ParseList(name + ".allowed_hosts", texts, hosts);
}

// The callers and unknown_callers fields of policy or policy.report_only (`prefix`):
// one rule per identity.
absl::Status BuildCallerRules(const std::string& prefix,
                              const google::protobuf::RepeatedPtrField<v1::CallerRule>& list,
                              v1::UnknownCallers unknown_callers,
                              transport::CallerRules* rules) {
  for (int i = 0; i < list.size(); ++i) {
    const auto& rule = list[i];
    const std::string entry = absl::StrCat(prefix, "callers[", i, "]");
    if (rule.identity().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ".identity: must not be empty"));
    }
    if (rules->allowed_hosts.contains(rule.identity())) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".identity: caller \"", rule.identity(), "\" has an earlier rule; give it one"));
    }
    if (auto status = BuildCallerHosts(entry, rule, &rules->allowed_hosts[rule.identity()]);
        !status.ok()) {
      return status;
    }
  }
  if (!v1::UnknownCallers_IsValid(unknown_callers)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "unknown_callers: unknown value ", unknown_callers));
  }
  rules->deny_unknown = unknown_callers == v1::UNKNOWN_CALLERS_DENY;
  return absl::OkStatus();
}

// identity_source and caller_header_trusted_peers, defaults filled in.
absl::Status BuildCallerIdentification(egress::v1::PolicyConfig* policy, CallerPolicy* callers) {
  switch (policy->identity_source()) {
    case v1::IDENTITY_SOURCE_UNSPECIFIED:
      policy->set_identity_source(v1::IDENTITY_SOURCE_URI_SAN);
      break;
    case v1::IDENTITY_SOURCE_URI_SAN:
    case v1::IDENTITY_SOURCE_DNS_SAN:
    case v1::IDENTITY_SOURCE_COMMON_NAME: break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("policy.identity_source: unknown value ", policy->identity_source()));
  }
  callers->identity_source = policy->identity_source();
  for (int i = 0; i < policy->caller_header_trusted_peers_size(); ++i) {
    const std::string& peer = policy->caller_header_trusted_peers(i);
    if (peer.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("policy.caller_header_trusted_peers[", i, "]: must not be empty"));
    }
    // An address or network names the peer's connection; anything else an mTLS identity.
    if (auto cidr = transport::Cidr::Parse(peer); cidr.ok()) {
      callers->header_trusted_cidrs.push_back(*std::move(cidr));
    } else {
      callers->header_trusted_identities.push_back(peer);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BuildPolicy(egress::v1::PolicyConfig* policy, ServiceConfig* config) {
  if (policy->unknown_callers() == v1::UNKNOWN_CALLERS_UNSPECIFIED) {
    policy->set_unknown_callers(v1::UNKNOWN_CALLERS_DEFAULT_POLICY);
  }
  transport::PolicyRules rules;
  rules.enabled = !policy->disabled();
  const v1::ReportOnlyRules& report_only = policy->report_only();
  transport::ReportOnlyRules& reported = rules.report_only;
  for (auto status :
       {ParseList("policy.allow_cidrs", policy->allow_cidrs(), &rules.allow_cidrs),
        ParseList("policy.deny_cidrs", policy->deny_cidrs(), &rules.deny_cidrs),
        ParseAllowHosts(policy->allow_hosts(), &rules.allow_hosts),
        ParseList("policy.deny_hosts", policy->deny_hosts(), &rules.deny_hosts),
        BuildCallerRules("policy.", policy->callers(), policy->unknown_callers(),
                         &rules.callers),
        ParseList("policy.report_only.deny_cidrs", report_only.deny_cidrs(), &reported.deny_cidrs),
        ParseList("policy.report_only.deny_hosts", report_only.deny_hosts(), &reported.deny_hosts),
        BuildCallerRules("policy.report_only.", report_only.callers(),
                         report_only.unknown_callers(), &reported.callers)}) {
    if (!status.ok()) return status;
  }
  config->transport.policy = std::make_shared<transport::AddressPolicy>(std::move(rules));
  NumberOrDefault(policy, &v1::PolicyConfig::decision_history_size,
                  &v1::PolicyConfig::set_decision_history_size,
                  &config->transport.policy_history_size);
  if (config->transport.policy_history_size > kMaxDecisionHistory) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy.decision_history_size: at most ", kMaxDecisionHistory, " (got ",
        config->transport.policy_history_size, ")"));
  }

  CallerPolicy& callers = config->callers;
  callers.caller_header = absl::AsciiStrToLower(policy->caller_header());
  NumberOrDefault(policy, &v1::PolicyConfig::max_redirects,
                  &v1::PolicyConfig::set_max_redirects, &callers.max_redirects);
  if (auto status = BuildRedirectStripHeaders(policy, &callers); !status.ok()) return status;
  return BuildCallerIdentification(policy, &callers);
}

}  // namespace egress::config_internal

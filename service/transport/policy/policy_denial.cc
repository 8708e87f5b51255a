#include "service/transport/policy/policy_denial.h"

#include "absl/strings/str_cat.h"
#include "service/base/error_reason.h"

namespace egress::transport {

absl::Status PolicyDenial(const Origin& origin, const PolicyVerdict& verdict,
                          const std::string& caller) {
  const DenyReason reason = verdict.denied.value_or(DenyReason::kHostDenied);
  const std::string address_text =
      verdict.denied_address ? verdict.denied_address->to_string() : "";
  std::string why;
  switch (reason) {
    case DenyReason::kHostDenied:
      why = absl::StrCat("host \"", origin.host, "\" matches policy.deny_hosts");
      break;
    case DenyReason::kCidrDenied:
      why = absl::StrCat(address_text, " is in policy.deny_cidrs");
      break;
    case DenyReason::kCallerNotAllowed:
      why = absl::StrCat("caller \"", caller,
                         "\" may reach only the hosts its policy.callers rule lists");
      break;
    case DenyReason::kUnknownCaller:
      why = absl::StrCat(caller.empty() ? std::string("the caller has no identity")
                                        : absl::StrCat("caller \"", caller,
                                                       "\" has no policy.callers rule"),
                         " and policy.unknown_callers is DENY");
      break;
    default:
      why = absl::StrCat("\"", origin.host, "\" resolves to ", address_text, ", a ",
                         ToString(reason),
                         " address, denied by default (allow it with policy.allow_cidrs or "
                         "policy.allow_hosts)");
  }
  const std::string key = origin.Key();
  return WithReason(
      absl::PermissionDeniedError(absl::StrCat("egress policy denies ", key, ": ", why)),
      "POLICY_DENIED",
      {{"rule", verdict.rule}, {"host", origin.host}, {"origin", key}, {"address", address_text},
       {"caller", caller}});
}

}  // namespace egress::transport

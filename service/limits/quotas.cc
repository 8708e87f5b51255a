#include "service/limits/quotas.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/base/error_reason.h"

namespace egress {
namespace {

// Separates rule name and caller in a table key; rule names never contain it.
constexpr char kKeySeparator = '\x1f';

// A table this full looks for idle entries to forget at most once a second.
constexpr absl::Duration kSweepInterval = absl::Seconds(1);

std::string Who(absl::string_view caller) {
  return caller.empty() ? "callers without an identity are"
                        : absl::StrCat("caller \"", caller, "\" is");
}

}  // namespace

bool QuotaRule::MatchesHost(absl::string_view host) const {
  if (hosts.empty()) return true;
  return std::any_of(hosts.begin(), hosts.end(),
                     [&](const transport::HostPattern& p) { return p.Matches(host); });
}

const QuotaRule* FindQuota(const std::vector<QuotaRule>& rules, absl::string_view caller,
                           absl::string_view host) {
  const QuotaRule* any_caller = nullptr;
  for (const QuotaRule& rule : rules) {
    if (!rule.MatchesHost(host)) continue;
    if (!caller.empty() && rule.caller == caller) return &rule;
    if (rule.caller == "*" && !any_caller) any_caller = &rule;
  }
  return any_caller;
}

QuotaTable::Lease& QuotaTable::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Reset();
    table_ = std::exchange(other.table_, nullptr);
    key_ = std::move(other.key_);
  }
  return *this;
}

void QuotaTable::Lease::Reset() {
  if (auto* table = std::exchange(table_, nullptr)) table->Release(key_);
}

absl::StatusOr<QuotaTable::Lease> QuotaTable::Acquire(const QuotaRule& rule,
                                                      absl::string_view caller,
                                                      absl::Time now) {
  std::optional<QuotaLimit> refused;
  absl::Duration retry_after = transport::kRetryAfterLoad;
  std::string key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& entry = EntryFor(rule, caller, now, &key);
    if (rule.requests_per_second > 0 && !rule.global) {
      // The rule's numbers as they are now; a new bucket starts full.
      if (entry.rate == 0) entry.bucket = transport::TokenBucket();
      entry.rate = rule.requests_per_second;
      entry.burst = rule.burst;
      entry.bucket.Refill(now, entry.rate, entry.burst);
    } else {
      entry.rate = 0;
    }
    if (rule.max_concurrent > 0 && entry.in_flight >= rule.max_concurrent) {
      refused = QuotaLimit::kMaxConcurrent;
    } else if (entry.rate > 0 && entry.bucket.tokens() < 1) {
      refused = QuotaLimit::kRequestsPerSecond;
      // Rounded up, so that a retry after exactly this long finds its token.
      retry_after =
          absl::Milliseconds(std::ceil((1 - entry.bucket.tokens()) / entry.rate * 1000));
    } else {
      if (entry.rate > 0) entry.bucket.TryTake();
      ++entry.in_flight;
    }
  }
  if (!refused) return Lease(this, std::move(key));
  return Refuse(rule, caller, *refused, retry_after);
}

absl::Status QuotaTable::Refuse(const QuotaRule& rule, absl::string_view caller,
                                QuotaLimit refused, absl::Duration retry_after) {
  observer_.OnQuotaRejected(rule.name, caller, refused);
  std::string limit;
  if (refused == QuotaLimit::kMaxConcurrent) {
    limit = absl::StrCat(rule.max_concurrent, " requests under way at once");
  } else {
    limit = absl::StrFormat("%g requests per second (burst %g%s)", rule.requests_per_second,
                            rule.burst, rule.global ? ", shared by every replica" : "");
  }
  return transport::WithReason(
      absl::ResourceExhaustedError(absl::StrCat(
          Who(caller), " over quota \"", rule.name, "\": at most ", limit,
          " to its hosts; retry after ", absl::FormatDuration(retry_after),
          ", or ask for a larger quota")),
      "QUOTA_EXCEEDED",
      {{"rule", rule.name}, {"caller", caller}, {"limit", ToString(refused)}}, retry_after);
}

QuotaTable::Entry& QuotaTable::EntryFor(const QuotaRule& rule, absl::string_view caller,
                                        absl::Time now, std::string* key) {
  *key = absl::StrCat(rule.name, std::string(1, kKeySeparator), caller);
  if (auto it = entries_.find(*key); it != entries_.end()) return it->second;
  if (entries_.size() >= max_entries_ && now - last_sweep_ >= kSweepInterval) {
    last_sweep_ = now;
    ForgetIdle(now);
  }
  if (entries_.size() >= max_entries_) *key = rule.name;  // the rule's overflow entry
  return entries_[*key];
}

void QuotaTable::ForgetIdle(absl::Time now) {
  absl::erase_if(entries_, [&](const auto& item) {
    const Entry& entry = item.second;
    return entry.in_flight == 0 &&
           (entry.rate == 0 || entry.bucket.TokensAt(now, entry.rate, entry.burst) >= entry.burst);
  });
}

void QuotaTable::Release(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.in_flight > 0) --it->second.in_flight;
}

size_t QuotaTable::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace egress

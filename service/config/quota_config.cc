#include "service/config/sections.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/config/fields.h"

namespace egress::config_internal {
namespace {

// A quota rule's name: short, and safe as a metric label and in a table key.
bool ValidQuotaName(absl::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-';
  });
}

}  // namespace

absl::Status BuildQuotaStore(v1::QuotaStoreConfig* store, QuotaStoreSettings* settings) {
  constexpr absl::Duration kMaxTimeout = absl::Seconds(5);
  const bool timeout_set = store->has_timeout();
  if (auto status = DurationField("quota_store.timeout", timeout_set, store->mutable_timeout(),
                                  settings->timeout, &settings->timeout);
      !status.ok()) {
    return status;
  }
  if (settings->timeout > kMaxTimeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("quota_store.timeout: at most ", absl::FormatDuration(kMaxTimeout),
                     " (got ", absl::FormatDuration(settings->timeout), "); a fetch waits for it"));
  }
  settings->fail_closed = store->fail_closed();
  if (store->redis().empty()) return absl::OkStatus();
  auto redis = ServerAddress::Parse(store->redis());
  if (!redis.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("quota_store.redis: a Redis server: ", redis.status().message()));
  }
  store->set_redis(redis->ToString());  // GetConfig shows the one spelling in use
  settings->host = redis->host;
  settings->port = redis->port;
  return absl::OkStatus();
}

absl::Status BuildQuotas(google::protobuf::RepeatedPtrField<v1::QuotaRule>* list,
                         const QuotaStoreSettings& store, std::vector<QuotaRule>* rules) {
  if (list->size() > kMaxQuotaRules) {
    return absl::InvalidArgumentError(
        absl::StrCat("quotas: at most ", kMaxQuotaRules, " rules (got ", list->size(), ")"));
  }
  for (int i = 0; i < list->size(); ++i) {
    v1::QuotaRule& proto = (*list)[i];
    const std::string entry = absl::StrCat("quotas[", i, "]");
    if (!ValidQuotaName(proto.name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".name: 1-64 of a-z, 0-9, '_' and '-' (got \"", proto.name(), "\")"));
    }
    if (std::any_of(rules->begin(), rules->end(),
                    [&](const QuotaRule& r) { return r.name == proto.name(); })) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ".name: \"", proto.name(), "\" is taken by an earlier rule"));
    }
    if (proto.caller().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".caller: must not be empty; name a caller identity, or \"*\" for any"));
    }
    QuotaRule rule;
    rule.name = proto.name();
    rule.caller = proto.caller();
    const auto& hosts = proto.hosts();
    if (hosts.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".hosts: empty; list the hosts the quota covers, or \"*\" for every host"));
    }
    if (std::find(hosts.begin(), hosts.end(), "*") != hosts.end()) {
      if (hosts.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            entry, ".hosts: \"*\" covers every host; list it alone or not at all"));
      }
    } else if (auto status = ParseList(entry + ".hosts", hosts, &rule.hosts); !status.ok()) {
      return status;
    }
    const double rate = proto.requests_per_second();
    if (!(rate >= 0 && rate <= kMaxQuotaRate)) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".requests_per_second: from 0 to ", kMaxQuotaRate, " (got ", rate, ")"));
    }
    if (rate == 0 && proto.burst() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ".burst: only with requests_per_second"));
    }
    if (proto.burst() > kMaxQuotaRate) {
      return absl::InvalidArgumentError(
          absl::StrCat(entry, ".burst: at most ", kMaxQuotaRate, " (got ", proto.burst(), ")"));
    }
    if (rate > 0 && proto.burst() == 0) {
      proto.set_burst(static_cast<uint32_t>(std::max(1.0, std::ceil(rate))));
    }
    if (rate == 0 && proto.max_concurrent() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ": limits nothing; set max_concurrent, requests_per_second or both"));
    }
    if (proto.global() && (rate == 0 || store.host.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          entry, ".global: a global rule needs requests_per_second and quota_store.redis"));
    }
    rule.global = proto.global();
    rule.max_concurrent = proto.max_concurrent();
    rule.requests_per_second = rate;
    rule.burst = proto.burst();
    rules->push_back(std::move(rule));
  }
  return absl::OkStatus();
}

}  // namespace egress::config_internal

#include "service/transport/dns/cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"

namespace egress::transport {

std::optional<absl::StatusOr<DnsCache::Addresses>> DnsCache::Fresh(absl::string_view host,
                                                                   absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(absl::AsciiStrToLower(host));
  if (it == entries_.end()) return std::nullopt;
  if (now >= it->second.expires) {
    // Addresses stay for Stale; a negative answer is of no more use.
    if (!it->second.answer.ok()) Erase(it);
    return std::nullopt;
  }
  Touch(it->second);
  return it->second.answer;
}

std::optional<DnsCache::Addresses> DnsCache::Stale(absl::string_view host, absl::Time now,
                                                   const DnsSettings& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(absl::AsciiStrToLower(host));
  if (it == entries_.end() || !it->second.answer.ok()) return std::nullopt;
  if (now >= it->second.expires + settings.stale_for) {
    Erase(it);
    return std::nullopt;
  }
  Touch(it->second);
  return *it->second.answer;
}

void DnsCache::StoreAddresses(absl::string_view host, Addresses addresses, absl::Duration ttl,
                              absl::Time now, const DnsSettings& settings) {
  ttl = std::clamp(ttl, settings.min_ttl, settings.max_ttl);
  std::lock_guard<std::mutex> lock(mu_);
  Store(absl::AsciiStrToLower(host), std::move(addresses), now + ttl,
        settings.cache_max_entries);
}

void DnsCache::StoreNegative(absl::string_view host, absl::Status status, absl::Time now,
                             const DnsSettings& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key = absl::AsciiStrToLower(host);
  if (settings.negative_ttl <= absl::ZeroDuration()) {
    // Nothing to keep, and the name's old addresses are not to be served stale: it
    // does not exist now, which is no failure of the servers.
    if (const auto it = entries_.find(key); it != entries_.end()) Erase(it);
    return;
  }
  Store(std::move(key), std::move(status), now + settings.negative_ttl,
        settings.cache_max_entries);
}

size_t DnsCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void DnsCache::Store(std::string host, absl::StatusOr<Addresses> answer, absl::Time expires,
                     uint32_t max_entries) {
  if (max_entries == 0) return;
  if (const auto it = entries_.find(host); it != entries_.end()) {
    it->second.answer = std::move(answer);
    it->second.expires = expires;
    Touch(it->second);
    return;
  }
  // Room for one more, also after cache_max_entries was lowered.
  while (entries_.size() >= max_entries) Erase(entries_.find(lru_.back()));
  lru_.push_front(host);
  entries_.emplace(std::move(host), Entry{std::move(answer), expires, lru_.begin()});
}

void DnsCache::Touch(Entry& entry) { lru_.splice(lru_.begin(), lru_, entry.lru); }

void DnsCache::Erase(absl::flat_hash_map<std::string, Entry>::iterator it) {
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

}  // namespace egress::transport

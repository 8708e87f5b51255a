#ifndef EGRESS_SERVICE_TRANSPORT_DNS_CACHE_H_
#define EGRESS_SERVICE_TRANSPORT_DNS_CACHE_H_

#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "boost/asio/ip/address.hpp"
#include "service/transport/settings.h"

namespace egress::transport {

// Answers of name lookups, by host name, for every origin and caller: addresses for
// their TTL (within DnsSettings' min_ttl and max_ttl), a name that does not exist for
// negative_ttl, and addresses whose TTL ran out for stale_for more, for when the servers
// fail. At most cache_max_entries names; the least recently used goes first. It holds
// answers, not verdicts: the egress policy checks whatever it hands out. Thread-safe.
class DnsCache {
 public:
  using Addresses = std::vector<boost::asio::ip::address>;

  // The answer for `host` whose time has not run out: addresses, or the status of a
  // negative answer. None when there is no such answer.
  std::optional<absl::StatusOr<Addresses>> Fresh(absl::string_view host, absl::Time now);
  // The addresses of `host` whose TTL ran out no longer than `settings.stale_for` ago.
  std::optional<Addresses> Stale(absl::string_view host, absl::Time now,
                                 const DnsSettings& settings);

  // An answer with addresses whose records' smallest TTL is `ttl`.
  void StoreAddresses(absl::string_view host, Addresses addresses, absl::Duration ttl,
                      absl::Time now, const DnsSettings& settings);
  // The name does not exist or has no addresses: `status` says so.
  void StoreNegative(absl::string_view host, absl::Status status, absl::Time now,
                     const DnsSettings& settings);

  size_t size() const;

 private:
  struct Entry {
    absl::StatusOr<Addresses> answer;
    absl::Time expires;  // fresh before
    std::list<std::string>::iterator lru;
  };

  void Store(std::string host, absl::StatusOr<Addresses> answer, absl::Time expires,
             uint32_t max_entries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the entry most recently used.
  void Touch(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Erase(absl::flat_hash_map<std::string, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DNS_CACHE_H_

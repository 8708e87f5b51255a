#ifndef EGRESS_SERVICE_LIMITS_QUOTAS_H_
#define EGRESS_SERVICE_LIMITS_QUOTAS_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/fetch/fetch_observer.h"
#include "service/transport/policy/address_policy.h"
#include "service/base/token_bucket.h"

namespace egress {

// One entry of Config.quotas, validated: limits on one caller's upstream requests to
// some hosts.
struct QuotaRule {
  std::string name;
  std::string caller;                         // an identity, or "*": any caller
  std::vector<transport::HostPattern> hosts;  // empty: every host
  uint32_t max_concurrent = 0;                // 0: no limit
  double requests_per_second = 0;             // 0: no limit
  double burst = 0;                           // the bucket's size, with requests_per_second
  bool global = false;  // the bucket is the quota store's; QuotaTable counts max_concurrent only

  bool MatchesHost(absl::string_view host) const;
};

// The rule for `caller`'s request to `host`: the first that names the caller and matches
// the host, else the first "*" rule that matches it; null when none does.
const QuotaRule* FindQuota(const std::vector<QuotaRule>& rules, absl::string_view caller,
                           absl::string_view host);

// Each caller's count of requests under way and token bucket, per rule, for this
// replica. Entries are kept by rule name, so a config that changes a rule's numbers
// applies them from the next request on (tokens above a smaller burst are dropped), and
// one that renames it starts afresh. At most `max_entries` (rule, caller) pairs are
// tracked: an entry whose bucket is full and that has nothing under way is forgotten
// (it would behave the same when made again), and callers past the bound share one
// entry per rule, so a flood of identities cannot grow memory or escape the quota.
// Thread-safe.
class QuotaTable {
 public:
  static constexpr size_t kDefaultMaxEntries = 10000;

  // A request admitted under a rule; its place under max_concurrent is given back when
  // the lease is destroyed or reset. Move-only.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Reset(); }
    void Reset();
    // The count and bucket it belongs to ("rule\x1fcaller", or the rule's name alone
    // for callers past the bound): a global rule's key in the quota store too.
    const std::string& bucket() const { return key_; }

   private:
    friend class QuotaTable;
    Lease(QuotaTable* table, std::string key) : table_(table), key_(std::move(key)) {}
    QuotaTable* table_ = nullptr;  // null: holds no place
    std::string key_;
  };

  explicit QuotaTable(FetchObserver& observer, size_t max_entries = kDefaultMaxEntries)
      : observer_(observer), max_entries_(max_entries) {}

  // Admits one upstream request of `caller` under `rule` at `now`, or refuses it with
  // RESOURCE_EXHAUSTED (reason QUOTA_EXCEEDED, RetryInfo: when a retry can pass) and
  // counts the refusal. A refused request takes neither a token nor a place. The
  // bucket of a global rule is not here: only its max_concurrent is checked.
  absl::StatusOr<Lease> Acquire(const QuotaRule& rule, absl::string_view caller,
                                absl::Time now);

  // The refusal of one of `caller`'s requests under `rule`, counted: RESOURCE_EXHAUSTED,
  // reason QUOTA_EXCEEDED, RetryInfo `retry_after` (also for a global rule's bucket).
  absl::Status Refuse(const QuotaRule& rule, absl::string_view caller, QuotaLimit limit,
                      absl::Duration retry_after);

  // (rule, caller) pairs tracked now, overflow entries included.
  size_t entries() const;

 private:
  struct Entry {
    uint32_t in_flight = 0;
    // The bucket, as the rule last applied to it sized it; rate 0: no bucket.
    double rate = 0;
    double burst = 0;
    transport::TokenBucket bucket;
  };

  void Release(const std::string& key);
  // The entry for `caller` under `rule`, made when missing (in the rule's overflow
  // entry when the table is full); its key in *key.
  Entry& EntryFor(const QuotaRule& rule, absl::string_view caller, absl::Time now,
                  std::string* key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets entries whose bucket is full and which have nothing under way.
  void ForgetIdle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FetchObserver& observer_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  // By "rule\x1fcaller", and by rule name alone for the callers past the bound.
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace egress

#endif  // EGRESS_SERVICE_LIMITS_QUOTAS_H_

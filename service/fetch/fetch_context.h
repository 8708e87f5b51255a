#ifndef EGRESS_SERVICE_FETCH_FETCH_CONTEXT_H_
#define EGRESS_SERVICE_FETCH_FETCH_CONTEXT_H_

// What every Fetch and FetchStream call works with: the transport, the config, the
// limits' counts and the observers FetchService owns or was given.

#include <atomic>
#include <cstdint>

#include "service/access_log/access_log.h"
#include "service/config/config_store.h"
#include "service/fetch/fetch_observer.h"
#include "service/limits/body_budget.h"
#include "service/limits/caller_counts.h"
#include "service/limits/quota_store.h"
#include "service/limits/quotas.h"
#include "service/transport/transport.h"

namespace egress::fetch {

// What every RPC's reactor works with.
struct Context {
  transport::Transport& transport;
  const ConfigStore& config;  // limits and caller rules; each RPC takes a snapshot
  FetchObserver& observer;
  std::atomic<uint32_t>& fetches_in_flight;  // for limits.max_concurrent_fetches
  const std::atomic<bool>& stopped;          // new fetches are refused
  BodyBudget& body_budget;      // for limits.buffered_body_budget_bytes
  CallerCounts& caller_counts;  // for limits.max_concurrent_fetches_per_caller
  QuotaTable& quotas;           // for Config.quotas
  QuotaStores& quota_stores;    // for Config.quotas' global rules
  AccessLog* access_log;        // a line per RPC; none when null
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_FETCH_CONTEXT_H_

#ifndef EGRESS_SERVICE_FETCH_FETCH_SERVICE_H_
#define EGRESS_SERVICE_FETCH_FETCH_SERVICE_H_

#include <atomic>
#include <cstdint>

#include "egress/v1/egress.grpc.pb.h"
#include "service/access_log/access_log.h"
#include "service/fetch/arena_messages.h"
#include "service/limits/body_budget.h"
#include "service/limits/caller_counts.h"
#include "service/limits/quota_store.h"
#include "service/limits/quotas.h"
#include "service/config/config.h"
#include "service/config/config_store.h"
#include "service/fetch/fetch_context.h"
#include "service/fetch/fetch_observer.h"
#include "service/transport/transport.h"

namespace egress {

// egress.v1.Egress over the shared transport, with the callback API: no gRPC thread
// waits on upstream I/O; each RPC finishes from the transport's completion.
class FetchService final : public egress::v1::Egress::CallbackService {
 public:
  // What every RPC's reactor works with (fetch_context.h).
  using Context = fetch::Context;

  FetchService(transport::Transport& transport, const ConfigStore& config,
               FetchObserver& observer, AccessLog* access_log)
      : body_budget_(observer),
        quotas_(observer),
        context_{transport, config, observer, fetches_in_flight_, stopped_, body_budget_,
                 caller_counts_, quotas_, quota_stores_, access_log} {
    SetMessageAllocatorFor_Fetch(&fetch_messages_);
    // Published whole: every call's first read of `stopped` (FetchCall::Begin) acquires
    // what is written here, also for ThreadSanitizer, which cannot see how gRPC's
    // uninstrumented threads hand a call over (a transport thread reading the service
    // then looked like a race with this constructor).
    stopped_.store(false, std::memory_order_release);
  }

  // From now on fetches are refused (UNAVAILABLE) before any work; those under way go on.
  void StopAccepting() { stopped_ = true; }
  uint32_t fetches_in_flight() const { return fetches_in_flight_; }
  // What every call works with, for a front end other than gRPC's (service/dataplane).
  const Context& context() const { return context_; }

  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* context,
                                  const egress::v1::FetchRequest* request,
                                  egress::v1::FetchResponse* response) override;

  grpc::ServerWriteReactor<egress::v1::FetchChunk>* FetchStream(
      grpc::CallbackServerContext* context, const egress::v1::FetchRequest* request) override;

 private:
  std::atomic<uint32_t> fetches_in_flight_{0};
  std::atomic<bool> stopped_{false};
  BodyBudget body_budget_;
  CallerCounts caller_counts_;
  QuotaTable quotas_;
  const Context context_;
  // Each Fetch's request and response, on an arena of their own; lives as long as the
  // service, which outlives the server.
  ArenaMessageAllocator<egress::v1::FetchRequest, egress::v1::FetchResponse> fetch_messages_;
  // After context_, so destroyed first (its threads stopped) while the rest is whole.
  QuotaStores quota_stores_;
};

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_FETCH_SERVICE_H_

#ifndef EGRESS_SERVICE_FETCH_BUDGETED_BODY_MEMORY_H_
#define EGRESS_SERVICE_FETCH_BUDGETED_BODY_MEMORY_H_

// The body bytes a fetch holds, charged to limits.buffered_body_budget_bytes: the refusal
// when the budget is spent, and the transport's face of the budget.

#include <cstdint>

#include "absl/status/status.h"
#include "service/limits/body_budget.h"
#include "service/transport/http/body_memory.h"

namespace egress::fetch {

// What a fetch that cannot reserve body bytes under limits.buffered_body_budget_bytes
// finishes with, whichever protocol it holds them for.
absl::Status BodyBudgetExhausted(uint64_t limit);

// The transport's charge for a fetch's body bytes (its HTTP/2 stream's window), from the
// same budget and with the same refusal as the bytes the reactor holds itself, so that
// egress_buffered_body_bytes counts both. It may outlive the reactor (a stream ends on
// its loop after the RPC): it holds the service's budget, which outlives the transport.
class BudgetedBodyMemory final : public transport::BodyMemory {
 public:
  BudgetedBodyMemory(BodyBudget& budget, uint64_t limit) : budget_(budget), limit_(limit) {}

  absl::Status TryReserve(uint64_t bytes) override {
    return budget_.TryReserve(bytes, limit_) ? absl::OkStatus() : BodyBudgetExhausted(limit_);
  }
  void Release(uint64_t bytes) override { budget_.Release(bytes); }

 private:
  BodyBudget& budget_;
  const uint64_t limit_;  // of the config the fetch started under
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_BUDGETED_BODY_MEMORY_H_

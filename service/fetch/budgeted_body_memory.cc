#include "service/fetch/budgeted_body_memory.h"

#include "absl/strings/str_cat.h"
#include "service/base/error_reason.h"

namespace egress::fetch {

absl::Status BodyBudgetExhausted(uint64_t limit) {
  return transport::WithReason(
      absl::ResourceExhaustedError(absl::StrCat(
          "egress is holding its limit of ", limit,
          " response body bytes for all fetches together "
          "(limits.buffered_body_budget_bytes); retry with backoff, or ask for fewer bytes")),
      "BODY_BUDGET_EXHAUSTED", {{"limit", "limits.buffered_body_budget_bytes"}},
      transport::kRetryAfterLoad);
}

}  // namespace egress::fetch

// Metrics as a FetchObserver and an AccessLogObserver: the front end's and the access
// log's events.
#include "service/metrics/metrics.h"

#include <string>

namespace egress {

void Metrics::OnAccessLogWritten(uint64_t lines) {
  std::lock_guard<std::mutex> lock(mu_);
  access_log_written_ += lines;
}

void Metrics::OnAccessLogDropped(AccessLogDrop reason, uint64_t lines) {
  std::lock_guard<std::mutex> lock(mu_);
  access_log_dropped_[static_cast<size_t>(reason)] += lines;
}

void Metrics::OnFetchDone(grpc::StatusCode code, absl::Duration duration) {
  fetch_duration_.Observe(absl::ToDoubleSeconds(duration));
  const auto index = static_cast<size_t>(code);
  std::lock_guard<std::mutex> lock(mu_);
  if (index < fetches_by_code_.size()) ++fetches_by_code_[index];
}

void Metrics::OnBufferedBodyBytes(uint64_t in_use) {
  std::lock_guard<std::mutex> lock(mu_);
  buffered_body_bytes_ = in_use;
}

absl::string_view Metrics::CallerLabel(absl::string_view caller) {
  // Looked up without a copy: every fetch comes here, under the lock.
  if (auto it = caller_labels_.find(caller); it != caller_labels_.end()) return *it;
  if (caller_labels_.size() >= kMaxCallerLabels) return "other";
  return *caller_labels_.emplace(caller).first;
}

void Metrics::OnQuotaRejected(absl::string_view rule, absl::string_view caller,
                              QuotaLimit limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++quota_rejected_[{std::string(rule), std::string(CallerLabel(caller))}]
                   [static_cast<size_t>(limit)];
}

void Metrics::OnCallerCost(absl::string_view caller, const CallerCost& cost) {
  std::lock_guard<std::mutex> lock(mu_);
  caller_costs_[CallerLabel(caller)] += cost;
}

void Metrics::OnQuotaStoreError(bool failed_closed) {
  std::lock_guard<std::mutex> lock(mu_);
  ++quota_store_errors_[failed_closed ? 1 : 0];
}

void Metrics::OnCallRefused(CallRefusal reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_refused_[static_cast<size_t>(reason)];
}

}  // namespace egress

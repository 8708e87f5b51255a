#include "service/transport/http1/body_drainer.h"

#include <utility>

namespace egress::transport {

namespace beast = boost::beast;

void BodyDrainer::Announce(absl::Time start, std::optional<uint64_t> bytes_left) {
  start_ns_ = absl::ToUnixNanos(start);
  remaining_ = bytes_left ? *bytes_left : kLengthUnknown;
}

void BodyDrainer::Start(const Drain& caps, DrainBudget* budget, uint64_t reserved,
                        absl::Time start, size_t buffer_bytes, DoneCallback done) {
  caps_ = caps;
  budget_ = budget;
  reserved_ = reserved;
  done_ = std::move(done);
  outcome_ = DrainOutcome{};
  start_ = start;
  deadline_ = start + caps.max_duration;
  scratch_.resize(buffer_bytes);
  Step();
}

DrainProgress BodyDrainer::progress() const {
  DrainProgress progress;
  progress.elapsed = now_() - absl::FromUnixNanos(start_ns_.load());
  if (const uint64_t rest = remaining_.load(); rest != kLengthUnknown) {
    progress.remaining_length = rest;
  }
  return progress;
}

void BodyDrainer::Step() {
  const auto rest = source_.KnownBytesLeft();
  remaining_ = rest ? *rest : kLengthUnknown;
  const bool over_cap = outcome_.bytes > caps_.max_bytes;
  if (over_cap || source_.BodyEnded()) {
    if (over_cap) outcome_.abandoned = DrainAbandonReason::kByteCap;
    return Finish();
  }
  // Read at most cap + 1 bytes in all: one byte past the cap proves the body is larger.
  // (Written so that a cap of 2^64 - 1 cannot wrap it to a read of nothing, forever.)
  const uint64_t left_to_cap = caps_.max_bytes - outcome_.bytes;  // !over_cap
  const size_t want = left_to_cap < scratch_.size() ? static_cast<size_t>(left_to_cap + 1)
                                                    : scratch_.size();
  const uint64_t needed = outcome_.bytes + want;
  if (budget_ && needed > reserved_) {
    if (!budget_->TryReserve(needed - reserved_)) {
      outcome_.abandoned = DrainAbandonReason::kBudget;
      return Finish();
    }
    reserved_ = needed;
  }
  // Each read may wait for the pause limit, never past the time cap.
  source_.ReadSome(scratch_.data(), want, caps_.max_pause, deadline_,
                   [this](beast::error_code ec, size_t bytes) { OnRead(ec, bytes); });
}

void BodyDrainer::OnRead(beast::error_code ec, size_t bytes) {
  if (!done_) return;  // aborted or dropped while the read was on its way
  outcome_.bytes += bytes;
  if (ec) {
    const bool time_cap = now_() + absl::Milliseconds(1) >= deadline_;
    outcome_.abandoned = ec != beast::error::timeout ? DrainAbandonReason::kError
                         : time_cap                  ? DrainAbandonReason::kTimeCap
                                                     : DrainAbandonReason::kSlowerThanDial;
    return Finish();
  }
  Step();
}

void BodyDrainer::Abort(DrainAbandonReason reason) {
  if (!done_) return;
  outcome_.abandoned = reason;
  Finish();
}

void BodyDrainer::Finish() {
  outcome_.duration = now_() - start_;
  // Freed, not cleared (`= {}` keeps a vector's capacity): an idle connection held 64 KiB.
  scratch_ = std::vector<char>();
  if (budget_) budget_->Release(std::exchange(reserved_, 0));
  budget_ = nullptr;
  std::exchange(done_, nullptr)(outcome_);
}

}  // namespace egress::transport

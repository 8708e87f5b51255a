#include "service/fetch/stalled_write_watch.h"

namespace egress::fetch {

StalledWriteWatch::StalledWriteWatch(grpc::CallbackServerContext* context)
    : state_(std::make_shared<State>()) {
  state_->context = context;
}

void StalledWriteWatch::Arm(absl::Time deadline) {
  alarm_.emplace();
  alarm_->Set(absl::ToChronoTime(deadline + kStalledWriteGrace), [state = state_](bool fired) {
    if (!fired) return;  // the reactor is gone
    std::lock_guard<std::mutex> lock(state->mu);
    state->expired = true;
    if (!state->writing || !state->context) return;
    state->cancelled = true;
    // gRPC runs a write's completion and OnDone on its own threads, never inside
    // TryCancel: holding mu here cannot deadlock with WriteDone or Detach.
    state->context->TryCancel();
  });
}

bool StalledWriteWatch::WriteStarting() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->expired) return false;
  state_->writing = true;
  return true;
}

bool StalledWriteWatch::WriteDone() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->writing = false;
  return state_->cancelled;
}

void StalledWriteWatch::Detach() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->context = nullptr;
}

}  // namespace egress::fetch

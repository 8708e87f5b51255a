#include "service/base/poller.h"

#include <utility>

namespace egress {

Poller::Poller(absl::Duration period, std::function<void()> poll)
    : period_(period), poll_(std::move(poll)), thread_([this] { Run(); }) {}

Poller::~Poller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Poller::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  wake_.notify_all();
}

void Poller::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(lock, absl::ToChronoNanoseconds(period_),
                   [this] { return stopping_ || woken_; });
    if (stopping_) return;
    woken_ = false;
    lock.unlock();
    poll_();
    lock.lock();
  }
}

}  // namespace egress

#include "service/transport/io/event_loops.h"

#include <algorithm>
#include <exception>

#include "boost/asio/steady_timer.hpp"

namespace egress::transport {

EventLoops::EventLoops(unsigned threads, std::function<void(const char*)> on_exception)
    : on_exception_(std::move(on_exception)) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i) loops_.push_back(std::make_unique<Loop>());
  for (auto& loop : loops_) {
    // A timer brings up the loop's reactor (its epoll, event and timer descriptors) now
    // rather than with the loop's first connection: the descriptors egressd holds for
    // itself are fixed from the start.
    boost::asio::steady_timer(loop->context);
    loop->thread = std::thread([this, context = &loop->context] { Run(*context); });
  }
}

boost::asio::io_context& EventLoops::Next() {
  return loops_[next_.fetch_add(1, std::memory_order_relaxed) % loops_.size()]->context;
}

boost::asio::io_context& EventLoops::ForNewConnection() {
  for (auto& loop : loops_) {
    if (loop->context.get_executor().running_in_this_thread()) return loop->context;
  }
  return Next();
}

void EventLoops::Run(boost::asio::io_context& context) {
  // Connections catch what their handlers throw (and close); this catches the rest, so
  // that no exception ends egressd.
  for (;;) {
    try {
      context.run();
      return;
    } catch (const std::exception& e) {
      on_exception_(e.what());
    } catch (...) {
      on_exception_(nullptr);
    }
  }
}

EventLoops::~EventLoops() {
  Stop();
  for (auto& loop : loops_) loop->context.shutdown();
}

void EventLoops::Stop() {
  for (auto& loop : loops_) {
    loop->work.reset();
    loop->context.stop();
  }
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
  }
}

}  // namespace egress::transport

#include "service/dataplane/connection_registry.h"

#include <utility>
#include <vector>

#include "boost/asio/post.hpp"

namespace egress::dataplane {
namespace {

// The final GOAWAY's debug data at shutdown.
constexpr char kShutdown[] = "shutdown";

}  // namespace

void ConnectionRegistry::Add(const std::shared_ptr<ServerSession>& session) {
  uint64_t id;
  bool going_away;
  bool closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    going_away = going_away_;
    closing = closing_;
    sessions_.emplace(id, session);
  }
  session->OnEnd([this, id] { Remove(id); });
  if (closing) return session->Close();
  // Until CloseAll: the shutdown closes it with the others.
  if (going_away) session->GoAway(absl::InfiniteDuration(), kShutdown);
}

void ConnectionRegistry::Remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(id);
  ended_.notify_all();
}

void ConnectionRegistry::GoAwayAll() {
  std::vector<std::weak_ptr<ServerSession>> sessions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    going_away_ = true;
    for (const auto& [id, session] : sessions_) sessions.push_back(session);
  }
  for (auto& weak : sessions) {
    auto session = weak.lock();
    if (!session) continue;  // ended meanwhile
    const auto loop = session->executor();
    boost::asio::post(loop, [session = std::move(session)] {
      session->GoAway(absl::InfiniteDuration(), kShutdown);
    });
  }
}

void ConnectionRegistry::CloseAll(absl::Duration wait) {
  std::vector<std::weak_ptr<ServerSession>> sessions;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (const auto& [id, session] : sessions_) sessions.push_back(session);
  }
  for (auto& weak : sessions) {
    auto session = weak.lock();
    if (!session) continue;
    const auto loop = session->executor();
    boost::asio::post(loop, [session = std::move(session)] { session->Close(); });
  }
  std::unique_lock<std::mutex> lock(mu_);
  ended_.wait_for(lock, absl::ToChronoNanoseconds(wait), [this] { return sessions_.empty(); });
}

size_t ConnectionRegistry::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace egress::dataplane

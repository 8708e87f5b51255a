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
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    going_away = going_away_;
    sessions_.emplace(id, session);
  }
  session->OnEnd([this, id] { Remove(id); });
  // Until CloseAll: the shutdown closes it with the others.
  if (going_away) session->GoAway(absl::InfiniteDuration(), kShutdown);
}

void ConnectionRegistry::Remove(uint64_t id) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(id);
}

void ConnectionRegistry::GoAwayAll() {
  std::vector<std::weak_ptr<ServerSession>> sessions;
  {
    absl::MutexLock lock(&mu_);
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
    absl::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) sessions.push_back(session);
  }
  for (auto& weak : sessions) {
    auto session = weak.lock();
    if (!session) continue;
    const auto loop = session->executor();
    boost::asio::post(loop, [session = std::move(session)] { session->Close(); });
  }
  absl::MutexLock lock(&mu_);
  const auto none_open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return sessions_.empty();
  };
  mu_.AwaitWithTimeout(absl::Condition(&none_open), wait);
}

size_t ConnectionRegistry::open() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace egress::dataplane

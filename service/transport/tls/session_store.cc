#include "service/transport/tls/session_store.h"

#include <ctime>
#include <utility>

namespace egress::transport {

TlsSessionStore::SessionPtr TlsSessionStore::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  SSL_SESSION* session = it->second.session.get();
  // Offering an expired session costs the server a failed lookup and us a full
  // handshake anyway; drop it instead.
  const long expires = SSL_SESSION_get_time(session) + SSL_SESSION_get_timeout(session);
  if (!SSL_SESSION_is_resumable(session) || std::time(nullptr) >= expires) {
    EraseLocked(it);
    return nullptr;
  }
  return it->second.session;
}

void TlsSessionStore::Save(const std::string& key, SessionPtr session) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const auto it = entries_.find(key); it != entries_.end()) {
    saved_.splice(saved_.begin(), saved_, it->second.position);
    it->second.session = std::move(session);
    return;
  }
  while (!saved_.empty() && entries_.size() >= max_origins_) {
    EraseLocked(entries_.find(saved_.back()));
  }
  saved_.push_front(key);
  entries_.emplace(key, Entry{std::move(session), saved_.begin()});
}

void TlsSessionStore::Forget(const std::string& key, const SSL_SESSION* session) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(key);
  if (it != entries_.end() && it->second.session.get() == session) EraseLocked(it);
}

size_t TlsSessionStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void TlsSessionStore::EraseLocked(absl::flat_hash_map<std::string, Entry>::iterator it) {
  saved_.erase(it->second.position);
  entries_.erase(it);
}

}  // namespace egress::transport

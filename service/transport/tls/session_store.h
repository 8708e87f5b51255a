#ifndef EGRESS_SERVICE_TRANSPORT_TLS_SESSION_STORE_H_
#define EGRESS_SERVICE_TRANSPORT_TLS_SESSION_STORE_H_

#include <openssl/ssl.h>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

namespace egress::transport {

// The latest TLS session each origin's server gave, so that the next connection to it
// resumes (one round trip and no certificate chain to verify). One store per client TLS
// context: a context stands for one set of TLS settings (CA file, client certificate),
// and the key is the origin, whose host is the SNI name and the name the session's
// certificate was verified for. A session is thus never offered to another host, nor
// under other TLS settings; a config change (new contexts) starts with an empty store.
class TlsSessionStore {
 public:
  using SessionPtr = std::shared_ptr<SSL_SESSION>;

  explicit TlsSessionStore(size_t max_origins) : max_origins_(max_origins) {}

  // The session saved under `key`, if it is still resumable and within its lifetime.
  SessionPtr Find(const std::string& key);
  // Keeps `session` as the one for `key`; past max_origins keys, the least recently
  // saved key is dropped.
  void Save(const std::string& key, SessionPtr session);
  // Drops `session` if it is still the one for `key` (a handshake offering it failed).
  void Forget(const std::string& key, const SSL_SESSION* session);
  size_t size() const;

 private:
  struct Entry {
    SessionPtr session;
    std::list<std::string>::iterator position;  // in saved_
  };
  void EraseLocked(absl::flat_hash_map<std::string, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_origins_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> saved_ ABSL_GUARDED_BY(mu_);  // keys, most recently saved first
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_TLS_SESSION_STORE_H_

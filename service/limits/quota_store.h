#ifndef EGRESS_SERVICE_LIMITS_QUOTA_STORE_H_
#define EGRESS_SERVICE_LIMITS_QUOTA_STORE_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct redisContext;

namespace egress {

// Where a global quota's token buckets live (Config.quota_store).
struct QuotaStoreSettings {
  std::string host;  // empty: no store
  int port = 0;
  absl::Duration timeout = absl::Milliseconds(50);  // per connect and per answer
  bool fail_closed = false;                         // when the store cannot answer

  std::string Address() const;
  friend bool operator==(const QuotaStoreSettings& a, const QuotaStoreSettings& b) {
    return a.host == b.host && a.port == b.port && a.timeout == b.timeout;
  }
};

// What the store answered for one token.
struct QuotaTake {
  bool admitted = false;
  absl::Duration retry_after;  // when refused: until the bucket has a token again
};

// Token buckets in Redis, shared by every replica that uses the same Redis: one Lua
// script refills and takes a token atomically, on Redis's own clock (replicas' clocks
// do not matter). A thread of its own sends what is waiting, pipelined, and answers each
// request on that thread. A Redis that cannot be reached, or does not answer a batch
// within the timeout, answers UNAVAILABLE (the caller fails open or closed): a request
// waits for the batches before it (at most 256 requests each) and its own, each at most
// a connect and a timeout; at most about two timeouts unless more than 256 queue up.
// A connection that timed out is made again for the next batch; one that cannot be made
// is tried again at most once a second, requests meanwhile answered at once.
// Thread-safe.
class RedisQuotaStore {
 public:
  using Done = std::function<void(absl::StatusOr<QuotaTake>)>;

  explicit RedisQuotaStore(QuotaStoreSettings settings);
  // Answers what is still waiting (UNAVAILABLE) and stops the thread.
  ~RedisQuotaStore();
  RedisQuotaStore(const RedisQuotaStore&) = delete;
  RedisQuotaStore& operator=(const RedisQuotaStore&) = delete;

  const QuotaStoreSettings& settings() const { return settings_; }

  // Takes a token from the bucket `key` (rate per second, size burst); `done` runs on
  // the store's thread, or at once when the store is stopping or retired.
  void Take(std::string key, double rate, double burst, Done done);
  // No longer the store in force: it answers what is waiting, refuses what comes after
  // (UNAVAILABLE), and its thread ends. Does not wait for it.
  void Retire();
  // Whether it still has requests to answer (a retired store that has none is joined at
  // once: its thread is ending without I/O).
  bool Busy();

 private:
  struct Request {
    std::string key;
    double rate = 0;
    double burst = 0;
    Done done;
  };

  void Run();
  // Sends a batch, pipelined, and answers each request; on an I/O error the rest are
  // answered UNAVAILABLE and the connection is dropped.
  void Serve(std::vector<Request>& batch);
  // A connection, or the reason there is none (not tried again within a second).
  absl::Status Connect();
  void Disconnect();

  const QuotaStoreSettings settings_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool retired_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;  // a batch taken from queue_ is unanswered
  // Only the thread touches these.
  redisContext* redis_ = nullptr;
  absl::Time next_connect_ = absl::InfinitePast();
  absl::Status last_error_;
  std::thread thread_;
};

// The store for the config in force: one RedisQuotaStore, for the Redis address and
// timeout asked for last. A config that changes them gets a new store; the old one is
// retired (what waits on it is answered) and joined once it has nothing left to answer,
// at that change or the next call, so a thread is kept only for the address in force
// and a store still answering. Callers ask with the settings in force (not those an
// older RPC started under), or each would swap the store back. Thread-safe.
class QuotaStores {
 public:
  std::shared_ptr<RedisQuotaStore> For(const QuotaStoreSettings& settings);

 private:
  std::mutex mu_;
  std::shared_ptr<RedisQuotaStore> current_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<RedisQuotaStore>> retired_ ABSL_GUARDED_BY(mu_);  // answering
};

}  // namespace egress

#endif  // EGRESS_SERVICE_LIMITS_QUOTA_STORE_H_

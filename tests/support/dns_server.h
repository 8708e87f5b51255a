#ifndef EGRESS_TESTS_SUPPORT_DNS_SERVER_H_
#define EGRESS_TESTS_SUPPORT_DNS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace egress::testing {

// A DNS server over UDP on a loopback address, for tests in their own network namespace.
// It answers the names it is told to with their A records (and their AAAA queries with
// no record), never answers the names it is told to ignore, answers SERVFAIL for the
// names it is told to fail, and NXDOMAIN for the rest. Names are matched without regard
// to case. A later instruction for a name replaces the earlier ones.
class DnsServer {
 public:
  // Serves on ip:port (port 0: a free one); null if the address cannot be bound.
  static std::unique_ptr<DnsServer> Start(const std::string& ip, uint16_t port = 53);
  ~DnsServer();

  // One A record with a TTL of 60 s.
  void Answer(const std::string& name, const std::string& ipv4);
  // A records in this order, each with this TTL (seconds).
  void AnswerAll(const std::string& name, const std::vector<std::string>& ipv4s,
                 uint32_t ttl);
  void Ignore(const std::string& name);
  void Fail(const std::string& name);

  uint16_t port() const { return port_; }
  // Queries received for `name`, of any type, answered or not.
  int Queries(const std::string& name) const;
  // Queries for `name` it stayed silent to (the lookups left hanging).
  int Unanswered(const std::string& name) const;

 private:
  DnsServer(int fd, uint16_t port);
  void Serve();
  // The reply to one query, or empty to stay silent.
  std::string Reply(const std::string& query);

  const int fd_;
  const uint16_t port_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  struct Records {
    std::vector<uint32_t> ipv4s;  // host order
    uint32_t ttl = 60;
  };
  // Forgets what it was told about `name`.
  void Forget(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<std::string, Records> answers_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> ignored_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> failing_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> queries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> unanswered_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_DNS_SERVER_H_

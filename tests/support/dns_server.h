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

#include "absl/base/thread_annotations.h"

namespace egress::testing {

// A DNS server over UDP on a loopback address, for tests in their own network namespace.
// It answers the names it is told to with one A record (and their AAAA queries with no
// record), never answers the names it is told to ignore, and answers NXDOMAIN for the
// rest. Names are matched without regard to case.
class DnsServer {
 public:
  // Serves on ip:port (port 0: a free one); null if the address cannot be bound.
  static std::unique_ptr<DnsServer> Start(const std::string& ip, uint16_t port = 53);
  ~DnsServer();

  void Answer(const std::string& name, const std::string& ipv4);
  void Ignore(const std::string& name);

  uint16_t port() const { return port_; }
  // Queries received for `name`, of any type, answered or not.
  int Queries(const std::string& name) const;

 private:
  DnsServer(int fd, uint16_t port);
  void Serve();
  // The reply to one query, or empty to stay silent.
  std::string Reply(const std::string& query);

  const int fd_;
  const uint16_t port_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<std::string, uint32_t> answers_ ABSL_GUARDED_BY(mu_);  // name -> IPv4, host order
  std::set<std::string> ignored_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> queries_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_DNS_SERVER_H_

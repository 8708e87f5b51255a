#ifndef EGRESS_SERVICE_TRANSPORT_DNS_ARES_RESOLVER_H_
#define EGRESS_SERVICE_TRANSPORT_DNS_ARES_RESOLVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "service/transport/dns/resolver.h"
#include "service/transport/observer.h"

namespace egress::transport {

// What a lookup found: the endpoints or why there are none, and how long they may be
// kept.
struct DnsAnswer {
  absl::StatusOr<Resolver::Endpoints> endpoints;
  DnsResult result = DnsResult::kOk;
  absl::Duration ttl = absl::ZeroDuration();  // kOk: the smallest TTL of the records
};

// Lookups with c-ares, on the caller's executor. Each lookup has a c-ares channel of its
// own, its sockets watched by asio: it can be cancelled alone (c-ares 1.18 cancels only
// whole channels) and it reads /etc/resolv.conf and /etc/hosts as they are now. Must
// outlive its lookups (the transport declares it before its io_context).
// It asks every time; CachingResolver keeps the answers, so that few lookups pay for a
// channel (one shared channel could not end a lookup at its own deadline or cancel).
class AresResolver final {
 public:
  using Query = Resolver::Query;
  using Endpoints = Resolver::Endpoints;
  using Callback = std::function<void(DnsAnswer)>;

  explicit AresResolver(TransportObserver& observer);

  // As Resolver::Resolve, with the answer's TTL and result.
  std::shared_ptr<DnsLookup> Resolve(Query query, const DnsSettings& settings,
                                     boost::asio::any_io_executor executor, Callback done);

 private:
  class Lookup;

  // A refusal when the caller or everyone has as many lookups in flight as allowed;
  // otherwise counts one more for the caller.
  absl::Status Admit(const std::optional<std::string>& caller, const DnsSettings& settings);
  // A lookup ended: its place is free again.
  void Release(const std::optional<std::string>& caller, DnsResult result);

  TransportObserver& observer_;
  std::mutex mu_;
  absl::flat_hash_map<std::optional<std::string>, uint32_t> in_flight_by_caller_ ABSL_GUARDED_BY(mu_);
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DNS_ARES_RESOLVER_H_

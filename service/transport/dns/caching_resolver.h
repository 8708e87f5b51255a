#ifndef EGRESS_SERVICE_TRANSPORT_DNS_CACHING_RESOLVER_H_
#define EGRESS_SERVICE_TRANSPORT_DNS_CACHING_RESOLVER_H_

#include <memory>

#include "service/transport/dns/ares_resolver.h"
#include "service/transport/dns/cache.h"
#include "service/transport/dns/resolver.h"
#include "service/transport/observer.h"

namespace egress::transport {

// The transport's resolver: answers from the DnsCache while they are fresh, asks c-ares
// otherwise and keeps what it says (addresses for their TTL, a missing name for
// negative_ttl), and falls back on addresses whose TTL ran out (within stale_for) when
// the servers fail or do not answer within 1.8 s. With transport.dns.disable_cache it
// only asks.
// Cache hits count as no lookup (and against no caller's lookup limit).
class CachingResolver final : public Resolver {
 public:
  explicit CachingResolver(TransportObserver& observer);

  std::shared_ptr<DnsLookup> Resolve(Query query, const DnsSettings& settings,
                                     boost::asio::any_io_executor executor,
                                     Callback done) override;

 private:
  // What the caller gets for a lookup's answer, which is kept for the next.
  absl::StatusOr<Endpoints> Keep(const Query& query, const DnsSettings& settings,
                                 DnsAnswer answer);

  TransportObserver& observer_;
  AresResolver resolver_;
  DnsCache cache_;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DNS_CACHING_RESOLVER_H_

#include "service/transport/dns/caching_resolver.h"

#include <algorithm>
#include <utility>

#include "boost/asio/post.hpp"

namespace egress::transport {

namespace net = boost::asio;

namespace {

constexpr absl::Duration kStaleAnswerAfter = absl::Milliseconds(1800);  // RFC 8767 section 5

Resolver::Endpoints WithPort(const DnsCache::Addresses& addresses, uint16_t port) {
  Resolver::Endpoints endpoints;
  endpoints.reserve(addresses.size());
  for (const auto& address : addresses) endpoints.emplace_back(address, port);
  return endpoints;
}

}  // namespace

CachingResolver::CachingResolver(TransportObserver& observer)
    : observer_(observer), resolver_(observer) {}

std::shared_ptr<DnsLookup> CachingResolver::Resolve(Query query, const DnsSettings& settings,
                                                    net::any_io_executor executor,
                                                    Callback done) {
  // The cache's entries hold what an origin's lookup keeps: one that keeps more asks.
  if (!settings.cache || query.max_addresses_per_family > kDefaultMaxAddressesPerFamily) {
    return resolver_.Resolve(std::move(query), settings, executor,
                             [done = std::move(done)](DnsAnswer answer) {
                               done(std::move(answer.endpoints));
                             });
  }
  if (auto cached = cache_.Fresh(query.host, absl::Now())) {
    observer_.OnDnsCacheHit();
    absl::StatusOr<Endpoints> result =
        cached->ok() ? absl::StatusOr<Endpoints>(WithPort(**cached, query.port))
                     : absl::StatusOr<Endpoints>(cached->status());
    // As a lookup's would: never before Resolve returns.
    net::post(executor, [done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
    return nullptr;
  }
  Query asked = query;
  // RFC 8767's client response timer: with an expired answer to fall back on, the
  // servers get this long (c-ares 1.18 takes 5 s a try, 4 tries, whatever resolv.conf
  // says), and the fetch goes on with the stale answer.
  if (cache_.Stale(query.host, absl::Now(), settings)) {
    asked.deadline = std::min(asked.deadline, absl::Now() + kStaleAnswerAfter);
  }
  return resolver_.Resolve(
      std::move(asked), settings, executor,
      [this, query = std::move(query), settings, done = std::move(done)](DnsAnswer answer) {
        done(Keep(query, settings, std::move(answer)));
      });
}

absl::StatusOr<Resolver::Endpoints> CachingResolver::Keep(const Query& query,
                                                          const DnsSettings& settings,
                                                          DnsAnswer answer) {
  const absl::Time now = absl::Now();
  switch (answer.result) {
    case DnsResult::kOk: {
      DnsCache::Addresses addresses;
      for (const auto& endpoint : *answer.endpoints) addresses.push_back(endpoint.address());
      cache_.StoreAddresses(query.host, std::move(addresses), answer.ttl, now, settings);
      break;
    }
    case DnsResult::kNxdomain:
      cache_.StoreNegative(query.host, answer.endpoints.status(), now, settings);
      break;
    case DnsResult::kTimeout:
    case DnsResult::kError:
      // The servers failed us, not the name: what it last resolved to still serves.
      if (auto stale = cache_.Stale(query.host, now, settings)) {
        observer_.OnDnsStaleServed();
        return WithPort(*stale, query.port);
      }
      break;
    case DnsResult::kCancelled:
    case DnsResult::kOverLimit:
      break;
  }
  return std::move(answer.endpoints);
}

}  // namespace egress::transport

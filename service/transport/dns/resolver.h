#ifndef EGRESS_SERVICE_TRANSPORT_DNS_RESOLVER_H_
#define EGRESS_SERVICE_TRANSPORT_DNS_RESOLVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "service/transport/settings.h"

namespace egress::transport {

// A name lookup under way.
class DnsLookup {
 public:
  virtual ~DnsLookup() = default;
  // Ends the lookup; its callback gets CANCELLED unless it already has its answer.
  // Safe from any thread.
  virtual void Cancel() = 0;
};

// Looks up the addresses of host names, many at once: a name whose servers never answer
// delays no other lookup.
class Resolver {
 public:
  using Endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
  using Callback = std::function<void(absl::StatusOr<Endpoints>)>;

  struct Query {
    std::string host;
    uint16_t port = 0;   // given to every endpoint found
    // Whose allowance of settings.max_lookups_per_caller the lookup counts against;
    // nullopt for the pool's own dials (pre-warming), an allowance apart from every
    // caller's, so that a re-dial storm cannot starve callers without an identity.
    std::optional<std::string> caller;
    absl::Time deadline = absl::InfiniteFuture();
    // Addresses kept per family from the answer. An upstream's DNS server may answer
    // with thousands (over TCP), and each is cached and may cost a connect attempt: an
    // origin's lookups keep the default. One that asks for more (the fleet's members,
    // Transport::LookUp) is neither answered from the cache nor kept in it.
    size_t max_addresses_per_family = kDefaultMaxAddressesPerFamily;
  };
  static constexpr size_t kDefaultMaxAddressesPerFamily = 8;

  virtual ~Resolver() = default;

  // Starts a lookup. `done` runs once, on `executor`, never before Resolve returns, with
  // at least one endpoint or: DEADLINE_EXCEEDED (the query's deadline passed),
  // RESOURCE_EXHAUSTED (too many lookups in flight; the message names the limit),
  // UNAVAILABLE (no such name, no address, or the servers failed or never answered; the
  // message says which) or CANCELLED. The returned lookup may be null (a refused one, or
  // one answered from a cache).
  virtual std::shared_ptr<DnsLookup> Resolve(Query query, const DnsSettings& settings,
                                             boost::asio::any_io_executor executor,
                                             Callback done) = 0;
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_DNS_RESOLVER_H_

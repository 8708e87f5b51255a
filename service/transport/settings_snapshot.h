#ifndef EGRESS_SERVICE_TRANSPORT_SETTINGS_SNAPSHOT_H_
#define EGRESS_SERVICE_TRANSPORT_SETTINGS_SNAPSHOT_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "boost/asio/ssl/context.hpp"
#include "service/transport/pool/connection_pool.h"
#include "service/transport/settings.h"

namespace egress::transport {

// The settings new requests get, and the TLS contexts built from them: one immutable
// value per config, swapped whole (Transport::UpdateSettings).
struct Snapshot {
  TransportSettings settings;
  std::shared_ptr<boost::asio::ssl::context> tls_context;
  // One per settings.origin_overrides entry; null where the override sets no TLS.
  std::vector<std::shared_ptr<boost::asio::ssl::context>> override_tls;
  // The settings as they apply to a host no override matches, and to each override's
  // hosts (settings.With), made once per config rather than copied for every fetch.
  TransportSettings for_other_hosts;
  std::vector<TransportSettings> for_override;

  // The TLS context for connections to `host`.
  std::shared_ptr<boost::asio::ssl::context> TlsFor(absl::string_view host) const;
  // The settings for `host` (settings.ForHost), as long as this snapshot lives.
  const TransportSettings& SettingsFor(absl::string_view host) const;
  // The first of settings.origin_overrides matching `host`, if any.
  std::optional<size_t> OverrideIndex(absl::string_view host) const;
};

// Builds the TLS contexts the settings need; fails on unreadable certificate files.
absl::StatusOr<std::shared_ptr<const Snapshot>> MakeSnapshot(TransportSettings settings);

// The pool's limits the settings give, per host.
PoolLimitsByHost PoolLimitsOf(const TransportSettings& settings);

// The circuit breakers a snapshot configures: the defaults', then each override's hosts'.
std::vector<std::pair<std::string, CircuitBreakerSettings>> BreakerSettingsOf(
    const Snapshot& snapshot);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_SETTINGS_SNAPSHOT_H_

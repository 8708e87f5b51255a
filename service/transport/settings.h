#ifndef EGRESS_SERVICE_TRANSPORT_SETTINGS_H_
#define EGRESS_SERVICE_TRANSPORT_SETTINGS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "service/transport/address_policy.h"

namespace egress::transport {

enum class DrainMode {
  kOff,    // never drain: unread bytes mean the connection is closed (Go 1.26)
  kFixed,  // drain up to max_bytes or max_duration (Go 1.27)
};

// What happens to a response body the caller did not read to its end.
struct DrainSettings {
  DrainMode mode = DrainMode::kFixed;
  uint64_t max_bytes = 256 * 1024;
  absl::Duration max_duration = absl::Milliseconds(50);
};

// Everything the shared transport is configured with; built-in defaults serve.
struct TransportSettings {
  uint32_t max_idle_per_origin = 100;
  uint32_t max_conns_per_origin = 0;  // 0 = unlimited
  absl::Duration idle_timeout = absl::Seconds(90);
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration tls_handshake_timeout = absl::Seconds(10);
  absl::Duration response_header_timeout = absl::Seconds(30);
  std::string extra_ca_file;  // PEM, trusted in addition to the system store
  uint32_t max_response_header_bytes = 64 * 1024;
  uint32_t io_threads = 0;  // 0 = one per core
  DrainSettings drain;
  std::shared_ptr<const AddressPolicy> policy = std::make_shared<AddressPolicy>(PolicyRules{});
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_SETTINGS_H_

#ifndef EGRESS_SERVICE_TRANSPORT_HTTP1_KEEP_ALIVE_HINT_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP1_KEEP_ALIVE_HINT_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace egress::transport {

// What a server announced in a response's `Keep-Alive: timeout=N, max=M` header: it
// closes a connection idle for N seconds, and takes at most M requests on it. `max` is
// read as the connection's total; Apache's count of requests left is never larger, so
// honouring it as a total retires such connections early, never late.
struct KeepAliveHint {
  std::optional<absl::Duration> timeout;
  std::optional<uint32_t> max;

  friend bool operator==(const KeepAliveHint& a, const KeepAliveHint& b) {
    return a.timeout == b.timeout && a.max == b.max;
  }
};

// Parses a Keep-Alive header value. Tolerant: names in any case, spaces around `=` and
// `,`, quoted numbers, unknown parameters skipped; a parameter that is malformed or out of
// range is ignored, and a value longer than kMaxKeepAliveHeaderBytes is ignored whole.
// None when the value announces neither parameter.
std::optional<KeepAliveHint> ParseKeepAlive(absl::string_view value);

inline constexpr size_t kMaxKeepAliveHeaderBytes = 256;
// Larger numbers are taken as no announcement at all (a day of idling, ~4e9 requests).
inline constexpr int64_t kMaxKeepAliveTimeoutSeconds = 86400;

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP1_KEEP_ALIVE_HINT_H_

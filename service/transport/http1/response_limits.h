#ifndef EGRESS_SERVICE_TRANSPORT_HTTP1_RESPONSE_LIMITS_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP1_RESPONSE_LIMITS_H_

#include <cstdint>

namespace egress::transport {

// Bounds on what one response may make the connection buffer or loop on.
struct ResponseLimits {
  uint32_t max_header_bytes = 64 * 1024;  // the head, and a chunked body's trailers
  uint32_t max_chunk_line_bytes = 4096;   // a chunk-size line with its extensions
  uint32_t max_interim_responses = 5;     // 1xx responses before the final one
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP1_RESPONSE_LIMITS_H_

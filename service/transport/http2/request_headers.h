#ifndef EGRESS_SERVICE_TRANSPORT_HTTP2_REQUEST_HEADERS_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP2_REQUEST_HEADERS_H_

#include "absl/status/statusor.h"
#include "service/transport/http/request.h"

namespace egress::transport::http2 {

// The header block of `request` on HTTP/2 (RFC 9113 8.3.1): the pseudo-header fields
// first (:method, :scheme, :authority = the Host header's value, :path = the target),
// then the request's fields with lower-case names, without the connection-specific ones
// HTTP/2 forbids (Connection and the fields it names, Keep-Alive, Proxy-Connection,
// Transfer-Encoding, Upgrade, and TE unless it is "trailers"), values without the spaces
// and tabs around them; content-length as on HTTP/1.1 (HasContentLength). A request that
// ValidateForWire refuses is refused here too, with its INVALID_ARGUMENT.
absl::StatusOr<HeaderList> RequestHeaderBlock(const HttpRequest& request);

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP2_REQUEST_HEADERS_H_

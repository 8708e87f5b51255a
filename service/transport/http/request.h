#ifndef EGRESS_SERVICE_TRANSPORT_HTTP_REQUEST_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP_REQUEST_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "service/transport/http/body_memory.h"
#include "service/transport/http/header_list.h"
#include "service/transport/http/origin.h"
#include "service/transport/http/request_body.h"

namespace egress::transport {

// One validated outbound HTTP/1.1 request. Build it with MakeRequest.
struct HttpRequest {
  std::string method;  // upper-case token, e.g. "GET"
  Origin origin;
  std::string target;  // origin-form: path and query, e.g. "/a?b=c"
  HeaderList headers;  // never Host, Content-Length or Transfer-Encoding
  RequestBody body;  // shared by every copy of the request
  // The caller's identity, for the policy's caller rules and messages; empty: none.
  std::string caller;
  // Attempts this request may take (RetrySettings.max_attempts); unset: its origin's.
  std::optional<uint32_t> max_attempts;
  // What the response body bytes egress holds for this request are charged to (an
  // HTTP/2 stream's window); none: they are bounded by the transport's limits alone.
  std::shared_ptr<BodyMemory> body_memory;

  // GET, HEAD, OPTIONS, TRACE, PUT and DELETE may be sent again safely.
  bool IsIdempotent() const;
};

// Validates a caller's request and builds it. Errors are INVALID_ARGUMENT with a
// message that names the offending part: the URL (absolute http/https with a host),
// the method (an RFC 9110 token) or a header (token name; no CR, LF or NUL in values).
// An empty method means GET. What egress cannot send as asked is refused too: CONNECT,
// a protocol upgrade (an Upgrade header, Connection: upgrade), TRACE with a body, and
// header fields over 65533 bytes.
absl::StatusOr<HttpRequest> MakeRequest(absl::string_view method, absl::string_view url,
                                        HeaderList headers, RequestBody body);

// What SerializeRequestHead checks again of a request before anything of it is written: the
// method, the target and the headers as MakeRequest does, and that the host is printable
// without spaces. INVALID_ARGUMENT, as MakeRequest would say it. HTTP/2 checks the same.
absl::Status ValidateForWire(const HttpRequest& request);

// A header value as it goes on the wire: without the spaces and tabs around it (RFC 9110
// 5.5: they are not part of it), as Beast's fields stored values.
absl::string_view TrimSpacesAndTabs(absl::string_view value);

// The head of the request as it is written to an HTTP/1.1 connection: the request line,
// Host, the headers in order, Content-Length (see HasContentLength) and a blank line; the
// body follows it on the wire from its own bytes (not copied into the head).
// Checks it first (ValidateForWire), so that a request built some other way cannot
// smuggle a header or a second request.
absl::StatusOr<std::string> SerializeRequestHead(const HttpRequest& request);

// Whether the request is sent with a Content-Length: it has a body, or its method is
// POST, PUT or OPTIONS, which announce an empty one.
bool HasContentLength(const HttpRequest& request);

// Whether the request lets its connection be reused: no Connection header asks to
// close it (HTTP/1.1 keeps connections open otherwise).
bool KeepsAlive(const HttpRequest& request);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP_REQUEST_H_

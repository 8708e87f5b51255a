#ifndef EGRESS_SERVICE_TRANSPORT_HTTP1_WIRE_ERRORS_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP1_WIRE_ERRORS_H_

#include <openssl/ssl.h>

#include <optional>

#include "absl/status/status.h"
#include "boost/beast/core/error.hpp"
#include "service/transport/http1/response_limits.h"
#include "service/transport/io/socket_errors.h"
#include "service/transport/observer.h"

namespace egress::transport {

// Whether `ec` is Beast's HTTP parser refusing what the server sent.
bool IsHttpParseError(boost::beast::error_code ec);

// Maps an error of an HTTP/1.1 exchange's step to a status a caller can act on: a bound
// of `limits` the response went past (`limit_hit` says which for a chunked body's
// buffer_overflow), a close before or inside the response, an invalid response; else
// what SocketFailure says.
absl::Status WireFailure(const FailedStep& step, boost::beast::error_code ec,
                         const ResponseLimits& limits, std::optional<UpstreamLimit> limit_hit,
                         SSL* ssl);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP1_WIRE_ERRORS_H_

#include "service/transport/http1/wire_errors.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "boost/beast/http/error.hpp"

namespace egress::transport {

namespace beast = boost::beast;
namespace http = beast::http;

bool IsHttpParseError(beast::error_code ec) {
  return ec.category() == http::make_error_code(http::error::bad_version).category();
}

absl::Status WireFailure(const FailedStep& step, beast::error_code ec,
                         const ResponseLimits& limits, std::optional<UpstreamLimit> limit_hit,
                         SSL* ssl) {
  const std::string where = absl::StrCat(step.phase, " ", step.origin);
  if (ec == http::error::header_limit) {
    return TagFailure(absl::UnavailableError(absl::StrCat(
                          "response headers from ", step.origin, " exceed the limit of ",
                          limits.max_header_bytes,
                          " bytes (transport.max_response_header_bytes)")),
                      "UPSTREAM_LIMIT_EXCEEDED", step);
  }
  if (ec == http::error::buffer_overflow && limit_hit) {
    switch (*limit_hit) {
      case UpstreamLimit::kChunkLine:
        return TagFailure(absl::UnavailableError(absl::StrCat(
                              "response from ", step.origin, " has a chunk line over the limit of ",
                              limits.max_chunk_line_bytes,
                              " bytes (transport.max_chunk_line_bytes)")),
                          "UPSTREAM_LIMIT_EXCEEDED", step);
      case UpstreamLimit::kTrailers:
        return TagFailure(absl::UnavailableError(absl::StrCat(
                              "response from ", step.origin, " has trailers over the limit of ",
                              limits.max_header_bytes,
                              " bytes (transport.max_response_header_bytes)")),
                          "UPSTREAM_LIMIT_EXCEEDED", step);
      case UpstreamLimit::kResponseHead:
      case UpstreamLimit::kInterimResponses:
        break;  // reported where the head is read
    }
  }
  if (ec == http::error::end_of_stream) {
    return TagFailure(absl::UnavailableError(absl::StrCat(
                          where, " failed: the server closed the connection before responding")),
                      "UPSTREAM_CLOSED", step);
  }
  if (ec == http::error::partial_message) {
    return TagFailure(
        absl::UnavailableError(absl::StrCat(
            where, " failed: the server closed the connection before the message ended")),
        "UPSTREAM_CLOSED", step);
  }
  if (IsHttpParseError(ec)) {
    return TagFailure(absl::UnavailableError(absl::StrCat("invalid HTTP response from ",
                                                          step.origin, ": ", ec.message())),
                      "UPSTREAM_INVALID_RESPONSE", step);
  }
  return SocketFailure(step, ec, ssl);
}

}  // namespace egress::transport

#ifndef EGRESS_SERVICE_TRANSPORT_HTTP2_ERRORS_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP2_ERRORS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "boost/beast/core/error.hpp"

// How an HTTP/2 session's failures read: each one a status with a reason
// (error_reason.h), the origin in its metadata, and words a caller can act on.
namespace egress::transport::http2 {

// The reason of the UNAVAILABLE a stream fails with when its server did not process its
// request: refused (REFUSED_STREAM) or above a GOAWAY's last stream id before any
// response head (interim ones included) came, or never sent (the session ended or went
// away first). Such a request may be sent again on another connection whatever its
// method (RFC 9113 8.7). Once a head has come, either is a reset (UPSTREAM_STREAM_RESET).
inline constexpr absl::string_view kNotProcessedReason = "UPSTREAM_REFUSED_STREAM";
// Whether `status` says the server did not process the request (kNotProcessedReason).
bool WasNotProcessed(const absl::Status& status);

// The bytes of a server's GOAWAY debug data or nghttp2's message quoted in an error.
inline constexpr size_t kMaxQuotedBytes = 200;
// `text` in quotes, escaped, cut at kMaxQuotedBytes.
std::string Quote(absl::string_view text);
// An HTTP/2 error code's name (NO_ERROR, PROTOCOL_ERROR, ...).
std::string ErrorCodeName(uint32_t error_code);

// `status` for a callback, sharing nothing with the session's own copy: copies of an
// absl::Status share a reference-counted representation, which the loop may let go of
// while the caller still reads its copy; ThreadSanitizer cannot see that count
// (Debian's Abseil is not instrumented) and would report a race.
absl::Status ForCaller(const absl::Status& status);

// The request was not processed, because `why`: it may be sent again (kNotProcessedReason).
absl::Status NotProcessed(absl::string_view origin_key, absl::string_view why);
// The response went past one of SessionLimits (UPSTREAM_LIMIT_EXCEEDED).
absl::Status LimitExceeded(absl::string_view origin_key, absl::string_view what);
// A response that broke HTTP/2's rules for its stream (UPSTREAM_INVALID_RESPONSE).
absl::Status InvalidResponse(absl::string_view origin_key, absl::string_view what);
// The connection broke HTTP/2 and was closed (UPSTREAM_PROTOCOL_ERROR).
absl::Status ProtocolError(absl::string_view origin_key, absl::string_view what);
// nghttp2 failed with `library_code`; `library_message` is its latest message, if any.
absl::Status LibraryError(absl::string_view origin_key, int library_code,
                          uint32_t max_queued_acks, absl::string_view library_message);
// Reading or writing the socket failed (`phase`: "reading from", "writing to").
absl::Status IoFailure(absl::string_view origin_key, absl::string_view phase,
                       boost::beast::error_code ec, bool after_goaway);

// A stream's deadline passed. What it was doing: awaiting its head with `body_sent` of
// `body_size` request body bytes sent (the server's window closed, or not), or reading
// the body once `head_received`.
absl::Status DeadlineFailure(absl::string_view origin_key, bool head_received,
                             size_t body_sent, size_t body_size, bool window_closed);

// A GOAWAY received: its last stream id and error code.
struct Goaway {
  int32_t last_stream_id = 0;
  uint32_t error_code = 0;
};

// The server ended stream `stream_id` with `error_code` before its response ended:
// `awaiting_head` if no final head had come, `answered` if any head (an interim one
// included) had; `goaway` when the stream was above the last stream id of a GOAWAY.
absl::Status StreamResetFailure(absl::string_view origin_key, int32_t stream_id,
                                uint32_t error_code, bool awaiting_head, bool answered,
                                std::optional<Goaway> goaway);

// What a stream open when the session ended with `ended` fails with: not processed when
// its request had not been sent.
absl::Status FailureAtEnd(absl::string_view origin_key, bool request_sent,
                          const absl::Status& ended);

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP2_ERRORS_H_

#include "service/transport/http2/errors.h"

#include <nghttp2/nghttp2.h>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/error.hpp"
#include "boost/asio/ssl/error.hpp"
#include "service/base/error_reason.h"

namespace egress::transport::http2 {

namespace net = boost::asio;

bool WasNotProcessed(const absl::Status& status) {
  const std::optional<ErrorReason> reason = ReasonOf(status);
  return reason && reason->reason == kNotProcessedReason;
}

std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::CEscape(text.substr(0, kMaxQuotedBytes)),
                      text.size() > kMaxQuotedBytes ? "...\"" : "\"");
}

std::string ErrorCodeName(uint32_t error_code) {
  return nghttp2_http2_strerror(error_code);
}

absl::Status ForCaller(const absl::Status& status) {
  absl::Status copy(status.code(), status.message());
  status.ForEachPayload([&](absl::string_view type_url, const absl::Cord& payload) {
    copy.SetPayload(type_url, absl::Cord(std::string(payload)));
  });
  return copy;
}

absl::Status NotProcessed(absl::string_view origin_key, absl::string_view why) {
  return WithReason(absl::UnavailableError(absl::StrCat(
                        why, "; ", origin_key,
                        " did not process the request: it may be sent again on another "
                        "connection")),
                    kNotProcessedReason, {{"origin", origin_key}});
}

absl::Status LimitExceeded(absl::string_view origin_key, absl::string_view what) {
  return WithReason(absl::UnavailableError(absl::StrCat("HTTP/2 response from ", origin_key,
                                                        " went past a limit: ", what)),
                    "UPSTREAM_LIMIT_EXCEEDED", {{"origin", origin_key}});
}

absl::Status InvalidResponse(absl::string_view origin_key, absl::string_view what) {
  return WithReason(absl::UnavailableError(
                        absl::StrCat("invalid HTTP/2 response from ", origin_key, ": ", what)),
                    "UPSTREAM_INVALID_RESPONSE", {{"origin", origin_key}});
}

absl::Status ProtocolError(absl::string_view origin_key, absl::string_view what) {
  return WithReason(absl::UnavailableError(absl::StrCat("HTTP/2 protocol error from ",
                                                        origin_key, ": ", what,
                                                        "; the connection was closed")),
                    "UPSTREAM_PROTOCOL_ERROR", {{"origin", origin_key}});
}

absl::Status LibraryError(absl::string_view origin_key, int library_code,
                          uint32_t max_queued_acks, absl::string_view library_message) {
  switch (library_code) {
    case NGHTTP2_ERR_FLOODED:
      return LimitExceeded(origin_key, absl::StrCat(
          "it sent more SETTINGS or PING frames than egress acknowledges while they go "
          "unread (",
          max_queued_acks, " acknowledgements waiting); a flood"));
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
      return LimitExceeded(origin_key,
                           "a header block in too many CONTINUATION frames; a flood");
    case NGHTTP2_ERR_NOMEM:
      return WithReason(absl::ResourceExhaustedError(absl::StrCat(
                            "egress ran out of memory in the HTTP/2 session with ", origin_key)),
                        "LIMIT_EXCEEDED", {{"origin", origin_key}});
    default:
      return ProtocolError(origin_key,
                           absl::StrCat(nghttp2_strerror(library_code),
                                        library_message.empty() ? "" : ": ", library_message));
  }
}

absl::Status IoFailure(absl::string_view origin_key, absl::string_view phase,
                       boost::beast::error_code ec, bool after_goaway) {
  if (ec == net::error::eof || ec == net::ssl::error::stream_truncated ||
      ec == net::error::connection_reset) {
    return WithReason(absl::UnavailableError(absl::StrCat(
                          origin_key, " closed the HTTP/2 connection",
                          after_goaway ? " after GOAWAY" : "", " (", ec.message(), ")")),
                      "UPSTREAM_CLOSED", {{"origin", origin_key}, {"phase", phase}});
  }
  return WithReason(absl::UnavailableError(absl::StrCat(phase, " ", origin_key,
                                                        " failed: ", ec.message())),
                    "UPSTREAM_CONNECTION_FAILED", {{"origin", origin_key}, {"phase", phase}});
}

absl::Status DeadlineFailure(absl::string_view origin_key, bool head_received,
                             size_t body_sent, size_t body_size, bool window_closed) {
  absl::string_view phase = "waiting for the response from";
  std::string detail;
  if (head_received) {
    phase = "reading the response body from";
  } else if (body_sent < body_size) {
    phase = "sending the request body to";
    detail = absl::StrCat(" (", body_sent, " of ", body_size, " bytes sent",
                          window_closed ? "; the server's flow-control window stayed closed" : "",
                          ")");
  }
  return WithReason(absl::DeadlineExceededError(absl::StrCat("deadline expired while ", phase,
                                                             " ", origin_key, detail)),
                    "DEADLINE_EXCEEDED", {{"origin", origin_key}, {"phase", phase}});
}

absl::Status StreamResetFailure(absl::string_view origin_key, int32_t stream_id,
                                uint32_t error_code, bool awaiting_head, bool answered,
                                std::optional<Goaway> goaway) {
  const absl::string_view when =
      awaiting_head ? "before its response head" : "before the response body ended";
  if (error_code == NGHTTP2_NO_ERROR) {
    return WithReason(absl::UnavailableError(absl::StrCat(
                          origin_key, " closed the HTTP/2 stream ", when)),
                      "UPSTREAM_CLOSED", {{"origin", origin_key}});
  }
  // nghttp2 closes the streams above a GOAWAY's last stream id with REFUSED_STREAM; one
  // the server had begun to answer was taken, and may have been processed.
  const std::string how =
      goaway ? absl::StrCat(" sent GOAWAY (last stream ", goaway->last_stream_id, ", ",
                            ErrorCodeName(goaway->error_code), ") below HTTP/2 stream ",
                            stream_id, " ", when, ", which ended it")
             : absl::StrCat(" reset the HTTP/2 stream ", when, " (", ErrorCodeName(error_code),
                            ")");
  return WithReason(
      absl::UnavailableError(absl::StrCat(
          origin_key, how,
          answered ? "; it had begun to answer, so it may have processed the request" : "")),
      "UPSTREAM_STREAM_RESET", {{"origin", origin_key}});
}

absl::Status FailureAtEnd(absl::string_view origin_key, bool request_sent,
                          const absl::Status& ended) {
  if (!request_sent) {
    return NotProcessed(origin_key,
                        absl::StrCat("the HTTP/2 connection ended before the request was sent (",
                                     ended.message(), ")"));
  }
  return ended;
}

}  // namespace egress::transport::http2

#ifndef EGRESS_SERVICE_TRANSPORT_IO_SOCKET_ERRORS_H_
#define EGRESS_SERVICE_TRANSPORT_IO_SOCKET_ERRORS_H_

#include <openssl/ssl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "boost/beast/core/error.hpp"

namespace egress::transport {

// The phases whose failures have reasons of their own (see SocketFailure).
inline constexpr absl::string_view kConnectPhase = "connecting to";
inline constexpr absl::string_view kTlsPhase = "TLS handshake with";

// Whether `ec` came from OpenSSL or the TLS stream.
bool IsTlsError(boost::beast::error_code ec);

// Where an I/O step on an upstream connection failed.
struct FailedStep {
  absl::string_view phase;      // what was under way, e.g. kConnectPhase; the origin follows
  absl::string_view origin;     // Origin::Key()
  absl::Time deadline;          // the request's
  absl::Duration phase_timeout;  // the step's own bound
};

// `status` tagged with `reason` and the step's origin and phase (see WithReason).
absl::Status TagFailure(absl::Status status, absl::string_view reason, const FailedStep& step);

// Maps a socket or TLS error of `step` to a status a caller can act on: a timeout (the
// deadline's or the phase's), a cancel, a certificate that failed verification (read from
// `ssl`, null on a plain connection), else CONNECT_FAILED, TLS_FAILED or
// UPSTREAM_CONNECTION_FAILED by the phase.
absl::Status SocketFailure(const FailedStep& step, boost::beast::error_code ec, SSL* ssl);

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_IO_SOCKET_ERRORS_H_

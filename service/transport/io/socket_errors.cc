#include "service/transport/io/socket_errors.h"

#include <openssl/x509_vfy.h>

#include "absl/strings/str_cat.h"
#include "boost/asio/error.hpp"
#include "boost/asio/ssl/error.hpp"
#include "service/base/error_reason.h"

namespace egress::transport {

namespace net = boost::asio;
namespace beast = boost::beast;

bool IsTlsError(beast::error_code ec) {
  return ec.category() == net::error::get_ssl_category() ||
         ec.category() == net::ssl::error::get_stream_category();
}

absl::Status TagFailure(absl::Status status, absl::string_view reason, const FailedStep& step) {
  return WithReason(std::move(status), reason, {{"origin", step.origin}, {"phase", step.phase}});
}

absl::Status SocketFailure(const FailedStep& step, beast::error_code ec, SSL* ssl) {
  const std::string where = absl::StrCat(step.phase, " ", step.origin);
  if (ec == beast::error::timeout) {
    if (absl::Now() + absl::Milliseconds(1) >= step.deadline) {
      return TagFailure(
          absl::DeadlineExceededError(absl::StrCat("deadline expired while ", where)),
          "DEADLINE_EXCEEDED", step);
    }
    return TagFailure(absl::DeadlineExceededError(absl::StrCat(
                          where, " timed out after ", absl::FormatDuration(step.phase_timeout))),
                      "UPSTREAM_TIMEOUT", step);
  }
  if (ec == net::error::operation_aborted) {
    return TagFailure(absl::CancelledError(absl::StrCat(where, " was cancelled")), "CANCELLED",
                      step);
  }
  if (ssl != nullptr && IsTlsError(ec)) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) {
      return TagFailure(absl::UnavailableError(
                            absl::StrCat(where, " failed: certificate verification failed: ",
                                         X509_verify_cert_error_string(verify))),
                        "TLS_CERTIFICATE_INVALID", step);
    }
  }
  return TagFailure(absl::UnavailableError(absl::StrCat(where, " failed: ", ec.message())),
                    step.phase == kConnectPhase ? "CONNECT_FAILED"
                    : step.phase == kTlsPhase   ? "TLS_FAILED"
                                                : "UPSTREAM_CONNECTION_FAILED",
                    step);
}

}  // namespace egress::transport

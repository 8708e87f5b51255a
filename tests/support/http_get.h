#ifndef EGRESS_TESTS_SUPPORT_HTTP_GET_H_
#define EGRESS_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace egress::testing {

struct HttpReply {
  int status = 0;
  std::string body;
};

// A blocking plain-HTTP GET to 127.0.0.1:port, for tests talking to helper servers
// (Prometheus, /metrics).
absl::StatusOr<HttpReply> HttpGet(int port, const std::string& target);

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& value);

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_HTTP_GET_H_

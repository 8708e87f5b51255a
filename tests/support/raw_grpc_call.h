#ifndef EGRESS_TESTS_SUPPORT_RAW_GRPC_CALL_H_
#define EGRESS_TESTS_SUPPORT_RAW_GRPC_CALL_H_

// One gRPC call over an HTTP/2 connection of its own (cleartext, prior knowledge), sent
// with the headers a test gives and nothing else: no deadline of the client's own, no
// RST_STREAM, what a real gRPC client would not let a test do.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace egress::testing {

struct RawGrpcAnswer {
  std::vector<std::pair<std::string, std::string>> headers;   // the first HEADERS frame
  std::vector<std::pair<std::string, std::string>> trailers;  // empty for Trailers-Only
  std::string data;  // the DATA bytes, length prefixes included
  // A field of the trailers (or of the headers, for Trailers-Only); empty when absent.
  std::string Field(const std::string& name) const;
};

// POSTs `framed` (length-prefixed messages) on `path` of 127.0.0.1:port with `extra`
// headers besides the required ones; waits up to `wait` for the stream to end.
absl::StatusOr<RawGrpcAnswer> RawGrpcCall(
    int port, const std::string& path, const std::string& framed,
    const std::vector<std::pair<std::string, std::string>>& extra, absl::Duration wait);

}  // namespace egress::testing

#endif  // EGRESS_TESTS_SUPPORT_RAW_GRPC_CALL_H_
